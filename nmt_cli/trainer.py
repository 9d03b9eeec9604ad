"""The training loop: when to update, report, validate, save and stop.

The trainer prints nothing. It reports through `on_event(progress.Event)`, which the CLI turns
into a live display, and appends every report to `train.jsonl` in the model directory. What it
calls lives beside it: one update (loss, Adam, mixed precision) in `updates`, the reports in
`train_report`, validation in `validation`, the files in `checkpoint`.
"""

from __future__ import annotations

import json
import math
import threading
import time
from contextlib import nullcontext
from dataclasses import asdict
from pathlib import Path
from typing import Any

import numpy as np
import torch

from nmt_cli import checkpoint
from nmt_cli.batching import Batch, iterate_batches, make_batches
from nmt_cli.config import Config, TrainConfig
from nmt_cli.data.datadir import DataDir
from nmt_cli.device import pick_device, set_threads
from nmt_cli.distributed import Ranks, barrier, broadcast, shard, sum_values
from nmt_cli.errors import ConfigError, Interrupted, NmtError
from nmt_cli.model.seq2seq import Seq2Seq
from nmt_cli.progress import Event, OnEvent, counted_epoch, ignore
from nmt_cli.train_report import Clock, Progress, Window, remaining
from nmt_cli.updates import Updater
from nmt_cli.validation import DevScores, Validator

# A training NLL this far (nats per target piece) above a uniform guess's, after this many
# updates and the warm-up, is reported as divergence.
DIVERGENCE_MARGIN = 1.0
DIVERGENCE_AFTER = 100


