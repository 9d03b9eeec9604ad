"""Where training stands (`Progress`, kept in the resume checkpoint) and what it reports between
validations: the clock, the window of updates since the last report, and the 'train' event made
of them (`train.jsonl` and the live display read it)."""

from __future__ import annotations

import math
import time
from dataclasses import dataclass
from typing import TYPE_CHECKING

from nmt_cli.config import TrainConfig
from nmt_cli.progress import Event

if TYPE_CHECKING:
    from nmt_cli.updates import Measured


@dataclass
class Progress:
    """Everything about where training stands; saved in the resume checkpoint."""

    step: int = 0
    epoch: int = 0
    batch_index: int = 0  # the next batch of `epoch` to train on
    best_bleu: float = -1.0  # the best validation's score (see DevScores.score)
    best_by: str = "bleu"  # what that score is: "bleu", "loss" (negated) or "step" (no dev split)
    best_step: int = 0
    validated_step: int = -1  # the step last validated: a resume does not validate it again
    bad_validations: int = 0
    lr_scale: float = 1.0  # plateau decay applied so far
    # The best score of the validations on the schedule (every --valid-every updates, each
    # epoch's end), what the plateau decay and --patience compare with. The validation a run
    # makes where a budget stops it off the schedule counts for `best_bleu` (the saved model)
    # only, so a run resumed from there decays as an uninterrupted one. None: as `best_bleu`
    # (a checkpoint saved before the field).
    schedule_best: float | None = None
    # The validation of `validated_step` was that off-schedule one: where that step ends an
    # epoch, a resumed run makes the epoch's validation again, on the schedule.
    validated_off_schedule: bool = False
    tokens_seen: int = 0
    train_seconds: float = 0.0


class Clock:
    """Training time: this run's, and the total including runs before a resume."""

    def __init__(self, before: float):
        self.before = before
        self.started = time.monotonic()

    def run(self) -> float:
        return time.monotonic() - self.started

    def total(self) -> float:
        return self.before + self.run()


class Window:
    """Loss and throughput of the updates since the last report."""

    def __init__(self) -> None:
        self.restart()

    def restart(self) -> None:
        self.loss, self.nll, self.steps, self.tokens = 0.0, 0.0, 0, 0
        self.started = time.monotonic()
        self.alignment, self.alignment_steps = 0.0, 0

    def add(self, measured: Measured) -> None:
        self.loss += measured.loss
        self.nll += measured.nll
        self.steps += 1
        self.tokens += measured.tokens
        if measured.alignment is not None:
            self.alignment += measured.alignment
            self.alignment_steps += 1

    def seconds(self) -> float:
        return max(1e-9, time.monotonic() - self.started)

    def _alignment_fields(self) -> dict[str, float]:
        """The guided-alignment term per guided target step (its floor: the links' entropy)."""
        if not self.alignment_steps:
            return {}
        return {"align_loss": round(self.alignment / self.alignment_steps, 4)}

    def event(
        self, progress: Progress, lr: float, batches: int, left: float | None, world: int
    ) -> Event:
        """The 'train' event of this window, at `progress`."""
        steps = max(1, self.steps)
        return Event(
            "train",
            {
                "step": progress.step,
                "epoch": progress.epoch + 1,
                "batch": progress.batch_index,
                "batches": batches,
                "loss": round(self.loss / steps, 4),  # label-smoothed, as trained
                "ppl": round(math.exp(min(self.nll / steps, 50.0)), 2),  # of the plain NLL
                **self._alignment_fields(),
                "lr": lr,
                "tokens_per_s": round(self.tokens / self.seconds(), 1),
                "elapsed": round(progress.train_seconds, 1),
                "remaining": left,
                "world_size": world,
            },
        )


def remaining(
    t: TrainConfig, p: Progress, elapsed: float, steps_per_s: float, batches: int
) -> float | None:
    """Seconds until the first budget (--max-time, --max-steps, --max-epochs) is spent."""
    estimates = []
    if t.max_time:
        estimates.append(max(0.0, t.max_time - elapsed))
    if t.max_steps and steps_per_s > 0:
        estimates.append((t.max_steps - p.step) / steps_per_s)
    if t.max_epochs and steps_per_s > 0:
        left = (t.max_epochs - p.epoch - 1) * batches + (batches - p.batch_index)
        estimates.append(left / steps_per_s)
    return round(min(estimates), 1) if estimates else None
