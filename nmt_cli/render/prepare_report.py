"""What `nmt prepare` shows people on stderr: live progress and the summary table."""

from __future__ import annotations

import contextlib
import time
from collections.abc import Iterator
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from rich.console import Console

    from nmt_cli.data.prepare import PrepareReport, ProgressCallback


_PLAIN_EVERY_S = 30.0  # a long step prints a plain line this often
_PLAIN_AFTER_S = 5.0  # a step shorter than this prints no plain line (small corpora stay quiet)


@contextlib.contextmanager
def prepare_progress(console: Console) -> Iterator[ProgressCallback]:
    """Yield a progress callback: a bar per step on a terminal, plain lines otherwise.

    Each step shows what it has done, its rate and its time: lines read and pairs/s while
    reading, sentences/s while encoding. Plain lines come when a step ends and, for a long
    one, every half minute; steps shorter than 5 s print none.
    """
    if not console.is_terminal:
        yield _PlainProgress(console)
        return
    from rich.markup import escape
    from rich.progress import (
        BarColumn,
        MofNCompleteColumn,
        Progress,
        SpinnerColumn,
        TextColumn,
        TimeElapsedColumn,
    )

    columns = (SpinnerColumn(), TextColumn("{task.description}"), BarColumn())
    columns += (MofNCompleteColumn(), TextColumn("{task.fields[rate]}"), TimeElapsedColumn())
    tasks: dict[str, tuple[int, float]] = {}
    with Progress(*columns, console=console, transient=True) as bar:

        def update(step: str, done: int, total: int | None) -> None:
            if step not in tasks:
                tasks[step] = (bar.add_task(escape(step), total=total, rate=""), time.monotonic())
            task, started = tasks[step]
            bar.update(
                task,
                completed=done,
                total=total,
                rate=_rate(step, done, time.monotonic() - started),
            )

        yield update


def _rate(step: str, done: int, seconds: float) -> str:
    """`95,000 pairs/s` while reading, `sentences/s` while encoding; nothing for other steps."""
    unit = "pairs" if step.startswith("reading") else "sentences" if step.startswith("enc") else ""
    if not unit or seconds <= 0 or not done:
        return ""
    return f"{done / seconds:,.0f} {unit}/s"


class _PlainProgress:
    """Plain progress lines (a log file, a pipe): when a long step ends, and every 30 s."""

    def __init__(self, console: Console) -> None:
        self.console = console
        self.started: dict[str, float] = {}
        self.printed: dict[str, float] = {}

    def __call__(self, step: str, done: int, total: int | None) -> None:
        now = time.monotonic()
        started = self.started.setdefault(step, now)
        finished = total is not None and done >= total
        if now - started < _PLAIN_AFTER_S or (
            not finished and now - self.printed.get(step, started) < _PLAIN_EVERY_S
        ):
            return
        self.printed[step] = now
        parts = [f"prepare: {step}:"]
        if step.startswith("reading"):
            parts.append(f"{done:,} pairs,")
        elif step.startswith("encoding") and total:
            parts.append(f"{done:,}/{total:,} sentences,")
        if rate := _rate(step, done, now - started):
            parts.append(f"{rate},")
        parts.append(f"{now - started:.1f} s" + ("" if finished else " so far"))
        line = " ".join(parts)
        self.console.print(line, markup=False, highlight=False, soft_wrap=True)


def render_prepare_report(report: PrepareReport, console: Console) -> None:
    """Print the per-split counts, the tokenizers and where the data went."""
    from rich.markup import escape

    console.print(_counts_table(report))
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
    table.caption = "\n".join(_notes(report))
    return table


def _notes(report: PrepareReport) -> list[str]:
    """Footnotes that say what the columns count and where each split came from."""
    notes = [
        "norm.: changed by NFC/whitespace normalisation (kept); empty, long, ratio, dup: dropped"
    ]
    by_origin: dict[str, list[str]] = {}
    for split in report.splits:
        by_origin.setdefault(split.origin, []).append(split.name)
    if "given" in by_origin:
        names = ", ".join(by_origin["given"])
        notes.append(
            f"{names}: given references, only normalised (never filtered or de-duplicated)"
        )
    if "held out" in by_origin:
        names = ", ".join(by_origin["held out"])
        notes.append(f"{names}: held out of the cleaned training pairs (seeded)")
    return notes
