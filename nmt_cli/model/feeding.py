"""Training's step loop of a Luong decoder with input feeding, with a backward pass of its own.

With input feeding the attentional vector of step t is an input of step t + 1, so the steps
cannot run at once (as `Decoder.forward_fused` does without it). Under autograd every step
records its GRU, attention and output projection as separate operations, and the backward
pass then adds every weight's gradient step by step: a small matrix product and a pass over
the whole weight per step and weight. Here the forward loop runs without autograd and keeps
what backward needs; the backward loop carries only the gradients that recur (state and
fed vector); every weight's gradient, and the memory's, come afterwards from one large
product each (as `gru.FastGRU` does for a GRU alone). The source memory's keys, for additive
attention, are the exception: their gradient goes through a tanh per step and is summed as
it comes.

The math is the module's (`Decoder.step` with input feeding, one GRU layer):
  x_t = [y_{t-1}; f_{t-1}]        d_t = GRU(x_t, d_{t-1})        a_t = softmax(score(d_t, K))
  c_t = a_tᵀ M        u_t = tanh(W_c [c_t; d_t])        f_t = dropout(u_t), the step's output
with f_{-1} = 0 and score dot (Kd), general (K = W e, Kd) or additive (vᵀ tanh(K + W_q d + b)).
Under CPU autocast (`--bf16`) the products with weights run in its dtype, everything else in
float32. Shapes: B batch, T steps, S source, E embedding, O output, D state, M memory, A keys.
"""

from __future__ import annotations

import torch
from torch import nn

from nmt_cli.device import autocast_dtype, low_mm, low_tmm
from nmt_cli.model.attention import AdditiveAttention, DotAttention, GeneralAttention


def applies(decoder: nn.Module, embedded: torch.Tensor) -> bool:
    """Whether `run` can stand in for the module's step loop: gradients wanted on a CPU, one
    GRU layer, Luong input feeding with dot, general or additive attention, float weights."""
    rnn, combine = decoder.rnn, decoder.combine.weight
    return (
        embedded.device.type == "cpu"
        and isinstance(combine, nn.Parameter)  # not an int8 layer
        and combine.dtype in (torch.float32, torch.float64)  # not a bfloat16 model
        and torch.is_grad_enabled()
        and decoder.input_feed
        and isinstance(rnn, nn.GRU)
        and rnn.num_layers == 1
        and isinstance(decoder.attention, (DotAttention, GeneralAttention, AdditiveAttention))
    )


def run(decoder: nn.Module, embedded: torch.Tensor, hidden: torch.Tensor, memory):
    """Attentional vectors (B, T, O) and attention weights (B, T, S) of the teacher-forced
    steps over the embedded target inputs (B, T, E), from the initial state (1, B, D)."""
    rnn, attention = decoder.rnn, decoder.attention
    batch, steps, _ = embedded.shape
    drop = dropout_mask(decoder, batch, steps, embedded.device)
    additive = isinstance(attention, AdditiveAttention)
    return _Steps.apply(
        embedded,
        hidden[0],
        memory.keys,
        memory.states,
        memory.mask,
        drop,
        rnn.weight_ih_l0,
        rnn.weight_hh_l0,
        rnn.bias_ih_l0,
        rnn.bias_hh_l0,
        decoder.combine.weight,
        attention.query_proj.weight if additive else None,
        attention.query_proj.bias if additive else None,
        attention.v.weight if additive else None,
    )


def _widened(x: torch.Tensor) -> torch.Tensor:
    """x in float32 if it is of a lower precision (autocast's), else as it is."""
    return x.to(torch.promote_types(x.dtype, torch.float32))


def dropout_mask(decoder: nn.Module, batch: int, steps: int, device) -> torch.Tensor | None:
    """The dropout of the attentional vectors (B, T, O), scaled: what `nn.Dropout` multiplies
    them by; None outside training or without dropout."""
    p = decoder.dropout.p
    if not decoder.training or p == 0:
        return None
    mask = torch.empty(batch, steps, decoder.output_size, device=device)
    return mask.bernoulli_(1 - p).div_(1 - p)


class _Products:
    """x @ w.T for the weights of one pass: float32, or under CPU autocast in its dtype (the
    weights cast once per pass, the rows padded as `low_mm` pads them) with a float32 result."""

    def __init__(self):
        self.low = autocast_dtype("cpu")
        self._cast: dict[int, torch.Tensor] = {}

    def weight(self, w: torch.Tensor) -> torch.Tensor:
        if self.low is None:
            return w
        if id(w) not in self._cast:
            self._cast[id(w)] = w.to(self.low)
        return self._cast[id(w)]

    def times_t(self, x: torch.Tensor, w: torch.Tensor, bias: torch.Tensor | None = None):
        """x @ wᵀ (+ bias)."""
        if self.low is None:
            return x @ w.t() if bias is None else torch.addmm(bias, x, w.t())
        out = low_mm(x.to(self.low), self.weight(w).t()).float()
        return out if bias is None else out.add_(bias)

    def times(self, x: torch.Tensor, w: torch.Tensor) -> torch.Tensor:
        """x @ w."""
        if self.low is None:
            return x @ w
        return low_mm(x.to(self.low), self.weight(w)).float()

    def grad(self, dy: torch.Tensor, x: torch.Tensor) -> torch.Tensor:
        """dyᵀ @ x: a weight's gradient from its output gradients and inputs (rows × ·)."""
        if self.low is None:
            return dy.t() @ x
        return low_tmm(dy.to(self.low), x.to(self.low)).float()


