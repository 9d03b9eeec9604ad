"""Training: token batches, Adam with warm-up and decay, validation by dev BLEU, checkpoints.

The trainer prints nothing. It reports through `on_event(dict)`, which the CLI turns into a
live display, and appends every report to `train.jsonl` in the model directory.
"""

from __future__ import annotations

import json
import math
import shutil
import threading
import time
from collections.abc import Callable
from contextlib import nullcontext
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

import numpy as np
import torch
import torch.nn.functional as F

from nmt_cli import checkpoint
from nmt_cli.batching import Batch, collate, iterate_batches, make_batches
from nmt_cli.config import Config
from nmt_cli.data.datadir import DataDir
from nmt_cli.errors import Interrupted, NmtError
from nmt_cli.model.seq2seq import PAD_ID, Seq2Seq

Event = dict[str, Any]
MAX_BAD_LOSSES = 5  # consecutive non-finite losses before training stops


@dataclass
class Progress:
    """Everything about where training stands; saved in the resume checkpoint."""

    step: int = 0
    epoch: int = 0
    batch_index: int = 0  # the next batch of `epoch` to train on
    best_bleu: float = -1.0
    best_step: int = 0
    bad_validations: int = 0
    lr_scale: float = 1.0  # plateau decay applied so far
    tokens_seen: int = 0
    train_seconds: float = 0.0


def pick_device(name: str) -> torch.device:
    if name == "auto":
        return torch.device("cuda" if torch.cuda.is_available() else "cpu")
    if name.startswith("cuda") and not torch.cuda.is_available():
        raise NmtError(
            "--device cuda was asked for but no CUDA device is available; use --device cpu"
        )
    return torch.device(name)


def autocast_for(device: torch.device, enabled: bool):
    """bf16 autocast where the GPU supports it, else fp16; nothing on CPU."""
    if device.type != "cuda" or not enabled:
        return nullcontext(), None
    if torch.cuda.is_bf16_supported():
        return torch.autocast("cuda", dtype=torch.bfloat16), None
    return torch.autocast("cuda", dtype=torch.float16), torch.amp.GradScaler("cuda")


def batch_loss(
    model: Seq2Seq, batch: Batch, label_smoothing: float
) -> tuple[torch.Tensor, torch.Tensor]:
    """Mean smoothed loss per target token, and the summed plain NLL (for perplexity).

    The output layer runs once over the real (non-pad) positions of all steps: it dominates
    the cost, and skipping padding here saves it outright.
    """
    vectors = model(batch.src, batch.src_lengths, batch.tgt_in)  # (B, T, O)
    real = batch.tgt_out != PAD_ID
    logits = model.generator(vectors[real]).float()  # (N, V)
    targets = batch.tgt_out[real]
    loss = F.cross_entropy(logits, targets, label_smoothing=label_smoothing, reduction="sum")
    with torch.no_grad():
        nll = (
            F.cross_entropy(logits, targets, reduction="sum") if label_smoothing else loss.detach()
        )
    return loss / max(1, batch.n_tokens), nll


