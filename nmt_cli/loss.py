"""The training objective: label-smoothed cross-entropy over the real target tokens."""

from __future__ import annotations

import torch
import torch.nn.functional as F

from nmt_cli.batching import Batch
from nmt_cli.model.seq2seq import Seq2Seq
from nmt_cli.specials import PAD_ID


class Objective(torch.nn.Module):
    """The training loss as a module, so DistributedDataParallel can wrap the whole computation."""

    def __init__(self, model: Seq2Seq, label_smoothing: float):
        super().__init__()
        self.model = model
        self.label_smoothing = label_smoothing

    def forward(
        self,
        src: torch.Tensor,
        src_lengths: torch.Tensor,
        tgt_in: torch.Tensor,
        tgt_out: torch.Tensor,
    ) -> tuple[torch.Tensor, torch.Tensor]:
        """Summed smoothed loss and summed plain NLL over the real target tokens.

        The output layer runs once over the real (non-pad) positions of all steps: it
        dominates the cost, and skipping padding here saves it outright.
        """
        vectors = self.model(src, src_lengths, tgt_in)  # (B, T, O)
        real = tgt_out != PAD_ID
        logits = self.model.generator(vectors[real]).float()  # (N, V)
        targets = tgt_out[real]
        loss = F.cross_entropy(
            logits, targets, label_smoothing=self.label_smoothing, reduction="sum"
        )
        if not self.label_smoothing:
            return loss, loss.detach()
        with torch.no_grad():
            nll = F.cross_entropy(logits, targets, reduction="sum")
        return loss, nll


def batch_loss(
    model: Seq2Seq, batch: Batch, label_smoothing: float
) -> tuple[torch.Tensor, torch.Tensor]:
    """Mean smoothed loss per target token, and the summed plain NLL (for perplexity)."""
    loss, nll = Objective(model, label_smoothing)(
        batch.src, batch.src_lengths, batch.tgt_in, batch.tgt_out
    )
    return loss / max(1, batch.n_tokens), nll
