"""Reading parallel corpora: two line-aligned files (plain or gzip) or one two-column TSV file.

Everything streams line by line and every error names the file and the 1-based line number,
so a user can jump straight to the broken line.
"""

from __future__ import annotations

import gzip
import zlib
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import BinaryIO, NoReturn

from nmt_cli.errors import ConfigError, InputError

GZIP_MAGIC = b"\x1f\x8b"
UTF8_BOM = b"\xef\xbb\xbf"
_UTF16_BOMS = (b"\xff\xfe", b"\xfe\xff")
_CHUNK = 1 << 20


@dataclass(frozen=True)
class ParallelSource:
    """Where one split's sentence pairs come from: two line-aligned files or one TSV file."""

    src: Path | None = None
    tgt: Path | None = None
    tsv: Path | None = None

    def __post_init__(self) -> None:
        pair = self.src is not None or self.tgt is not None
        if pair and self.tsv is not None:
            raise ConfigError("give either a source and a target file or a TSV file, not both")
        if pair and (self.src is None or self.tgt is None):
            given, missing = ("source", "target") if self.tgt is None else ("target", "source")
            raise ConfigError(f"a {given} file was given without its {missing} file: give both")
        if not pair and self.tsv is None:
            raise ConfigError("no corpus given: use --src FILE --tgt FILE or --tsv FILE")

    @property
    def files(self) -> tuple[Path, ...]:
        """The files this source reads, in the order they are read."""
        return (self.tsv,) if self.tsv is not None else (self.src, self.tgt)  # type: ignore[return-value]

    def describe(self) -> str:
        """A short human name such as `train.de + train.en`."""
        return " + ".join(str(path) for path in self.files)

    def to_json(self) -> dict[str, str]:
        """The input file names as recorded in prepare.json."""
        if self.tsv is not None:
            return {"tsv": str(self.tsv)}
        return {"src": str(self.src), "tgt": str(self.tgt)}


def source_from_flags(
    flag: str, src: Path | None, tgt: Path | None, tsv: Path | None, required: bool = False
) -> ParallelSource | None:
    """The source named by `{flag}-src/{flag}-tgt` or `{flag}-tsv`; None when none is given."""
    if src is None and tgt is None and tsv is None:
        if required:
            raise ConfigError(
                f"no corpus given: use {flag}-src FILE {flag}-tgt FILE or {flag}-tsv FILE"
            )
        return None
    if tsv is not None and (src is not None or tgt is not None):
        raise ConfigError(f"give {flag}-src/{flag}-tgt or {flag}-tsv, not both")
    if tsv is None and (src is None or tgt is None):
        given, missing = ("src", "tgt") if tgt is None else ("tgt", "src")
        raise ConfigError(f"{flag}-{given} was given without {flag}-{missing}: give both")
    return ParallelSource(src=src, tgt=tgt, tsv=tsv)


def check_regular(path: Path, what: str = "") -> None:
    """Refuse a FIFO, socket or device: opening a FIFO waits for a writer that may never come."""
    if path.exists() and not path.is_dir() and not path.is_file():
        raise InputError(
            f"{what}{path} is not a regular file (a FIFO, socket or device): "
            "write its contents to a file and give that"
        )


def check_readable(path: Path) -> None:
    """Raise InputError unless `path` is an existing, readable regular file."""
    if not path.exists():
        raise InputError(f"{path} does not exist: check the path")
    if path.is_dir():
        raise InputError(f"{path} is a directory, not a file: give the corpus file inside it")
    check_regular(path)
    try:
        with open(path, "rb"):
            pass
    except OSError as exc:
        raise InputError(f"cannot read {path}: {exc.strerror}: check its permissions") from exc


def open_binary(path: Path) -> BinaryIO:
    """Open `path` for binary reading, decompressing it when it starts with the gzip magic."""
    check_readable(path)
    with open(path, "rb") as probe:
        compressed = probe.read(2) == GZIP_MAGIC
    # The magic bytes decide, not the extension: a plain file named .gz still reads.
    return gzip.open(path, "rb") if compressed else open(path, "rb")  # type: ignore[return-value]


