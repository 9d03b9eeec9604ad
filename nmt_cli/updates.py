"""One training update: the loss under mixed precision, its gradient over all ranks, the skip
of a non-finite one, clipping, the learning-rate schedule and Adam's step.

`Trainer` decides when to update, validate and save; an `Updater` only updates, and reports
what the update measured (`Measured`).
"""

from __future__ import annotations

import math
from collections.abc import Callable
from contextlib import nullcontext
from dataclasses import dataclass

import torch

from nmt_cli.batching import Batch
from nmt_cli.config import TrainConfig
from nmt_cli.device import check_bf16, gpu_bf16
from nmt_cli.distributed import Ranks, sum_values
from nmt_cli.errors import NmtError
from nmt_cli.loss import Objective
from nmt_cli.model.seq2seq import Seq2Seq
from nmt_cli.progress import Event

MAX_BAD_LOSSES = 5  # consecutive non-finite losses before training stops

# How `nmt train` names bfloat16 training in a refusal, and the way around it: a resumed run
# takes bf16 from its saved config, where there is no --bf16 to drop.
BF16_FLAG, BF16_FIX = "--bf16 (bf16 in [train])", "train without it (--no-bf16)"


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


@dataclass(frozen=True)
class Measured:
    """What one update measured, summed over the ranks."""

    loss: float  # the translation loss per target token (the guided term left out)
    nll: float  # its plain NLL per target token (no smoothing), for perplexity
    tokens: int  # target tokens of the update
    alignment: float | None  # the guided term per guided target step; None when unguided


class Updater:
    """The objective, Adam and mixed precision of one model (on this rank). Made right after
    the model: when distributed, it reseeds torch for this rank's dropout once the weights
    are in place (the same on every rank)."""

    def __init__(
        self,
        model: Seq2Seq,
        config: TrainConfig,
        device: torch.device,
        ranks: Ranks,
        emit: Callable[[Event], None],
    ):
        self.config, self.device, self.ranks, self.emit = config, device, ranks, emit
        self.model = model
        self.objective: torch.nn.Module = Objective(
            model, config.label_smoothing, config.guided_alignment
        )
        if ranks.distributed:
            from torch.nn.parallel import DistributedDataParallel

            ids = [device.index] if device.type == "cuda" else None
            self.objective = DistributedDataParallel(self.objective, device_ids=ids)
            torch.manual_seed(config.seed + 7919 * ranks.rank)  # different dropout per rank
        # torch's fused Adam: one kernel over each parameter where the default walks it in
        # several passes (9M parameters of the reference model: 4 ms an update instead of 17 on
        # 2 cores); the same update, rounded differently in the last bit
        self.fused = device.type in ("cpu", "cuda")
        self.optimizer = torch.optim.Adam(model.parameters(), lr=config.lr, fused=self.fused)
        self.autocast, self.scaler = autocast_for(device, config.amp, config.bf16)
        self._bad_losses = 0

    def lr(self, step: int, scale: float) -> float:
        """Linear warm-up, then constant × plateau decay (`scale`), or inverse square root, for
        the update after `step`."""
        t, step = self.config, max(1, step + 1)
        if t.warmup_steps and step < t.warmup_steps:
            return t.lr * step / t.warmup_steps
        if t.schedule == "inverse_sqrt" and t.warmup_steps:
            return t.lr * math.sqrt(t.warmup_steps / step)
        return max(t.min_lr, t.lr * scale)

    def set_lr(self, step: int, scale: float) -> float:
        lr = self.lr(step, scale)
        for group in self.optimizer.param_groups:
            group["lr"] = lr
        return lr

    def __call__(self, batch: Batch, step: int) -> Measured | None:
        """Update `step` on `batch` (this rank's share of a global batch); None if skipped."""
        self.objective.train()
        batch = batch.to(self.device)
        tokens, sentences = sum_values(
            [float(batch.n_tokens), float(batch.src.size(0))], self.ranks, self.device
        )
        per = sentences if self.config.normalization == "sentences" else tokens
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
            loss_sum.item() / max(1.0, tokens),  # the loss per target token, all ranks
            nll_sum.item() / max(1.0, tokens),  # its plain NLL (no smoothing), for ppl
            alignment.item() if guided else 0.0,
            batch.guide.weights.sum().item() if guided else 0.0,  # guided steps: weights sum to 1
        ]
        finite, value, nll, alignment_sum, guided_steps = sum_values(
            reported, self.ranks, self.device
        )
        if finite < self.ranks.world:
            return self._skip(step)
        if guided:  # the loss reported stays the translation loss, comparable with unguided runs
            value -= self.config.guided_alignment * alignment_sum / max(1.0, tokens)
        self._bad_losses = 0
        if self.config.clip_norm > 0:
            torch.nn.utils.clip_grad_norm_(self.model.parameters(), self.config.clip_norm)
        if self.scaler is not None:
            self.scaler.step(self.optimizer)
            self.scaler.update()
        else:
            self.optimizer.step()
        aligned = alignment_sum / max(1.0, guided_steps) if guided else None
        return Measured(value, nll, int(tokens), aligned)

    def _skip(self, step: int) -> None:
        self._bad_losses += 1
        self.optimizer.zero_grad(set_to_none=True)
        if self.scaler is not None:  # closes the unscale_ of this update (and lowers the scale)
            self.scaler.update()
        self.emit(
            Event(
                "warning",
                {"step": step, "message": f"non-finite loss at step {step}: update skipped"},
            )
        )
        if self._bad_losses >= MAX_BAD_LOSSES:
            raise NmtError(
                f"the loss was not finite {MAX_BAD_LOSSES} times in a row (step {step}); the "
                "last good checkpoint is kept: lower --lr or check the data, then --resume"
            )
        return None

    def state(self) -> dict:
        """What a resume checkpoint keeps of it."""
        return {
            "optimizer": self.optimizer.state_dict(),
            "scaler": self.scaler.state_dict() if self.scaler else None,
        }

    def restore(self, payload: dict) -> None:
        """Take back what `state` kept (a scaler's only where both runs have one)."""
        self.optimizer.load_state_dict(payload["optimizer"])
        for group in self.optimizer.param_groups:  # a state saved by an unfused Adam says so
            group["fused"] = self.fused
        if self.scaler is not None and payload.get("scaler"):
            self.scaler.load_state_dict(payload["scaler"])