class Trainer:
    def __init__(
        self,
        config: Config,
        data: DataDir,
        model_dir: Path,
        on_event: Callable[[Event], None] = lambda event: None,
        stop: threading.Event | None = None,
    ):
        self.config = config
        self.data = data
        self.model_dir = model_dir
        self.on_event = on_event
        self.stop = stop or threading.Event()
        t = config.train
        self.device = pick_device(t.device)
        if t.threads:
            torch.set_num_threads(t.threads)
        torch.manual_seed(t.seed)
        self.model = Seq2Seq(config.model).to(self.device)
        self.optimizer = torch.optim.Adam(self.model.parameters(), lr=t.lr)
        self.autocast, self.scaler = autocast_for(self.device, t.amp)
        self.progress = Progress()
        self._load_training_data()
        self._tgt_tokenizer = None
        self._bad_losses = 0

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

    def _epoch_batches(self, epoch: int) -> list[np.ndarray]:
        rows = self.train_rows
        batches = make_batches(
            self.train_src.lengths[rows],
            self.train_tgt.lengths[rows],
            self.config.train.batch_tokens,
            self.config.train.seed,
            epoch,
        )
        return [rows[b] for b in batches]

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
    def _train_step(self, batch: Batch) -> float | None:
        self.model.train()
        batch = batch.to(self.device)
        with self.autocast:
            loss, _ = batch_loss(self.model, batch, self.config.train.label_smoothing)
        if not torch.isfinite(loss):
            self._bad_losses += 1
            self.optimizer.zero_grad(set_to_none=True)
            self._emit(
                {
                    "event": "warning",
                    "step": self.progress.step,
                    "message": f"non-finite loss at step {self.progress.step + 1}: update skipped",
                }
            )
            if self._bad_losses >= MAX_BAD_LOSSES:
                raise NmtError(
                    f"the loss was not finite {MAX_BAD_LOSSES} times in a row (step "
                    f"{self.progress.step + 1}); the last good checkpoint is kept: lower --lr "
                    "or check the data, then --resume"
                )
            return None
        self._bad_losses = 0
        self.optimizer.zero_grad(set_to_none=True)
        if self.scaler is not None:
            self.scaler.scale(loss).backward()
            self.scaler.unscale_(self.optimizer)
        else:
            loss.backward()
        if self.config.train.clip_norm > 0:
            torch.nn.utils.clip_grad_norm_(self.model.parameters(), self.config.train.clip_norm)
        if self.scaler is not None:
            self.scaler.step(self.optimizer)
            self.scaler.update()
        else:
            self.optimizer.step()
        return loss.item()

    # -- the loop ---------------------------------------------------------------------------
    def train(self) -> Progress:
        t = self.config.train
        started = time.monotonic() - self.progress.train_seconds
        run_started = time.monotonic()
        window = {"loss": 0.0, "steps": 0, "tokens": 0, "time": time.monotonic()}
        while not self._finished_epochs():
            batches = self._epoch_batches(self.progress.epoch)
            self._emit(
                {"event": "epoch", "epoch": self.progress.epoch + 1, "batches": len(batches)}
            )
            for index, batch in iterate_batches(
                self.train_src, self.train_tgt, batches, self.progress.batch_index
            ):
                if self.stop.is_set():
                    self._interrupt(started)
                lr = self._set_lr()
                loss = self._train_step(batch)
                self.progress.batch_index = index + 1
                if loss is None:
                    continue
                self.progress.step += 1
                self.progress.tokens_seen += batch.n_tokens
                window["loss"] += loss
                window["steps"] += 1
                window["tokens"] += batch.n_tokens
                self.progress.train_seconds = time.monotonic() - started
                if self.progress.step % t.log_every == 0:
                    self._report(window, lr, len(batches), run_started)
                if self.progress.step % t.valid_every == 0:
                    self._validate_and_save()
                    window["time"] = time.monotonic()  # validation time is not training speed
                if self._out_of_budget(run_started):
                    break
            else:
                self.progress.epoch += 1
                self.progress.batch_index = 0
                if self.progress.step % t.valid_every != 0:
                    self._validate_and_save()
                if self._patience_exhausted():
                    break
                continue
            break
        if (
            self.progress.step % t.valid_every != 0
            or not (self.model_dir / checkpoint.MODEL_FILE).exists()
        ):
            self._validate_and_save()
        self.progress.train_seconds = time.monotonic() - started
        self._save_last()
        self._emit({"event": "done", **asdict(self.progress)})
        return self.progress

    def _finished_epochs(self) -> bool:
        return (
            bool(self.config.train.max_epochs)
            and self.progress.epoch >= self.config.train.max_epochs
        )

    def _patience_exhausted(self) -> bool:
        patience = self.config.train.patience
        return bool(patience) and self.progress.bad_validations >= patience

    def _out_of_budget(self, run_started: float) -> bool:
        t = self.config.train
        if t.max_steps and self.progress.step >= t.max_steps:
            return True
        if t.max_time and time.monotonic() - run_started >= t.max_time:
            return True
        return self._patience_exhausted()

    def _interrupt(self, started: float) -> None:
        self.progress.train_seconds = time.monotonic() - started
        self._save_last()
        raise Interrupted(
            f"training stopped at step {self.progress.step}; resumable state saved in "
            f"{self.model_dir / checkpoint.LAST_FILE}: continue with --resume"
        )

    def _report(self, window: dict, lr: float, n_batches: int, run_started: float) -> None:
        now = time.monotonic()
        seconds = max(1e-9, now - window["time"])
        loss = window["loss"] / max(1, window["steps"])
        self._emit(
            {
                "event": "train",
                "step": self.progress.step,
                "epoch": self.progress.epoch + 1,
                "batch": self.progress.batch_index,
                "batches": n_batches,
                "loss": round(loss, 4),
                "lr": lr,
                "tokens_per_s": round(window["tokens"] / seconds, 1),
                "elapsed": round(self.progress.train_seconds, 1),
                "remaining": self._remaining(
                    now - run_started, window["steps"] / seconds, n_batches
                ),
            }
        )
        window.update(loss=0.0, steps=0, tokens=0, time=now)

    def _remaining(self, run_elapsed: float, steps_per_s: float, n_batches: int) -> float | None:
        t, p = self.config.train, self.progress
        estimates = []
        if t.max_time:
            estimates.append(max(0.0, t.max_time - run_elapsed))
        if t.max_steps and steps_per_s > 0:
            estimates.append((t.max_steps - p.step) / steps_per_s)
        if t.max_epochs and steps_per_s > 0:
            left = (t.max_epochs - p.epoch - 1) * n_batches + (n_batches - p.batch_index)
            estimates.append(left / steps_per_s)
        return round(min(estimates), 1) if estimates else None

    # -- validation -------------------------------------------------------------------------
    @torch.inference_mode()
    def dev_loss(self) -> float | None:
        if not self.data.has_split("dev"):
            return None
        self.model.eval()
        src, tgt = self.data.ids("dev", "src"), self.data.ids("dev", "tgt")
        batches = make_batches(
            src.lengths, tgt.lengths, self.config.train.batch_tokens, 0, 0, shuffle=False
        )
        total, tokens = 0.0, 0
        for _, batch in iterate_batches(src, tgt, batches):
            batch = batch.to(self.device)
            with self.autocast:
                _, nll = batch_loss(self.model, batch, 0.0)
            total += nll.item()
            tokens += batch.n_tokens
        return total / max(1, tokens)

    def dev_bleu(self) -> float | None:
        if not self.data.has_split("dev"):
            return None
        import sacrebleu

        from nmt_cli.data.tokenizer import Tokenizer
        from nmt_cli.translator import decode_ids

        if self._tgt_tokenizer is None:
            self._tgt_tokenizer = Tokenizer(self.data.tgt_spm)
        src = self.data.ids("dev", "src")
        limit = self.config.train.valid_sentences or len(src)
        n = min(limit, len(src))
        refs = self.data.text("dev", "tgt").read_text(encoding="utf-8").splitlines()[:n]
        sources = [src[i][: self.config.train.max_len] for i in range(n)]
        self.model.eval()
        with self.autocast:
            hyps = decode_ids(self.model, sources, device=self.device, batch_size=128)
        texts = [self._tgt_tokenizer.decode(nbest[0].tokens) for nbest in hyps]
        return sacrebleu.corpus_bleu(texts, [refs]).score

    def _validate_and_save(self) -> None:
        started = time.monotonic()
        loss = self.dev_loss()
        bleu = self.dev_bleu()
        p = self.progress
        score = bleu if bleu is not None else (-loss if loss is not None else float(p.step))
        improved = score > p.best_bleu
        if improved:
            p.best_bleu, p.best_step, p.bad_validations = score, p.step, 0
            self._save_best()
        else:
            p.bad_validations += 1
            if self.config.train.schedule == "plateau":
                p.lr_scale *= self.config.train.decay_factor
        self._save_last()
        self._emit(
            {
                "event": "valid",
                "step": p.step,
                "epoch": p.epoch + (0 if p.batch_index == 0 else 1),
                "dev_loss": None if loss is None else round(loss, 4),
                "dev_ppl": None if loss is None else round(math.exp(min(loss, 50)), 2),
                "dev_bleu": None if bleu is None else round(bleu, 2),
                "best_bleu": round(p.best_bleu, 2),
                "best_step": p.best_step,
                "improved": improved,
                "seconds": round(time.monotonic() - started, 1),
            }
        )

    # -- checkpoints ------------------------------------------------------------------------
    def _weights(self) -> dict[str, torch.Tensor]:
        return {k: v.detach().cpu() for k, v in self.model.state_dict().items()}

    def _save_best(self) -> None:
        meta = self._meta()
        checkpoint.save(
            self.model_dir / checkpoint.MODEL_FILE,
            {
                "config": self.config.to_dict(),
                "weights": self._weights(),
                "meta": meta,
            },
        )
        checkpoint.write_json(self.model_dir / checkpoint.META_FILE, meta)

    def _meta(self) -> dict[str, Any]:
        import nmt_cli

        return {
            "nmt_version": nmt_cli.__version__,
            "torch_version": str(torch.__version__),
            "step": self.progress.step,
            "epoch": self.progress.epoch,
            "best_dev_bleu": round(self.progress.best_bleu, 2),
            "best_step": self.progress.best_step,
            "tokens_seen": self.progress.tokens_seen,
            "train_seconds": round(self.progress.train_seconds, 1),
            "data_dir": str(self.data.path),
            "data_fingerprint": self.data.fingerprint,
            "src_lang": self.data.src_lang,
            "tgt_lang": self.data.tgt_lang,
            "device": str(self.device),
        }

    def _save_last(self) -> None:
        rng = {"torch": torch.get_rng_state()}
        if torch.cuda.is_available():
            rng["cuda"] = torch.cuda.get_rng_state_all()
        checkpoint.save(
            self.model_dir / checkpoint.LAST_FILE,
            {
                "config": self.config.to_dict(),
                "weights": self._weights(),
                "optimizer": self.optimizer.state_dict(),
                "progress": asdict(self.progress),
                "rng": rng,
                "scaler": self.scaler.state_dict() if self.scaler else None,
                "data_fingerprint": self.data.fingerprint,
            },
        )

    def resume(self) -> Progress:
        """Restore model, optimizer, schedule, step, data position, RNG and early-stopping state."""
        payload = checkpoint.load(self.model_dir / checkpoint.LAST_FILE, map_location=self.device)
        if payload.get("data_fingerprint") != self.data.fingerprint:
            raise NmtError(
                f"{self.model_dir} was trained on other data (fingerprint differs from "
                f"{self.data.path}); resume with the same data directory or train anew"
            )
        try:
            self.model.load_state_dict(payload["weights"])
            self.optimizer.load_state_dict(payload["optimizer"])
            self.progress = Progress(**payload["progress"])
        except (KeyError, RuntimeError, TypeError, ValueError) as exc:
            raise NmtError(
                f"{self.model_dir / checkpoint.LAST_FILE} does not match this configuration "
                f"({type(exc).__name__}); resume with the same options or train anew"
            ) from None
        torch.set_rng_state(payload["rng"]["torch"])
        if "cuda" in payload["rng"] and torch.cuda.is_available():
            torch.cuda.set_rng_state_all(payload["rng"]["cuda"])
        if self.scaler is not None and payload.get("scaler"):
            self.scaler.load_state_dict(payload["scaler"])
        self._emit({"event": "resumed", **asdict(self.progress)})
        return self.progress

    def _emit(self, event: Event) -> None:
        event = {"time": round(time.time(), 3), **event}
        with open(self.model_dir / "train.jsonl", "a", encoding="utf-8") as log:
            log.write(json.dumps(event) + "\n")
        self.on_event(event)


def copy_tokenizers(data: DataDir, model_dir: Path) -> None:
    """Make the model directory self-contained: translation needs only it."""
    for source, name in ((data.src_spm, checkpoint.SRC_SPM), (data.tgt_spm, checkpoint.TGT_SPM)):
        target = model_dir / name
        tmp = target.with_suffix(".tmp")
        shutil.copyfile(source, tmp)
        tmp.replace(target)


__all__ = ["Trainer", "Progress", "batch_loss", "collate", "copy_tokenizers", "pick_device"]