class Trainer:
    def __init__(
        self,
        config: Config,
        data: DataDir,
        model_dir: Path,
        on_event: OnEvent = ignore,
        stop: threading.Event | None = None,
        ranks: Ranks | None = None,
    ):
        self.config = config
        self.data = data
        # sides written without spaces (Chinese, Japanese): recorded in meta, for translate's
        # output and alignment units
        self._unsegmented = {side: data.unsegmented(side) for side in ("src", "tgt")}
        self.model_dir = model_dir
        self.on_event = on_event
        self.stop = stop or threading.Event()
        t = config.train
        self.device = pick_device(t.device)
        self.ranks = ranks or Ranks()
        if self.ranks.distributed and self.device.type == "cuda":
            self.device = torch.device("cuda", self.ranks.local_rank)
        set_threads(t.threads)
        torch.manual_seed(t.seed)  # the same initial weights on every rank
        self.model = Seq2Seq(config.model).to(self.device)
        self.update = Updater(self.model, t, self.device, self.ranks, self._emit)
        self.progress = Progress()
        self._divergence_told = False
        self._load_training_data()
        # Validation on a CPU runs in float32: as `nmt translate` runs the saved model, and
        # without the kernels oneDNN would compile for every row count of the search's steps
        # under bfloat16 autocast (see `device.low_mm`); on a GPU under autocast, for speed.
        precision = self.update.autocast if self.device.type == "cuda" else nullcontext()
        self.validate = Validator(data, t, self.device, precision)
        if long := self.validate.long_dev_pairs():
            self._emit(Event("warning", {"message": (
                f"{long:,} dev pair{'s are' if long > 1 else ' is'} longer than max_len "
                f"{t.max_len} pieces on a side: left out of the dev loss, as such pairs are "
                f"from training (dev BLEU translates the first {t.max_len} pieces of their "
                "sources)"
            )}))  # fmt: skip

    # -- data -------------------------------------------------------------------------------
    def _load_training_data(self) -> None:
        self.train_src = self.data.ids("train", "src")
        self.train_tgt = self.data.ids("train", "tgt")
        max_len = self.config.train.max_len
        keep = (self.train_src.lengths <= max_len) & (self.train_tgt.lengths <= max_len)
        self.train_rows = np.flatnonzero(keep)
        if len(self.train_rows) == 0:
            raise NmtError(
                f"no training pair has at most {max_len} pieces on both sides; raise --max-len"
            )
        self.guides = self._load_guides() if self.config.train.guided_alignment else None
        self._warn_if_batches_are_single_sentences()  # once every input is accepted

    def _warn_if_batches_are_single_sentences(self) -> None:
        """Most targets (with EOS) longer than half of --batch-tokens: each trains alone."""
        tokens = self.config.train.batch_tokens
        alone = int(np.sum(2 * (self.train_tgt.lengths[self.train_rows] + 1) > tokens))
        if 2 * alone <= len(self.train_rows):
            return
        self._emit(Event("warning", {"message": (
            f"--batch-tokens {tokens} holds fewer than two of most training targets: {alone:,} of "
            f"{len(self.train_rows):,} pairs train alone, one sentence an update (slow, noisy "
            f"updates); give a few thousand (the default is {TrainConfig().batch_tokens:,})"
        )}))  # fmt: skip

    def _load_guides(self):
        """The word links of the training pairs as piece-level attention targets: from the
        user's file, or from the teacher (run once by the main rank, stored in the data dir)."""
        from nmt_cli.guide import training_guides

        t = self.config.train
        path = Path(t.alignments) if t.alignments else None

        def load(on_event: OnEvent):  # the link rates only where they are written
            return training_guides(
                self.data, t.align_unit, path, on_event, self.model_dir, self.ranks.main
            )

        if not self.ranks.distributed:
            return load(self.on_event)
        guides = load(self.on_event) if self.ranks.main else None
        barrier(self.ranks)  # the teacher's file is in place before the other ranks read it
        return guides if guides is not None else load(ignore)

    def epoch_batches(self, epoch: int) -> list[np.ndarray]:
        """This rank's batches of `epoch`, in training order (a pure function of seed and epoch)."""
        rows = self.train_rows
        batches = make_batches(
            self.train_src.lengths[rows],
            self.train_tgt.lengths[rows],
            self.config.train.batch_tokens,
            self.config.train.seed,
            epoch,
        )
        mine = shard([rows[b] for b in batches], self.ranks)
        if not mine:  # more processes than batches: every rank would get none, and train nothing
            raise ConfigError(
                f"the training split makes {len(batches)} batch(es) of --batch-tokens "
                f"{self.config.train.batch_tokens} per epoch, fewer than the "
                f"{self.ranks.world} processes: use fewer processes or a smaller --batch-tokens"
            )
        return mine

    # -- one update ---------------------------------------------------------------------------
    def train_step(self, batch: Batch) -> float | None:
        """The next update on `batch` at the learning rate last set; its loss per target token,
        or None if it was skipped (`train` calls `self.update` itself; tests and
        scripts/profile_train.py call this)."""
        measured = self.update(batch, self.progress.step + 1)
        return None if measured is None else measured.loss

    # -- the loop ---------------------------------------------------------------------------
    def train(self) -> Progress:
        """Train until a limit is reached; validate and checkpoint along the way."""
        t = self.config.train
        clock = Clock(self.progress.train_seconds)
        window = Window()
        stopped = self._should_stop(clock)  # a resumed run may be at its limit already
        if stopped and self.progress.step and not self.stop.is_set():
            self._say_spent(t)
        while not stopped and not self._finished_epochs():
            batches = self.epoch_batches(self.progress.epoch)
            self._emit(Event("epoch", {"epoch": self.progress.epoch + 1, "batches": len(batches)}))
            for index, batch in iterate_batches(
                self.train_src, self.train_tgt, batches, self.progress.batch_index, self.guides
            ):
                lr = self.update.set_lr(self.progress.step, self.progress.lr_scale)
                measured = self.update(batch, self.progress.step + 1)
                self.progress.batch_index = index + 1
                self.progress.train_seconds = clock.total()
                if measured is not None:
                    self.progress.step += 1
                    self.progress.tokens_seen += measured.tokens
                    window.add(measured)
                    if self.progress.step % t.log_every == 0:
                        self._report(window, lr, len(batches), clock)
                    if self.progress.step % t.valid_every == 0:
                        self._validate_and_save()
                        window.restart()  # validation time is not training speed
                if self._should_stop(clock):
                    stopped = True
                    break
            else:
                self.progress.epoch += 1
                self.progress.batch_index = 0
                if self.progress.step % t.valid_every != 0:
                    self._validate_and_save()
                stopped = self._patience_exhausted()
        if self.stop.is_set():
            self._interrupt(clock)
        if self.progress.step % t.valid_every != 0 or not self._has_best():
            self._validate_and_save(scheduled=False)  # the model as it stopped, for the best
        self.progress.train_seconds = clock.total()
        self._save_last()
        self._emit(self._progress_event("done"))
        return self.progress

    def _has_best(self) -> bool:
        return bool(broadcast((self.model_dir / checkpoint.MODEL_FILE).exists(), self.ranks))

    def _finished_epochs(self) -> bool:
        max_epochs = self.config.train.max_epochs
        return bool(max_epochs) and self.progress.epoch >= max_epochs

    def _patience_exhausted(self) -> bool:
        patience = self.config.train.patience
        return bool(patience) and self.progress.bad_validations >= patience

    def _should_stop(self, clock: Clock) -> bool:
        """Stop on a signal or a budget; in DDP all ranks agree (any rank's reason stops all)."""
        t = self.config.train
        budget = (
            bool(t.max_steps and self.progress.step >= t.max_steps)
            or bool(t.max_time and clock.total() >= t.max_time)  # runs before --resume too
            or self._patience_exhausted()
        )
        signalled, spent = sum_values(
            [float(self.stop.is_set()), float(budget)], self.ranks, self.device
        )
        if signalled:
            self.stop.set()  # so every rank saves and exits the same way
        return bool(signalled or spent)

    def _say_spent(self, t) -> None:
        """Why a resumed run trains no further: its budget (kept in its config) is spent."""
        p = self.progress
        if t.max_steps and p.step >= t.max_steps:
            spent = f"--max-steps {t.max_steps} is reached (step {p.step})"
        elif t.max_time and p.train_seconds >= t.max_time:
            spent = f"--max-time {t.max_time:g}s is spent ({p.train_seconds:.0f}s trained)"
        else:
            return
        message = f"{spent}: give a larger one (0: no limit) to train on"
        self._emit(Event("warning", {"step": p.step, "message": message}))

    def _interrupt(self, clock: Clock) -> None:
        self.progress.train_seconds = clock.total()
        self._save_last(kept=False)  # resumable, but not one of the validated kept checkpoints
        self._emit(self._progress_event("interrupted"))
        raise Interrupted(
            f"training stopped at step {self.progress.step}; resumable state saved in "
            f"{self.model_dir / checkpoint.LAST_FILE}: continue with --resume"
        )

    def _report(self, window: Window, lr: float, n_batches: int, clock: Clock) -> None:
        rate = window.steps / window.seconds()
        left = remaining(self.config.train, self.progress, clock.total(), rate, n_batches)
        self._emit(window.event(self.progress, lr, n_batches, left, self.ranks.world))
        self._warn_if_diverging(window)
        window.restart()

    def _warn_if_diverging(self, window: Window) -> None:
        """Once a run: an NLL above a uniform guess's, past the first updates and warm-up, is a
        run that learns nothing and gets worse (a finite loss never stops training)."""
        t, step = self.config.train, self.progress.step
        if self._divergence_told or step < max(DIVERGENCE_AFTER, t.warmup_steps):
            return
        nll, vocab = window.nll / max(1, window.steps), self.config.model.tgt_vocab_size
        uniform = math.log(vocab)
        if nll <= uniform + DIVERGENCE_MARGIN:
            return
        self._divergence_told = True
        ppl = math.exp(min(nll, 50.0))
        message = (
            f"step {step}: the training NLL per target piece, {nll:.2f} (ppl {ppl:,.0f}), is "
            f"above a uniform guess's over the {vocab:,} pieces ({uniform:.2f}): training is "
            f"diverging; stop it (Ctrl-C) and train again with a lower --lr (now {t.lr:g}) or "
            f"more --batch-tokens (now {t.batch_tokens:,})"
        )
        self._emit(Event("warning", {"step": step, "message": message}))

    # -- validation and checkpoints ------------------------------------------------------
    def _validate_and_save(self, scheduled: bool = True) -> None:
        """Rank 0 validates and saves; the others wait, then take its early-stopping state.
        Nothing to do when this step was validated already (a run that stopped at the end of
        an epoch, resumed). A validation off the schedule (`scheduled=False`: where a budget
        stopped the run) may save the best model but leaves the schedule's state alone; the
        schedule's validation of that step, if it has one (the end of an epoch, reached by a
        resumed run), is made all the same."""
        p = self.progress
        if p.step == p.validated_step and not (scheduled and p.validated_off_schedule):
            return
        if self.ranks.main:
            self._validate_on_main(scheduled)
        barrier(self.ranks)
        self.progress = Progress(**broadcast(asdict(self.progress), self.ranks))

    def _validate_on_main(self, scheduled: bool) -> None:
        scores = self.validate(self.model)
        p = self.progress
        p.validated_step, p.validated_off_schedule = p.step, not scheduled
        score = scores.score(p.step)
        schedule_best = p.best_bleu if p.schedule_best is None else p.schedule_best
        improved = score > p.best_bleu
        if improved:
            p.best_bleu, p.best_step, p.best_by = score, p.step, scores.scored_by()
            checkpoint.save_best(
                self.model_dir, self.config.to_dict(), self._weights(), self._meta()
            )
        p.schedule_best = schedule_best  # off the schedule: as it was, the schedule goes on
        if scheduled and score > schedule_best:
            p.schedule_best, p.bad_validations = score, 0
        elif scheduled:
            p.bad_validations += 1
            if self.config.train.schedule == "plateau":
                p.lr_scale *= self.config.train.decay_factor
        self._save_last()
        self._emit(self._valid_event(scores, improved))

    def _epoch_counted(self) -> int:
        """The epoch as the log counts it: the one under way, or the one just finished."""
        return counted_epoch(self.progress.epoch, self.progress.batch_index)

    def _progress_event(self, kind: str) -> Event:
        """The progress as an event ('done', 'interrupted'): its epoch counted as the other
        events count it, the epochs completed beside it."""
        fields = asdict(self.progress)
        return Event(
            kind, {**fields, "epoch": self._epoch_counted(), "epochs_finished": fields["epoch"]}
        )

    def _valid_event(self, scores: DevScores, improved: bool) -> Event:
        p = self.progress
        return Event(
            "valid",
            {
                "step": p.step,
                "epoch": self._epoch_counted(),
                **scores.fields(),
                "best_bleu": round(p.best_bleu, 2),
                "best_by": p.best_by,
                "best_step": p.best_step,
                "improved": improved,
                "seconds": scores.seconds,
            },
        )

    def _best_dev_bleu(self) -> float | None:
        p = self.progress
        return round(p.best_bleu, 2) if p.best_by == "bleu" else None

    def _weights(self) -> dict[str, torch.Tensor]:
        return {k: v.detach().cpu() for k, v in self.model.state_dict().items()}

    def _meta(self) -> dict[str, Any]:
        import nmt_cli

        return {
            "nmt_version": nmt_cli.__version__,
            "torch_version": str(torch.__version__),
            "step": self.progress.step,
            "epoch": self._epoch_counted(),  # as the log counts it
            "best_dev_bleu": self._best_dev_bleu(),
            "best_step": self.progress.best_step,
            "tokens_seen": self.progress.tokens_seen,
            "train_seconds": round(self.progress.train_seconds, 1),
            "data_dir": str(self.data.path),
            "data_fingerprint": self.data.fingerprint,
            "src_lang": self.data.src_lang,
            "tgt_lang": self.data.tgt_lang,
            "src_unsegmented": self._unsegmented["src"],
            "tgt_unsegmented": self._unsegmented["tgt"],
            "lowercase": self.data.lowercase,  # its input is lowercased alike (text_form)
            "device": str(self.device),
            "world_size": self.ranks.world,
        }

    def _save_last(self, kept: bool = True) -> None:
        """The resume checkpoint; with `kept`, also one of the `--keep-checkpoints`."""
        if not self.ranks.main:
            return
        progress = asdict(self.progress)
        # The data position is kept in global batches, so any number of ranks can resume it.
        progress["batch_index"] = self.progress.batch_index * self.ranks.world
        update = self.update.state()  # optimizer and scaler
        state = {
            "config": self.config.to_dict(),
            "weights": self._weights(),
            "optimizer": update["optimizer"],
            "progress": progress,
            "scaler": update["scaler"],
            "data_fingerprint": self.data.fingerprint,
        }
        keep = self.config.train.keep_checkpoints if kept else 0
        checkpoint.save_resume(self.model_dir, state, keep)

    def resume(self) -> Progress:
        """Restore model, optimizer, schedule, step, data position, RNG and early-stopping state."""

        def restore(payload: dict) -> None:
            self.model.load_state_dict(payload["weights"])
            self.update.restore(payload)
            saved = dict(payload["progress"])
            if "best_by" not in saved:  # saved before the field: what its best score was
                saved["best_by"] = "bleu" if self.data.has_split("dev") else "step"
            self.progress = Progress(**saved)

        data = self.data
        checkpoint.load_resume(
            self.model_dir,
            self.device,
            data.fingerprint,
            data.path,
            restore,
            self.config.to_dict()["model"],
        )
        self.progress.batch_index //= self.ranks.world
        if self.ranks.distributed:
            torch.manual_seed(self.config.train.seed + 7919 * self.ranks.rank + self.progress.step)
        self._emit(Event("resumed", asdict(self.progress)))
        return self.progress

    def _emit(self, event: Event) -> None:
        if not self.ranks.main:
            return
        record = {"time": round(time.time(), 3), **event.record()}
        with open(self.model_dir / checkpoint.LOG_FILE, "a", encoding="utf-8") as log:
            log.write(json.dumps(record) + "\n")
        self.on_event(event)
