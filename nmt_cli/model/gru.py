"""A GRU for CPU training whose backward pass batches the weight gradients over all steps.

PyTorch's CPU GRU records every time step as separate autograd operations, so its backward
pass accumulates the weight gradients step by step (a small matrix product and an addition
per step and per weight). Here a layer's forward pass runs without autograd, keeps the gates,
and the backward pass walks the steps once for the state gradient only; the weight gradients
then come from one large matrix product each, as cuDNN does on GPUs. Under CPU autocast
(`nmt train --bf16`) its matrix products run in bfloat16 (their rows padded to few shapes: see
`device.low_mm`), and the gates, states and their gradients stay in float32.

The math is PyTorch's (and Cho et al. 2014's) GRU:
  r = σ(W_ir x + b_ir + W_hr h + b_hr)      z = σ(W_iz x + b_iz + W_hz h + b_hz)
  n = tanh(W_in x + b_in + r ⊙ (W_hn h + b_hn))      h' = (1 − z) ⊙ n + z ⊙ h
`FastGRU` subclasses nn.GRU, so parameters, checkpoints and the CUDA path (cuDNN) are nn.GRU's.
Shapes: B batch, T steps, I input size, H hidden size.
"""

from __future__ import annotations

import torch
from torch import nn

from nmt_cli.device import autocast_dtype, low_mm, low_tmm


class _GRULayer(torch.autograd.Function):
    """One direction of one layer over a padded batch: outputs (B, T, H)."""

    @staticmethod
    @torch.amp.custom_fwd(device_type="cpu")
    def forward(ctx, x, h0, w_ih, w_hh, b_ih, b_hh):  # noqa: D102 - autograd protocol
        # Under CPU autocast the products take its dtype (bfloat16 for nmt train --bf16).
        ctx.product_dtype = low = autocast_dtype("cpu")
        batch, steps, _ = x.shape
        size = h0.shape[1]
        gi = _affine(b_ih, x.reshape(batch * steps, -1), w_ih.t(), low)
        gi = gi.view(batch, steps, 3 * size)
        states = x.new_empty(batch, steps + 1, size)  # h_0 .. h_T
        gates = x.new_empty(batch, steps, 3 * size)  # r, z, n after their non-linearities
        hn_all = x.new_empty(batch, steps, size)  # W_hn h + b_hn, needed for r's gradient
        states[:, 0] = h0
        h = h0
        w_hh_t = w_hh.t() if low is None else w_hh.t().to(low)  # cast once, not per step
        for t in range(steps):
            gh = _affine(b_hh, h, w_hh_t, low)  # (B, 3H)
            i_r, i_z, i_n = gi[:, t].chunk(3, 1)
            h_r, h_z, h_n = gh.chunk(3, 1)
            r = torch.sigmoid(i_r + h_r)
            z = torch.sigmoid(i_z + h_z)
            n = torch.tanh(torch.addcmul(i_n, r, h_n))
            h = torch.lerp(n, h, z)  # (1 − z) n + z h
            states[:, t + 1] = h
            gates[:, t, :size] = r
            gates[:, t, size : 2 * size] = z
            gates[:, t, 2 * size :] = n
            hn_all[:, t] = h_n
        ctx.save_for_backward(x, states, gates, hn_all, w_ih, w_hh)
        return states[:, 1:]

    @staticmethod
    @torch.amp.custom_bwd(device_type="cpu")
    def backward(ctx, d_out):  # noqa: D102 - autograd protocol
        x, states, gates, hn_all, w_ih, w_hh = ctx.saved_tensors
        low = ctx.product_dtype
        w_hh_low = None if low is None else w_hh.to(low)
        batch, steps, size = d_out.shape
        d_gates = x.new_empty(batch, steps, 3 * size)  # gradients of the pre-activations
        d_hn = x.new_empty(batch, steps, size)  # gradient of W_hn h + b_hn
        dh = d_out.new_zeros(batch, size)
        for t in range(steps - 1, -1, -1):
            dh = dh + d_out[:, t]
            r, z, n = gates[:, t].chunk(3, 1)
            h_prev = states[:, t]
            d_n = dh * (1 - z) * (1 - n * n)
            d_z = dh * (h_prev - n) * z * (1 - z)
            d_r = d_n * hn_all[:, t] * r * (1 - r)
            d_gates[:, t, :size] = d_r
            d_gates[:, t, size : 2 * size] = d_z
            d_gates[:, t, 2 * size :] = d_n
            d_hn[:, t] = d_n * r
            d_gh = torch.cat([d_r, d_z, d_n * r], dim=1)  # (B, 3H)
            if w_hh_low is None:
                dh = torch.addmm(dh * z, d_gh, w_hh)
            else:  # the product in bfloat16, the gradient carried on in float32
                dh = low_mm(d_gh.to(low), w_hh_low).float().add_(dh * z)
        d_gh_all = torch.cat([d_gates[:, :, : 2 * size], d_hn], dim=2).reshape(-1, 3 * size)
        d_gi_all = d_gates.reshape(-1, 3 * size)
        prev = states[:, :-1].reshape(-1, size)
        flat_x = x.reshape(batch * steps, -1)
        if low is None:
            d_x = (d_gi_all @ w_ih).view_as(x) if ctx.needs_input_grad[0] else None
            d_w_ih = d_gi_all.t() @ flat_x
            d_w_hh = d_gh_all.t() @ prev
        else:  # in autocast's dtype; autograd hands each gradient on in its input's, float32
            d_low = d_gi_all.to(low)
            d_x = low_mm(d_low, w_ih.to(low)).view_as(x) if ctx.needs_input_grad[0] else None
            d_w_ih = low_tmm(d_low, flat_x.to(low))
            d_w_hh = low_tmm(d_gh_all.to(low), prev.to(low))
        return d_x, dh, d_w_ih, d_w_hh, d_gi_all.sum(0), d_gh_all.sum(0)


