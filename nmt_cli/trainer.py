"""The training loop: token batches, Adam with warm-up and decay, validation, checkpoints.

The trainer prints nothing. It reports through `on_event(progress.Event)`, which the CLI turns
into a live display, and appends every report to `train.jsonl` in the model directory. What it calls
lives beside it: the loss in `loss`, validation in `validation`, the files in `checkpoint`.
"""

from __future__ import annotations

import json
import math
import threading
import time
from contextlib import nullcontext
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

import numpy as np
import torch

from nmt_cli import checkpoint
from nmt_cli.batching import Batch, iterate_batches, make_batches
from nmt_cli.config import Config
from nmt_cli.data.datadir import DataDir
from nmt_cli.device import check_bf16, gpu_bf16, pick_device, set_threads
from nmt_cli.distributed import Ranks, barrier, broadcast, shard, sum_values
from nmt_cli.errors import ConfigError, Interrupted, NmtError
from nmt_cli.loss import Objective
from nmt_cli.model.seq2seq import Seq2Seq
from nmt_cli.progress import Event, OnEvent, counted_epoch, ignore
from nmt_cli.validation import DevScores, Validator

MAX_BAD_LOSSES = 5  # consecutive non-finite losses before training stops


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
    tokens_seen: int = 0
    train_seconds: float = 0.0


def autocast_for(device: torch.device, amp: bool, bf16: bool = False):
    """The mixed precision of training, and its gradient scaler (fp16 only).

    With `bf16` (whatever `amp` says): bf16 autocast on a CPU or GPU that computes bfloat16 in
    hardware (see `device.check_bf16`). With `amp` on CUDA: bf16 autocast where the GPU
    supports it, else fp16. Weights, optimizer state and the loss stay float32 either way.
    Otherwise: float32."""
    if bf16:
        check_bf16(device, BF16_FLAG, BF16_FIX)
        return torch.autocast(device.type, dtype=torch.bfloat16), None
    if device.type != "cuda" or not amp:
        return nullcontext(), None
    if gpu_bf16(device):  # else fp16: bfloat16 would be emulated, slower
        return torch.autocast("cuda", dtype=torch.bfloat16), None
    return torch.autocast("cuda", dtype=torch.float16), torch.amp.GradScaler("cuda")


