"""Steady-state training throughput from each system's own log, in target tokens per second.

A log gives a series of windows: the time between two consecutive progress reports, the
target tokens (non-pad, EOS included) and the updates done in it. The steady-state rate is
time-weighted over the windows that lie between `start_s` (the end of the warm-up) and
`end_s` after the training loop began, leaving out every window that contains a validation
or a checkpoint save.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass
from datetime import datetime
from pathlib import Path


@dataclass
class Window:
    """One interval between two progress reports."""

    end_s: float  # seconds after the training loop started
    seconds: float
    tokens: float  # target tokens trained on
    steps: int
    pure: bool  # no validation or checkpoint save inside


@dataclass
class Throughput:
    """The steady-state rate over the chosen windows."""

    tokens_per_s: float
    steps_per_s: float
    tokens_per_step: float
    seconds: float  # pure training time the rate is measured over
    windows: int
    first_step: int
    last_step: int
    start_s: float
    end_s: float


_ONMT_TIME = "%Y-%m-%d %H:%M:%S,%f"
_ONMT_STEP = re.compile(r"^\[(\S+ \S+) INFO\] Step\s+(\d+)/\s*\d+;.*?bsz:\s*\d+/\s*(\d+)/\s*\d+;")
_ONMT_START = re.compile(r"^\[(\S+ \S+) INFO\] Start training loop")
_ONMT_BREAK = re.compile(r"valid stats calculation|Validation |Saving checkpoint")
_JOEY_STEP = re.compile(
    r"^(\S+ \S+) - INFO - joeynmt\.training - Epoch\s+\d+, Step:\s+(\d+),.*Tokens per Sec:\s+([\d.]+)"
)
_JOEY_START = re.compile(r"^(\S+ \S+) - INFO - joeynmt\.training - EPOCH 1\b")
_JOEY_BREAK = re.compile(r"Predicting |Evaluation result|Checkpoint saved")
# The line a peer writes when its training loop starts: where its throughput clock and its
# training budget begin.
LOOP_START = {"onmt": _ONMT_START, "joey": _JOEY_START}


def _time(text: str) -> float:
    return datetime.strptime(text, _ONMT_TIME).timestamp()


def _log_windows(text: str, step_re, start_re, break_re, tokens_of) -> list[Window]:
    """Windows from a text log: `tokens_of(match, steps, seconds)` gives a window's tokens."""
    start = prev = None
    broken = False
    windows = []
    for line in text.splitlines():
        if start is None:
            if match := start_re.search(line):
                start = _time(match.group(1))
            continue
        if match := step_re.search(line):
            now, step = _time(match.group(1)), int(match.group(2))
            prev_time, prev_step = prev or (start, 0)
            seconds, steps = now - prev_time, step - prev_step
            tokens = tokens_of(match, steps, seconds)
            windows.append(Window(now - start, seconds, tokens, steps, not broken))
            prev, broken = (now, step), False
        elif break_re.search(line):
            broken = True
    return windows


def onmt_windows(text: str) -> list[Window]:
    """OpenNMT-py: `bsz: src/tgt/sents` is the mean per update over the report's window."""
    return _log_windows(
        text, _ONMT_STEP, _ONMT_START, _ONMT_BREAK, lambda m, steps, _s: int(m.group(3)) * steps
    )


def joey_windows(text: str) -> list[Window]:
    """Joey NMT: `Tokens per Sec` counts non-pad target tokens over its own window."""
    return _log_windows(
        text,
        _JOEY_STEP,
        _JOEY_START,
        _JOEY_BREAK,
        lambda m, _st, seconds: float(m.group(3)) * seconds,
    )


def nmt_windows(text: str) -> list[Window]:
    """Ours: "train" events of train.jsonl carry tokens_per_s, step and elapsed (loop seconds)."""
    windows, prev_elapsed, prev_step, broken = [], 0.0, 0, False
    for line in text.splitlines():
        event = json.loads(line) if line.strip() else {}
        kind = event.get("event")
        if kind == "valid":
            broken = True
        elif kind == "train":
            seconds = event["elapsed"] - prev_elapsed
            tokens = event["tokens_per_s"] * seconds
            steps = event["step"] - prev_step
            windows.append(Window(event["elapsed"], seconds, tokens, steps, not broken))
            prev_elapsed, prev_step, broken = event["elapsed"], event["step"], False
    return windows


PARSERS = {"onmt": onmt_windows, "joey": joey_windows, "nmt": nmt_windows}


def steady(windows: list[Window], start_s: float, end_s: float) -> Throughput | None:
    """The time-weighted rate over pure windows within [start_s, end_s]; None if there are none."""
    chosen = _chosen(windows, start_s, end_s)
    if not chosen:
        return None
    seconds = sum(w.seconds for w in chosen)
    tokens = sum(w.tokens for w in chosen)
    steps = sum(w.steps for w in chosen)
    last = windows.index(chosen[-1])
    first_step = sum(w.steps for w in windows[: windows.index(chosen[0])])
    return Throughput(
        tokens_per_s=tokens / seconds,
        steps_per_s=steps / seconds,
        tokens_per_step=tokens / max(1, steps),
        seconds=seconds,
        windows=len(chosen),
        first_step=first_step,
        last_step=sum(w.steps for w in windows[: last + 1]),
        start_s=start_s,
        end_s=end_s,
    )


def _chosen(windows: list[Window], start_s: float, end_s: float) -> list[Window]:
    return [
        w
        for w in windows
        if w.pure and w.seconds > 0 and w.end_s - w.seconds >= start_s and w.end_s <= end_s
    ]


def thirds(kind: str, log: Path, start_s: float, end_s: float) -> list[Throughput]:
    """The steady rate's windows cut in three by the time each ends (so every window of the
    whole rate counts in exactly one third), and the rate of each third that has any."""
    text = log.read_text(encoding="utf-8", errors="replace") if log.exists() else ""
    windows = _chosen(PARSERS[kind](text), start_s, end_s)
    third = (end_s - start_s) / 3
    parts = []
    for i in range(3):
        lo, hi = start_s + i * third, start_s + (i + 1) * third
        mine = [w for w in windows if lo < w.end_s <= hi]
        if mine:
            parts.append(steady(mine, start_s, end_s))
    return [part for part in parts if part]


def measure(kind: str, log: Path, start_s: float, end_s: float) -> Throughput | None:
    """Parse the log of a `kind` (onmt, joey, nmt) run and return its steady-state rate."""
    text = log.read_text(encoding="utf-8", errors="replace") if log.exists() else ""
    return steady(PARSERS[kind](text), start_s, end_s)
