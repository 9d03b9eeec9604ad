"""The training objective: label-smoothed cross-entropy over the real target tokens, plus the
guided-alignment term when the attention is trained towards given word links."""

from __future__ import annotations

import torch
import torch.nn.functional as F

from nmt_cli.batching import Batch, Guide
from nmt_cli.model.seq2seq import Seq2Seq
from nmt_cli.specials import PAD_ID


def guided_alignment_loss(
    weights: torch.Tensor, guide: Guide, shift: int = 0, lengths: torch.Tensor | None = None
) -> torch.Tensor:
    """Summed cross-entropy −Σ q log a between the guide's target distributions q and the
    attention a (B, T, S) of the steps they belong to (Chen et al. 2016, "Guided alignment
    training for topic-aware NMT"): target piece t's links train the attention of step
    t + `shift` (`model.decoder.input_step_offset`). For one step it is smallest, at the
    entropy of q, when the attention equals q; steps without links (unaligned target words,
    EOS) add nothing, nor do links of pieces past a row's end (`lengths` (B,): target pieces
    per row; piece n − 1 is aligned at step n − 1 + shift, so `weights` needs shift − 1 steps
    beyond the EOS step, see `Objective`)."""
    rows, steps, sources, targets = guide.rows, guide.steps + shift, guide.sources, guide.weights
    if shift:
        last = lengths[rows] + shift - 1 if lengths is not None else weights.size(1) - 1
        keep = steps <= last
        rows, steps, sources, targets = rows[keep], steps[keep], sources[keep], targets[keep]
    chosen = weights[rows, steps, sources]
    chosen = chosen.to(torch.promote_types(chosen.dtype, torch.float32))  # fp16/bf16 under amp
    return -(targets * torch.log(chosen.clamp_min(1e-12))).sum()


class Objective(torch.nn.Module):
    """The training loss as a module, so DistributedDataParallel can wrap the whole computation."""

    def __init__(self, model: Seq2Seq, label_smoothing: float, guided_alignment: float = 0.0):
        super().__init__()
        self.model = model
        self.label_smoothing = label_smoothing
        self.guided_alignment = guided_alignment

    def forward(
        self,
        src: torch.Tensor,
        src_lengths: torch.Tensor,
        tgt_in: torch.Tensor,
        tgt_out: torch.Tensor,
        guide: Guide | None = None,
    ) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor | None]:
        """Summed loss (smoothed cross-entropy + weight × guided term), summed plain NLL over
        the real target tokens, and the summed guided term (None without a guide).

        The output layer runs once over the real (non-pad) positions of all steps: it
        dominates the cost, and skipping padding here saves it outright.
        """
        guided = guide is not None and self.guided_alignment > 0
        # A Bahdanau decoder (align_shift 2) attends with a state that has read the last piece
        # one step after the EOS step: the decoder runs that step too, for its attention only.
        extra = max(0, self.model.config.align_shift - 1) if guided else 0
        if extra:
            tgt_in = F.pad(tgt_in, (0, extra), value=PAD_ID)
        out = self.model(src, src_lengths, tgt_in, attention=guided)
        vectors, weights = out if guided else (out, None)  # (B, T, O), (B, T + extra, S)
        if extra:
            vectors = vectors[:, :-extra]
        real = tgt_out != PAD_ID
        logits = self.model.generator(vectors[real]).float()  # (N, V)
        targets = tgt_out[real]
        loss = F.cross_entropy(
            logits, targets, label_smoothing=self.label_smoothing, reduction="sum"
        )
        if not self.label_smoothing:
            nll = loss.detach()
        else:
            with torch.no_grad():
                nll = F.cross_entropy(logits, targets, reduction="sum")
        if not guided:
            return loss, nll, None
        lengths = real.sum(dim=1) - 1  # target pieces per row (EOS not counted)
        alignment = guided_alignment_loss(weights, guide, self.model.config.align_shift, lengths)
        return loss + self.guided_alignment * alignment, nll, alignment.detach()


def batch_loss(
    model: Seq2Seq, batch: Batch, label_smoothing: float
) -> tuple[torch.Tensor, torch.Tensor]:
    """Mean smoothed loss per target token, and the summed plain NLL (for perplexity)."""
    loss, nll, _ = Objective(model, label_smoothing)(
        batch.src, batch.src_lengths, batch.tgt_in, batch.tgt_out
    )
    return loss / max(1, batch.n_tokens), nll