def _decode(raw: bytes, path: Path, number: int) -> str:
    """Decode one raw line (newline already removed), naming the file and line on failure."""
    if b"\0" in raw:
        hint = (
            "the file looks like UTF-16: convert it with `iconv -f UTF-16 -t UTF-8`"
            if number == 1 and raw[:2] in _UTF16_BOMS
            else "remove them or check that it is a text file"
        )
        raise InputError(f"{path} line {number} contains NUL bytes: {hint}")
    try:
        return raw.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise InputError(
            f"{path} line {number} is not valid UTF-8 (byte {raw[exc.start]:#04x} at column "
            f"{exc.start + 1}): re-encode the file as UTF-8, e.g. `iconv -f LATIN1 -t UTF-8`"
        ) from None


def read_lines(path: Path) -> Iterator[str]:
    """Yield the decoded lines of a plain or gzipped UTF-8 file, without their newline or BOM."""
    number = 0
    try:
        with open_binary(path) as handle:
            for raw in handle:
                number += 1
                if number == 1 and raw.startswith(UTF8_BOM):
                    raw = raw[len(UTF8_BOM) :]
                yield _decode(raw[:-1] if raw.endswith(b"\n") else raw, path, number)
    except (gzip.BadGzipFile, EOFError, zlib.error):
        raise InputError(
            f"{path} is a corrupt or truncated gzip file (after line {number}): "
            "re-download or re-compress it"
        ) from None
    except OSError as exc:
        raise InputError(f"cannot read {path} (after line {number}): {exc.strerror}") from None


def count_lines(path: Path) -> int:
    """Count lines cheaply (newlines, plus a last line without one) without decoding."""
    lines, last = 0, b"\n"
    try:
        with open_binary(path) as handle:
            while chunk := handle.read(_CHUNK):
                lines += chunk.count(b"\n")
                last = chunk[-1:]
    except (gzip.BadGzipFile, EOFError, zlib.error):
        raise InputError(f"{path} is a corrupt or truncated gzip file: re-download it") from None
    except OSError as exc:
        raise InputError(f"cannot read {path}: {exc.strerror}") from None
    return lines + (last != b"\n")


def read_pairs(source: ParallelSource) -> Iterator[tuple[str, str]]:
    """Yield the raw (source, target) sentence pairs of `source`, line by line."""
    if source.tsv is not None:
        return _read_tsv(source.tsv)
    return _read_aligned(source.src, source.tgt)  # type: ignore[arg-type]


def _read_aligned(src: Path, tgt: Path) -> Iterator[tuple[str, str]]:
    """Pair line k of `src` with line k of `tgt`; a length mismatch names both files and counts."""
    for path in (src, tgt):
        check_readable(path)
    src_lines, tgt_lines = read_lines(src), read_lines(tgt)
    for src_line in src_lines:
        tgt_line = next(tgt_lines, None)
        if tgt_line is None:
            _raise_mismatch(src, tgt)
        yield src_line, tgt_line
    if next(tgt_lines, None) is not None:
        _raise_mismatch(src, tgt)


def _raise_mismatch(src: Path, tgt: Path) -> NoReturn:
    n_src, n_tgt = count_lines(src), count_lines(tgt)
    if 0 in (n_src, n_tgt):
        fix = f"{src if n_src == 0 else tgt} is empty: give the file that holds the sentences"
    else:
        fix = "check that they are the two sides of one corpus, one sentence per line"
    raise InputError(
        f"{src} has {n_src:,} lines but {tgt} has {n_tgt:,}: source and target must be "
        f"line-aligned; {fix}"
    )


def _read_tsv(path: Path) -> Iterator[tuple[str, str]]:
    """Split each line at its one tab; a blank line is an empty pair (the cleaner drops it)."""
    for number, line in enumerate(read_lines(path), start=1):
        if not line.strip():
            yield "", ""
            continue
        columns = line.split("\t")
        if len(columns) != 2:
            raise InputError(
                f"{path} line {number} has {len(columns)} tab-separated columns, expected 2 "
                "(source<TAB>target): fix that line or keep two columns with `cut -f1,2`"
            )
        yield columns[0], columns[1]
