"""The progress event: what every long operation reports, and `render/progress.py` draws.

Training reports its steps, validations and warnings; preparing data and translating a file
report counted steps (`count`). The library never prints: it hands events to a callback.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any


@dataclass(frozen=True)
class Event:
    """One report: its kind and its figures (what `train.jsonl` records, beside the time)."""

    kind: str  # training: config, epoch, train, valid, warning, resumed, done; else count
    data: dict[str, Any] = field(default_factory=dict)

    def record(self) -> dict[str, Any]:
        return {"event": self.kind, **self.data}


OnEvent = Callable[[Event], None]


def count(task: str, done: int, total: int | None) -> Event:
    """`done` of `total` (None: unknown) units of `task` are finished."""
    return Event("count", {"task": task, "done": done, "total": total})


def ignore(event: Event) -> None:
    """The callback when nobody is watching."""


def counted_epoch(epoch: int, batch_index: int) -> int:
    """The epoch as logs count it, from training progress (epochs finished, batches into the
    next): the one under way, or the one just finished."""
    return epoch + (1 if batch_index else 0)
