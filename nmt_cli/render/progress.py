"""Progress events (`nmt_cli.progress.Event`) drawn for people, on stderr.

Training: a live panel on a terminal, plain log lines otherwise. Counted steps (preparing
data, translating a file): one bar per task, on a terminal only.
"""

from __future__ import annotations

import contextlib
import math
import time
from collections.abc import Iterator
from typing import Any

from rich.console import Console
from rich.live import Live
from rich.table import Table

from nmt_cli.progress import Event, OnEvent


def _best(e: dict) -> str:
    """The best validation of a `done` or `resumed` event, by what it was judged on."""
    by, step = e.get("best_by", "bleu"), e["best_step"]
    if not step:  # resumed from a stop before the first validation
        return "no validation yet"
    if by == "bleu":
        return f"best dev BLEU {e['best_bleu']:.2f} at step {step}"
    if by == "loss":
        return f"best dev loss {-e['best_bleu']:.3f} at step {step}"
    return f"no dev split: the model is the last one saved, at step {step}"


def _clock(seconds: float | None) -> str:
    if seconds is None:
        return "–"
    seconds = int(seconds)
    return f"{seconds // 3600}:{seconds % 3600 // 60:02d}:{seconds % 60:02d}"


def _ppl(loss: float | None) -> str:
    return "–" if loss is None else f"{math.exp(min(loss, 50)):.2f}"


def _train_ppl(event: dict) -> str:
    """Training perplexity: of the plain NLL (logs before it was kept: of the loss)."""
    return f"{event['ppl']:.2f}" if "ppl" in event else _ppl(event["loss"])


def shortlist_line(record: dict) -> str:
    """What the check of the lexical shortlist found (meta.json's "shortlist")."""
    if "checking" in record:
        return f"shortlist: checking it on {record['checking']:,} dev sentences…"
    if not record:
        return "shortlist: no dev split to check it on, so translate uses it only with --shortlist"
    with_it, without = record["dev_bleu"], record["dev_bleu_without"]
    kept = f"it keeps {record['kept']:.0%} of the target pieces"
    if with_it is None or without is None:  # decided by its size alone: not translated
        return (
            f"shortlist: {kept} on {record['sentences']:,} dev sentences, too many to pay, so "
            "translate uses it only with --shortlist"
        )
    digits = 4 if f"{with_it:.2f}" == f"{without:.2f}" and with_it != without else 2
    found = (
        f"shortlist: beam-{record['beam']} dev BLEU {with_it:.{digits}f} with it, "
        f"{without:.{digits}f} without ({record['sentences']:,} sentences; {kept})"
    )
    if record["default"]:
        return f"{found}: translate uses it unless given --no-shortlist"
    if record["kept"] > record["most_kept"]:
        return f"{found}: too many to pay, so translate uses it only with --shortlist"
    return f"{found}: it costs BLEU here, so translate uses it only with --shortlist"


