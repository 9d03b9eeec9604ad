"""The training objective: label-smoothed cross-entropy over the real target tokens, plus the
guided-alignment term when the attention is trained towards given word links."""

from __future__ import annotations

from functools import partial

import torch
import torch.nn.functional as F
from torch import nn

from nmt_cli.batching import Batch, Guide
from nmt_cli.device import autocast_dtype, low_mm, low_tmm, product_rows
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
        loss, nll = output_loss(
            self.model.generator, vectors[real], tgt_out[real], self.label_smoothing
        )
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


# Rows of the output layer's logits computed at once: chunk × V floats (8 MiB). A whole
# 2,000 × 8,000 float32 logits tensor and its gradient, allocated anew each update, come as
# fresh pages from the system, and touching them cost 50-90 ms per update on a 2-core Xeon.
_CHUNK_FLOATS = 1 << 21


def output_loss(
    generator: nn.Linear, vectors: torch.Tensor, targets: torch.Tensor, smoothing: float
) -> tuple[torch.Tensor, torch.Tensor]:
    """Summed label-smoothed cross-entropy and summed plain NLL of the output layer's logits
    (taken in float32) for `vectors` (N, O) against `targets` (N,): what
    `F.cross_entropy(generator(vectors).float(), targets, label_smoothing=…, reduction="sum")`
    gives, equal up to rounding.

    The logits are made and used a chunk of rows at a time and never kept whole. When a
    gradient is wanted, each chunk's logit gradient (softmax minus the smoothed one-hot) goes
    through the output layer's backward at once, so backward only scales what forward summed:
    the same matrix products as the plain way, without its N × V tensors (logits, their
    float32 copy, log-softmax, its gradient and theirs)."""
    wanted = torch.is_grad_enabled() and (
        vectors.requires_grad or any(p.requires_grad for p in generator.parameters())
    )
    if wanted:
        return _FusedOutputLoss.apply(vectors, generator.weight, generator.bias, targets, smoothing)
    with torch.no_grad():
        loss, nll, _ = _chunked_loss(vectors, generator.weight, generator.bias, targets, smoothing)
    return loss, nll


def _chunked_loss(x, weight, bias, targets, smoothing: float, grads: bool = False):
    """(loss, nll, (dx, dweight, dbias) or None): the sums over the rows of x, chunk by chunk;
    with `grads`, their gradients for a loss gradient of 1 (float32, float64 in a float64 model).

    The gradients' products are float32 (float64), each chunk's weight gradient added by the
    product itself (addmm_), but under bfloat16 autocast. There a product into a float32 sum
    does not exist, and adding each chunk's product to one cost more than the product (2,000 ×
    8,000 logits on a 2-core Xeon with AMX): the chunks' logit gradients are kept in bfloat16
    (half a float32 N × V tensor) for one product at the end, which rounds as autocast's own
    backward does. (Under float16 autocast the logit gradients, mostly tiny probabilities, are
    not kept in float16: unscaled by the loss scaler, they would fall below its range.)"""
    dtype = autocast_dtype(x.device.type) or x.dtype  # that of the output layer's products
    wide = torch.promote_types(dtype, torch.float32)  # sums and gradients
    kept_low = grads and dtype == torch.bfloat16
    # a low-precision product on the CPU pads its rows (see `low_mm`): few shapes for oneDNN
    mm = low_mm if dtype != wide and x.device.type == "cpu" else torch.mm
    with torch.autocast(x.device.type, enabled=False):
        rows, vocab = x.size(0), weight.size(0)
        chunk = max(1, _CHUNK_FLOATS // vocab)
        if mm is low_mm:  # a power of two, which `low_mm` leaves as it is: only the last pads
            chunk = 1 << (chunk.bit_length() - 1)
        xs, w = x.to(dtype), weight.to(dtype)
        b = None if bias is None else bias.to(dtype)
        new = partial(torch.zeros, dtype=wide, device=x.device)
        loss, nll = new(()), new(())
        if grads:
            dx, db = new(x.shape), None if bias is None else new(bias.shape)
            dw = None if kept_low else new(weight.shape)
            kept = None
            if kept_low:  # with the rows the last product pads to (`low_mm`), the extra ones 0
                size = product_rows(rows) if mm is low_mm else rows
                kept = torch.empty(size, vocab, dtype=dtype, device=x.device)
                kept[rows:].zero_()
            w_wide = weight.to(wide)
        for start in range(0, rows, chunk):
            part = slice(start, min(start + chunk, rows))
            rows_x, wanted = xs[part], targets[part, None]
            if mm is torch.mm:
                logits = rows_x @ w.t() if b is None else torch.addmm(b, rows_x, w.t())
                logits = logits.to(wide)
            else:
                logits = mm(rows_x, w.t()).to(wide)
                logits = logits if b is None else logits.add_(b)
            lse = torch.logsumexp(logits, dim=1)  # (n,)
            chunk_nll = (lse - logits.gather(1, wanted).squeeze(1)).sum()
            nll += chunk_nll
            if smoothing:  # (1 - ε)·NLL + ε·mean over the vocabulary of −log p
                loss += (1 - smoothing) * chunk_nll + smoothing * (lse - logits.mean(dim=1)).sum()
            else:
                loss += chunk_nll
            if not grads:
                continue
            grad = logits.sub_(lse.unsqueeze(1)).exp_()  # softmax, in place of the logits
            grad.scatter_add_(1, wanted, grad.new_full(wanted.shape, smoothing - 1.0))
            if smoothing:
                grad.sub_(smoothing / vocab)
            if db is not None:
                db += grad.sum(dim=0)
            if kept_low:
                grad = kept[part].copy_(grad)
                dx[part] = mm(grad, w)
            else:
                dw.addmm_(grad.t(), rows_x.to(wide))
                dx[part] = grad @ w_wide
        if kept_low:
            dw = (low_tmm(kept, xs) if mm is low_mm else kept[:rows].t() @ xs).to(wide)
    return loss, nll, (dx, dw, db) if grads else None


class _FusedOutputLoss(torch.autograd.Function):
    """`output_loss` with its gradient computed in forward (the loss is a sum: its gradient
    is known up to the scalar that backward brings)."""

    @staticmethod
    def forward(ctx, x, weight, bias, targets, smoothing):
        loss, nll, (dx, dw, db) = _chunked_loss(x, weight, bias, targets, smoothing, grads=True)
        ctx.x_dtype = x.dtype
        ctx.save_for_backward(dx, dw, *(() if db is None else (db,)))
        ctx.mark_non_differentiable(nll)
        return loss, nll

    @staticmethod
    def backward(ctx, grad_loss, _grad_nll):
        dx, dw, *db = ctx.saved_tensors
        return (
            (dx * grad_loss).to(ctx.x_dtype),
            dw * grad_loss,
            db[0] * grad_loss if db else None,
            None,
            None,
        )