def _affine(bias: torch.Tensor, x: torch.Tensor, weight_t: torch.Tensor, low):
    """bias + x @ weight_t: one addmm in float32; under CPU autocast (`low`: its dtype, else
    None) the product in that dtype (see `low_mm`) and the sum in float32."""
    if low is None:
        return torch.addmm(bias, x, weight_t)
    return low_mm(x.to(low), weight_t.to(low)).float().add_(bias)


def _reverse_padded(x: torch.Tensor, lengths: torch.Tensor) -> torch.Tensor:
    """Reverse each sequence within its own length (padding stays at the end)."""
    steps = x.shape[1]
    positions = torch.arange(steps, device=x.device).unsqueeze(0)  # (1, T)
    index = (lengths.unsqueeze(1) - 1 - positions).clamp(min=0)
    index = torch.where(positions < lengths.unsqueeze(1), index, positions)  # (B, T)
    return x.gather(1, index.unsqueeze(2).expand_as(x))


class FastGRU(nn.GRU):
    """nn.GRU (batch_first) with a faster CPU path over padded batches with known lengths."""

    def forward_padded(
        self, x: torch.Tensor, lengths: torch.Tensor | None = None, h0: torch.Tensor | None = None
    ) -> tuple[torch.Tensor, torch.Tensor]:
        """Outputs (B, T, dirs·H) and final states (layers·dirs, B, H) at each sequence's end."""
        batch, steps, _ = x.shape
        if lengths is None:
            lengths = torch.full((batch,), steps, dtype=torch.long, device=x.device)
        lengths = lengths.to(x.device)
        last = (lengths - 1).view(batch, 1, 1)
        dirs = 2 if self.bidirectional else 1
        finals, layer_input = [], x
        for layer in range(self.num_layers):
            outputs = []
            for direction in range(dirs):
                suffix = f"_l{layer}" + ("_reverse" if direction else "")
                start = (
                    h0[layer * dirs + direction]
                    if h0 is not None
                    else x.new_zeros(batch, self.hidden_size)
                )
                seq = _reverse_padded(layer_input, lengths) if direction else layer_input
                out = _GRULayer.apply(
                    seq.contiguous(),
                    start.contiguous(),
                    getattr(self, "weight_ih" + suffix),
                    getattr(self, "weight_hh" + suffix),
                    getattr(self, "bias_ih" + suffix),
                    getattr(self, "bias_hh" + suffix),
                )
                final = out.gather(1, last.expand(batch, 1, self.hidden_size)).squeeze(1)
                outputs.append(_reverse_padded(out, lengths) if direction else out)
                finals.append(final)
            layer_input = torch.cat(outputs, dim=2) if dirs == 2 else outputs[0]
            if self.dropout and self.training and layer < self.num_layers - 1:
                layer_input = nn.functional.dropout(layer_input, self.dropout, True)
        return layer_input, torch.stack(finals)

    def use_fast_path(self, x: torch.Tensor) -> bool:
        """The custom path pays off when gradients are needed on CPU; cuDNN is better on GPUs."""
        return x.device.type == "cpu" and torch.is_grad_enabled() and x.shape[1] > 1