class TrainDisplay:
    """Turns trainer events into a live rich table (terminal) or one line per event (logs)."""

    def __init__(self, console: Console):
        self.console = console
        self.live: Live | None = None
        self.last_train: dict[str, Any] = {}
        self.last_valid: dict[str, Any] = {}
        self.started: dict[str, float] = {}  # when each counted task (the teacher) began

    def __enter__(self) -> TrainDisplay:
        if self.console.is_terminal:
            self.live = Live(
                self._table(), console=self.console, refresh_per_second=4, transient=False
            )
            self.live.__enter__()
        return self

    def __exit__(self, *exc: object) -> None:
        if self.live is not None:
            self.live.__exit__(None, None, None)

    def __call__(self, event: Event) -> None:
        kind = event.kind
        if kind == "train":
            self.last_train = event.data
        elif kind == "valid":
            self.last_valid = event.data
        if self.live is not None and kind in ("train", "valid"):
            self.live.update(self._table())
        line = self._line(kind, event.data)
        if line and (self.live is None or kind not in ("train",)):
            self.console.print(line, highlight=False, markup=False, soft_wrap=True)

    def _line(self, kind: str, e: dict[str, Any]) -> str | None:
        if kind == "count":  # before training: the teacher's start and end (eflomal's links,
            task, done, total = e["task"], e["done"], e["total"]  # tens of seconds, once)
            if not task.startswith("aligning"):
                return None
            if done == 0:
                self.started[task] = time.monotonic()
                return f"{task}: {total:,} pairs…" if total else f"{task}…"
            if total is not None and done >= total and task in self.started:
                return f"{task}: done in {time.monotonic() - self.started.pop(task):.1f} s"
            return None
        if kind == "config":
            m, t = e["config"]["model"], e["config"]["train"]
            model = " ".join(f"{k}={v}" for k, v in m.items())
            off = not str(e["device"]).startswith("cuda")  # amp is for CUDA (bf16 for either)
            train = " ".join(
                f"{k}={v}" + (" (CUDA only: off here)" if k == "amp" and v and off else "")
                for k, v in t.items()
            )
            long = e.get("long_pairs", 0)
            skipped = f" ({long:,} longer than max_len {e['max_len']} left out)" if long else ""
            pairs = e["train_pairs"]
            return (
                f"config: model {model}\nconfig: train {train}\n"
                f"{e['parameters']:,} parameters on {e['device']}, {pairs:,} training "
                f"pair{'s' * (pairs != 1)}{skipped} → {e['output']}"
            )
        if kind == "resumed":
            return (
                f"resumed: step {e['step']}, epoch {e['epoch'] + 1}, batch {e['batch_index']}, "
                f"{_best(e)}, optimizer, schedule, RNG and early-stopping state restored"
            )
        if kind == "train":
            align = f" align {e['align_loss']:.3f}" if "align_loss" in e else ""
            return (
                f"step {e['step']} epoch {e['epoch']} loss {e['loss']:.3f} ppl {_train_ppl(e)}"
                f"{align} lr {e['lr']:.2e} {e['tokens_per_s']:.0f} tok/s elapsed {_clock(e['elapsed'])} "
                f"left {_clock(e['remaining'])}"
            )
        if kind == "valid":
            if e["dev_loss"] is None and e["dev_bleu"] is None:
                return f"checkpoint at step {e['step']} (no dev split to validate on)"
            bleu = "–" if e["dev_bleu"] is None else f"{e['dev_bleu']:.2f}"
            mark = " (best)" if e["improved"] else ""
            return (
                f"validation at step {e['step']}: dev loss {e['dev_loss']} ppl {e['dev_ppl']} "
                f"BLEU {bleu}{mark} [{e['seconds']:.0f}s]"
            )
        if kind == "warning":
            return f"warning: {e['message']}"
        if kind == "shortlist":
            return shortlist_line(e)
        if kind == "done":  # its epoch is counted as the step lines count it
            return (
                f"done: {e['step']} steps, epoch {e['epoch']}, {_best(e)}, "
                f"{_clock(e['train_seconds'])}"
            )
        return None

    def _table(self) -> Table:
        t, v = self.last_train, self.last_valid
        table = Table(show_header=True, header_style="bold", box=None, padding=(0, 2))
        guided = bool(t) and "align_loss" in t
        names = ("epoch", "step", "loss", "ppl", *(("align",) if guided else ()), "lr", "tok/s")
        for name in (*names, "elapsed", "left", "dev BLEU"):
            table.add_column(name, justify="right")
        if t:
            table.add_row(
                f"{t['epoch']} ({t['batch']}/{t['batches']})",
                str(t["step"]),
                f"{t['loss']:.3f}",
                _train_ppl(t),
                *((f"{t['align_loss']:.3f}",) if guided else ()),
                f"{t['lr']:.2e}",
                f"{t['tokens_per_s']:.0f}",
                _clock(t["elapsed"]),
                _clock(t["remaining"]),
                "–" if not v or v.get("dev_bleu") is None else f"{v['dev_bleu']:.2f}",
            )
        return table


_PLAIN_EVERY_S = 30.0  # a long counted task prints a plain line this often
_PLAIN_AFTER_S = 5.0  # a task shorter than this prints no plain line (small inputs stay quiet)


@contextlib.contextmanager
def count_display(console: Console, command: str) -> Iterator[OnEvent]:
    """Yield a callback that draws `count` events: one bar per task on a terminal, with its
    rate (pairs/s while reading, sentences/s while encoding); plain lines otherwise, when a
    task of 5 s or more ends and every half minute while it runs."""
    if not console.is_terminal:
        yield _PlainCounts(console, command)
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

        def update(event: Event) -> None:
            task, done, total = event.data["task"], event.data["done"], event.data["total"]
            if task not in tasks:
                tasks[task] = (bar.add_task(escape(task), total=total, rate=""), time.monotonic())
            handle, started = tasks[task]
            rate = _rate(task, done, time.monotonic() - started)
            bar.update(handle, completed=done, total=total, rate=rate)

        yield update


def _rate(task: str, done: int, seconds: float) -> str:
    """`95,000 pairs/s` while reading, `sentences/s` while encoding; nothing for other tasks."""
    unit = "pairs" if task.startswith("reading") else ""
    unit = unit or ("sentences" if task.startswith(("enc", "transl")) else "")
    if not unit or seconds < 0.5 or not done:  # (the first moments' rate means nothing)
        return ""
    return f"{done / seconds:,.0f} {unit}/s"


class _PlainCounts:
    """Plain progress lines (a log file, a pipe): when a long task ends, and every 30 s."""

    def __init__(self, console: Console, command: str) -> None:
        self.console, self.command = console, command
        self.started: dict[str, float] = {}
        self.printed: dict[str, float] = {}

    def __call__(self, event: Event) -> None:
        task, done, total = event.data["task"], event.data["done"], event.data["total"]
        now = time.monotonic()
        started = self.started.setdefault(task, now)
        finished = total is not None and done >= total
        if now - started < _PLAIN_AFTER_S or (
            not finished and now - self.printed.get(task, started) < _PLAIN_EVERY_S
        ):
            return
        self.printed[task] = now
        parts = [f"{self.command}: {task}:"]
        if task.startswith("reading"):
            parts.append(f"{done:,} pairs,")
        elif total:
            parts.append(f"{done:,}/{total:,},")
        if rate := _rate(task, done, now - started):
            parts.append(f"{rate},")
        parts.append(f"{now - started:.1f} s" + ("" if finished else " so far"))
        self.console.print(" ".join(parts), markup=False, highlight=False, soft_wrap=True)
