"""Reading parallel corpora: two line-aligned files (plain or gzip) or one two-column TSV file.

Everything streams line by line through the one text reader (`nmt_cli.lines`: gzip, UTF-8,
CR and NUL handled by its rule; NUL refused in a corpus) and every error names the file and
the 1-based line number, so a user can jump straight to the broken line.
"""

from __future__ import annotations

import shlex
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import NoReturn

from nmt_cli.errors import ConfigError, InputError
from nmt_cli.lines import check_readable, count_lines, first_inner_cr, read_lines

__all__ = ["ParallelSource", "check_readable", "count_lines", "read_lines", "read_pairs"]


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


def read_pairs(source: ParallelSource) -> Iterator[tuple[str, str]]:
    """Yield the raw (source, target) sentence pairs of `source`, line by line."""
    if source.tsv is not None:
        return _read_tsv(source.tsv)
    return _read_aligned(source.src, source.tgt)  # type: ignore[arg-type]


def _read_aligned(src: Path, tgt: Path) -> Iterator[tuple[str, str]]:
    """Pair line k of `src` with line k of `tgt`; a length mismatch names both files and counts."""
    src_lines, tgt_lines = read_lines(src), read_lines(tgt)  # each checks its file when first read
    number = 0
    for number, src_line in enumerate(src_lines, start=1):  # noqa: B007 (used after the loop)
        tgt_line = next(tgt_lines, None)
        if tgt_line is None:
            _raise_mismatch(src, tgt, number, src)
        yield src_line, tgt_line
    if next(tgt_lines, None) is not None:
        _raise_mismatch(src, tgt, number + 1, tgt)


def _raise_mismatch(src: Path, tgt: Path, number: int, longer: Path) -> NoReturn:
    """The error for sides of different lengths: both counts and the first unpaired line."""
    n_src, n_tgt = count_lines(src), count_lines(tgt)
    shorter = src if n_src < n_tgt else tgt
    if 0 in (n_src, n_tgt):
        fix = f"{shorter} is empty: give the file that holds the sentences"
    elif (number_cr := first_inner_cr(shorter)) is not None:  # lines it ends with CR alone
        fix = (
            f"{shorter} line {number_cr:,} holds a carriage return (\\r) inside it: where CRs "
            f"end lines, convert them, e.g. `sed 's/\\r$//; s/\\r/\\n/g' {shlex.quote(str(shorter))} > fixed.txt`"
        )
    else:
        fix = "check that they are the two sides of one corpus, one sentence per line"
    raise InputError(
        f"{src} has {n_src:,} line{'s' * (n_src != 1)} but {tgt} has {n_tgt:,} (line "
        f"{number:,} of {longer} has "
        f"no partner): source and target must be line-aligned; {fix}"
    )


def _read_tsv(path: Path) -> Iterator[tuple[str, str]]:
    """Split each line at its one tab; a blank line is an empty pair (the cleaner drops it)."""
    for number, line in enumerate(read_lines(path), start=1):
        if not line.strip():
            yield "", ""
            continue
        columns = line.split("\t")
        if len(columns) != 2:
            fix = (
                "keep two columns with `cut -f1,2`"
                if columns[2:]
                else f"keep only the lines of two columns with `awk -F'\\t' 'NF == 2 || NF == 0' {shlex.quote(str(path))} > pairs.tsv`"
            )
            raise InputError(
                f"{path} line {number:,} has {len(columns)} tab-separated "
                f"{'column' if len(columns) == 1 else 'columns'}, expected 2 "
                f"(source<TAB>target): fix that line or {fix}"
            )
        yield columns[0], columns[1]
