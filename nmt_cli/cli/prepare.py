"""`nmt prepare`: corpus files in, a data directory for `nmt train` out."""

from __future__ import annotations

from pathlib import Path

import typer

from nmt_cli.cli.boundary import command_boundary, stderr_console, warn

_IN, _SPLIT, _CLEAN, _SPM, _OUT = "Input", "Dev/test", "Cleaning", "SentencePiece", "Output"


def _file(flag: str, text: str, panel: str = _IN):
    return typer.Option(None, flag, help=text, rich_help_panel=panel, show_default=False)


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
    dev_src: Path | None = _file("--dev-src", "Dev source file (only normalised).", _SPLIT),
    dev_tgt: Path | None = _file("--dev-tgt", "Dev target file.", _SPLIT),
    dev_tsv: Path | None = _file("--dev-tsv", "Dev pairs as one TSV file.", _SPLIT),
    test_src: Path | None = _file("--test-src", "Test source file (only normalised).", _SPLIT),
    test_tgt: Path | None = _file("--test-tgt", "Test target file.", _SPLIT),
    test_tsv: Path | None = _file("--test-tsv", "Test pairs as one TSV file.", _SPLIT),
    dev_size: int = typer.Option(
        0, help="Hold out this many cleaned training pairs as dev.", rich_help_panel=_SPLIT
    ),
    test_size: int = typer.Option(
        0, help="Hold out this many cleaned training pairs as test.", rich_help_panel=_SPLIT
    ),
    seed: int = typer.Option(
        1, help="Seed of the held-out sample and SentencePiece.", rich_help_panel=_SPLIT
    ),
    max_len: int = typer.Option(
        100,
        help="Drop pairs with a side longer than this many words (CJK: characters). 0: no limit.",
        rich_help_panel=_CLEAN,
    ),
    max_ratio: float = typer.Option(
        3.0,
        help="Drop pairs whose longer side is this many times the shorter (in words; "
        "1.5 CJK characters count as a word). 0: no limit.",
        rich_help_panel=_CLEAN,
    ),
    dedup: bool = typer.Option(
        True, "--dedup/--no-dedup", help="Drop repeated training pairs.", rich_help_panel=_CLEAN
    ),
    vocab_size: int = typer.Option(
        8000, help="Pieces per SentencePiece model.", rich_help_panel=_SPM
    ),
    model_type: str = typer.Option("unigram", help="unigram or bpe.", rich_help_panel=_SPM),
    joint: bool = typer.Option(
        True,
        "--joint/--separate",
        help="One model for both languages, or one per language.",
        rich_help_panel=_SPM,
    ),
    character_coverage: float | None = typer.Option(
        None,
        help="Share of characters the model must cover (default: 0.9995 for mostly-CJK text, "
        "else 1.0).",
        rich_help_panel=_SPM,
        show_default=False,
    ),
    output: Path = typer.Option(
        ..., "-o", "--output", help="Data directory to create.", rich_help_panel=_OUT
    ),
    force: bool = typer.Option(
        False, "--force", help="Replace an existing output directory.", rich_help_panel=_OUT
    ),
) -> None:
    """Clean a parallel corpus, train SentencePiece and write a data directory for `nmt train`."""
    from nmt_cli.data.clean import CleanOptions
    from nmt_cli.data.corpus import source_from_flags
    from nmt_cli.data.prepare import PrepareOptions
    from nmt_cli.data.prepare import prepare as run_prepare
    from nmt_cli.progress import count
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
        clean=CleanOptions(max_len=max_len, max_ratio=max_ratio, dedup=dedup),
        vocab_size=vocab_size,
        model_type=model_type,
        joint=joint,
        character_coverage=character_coverage,
        src_lang=src_lang,
        tgt_lang=tgt_lang,
        force=force,
    )
    console = stderr_console()
    with count_display(console) as show:
        report = run_prepare(options, lambda step, done, total: show(count(step, done, total)))
    render_prepare_report(report, console)
    for message in report.warnings:
        warn(message)
