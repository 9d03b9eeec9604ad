"""What `nmt prepare` shows people on stderr: the summary table (progress: render/progress.py)."""

from __future__ import annotations

from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from rich.console import Console

    from nmt_cli.data.prepare import PrepareReport


def render_prepare_report(report: PrepareReport, console: Console) -> None:
    """Print the per-split counts, the tokenizers and where the data went."""
    from rich.console import Console
    from rich.markup import escape
    from rich.measure import Measurement

    table = _counts_table(report)
    table.caption = None  # (printed below it, wrapped at the console's width)
    needed = Measurement.get(console, console.options.update_width(1000), table).maximum
    if console.is_terminal or needed <= console.width or console.quiet:
        console.print(table)
    else:  # a log (nohup, 2> file): whole numbers, whatever the width rich assumes there
        Console(file=console.file, width=needed, no_color=True, highlight=False).print(table)
    console.print("\n".join(_notes(report)), style="dim")
    for side, model in _distinct_tokenizers(report):
        asked = f" (asked {model.requested_vocab_size:,})" if model.fell_back else ""
        console.print(
            f"tokenizer {side}: {model.model_type}, {model.vocab_size:,} pieces{asked}, "
            f"coverage {model.character_coverage:g} → {escape(model.model.name)}"
        )
    console.print(f"wrote [bold]{escape(str(report.output))}[/] in {report.seconds:.1f} s")


def _distinct_tokenizers(report: PrepareReport) -> list:
    """One (label, model) per model file: the joint model once, or src and tgt."""
    if report.joint:
        return [("joint", report.tokenizers["src"])]
    return [(side, model) for side, model in report.tokenizers.items()]


def _counts_table(report: PrepareReport):
    """The per-split counts as a compact table that fits 80 columns."""
    from rich import box
    from rich.table import Table

    table = Table(
        box=box.SIMPLE_HEAD,
        show_edge=False,
        pad_edge=False,
        collapse_padding=True,
        header_style="bold",
        caption_justify="left",
    )
    table.add_column("split")
    for name in ("read", "norm.", "empty", "long", "ratio", "dup", "pairs"):
        table.add_column(name, justify="right")
    table.add_column("src\npieces", justify="right")
    table.add_column("tgt\npieces", justify="right")
    for split in report.splits:
        counts = split.counts
        numbers = (counts.read, counts.normalized, counts.empty, counts.too_long, counts.ratio)
        numbers += (counts.duplicate, split.pairs, split.src_pieces, split.tgt_pieces)
        table.add_row(split.name, *(f"{n:,}" for n in numbers))
    return table


def _notes(report: PrepareReport) -> list[str]:
    """Footnotes that say what the columns count and where each split came from."""
    notes = [
        "norm.: changed by normalisation (NFC, whitespace inside the line, invisible "
        "characters such as zero-width spaces; kept; spaces and tabs at the ends not counted); "
        "empty, long, ratio, dup: dropped"
    ]
    for origin, note in (
        ("given", "given references, only normalised (never filtered or de-duplicated)"),
        (
            "held out",
            "held out of the cleaned training pairs (seeded): the train row's pairs are those left",
        ),
    ):
        if names := [split.name for split in report.splits if split.origin == origin]:
            notes.append(f"{', '.join(names)}: {note}")
    if report.lowercase:
        notes.append("every split lowercased (--lowercase; not counted as a change)")
    return notes
