"""Lines from stdin or a file for the streaming commands, one per input line, never shifted."""

from __future__ import annotations

import sys
from collections.abc import Iterator
from pathlib import Path
from typing import BinaryIO

from nmt_cli.errors import ConfigError, InputError

ON_INVALID = ("error", "replace")


def _decode(raw: bytes, name: str, number: int, on_invalid: str) -> str:
    try:
        text = raw.decode("utf-8")
    except UnicodeDecodeError as exc:
        if on_invalid == "replace":
            text = raw.decode("utf-8", errors="replace")
        else:
            raise InputError(
                f"{name} line {number} is not valid UTF-8 (byte {raw[exc.start]:#04x} at column "
                f"{exc.start + 1}): re-encode it as UTF-8 or pass --on-invalid replace"
            ) from None
    # NUL and other line breaks inside a line would corrupt the one-line-per-line output.
    return text.replace("\0", " ").replace("\r", " ").replace("\u2028", " ").replace("\u2029", " ")


def iter_lines(stream: BinaryIO, name: str, on_invalid: str = "error") -> Iterator[str]:
    """Decode a binary stream line by line; a CRLF ending and a BOM on line 1 are removed."""
    if on_invalid not in ON_INVALID:
        raise ConfigError(f"--on-invalid must be error or replace, got {on_invalid!r}")
    for number, raw in enumerate(stream, start=1):
        raw = raw[:-1] if raw.endswith(b"\n") else raw
        raw = raw[:-1] if raw.endswith(b"\r") else raw
        if number == 1 and raw.startswith(b"\xef\xbb\xbf"):
            raw = raw[3:]
        yield _decode(raw, name, number, on_invalid)


def open_input(path: Path | None) -> tuple[BinaryIO, str]:
    """stdin (binary) when path is None or '-', else the file (plain or gzip)."""
    if path is None or str(path) == "-":
        return sys.stdin.buffer, "<stdin>"
    from nmt_cli.data.corpus import open_binary

    return open_binary(path), str(path)