# How `nmt train` names bfloat16 training in a refusal, and the way around it: a resumed run
# takes bf16 from its saved config, where there is no --bf16 to drop.
BF16_FLAG, BF16_FIX = "--bf16 (bf16 in [train])", "train without it (--no-bf16)"


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
        self.objective: torch.nn.Module = Objective(
            self.model, t.label_smoothing, t.guided_alignment
        )
        if self.ranks.distributed:
            from torch.nn.parallel import DistributedDataParallel

            ids = [self.device.index] if self.device.type == "cuda" else None
            self.objective = DistributedDataParallel(self.objective, device_ids=ids)
            torch.manual_seed(t.seed + 7919 * self.ranks.rank)  # different dropout per rank
        self.optimizer = torch.optim.Adam(self.model.parameters(), lr=t.lr)
        self.autocast, self.scaler = autocast_for(self.device, t.amp, t.bf16)
        self.progress = Progress()
        self._load_training_data()
        self.validate = Validator(data, t, self.device, self.autocast)
        self._bad_losses = 0
        self.global_tokens = 0  # target tokens of the last update, summed over ranks
        self.alignment_loss: float | None = None  # guided term per guided step, last update
        self.nll = 0.0  # plain NLL per target token of the last update (its ppl is logged)

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

    # -- schedule ---------------------------------------------------------------------------
    def _lr(self) -> float:
        """Linear warm-up, then constant × plateau decay, or inverse square root."""
        t, step = self.config.train, max(1, self.progress.step + 1)
        if t.warmup_steps and step < t.warmup_steps:
            return t.lr * step / t.warmup_steps
        if t.schedule == "inverse_sqrt" and t.warmup_steps:
            return t.lr * math.sqrt(t.warmup_steps / step)
        return max(t.min_lr, t.lr * self.progress.lr_scale)

    def _set_lr(self) -> float:
        lr = self._lr()
        for group in self.optimizer.param_groups:
            group["lr"] = lr
        return lr

    # -- one update -------------------------------------------------------------------------
    def train_step(self, batch: Batch) -> float | None:
        """One update on `batch` (this rank's share of a global batch); None if it was skipped."""
        self.objective.train()
        batch = batch.to(self.device)
        global_tokens, global_sentences = sum_values(
            [float(batch.n_tokens), float(batch.src.size(0))], self.ranks, self.device
        )
        self.global_tokens = int(global_tokens)  # target tokens of this update, all ranks
        per = global_sentences if self.config.train.normalization == "sentences" else global_tokens
        with self.autocast:
            loss_sum, nll_sum, alignment = self.objective(
                batch.src, batch.src_lengths, batch.tgt_in, batch.tgt_out, batch.guide
            )
        # DDP averages gradients over ranks; scaling by world/global tokens (or sentences) makes
        # the result the gradient of the mean loss over the whole global batch.
        loss = loss_sum * (self.ranks.world / max(1.0, per))
        self.optimizer.zero_grad(set_to_none=True)
        if self.scaler is not None:
            self.scaler.scale(loss).backward()
            self.scaler.unscale_(self.optimizer)
        else:
            loss.backward()
        guided = alignment is not None
        reported = [
            float(torch.isfinite(loss).item()),
            loss_sum.item() / max(1.0, global_tokens),  # the loss per target token, all ranks
            nll_sum.item() / max(1.0, global_tokens),  # its plain NLL (no smoothing), for ppl
            alignment.item() if guided else 0.0,
            batch.guide.weights.sum().item() if guided else 0.0,  # guided steps: weights sum to 1
        ]
        finite, value, nll, alignment_sum, guided_steps = sum_values(
            reported, self.ranks, self.device
        )
        if finite < self.ranks.world:
            return self._skip_update()
        if guided:  # the loss reported stays the translation loss, comparable with unguided runs
            value -= self.config.train.guided_alignment * alignment_sum / max(1.0, global_tokens)
            self.alignment_loss = alignment_sum / max(1.0, guided_steps)
        self._bad_losses = 0
        self.nll = nll
        if self.config.train.clip_norm > 0:
            torch.nn.utils.clip_grad_norm_(self.model.parameters(), self.config.train.clip_norm)
        if self.scaler is not None:
            self.scaler.step(self.optimizer)
            self.scaler.update()
        else:
            self.optimizer.step()
        return value

    def _skip_update(self) -> None:
        self._bad_losses += 1
        self.optimizer.zero_grad(set_to_none=True)
        step = self.progress.step + 1
        message = f"non-finite loss at step {step}: update skipped"
        self._emit(Event("warning", {"step": step, "message": message}))
        if self._bad_losses >= MAX_BAD_LOSSES:
            raise NmtError(
                f"the loss was not finite {MAX_BAD_LOSSES} times in a row (step {step}); the "
                "last good checkpoint is kept: lower --lr or check the data, then --resume"
            )
        return None

    # -- the loop ---------------------------------------------------------------------------
    def train(self) -> Progress:
        """Train until a limit is reached; validate and checkpoint along the way."""
        t = self.config.train
        clock = _Clock(self.progress.train_seconds)
        window = _Window()
        stopped = self._should_stop(clock)  # a resumed run may be at its limit already
        if stopped and self.progress.step and not self.stop.is_set():
            self._say_spent(t)
        while not stopped and not self._finished_epochs():
            batches = self.epoch_batches(self.progress.epoch)
            self._emit(Event("epoch", {"epoch": self.progress.epoch + 1, "batches": len(batches)}))
            for index, batch in iterate_batches(
                self.train_src, self.train_tgt, batches, self.progress.batch_index, self.guides
            ):
                lr = self._set_lr()
                loss = self.train_step(batch)
                self.progress.batch_index = index + 1
                self.progress.train_seconds = clock.total()
                if loss is not None:
                    self.progress.step += 1
                    self.progress.tokens_seen += self.global_tokens
                    window.add(loss, self.global_tokens, self.alignment_loss, self.nll)
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
            self._validate_and_save()
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

    def _should_stop(self, clock: _Clock) -> bool:
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

    def _interrupt(self, clock: _Clock) -> None:
        self.progress.train_seconds = clock.total()
        self._save_last(kept=False)  # resumable, but not one of the validated kept checkpoints
        self._emit(self._progress_event("interrupted"))
        raise Interrupted(
            f"training stopped at step {self.progress.step}; resumable state saved in "
            f"{self.model_dir / checkpoint.LAST_FILE}: continue with --resume"
        )

    def _report(self, window: _Window, lr: float, n_batches: int, clock: _Clock) -> None:
        steps_per_s = window.steps / window.seconds()
        self._emit(
            Event(
                "train",
                {
                    "step": self.progress.step,
                    "epoch": self.progress.epoch + 1,
                    "batch": self.progress.batch_index,
                    "batches": n_batches,
                    "loss": round(window.mean_loss(), 4),  # label-smoothed, as trained
                    "ppl": round(math.exp(min(window.mean_nll(), 50.0)), 2),  # of the plain NLL
                    **self._alignment_report(window),
                    "lr": lr,
                    "tokens_per_s": round(window.tokens / window.seconds(), 1),
                    "elapsed": round(self.progress.train_seconds, 1),
                    "remaining": self._remaining(clock.total(), steps_per_s, n_batches),
                    "world_size": self.ranks.world,
                },
            )
        )
        window.restart()

    @staticmethod
    def _alignment_report(window: _Window) -> dict[str, float]:
        """The guided-alignment term per guided target step (its floor: the links' entropy)."""
        if not window.alignment_steps:
            return {}
        return {"align_loss": round(window.alignment / window.alignment_steps, 4)}

    def _remaining(self, elapsed: float, steps_per_s: float, n_batches: int) -> float | None:
        t, p = self.config.train, self.progress
        estimates = []
        if t.max_time:
            estimates.append(max(0.0, t.max_time - elapsed))
        if t.max_steps and steps_per_s > 0:
            estimates.append((t.max_steps - p.step) / steps_per_s)
        if t.max_epochs and steps_per_s > 0:
            left = (t.max_epochs - p.epoch - 1) * n_batches + (n_batches - p.batch_index)
            estimates.append(left / steps_per_s)
        return round(min(estimates), 1) if estimates else None

    # -- validation and checkpoints ------------------------------------------------------
    def _validate_and_save(self) -> None:
        """Rank 0 validates and saves; the others wait, then take its early-stopping state.
        Nothing to do when this step was validated already (a run that stopped at the end of
        an epoch, resumed)."""
        if self.progress.step == self.progress.validated_step:
            return
        if self.ranks.main:
            self._validate_on_main()
        barrier(self.ranks)
        self.progress = Progress(**broadcast(asdict(self.progress), self.ranks))

    def _validate_on_main(self) -> None:
        scores = self.validate(self.model)
        p = self.progress
        p.validated_step = p.step
        improved = scores.score(p.step) > p.best_bleu
        if improved:
            p.best_bleu, p.best_step, p.bad_validations = scores.score(p.step), p.step, 0
            p.best_by = scores.scored_by()
            checkpoint.save_best(
                self.model_dir, self.config.to_dict(), self._weights(), self._meta()
            )
        else:
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
        state = {
            "config": self.config.to_dict(),
            "weights": self._weights(),
            "optimizer": self.optimizer.state_dict(),
            "progress": progress,
            "scaler": self.scaler.state_dict() if self.scaler else None,
            "data_fingerprint": self.data.fingerprint,
        }
        keep = self.config.train.keep_checkpoints if kept else 0
        checkpoint.save_resume(self.model_dir, state, keep)

    def resume(self) -> Progress:
        """Restore model, optimizer, schedule, step, data position, RNG and early-stopping state."""

        def restore(payload: dict) -> None:
            self.model.load_state_dict(payload["weights"])
            self.optimizer.load_state_dict(payload["optimizer"])
            saved = dict(payload["progress"])
            if "best_by" not in saved:  # saved before the field: what its best score was
                saved["best_by"] = "bleu" if self.data.has_split("dev") else "step"
            self.progress = Progress(**saved)

        data = self.data
        payload = checkpoint.load_resume(
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
        if self.scaler is not None and payload.get("scaler"):
            self.scaler.load_state_dict(payload["scaler"])
        self._emit(Event("resumed", asdict(self.progress)))
        return self.progress

    def _emit(self, event: Event) -> None:
        if not self.ranks.main:
            return
        record = {"time": round(time.time(), 3), **event.record()}
        with open(self.model_dir / checkpoint.LOG_FILE, "a", encoding="utf-8") as log:
            log.write(json.dumps(record) + "\n")
        self.on_event(event)


class _Clock:
    """Training time: this run's, and the total including runs before a resume."""

    def __init__(self, before: float):
        self.before = before
        self.started = time.monotonic()

    def run(self) -> float:
        return time.monotonic() - self.started

    def total(self) -> float:
        return self.before + self.run()


class _Window:
    """Loss and throughput since the last report."""

    def __init__(self) -> None:
        self.restart()

    def restart(self) -> None:
        self.loss, self.nll, self.steps, self.tokens = 0.0, 0.0, 0, 0
        self.started = time.monotonic()
        self.alignment, self.alignment_steps = 0.0, 0

    def add(
        self, loss: float, tokens: int, alignment: float | None = None, nll: float | None = None
    ) -> None:
        self.loss += loss
        self.nll += loss if nll is None else nll
        self.steps += 1
        self.tokens += tokens
        if alignment is not None:
            self.alignment += alignment
            self.alignment_steps += 1

    def seconds(self) -> float:
        return max(1e-9, time.monotonic() - self.started)

    def mean_loss(self) -> float:
        return self.loss / max(1, self.steps)

    def mean_nll(self) -> float:
        return self.nll / max(1, self.steps)
