"""`nmt prepare`: corpus files in, a data directory for `nmt train` out."""

from __future__ import annotations

import functools
from pathlib import Path

from nmt_cli.cli.boundary import command_boundary, stderr_console, warn
from nmt_cli.cli.options import given, in_panel

_IN, _SPLIT, _SPM = "Input", "Dev/test", "SentencePiece"
_split, _clean, _spm, _out = (in_panel(p) for p in (_SPLIT, "Cleaning", _SPM, "Output"))

_file = functools.partial(given, panel=_IN)  # (flag, help): a file or name, None when not given


@command_boundary
def prepare(
    src: Path | None = _file(
        "--src", "Source-language corpus, one sentence per line (plain or .gz)."
    ),
    tgt: Path | None = _file("--tgt", "Target-language corpus, line-aligned with --src."),
    tsv: Path | None = _file(
        "--tsv", "Instead of --src/--tgt: one file of source<TAB>target lines."
    ),
    src_lang: str | None = _file("--src-lang", "Source language code, recorded (e.g. de)."),
    tgt_lang: str | None = _file("--tgt-lang", "Target language code, recorded (e.g. en)."),
    dev_src: Path | None = _file("--dev-src", "Dev source file (only normalised).", panel=_SPLIT),
    dev_tgt: Path | None = _file("--dev-tgt", "Dev target file.", panel=_SPLIT),
    dev_tsv: Path | None = _file("--dev-tsv", "Dev pairs as one TSV file.", panel=_SPLIT),
    test_src: Path | None = _file(
        "--test-src", "Test source file (only normalised).", panel=_SPLIT
    ),
    test_tgt: Path | None = _file("--test-tgt", "Test target file.", panel=_SPLIT),
    test_tsv: Path | None = _file("--test-tsv", "Test pairs as one TSV file.", panel=_SPLIT),
    dev_size: int = _split(0, "Hold out this many cleaned training pairs as dev."),
    test_size: int = _split(0, "Hold out this many cleaned training pairs as test."),
    seed: int = _split(1, "Seed of the held-out sample and SentencePiece."),
    max_len: int = _clean(
        100, "Drop pairs with a side longer than this many words (CJK: characters). 0: no limit."
    ),
    max_ratio: float = _clean(
        3.0,
        "Drop pairs whose longer side is this many times the shorter (in words; "
        "1.5 CJK characters count as a word). 0: no limit.",
    ),
    dedup: bool = _clean(True, "Drop repeated training pairs.", "--dedup/--no-dedup"),
    lowercase: bool = _clean(
        False,
        "Lowercase both sides of every split (as word-alignment tasks do); the model records "
        "it, and translate, align and serve lowercase their input alike.",
        "--lowercase",
    ),
    vocab_size: int = _spm(8000, "Pieces per SentencePiece model."),
    model_type: str = _spm("unigram", "unigram or bpe."),
    joint: bool = _spm(
        True, "One model for both languages, or one per language.", "--joint/--separate"
    ),
    character_coverage: float | None = given(
        "--character-coverage",
        "Share of characters the model must cover (default: 0.9995 when either side is mostly "
        "Chinese, Japanese or Korean, else 1.0).",
        panel=_SPM,
    ),
    output: Path = _out(..., "Data directory to create.", "-o", "--output"),
    force: bool = _out(False, "Replace an existing output directory.", "--force"),
) -> None:
    """Clean a parallel corpus, train SentencePiece and write a data directory for `nmt train`.

    Every corpus is read more than once, so give files (plain or .gz), not <(command)."""
    from nmt_cli.data.clean import CleanOptions
    from nmt_cli.data.corpus import source_from_flags
    from nmt_cli.data.prepare import PrepareOptions
    from nmt_cli.data.prepare import prepare as run_prepare
    from nmt_cli.render.prepare_report import render_prepare_report
    from nmt_cli.render.progress import count_display

    options = PrepareOptions(
        train=source_from_flags("-", src, tgt, tsv, required=True),
        dev=source_from_flags("--dev", dev_src, dev_tgt, dev_tsv),
        test=source_from_flags("--test", test_src, test_tgt, test_tsv),
        output=output,
        dev_size=dev_size,
        test_size=test_size,
        seed=seed,
        clean=CleanOptions(max_len=max_len, max_ratio=max_ratio, dedup=dedup, lowercase=lowercase),
        vocab_size=vocab_size,
        model_type=model_type,
        joint=joint,
        character_coverage=character_coverage,
        src_lang=src_lang,
        tgt_lang=tgt_lang,
        force=force,
    )
    console = stderr_console()
    with count_display(console, "prepare") as show:
        report = run_prepare(options, show)
    render_prepare_report(report, console)
    for message in report.warnings:
        warn(message)
