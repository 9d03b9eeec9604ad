"""Lines from stdin or a file for the streaming commands, one per input line, never shifted."""

from __future__ import annotations

import gzip
import sys
import zlib
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


def check_on_invalid(on_invalid: str) -> None:
    if on_invalid not in ON_INVALID:
        raise ConfigError(f"--on-invalid must be error or replace, got {on_invalid!r}")


def iter_lines(stream: BinaryIO, name: str, on_invalid: str = "error") -> Iterator[str]:
    """Decode a binary stream line by line; a CRLF ending and a BOM on line 1 are removed."""
    check_on_invalid(on_invalid)
    for number, raw in enumerate(_raw_lines(stream, name), start=1):
        raw = raw[:-1] if raw.endswith(b"\n") else raw
        raw = raw[:-1] if raw.endswith(b"\r") else raw
        if number == 1 and raw.startswith(b"\xef\xbb\xbf"):
            raw = raw[3:]
        yield _decode(raw, name, number, on_invalid)


def _raw_lines(stream: BinaryIO, name: str) -> Iterator[bytes]:
    """The raw lines of `stream`; a corrupt gzip or a read error names the line it stopped at."""
    number = 0
    try:
        for raw in stream:
            number += 1
            yield raw
    except (EOFError, zlib.error, gzip.BadGzipFile):
        raise InputError(
            f"{name} is a corrupt or truncated gzip file (after line {number}): "
            "re-download or re-compress it"
        ) from None
    except OSError as exc:
        raise InputError(f"cannot read {name} (after line {number}): {exc.strerror}") from None


class UntilError:
    """The lines of `lines` up to the first that cannot be read; `check()` raises its error then.

    A streaming command translates and prints every line before the bad one and only then
    fails, naming it: stdout holds exactly the results of the lines before it, never a
    shifted or half-finished batch.
    """

    def __init__(self, lines: Iterator[str]) -> None:
        self._lines = lines
        self.error: InputError | None = None

    def __iter__(self) -> Iterator[str]:
        try:
            yield from self._lines
        except InputError as exc:
            self.error = exc

    def check(self) -> None:
        if self.error is not None:
            raise self.error


def open_input(path: Path | None) -> tuple[BinaryIO, str]:
    """stdin (binary) when path is None or '-', else the file (plain or gzip)."""
    if path is None or str(path) == "-":
        return sys.stdin.buffer, "<stdin>"
    from nmt_cli.data.corpus import open_binary

    return open_binary(path), str(path)