class _Steps(torch.autograd.Function):
    @staticmethod
    @torch.amp.custom_fwd(device_type="cpu")
    def forward(ctx, emb, h0, keys, states, mask, drop, w_ih, w_hh, b_ih, b_hh, w_c, w_q, b_q, v):
        ctx.dtypes = (emb.dtype, h0.dtype, keys.dtype, states.dtype)
        products = _Products()
        with torch.autocast("cpu", enabled=False), torch.no_grad():
            emb, h0, keys, states = (_widened(t) for t in (emb, h0, keys, states))
            batch, steps, emb_size = emb.shape
            size, out_size = h0.size(1), w_c.size(0)
            w_e, w_f = w_ih[:, :emb_size], w_ih[:, emb_size:]
            gi_all = products.times_t(emb.reshape(batch * steps, emb_size), w_e, b_ih)
            gi_all = gi_all.view(batch, steps, 3 * size)
            hs = emb.new_empty(batch, steps + 1, size)  # d_{-1} .. d_{T-1}
            feeds = emb.new_zeros(batch, steps + 1, out_size)  # f_{-1} = 0 .. f_{T-1}
            gates = emb.new_empty(batch, steps, 3 * size)  # r, z, n
            hn_all = emb.new_empty(batch, steps, size)  # W_hn d + b_hn
            weights = emb.new_empty(batch, steps, mask.size(1))
            contexts = emb.new_empty(batch, steps, states.size(2))
            tanhs = emb.new_empty(batch, steps, out_size)  # u_t, before dropout
            queries = emb.new_empty(batch, steps, w_q.size(0)) if w_q is not None else None
            closed = ~mask
            hs[:, 0] = h = h0
            for t in range(steps):
                gi = gi_all[:, t]
                if t:
                    gi = gi + products.times_t(feeds[:, t], w_f)
                gh = products.times_t(h, w_hh, b_hh)
                i_r, i_z, i_n = gi.chunk(3, 1)
                h_r, h_z, h_n = gh.chunk(3, 1)
                r = torch.sigmoid(i_r + h_r)
                z = torch.sigmoid(i_z + h_z)
                n = torch.tanh(torch.addcmul(i_n, r, h_n))
                h = torch.lerp(n, h, z)
                hs[:, t + 1] = h
                gates[:, t] = torch.cat([r, z, n], dim=1)
                hn_all[:, t] = h_n
                if w_q is not None:  # additive
                    query = products.times_t(h, w_q, b_q)  # (B, A)
                    queries[:, t] = query
                    hidden = torch.add(keys, query.unsqueeze(1)).tanh_()  # (B, S, A)
                    scores = hidden @ v[0]  # (B, S)
                else:
                    scores = torch.bmm(keys, h.unsqueeze(2)).squeeze(2)
                a = torch.softmax(scores.masked_fill_(closed, float("-inf")), dim=1)
                weights[:, t] = a
                context = torch.bmm(a.unsqueeze(1), states).squeeze(1)  # (B, M)
                contexts[:, t] = context
                u = torch.tanh(products.times_t(torch.cat([context, h], dim=1), w_c))
                tanhs[:, t] = u
                feeds[:, t + 1] = u if drop is None else u * drop[:, t]
        ctx.save_for_backward(
            emb, keys, states, drop, w_ih, w_hh, w_c, w_q, v,
            hs, feeds, gates, hn_all, weights, contexts, tanhs, queries,
        )  # fmt: skip
        return feeds[:, 1:].clone(), weights

    @staticmethod
    @torch.amp.custom_bwd(device_type="cpu")
    def backward(ctx, d_out, d_weights):
        (emb, keys, states, drop, w_ih, w_hh, w_c, w_q, v,
         hs, feeds, gates, hn_all, weights, contexts, tanhs, queries) = ctx.saved_tensors  # fmt: skip
        products = _Products()
        with torch.autocast("cpu", enabled=False), torch.no_grad():
            d_out = _widened(d_out)
            batch, steps, emb_size = emb.shape
            size, memory_size = hs.size(2), states.size(2)
            w_e, w_f = w_ih[:, :emb_size], w_ih[:, emb_size:]
            additive = w_q is not None
            d_gi_all = emb.new_empty(batch, steps, 3 * size)
            d_gh_all = emb.new_empty(batch, steps, 3 * size)
            d_pre_all = emb.new_empty(batch, steps, w_c.size(0))
            d_contexts = emb.new_empty(batch, steps, memory_size)
            d_scores = emb.new_empty(batch, steps, weights.size(2))
            if additive:
                d_queries = emb.new_empty(batch, steps, w_q.size(0))
                d_keys = torch.zeros_like(keys)
                d_v = emb.new_zeros(v.shape)
            dh = emb.new_zeros(batch, size)
            d_feed = None
            for t in range(steps - 1, -1, -1):
                d_vec = d_out[:, t] if d_feed is None else d_out[:, t] + d_feed
                if drop is not None:
                    d_vec = d_vec * drop[:, t]
                u = tanhs[:, t]
                d_pre = d_vec * (1 - u * u)
                d_pre_all[:, t] = d_pre
                d_joined = products.times(d_pre, w_c)  # (B, M + D)
                d_context, dh_out = d_joined[:, :memory_size], d_joined[:, memory_size:]
                d_contexts[:, t] = d_context
                a = weights[:, t]
                d_a = torch.bmm(states, d_context.unsqueeze(2)).squeeze(2)  # (B, S)
                if d_weights is not None:
                    d_a = d_a + d_weights[:, t]
                d_score = a * (d_a - (a * d_a).sum(1, keepdim=True))
                d_scores[:, t] = d_score
                if additive:
                    hidden = torch.add(keys, queries[:, t].unsqueeze(1)).tanh_()  # (B, S, A)
                    d_v += torch.bmm(d_score.unsqueeze(1), hidden).sum(0)
                    d_hidden = torch.ops.aten.tanh_backward(d_score.unsqueeze(2) * v[0], hidden)
                    d_keys += d_hidden
                    d_query = d_hidden.sum(1)  # (B, A)
                    d_queries[:, t] = d_query
                    d_h = products.times(d_query, w_q)
                else:
                    d_h = torch.bmm(d_score.unsqueeze(1), keys).squeeze(1)
                dh = dh + dh_out + d_h
                r, z, n = gates[:, t].chunk(3, 1)
                d_n = dh * (1 - z) * (1 - n * n)
                d_z = dh * (hs[:, t] - n) * z * (1 - z)
                d_r = d_n * hn_all[:, t] * r * (1 - r)
                d_gi = torch.cat([d_r, d_z, d_n], dim=1)
                d_gh = torch.cat([d_r, d_z, d_n * r], dim=1)
                d_gi_all[:, t] = d_gi
                d_gh_all[:, t] = d_gh
                dh = torch.addcmul(products.times(d_gh, w_hh), dh, z)
                d_feed = products.times(d_gi, w_f) if t else None
            rows = batch * steps
            d_gi_flat, d_gh_flat = d_gi_all.view(rows, -1), d_gh_all.view(rows, -1)
            d_emb = products.times(d_gi_flat, w_e).view_as(emb)
            d_states = torch.bmm(weights.transpose(1, 2), d_contexts)  # (B, S, M)
            if not additive:  # scores K d_t: K's gradient sums d_score_t ⊗ d_t over the steps
                d_keys = torch.bmm(d_scores.transpose(1, 2), hs[:, 1:])
            # the weights' gradients, one product each, where they are wanted (saliency, which
            # runs this backward for the embeddings' gradient, wants none)
            wanted = ctx.needs_input_grad
            grads: list[torch.Tensor | None] = [
                None
            ] * 8  # w_ih, w_hh, b_ih, b_hh, w_c, w_q, b_q, v
            if wanted[6]:
                grads[0] = torch.cat(
                    [
                        products.grad(d_gi_flat, emb.reshape(rows, emb_size)),
                        products.grad(d_gi_flat, feeds[:, :-1].reshape(rows, -1)),
                    ],
                    dim=1,
                )
            if wanted[7]:
                grads[1] = products.grad(d_gh_flat, hs[:, :-1].reshape(rows, size))
            if wanted[8]:
                grads[2] = d_gi_flat.sum(0)
            if wanted[9]:
                grads[3] = d_gh_flat.sum(0)
            if wanted[10]:
                joined = torch.cat([contexts, hs[:, 1:]], dim=2).view(rows, -1)
                grads[4] = products.grad(d_pre_all.view(rows, -1), joined)
            if additive:
                d_query_flat = d_queries.view(rows, -1)
                if wanted[11]:
                    grads[5] = products.grad(d_query_flat, hs[:, 1:].reshape(rows, size))
                if wanted[12]:
                    grads[6] = d_query_flat.sum(0)
                if wanted[13]:
                    grads[7] = d_v
        emb_dtype, h0_dtype, keys_dtype, states_dtype = ctx.dtypes
        return (
            d_emb.to(emb_dtype),
            dh.to(h0_dtype),
            d_keys.to(keys_dtype),
            d_states.to(states_dtype),
            None,
            None,
            *grads,
        )
