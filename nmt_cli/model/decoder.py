"""The decoder: one step function shared by training and search, plus a fused teacher-forced path.

Shapes: B batch, T target steps, S source length, E embedding, D decoder state, M encoder
state (memory), O attentional vector (E when the output layer is tied to the embedding, else D).

Styles (Luong et al. 2015 and Bahdanau et al. 2015):
  luong:    d_t = RNN([y_{t-1}; h̃_{t-1}?], d_{t-1}); c_t = attend(d_t); h̃_t = tanh(W_c[c_t; d_t])
  bahdanau: c_t = attend(d_{t-1}); d_t = RNN([y_{t-1}; c_t], d_{t-1}); h̃_t = tanh(W_c[d_t; c_t; y_{t-1}])
Without attention (`none`) the decoder sees the source only through its initial state, and
h̃_t = tanh(W_c d_t).
"""

from __future__ import annotations

import functools
from collections.abc import Callable
from dataclasses import dataclass, field

import torch
from torch import nn

from nmt_cli.config import ModelConfig
from nmt_cli.device import low_linear
from nmt_cli.model import feeding
from nmt_cli.model.attention import build_attention
from nmt_cli.model.encoder import Hidden, rnn_class
from nmt_cli.model.gru import FastGRU


def input_step_offset(style: str) -> int:
    """How many steps after predicting target piece t the decoder's attention query has read
    it: a Luong decoder reads y_t at step t+1 and attends after its RNN step (query d_{t+1});
    a Bahdanau decoder attends before its RNN step, with d_{t+1} only at step t+2. Guided
    alignment trains, and `nmt align` reads, the attention of that step (Chen et al. 2020's
    Shift-Att: the step where the word is input, not where it is predicted)."""
    return 1 if style == "luong" else 2


@dataclass
class Memory:
    """What the decoder attends to, computed once per batch by the encoder.

    Decoder rows map to memory entries in runs: row r attends to entry r // `group`. A beam
    search keeps each sentence's hypotheses in consecutive rows, so its W rows share one entry
    and the source is neither copied per hypothesis nor attended to W times over.
    """

    states: torch.Tensor  # (N, S, M) encoder states: the values
    keys: torch.Tensor  # (N, S, K) projected keys (the states themselves for dot attention)
    mask: torch.Tensor  # (N, S) True on real source tokens
    origin: torch.Tensor | None = None  # (N,) the source sentence each entry was encoded from
    group: int = 1  # decoder rows per entry
    # (states, keys, mask) with room for more entries, whose first N are the three above (views):
    # `join` writes newcomers after them instead of copying the whole memory
    room: tuple[torch.Tensor, torch.Tensor, torch.Tensor] | None = field(
        default=None, repr=False, compare=False
    )

    def row_origin(self) -> torch.Tensor:
        """The source sentence of each decoder row (N * group,)."""
        assert self.origin is not None, "the memory was built without origins"
        return self.origin if self.group == 1 else self.origin.repeat_interleave(self.group)

    def select(self, index: torch.Tensor) -> Memory:
        """The memory of decoder rows `index` (R',). Runs of equal length that share an entry
        (a beam's rows) keep sharing it; when every entry stays in place, nothing is copied."""
        entries = index // self.group if self.group > 1 else index
        count = self.keys.size(0)
        if entries.numel() and entries.numel() % count == 0:  # a beam's usual step: all in place?
            group = entries.numel() // count
            if torch.equal(entries, _in_place(count, group, entries.device)):
                return self if group == self.group else self._regrouped(group)
        group = 1
        if entries.numel():
            runs, counts = torch.unique_consecutive(entries, return_counts=True)
            if bool((counts == counts[0]).all()):
                entries, group = runs, int(counts[0])
        if entries.numel() == self.keys.size(0) and torch.equal(
            entries, torch.arange(len(entries), device=entries.device)
        ):  # every entry in place: share the tensors (the object too, if the group stays)
            return self if group == self.group else self._regrouped(group)
        if group == self.group and (filled := self._filled(entries)) is not None:
            return filled
        return Memory(
            self.states.index_select(0, entries),
            self.keys.index_select(0, entries),
            self.mask.index_select(0, entries),
            None if self.origin is None else self.origin.index_select(0, entries),
            group,
        )

    def _filled(self, entries: torch.Tensor) -> Memory | None:
        """The memory of `entries` (N',) made in place, if they are the first N' entries but
        for some places that take entries from beyond N' (a beam search's sentences once some
        have ended: `search._holes_filled`): only those places are written, and the first N'
        entries of this memory's tensors are the result, so this memory is not to be used
        afterwards. None for any other selection."""
        count = entries.numel()
        if not count or count >= self.keys.size(0) or not _writable(self.keys):
            return None
        moved = (entries != torch.arange(count, device=entries.device)).nonzero().squeeze(1)
        sources = entries[moved]
        if moved.numel() and not bool((sources >= count).all()):
            return None
        tensors = [self.states, self.keys, self.mask]
        if self.origin is not None:
            tensors.append(self.origin)
        if moved.numel():
            for tensor in tensors:
                tensor[moved] = tensor[sources]
        states, keys, mask, *origin = (tensor[:count] for tensor in tensors)
        return Memory(states, keys, mask, origin[0] if origin else None, self.group, self.room)

    def _regrouped(self, group: int) -> Memory:
        return Memory(self.states, self.keys, self.mask, self.origin, group, self.room)

    def join(self, other: Memory) -> Memory:
        """The entries of this memory, then `other`'s (same rows per entry), padded to one source
        length: the longer of the two sources' real lengths, so padding left by sentences that
        have gone is dropped. Origins are not kept (they index one batch's sentences).

        Where this memory has room for `other` at that length, `other` is written there and
        this memory is not to be used afterwards; otherwise both are copied into new tensors
        with room for as many entries again, so sentences joining a running search
        (`nmt serve`) copy only themselves most of the time."""
        assert self.group == other.group, "joined memories need the same rows per entry"
        width = int(max(self.mask.sum(1).max(), other.mask.sum(1).max()))
        count, total = self.keys.size(0), self.keys.size(0) + other.keys.size(0)
        room = self.room
        if (
            room is None
            or room[0].size(0) < total
            or room[0].size(1) != width
            or not _writable(room[0])
        ):
            room = tuple(
                mine.new_empty((2 * total, width, *mine.shape[2:]))
                for mine in (self.states, self.keys, self.mask)
            )
            _fill(room, 0, (self.states, self.keys, self.mask))
        _fill(room, count, (other.states, other.keys, other.mask))
        states, keys, mask = (tensor[:total] for tensor in room)
        return Memory(states, keys, mask, None, self.group, room)

    def attend(
        self, attention: nn.Module, query: torch.Tensor
    ) -> tuple[torch.Tensor, torch.Tensor]:
        """Context (R, 1, M) and weights (R, 1, S) for one query per decoder row (R, 1, D)."""
        if self.group == 1:
            return attention(query, self.keys, self.states, self.mask)
        entries, rows = self.keys.size(0), query.size(0)
        queries = query.reshape(entries, self.group, query.size(-1))  # (N, group, D)
        context, weights = attention(queries, self.keys, self.states, self.mask)
        return context.reshape(rows, 1, -1), weights.reshape(rows, 1, -1)


def _writable(tensor: torch.Tensor) -> bool:
    """Whether `tensor` may be written in place here: not one made under inference mode while
    that mode is now off (a search run under no_grad on a memory encoded under inference mode
    copies instead)."""
    return not tensor.is_inference() or torch.is_inference_mode_enabled()


def _fill(room: tuple[torch.Tensor, ...], start: int, parts: tuple[torch.Tensor, ...]) -> None:
    """Write `parts` (N, S', ...) into `room`'s entries from `start` on, cut or padded with
    zeros (False in a mask) to room's source length."""
    width = room[0].size(1)
    for tensor, part in zip(room, parts, strict=True):
        end, length = start + part.size(0), min(width, part.size(1))
        tensor[start:end, :length] = part[:, :length]
        tensor[start:end, length:] = 0


@functools.lru_cache(maxsize=64)
def _in_place(count: int, group: int, device: torch.device) -> torch.Tensor:
    """The entries (count * group,) of rows that keep every entry in place, `group` rows each."""
    return torch.arange(count, device=device).repeat_interleave(group)


_CELL_WEIGHTS = ("weight_ih", "weight_hh", "bias_ih", "bias_hh")


def padded_rows(fn: Callable[..., torch.Tensor], bucket: int, *inputs: torch.Tensor):
    """fn(*inputs), for inputs whose first dimension counts the same R rows, run on those rows
    padded with zeros to a multiple of `bucket` and cut back to R rows; run as they are when R
    is at most `bucket` (or `bucket` is 0).

    A search's row count changes as sentences finish; padding keeps the matrix shapes few. For
    bfloat16 on the CPU, oneDNN builds a kernel for every new shape (about 2 ms each, measured
    on an AMX Xeon), which otherwise cost a fresh process a quarter of its search time. A beam
    of one sentence has too few rows to pad: padded to 32, or to 8, its 5 rows ran slower."""
    rows = inputs[0].size(0)
    extra = -rows % bucket if bucket and rows > bucket else 0
    if not extra:
        return fn(*inputs)
    padded = [nn.functional.pad(x, (0, 0) * (x.dim() - 1) + (0, extra)) for x in inputs]
    return fn(*padded)[:rows]


@dataclass
class DecoderState:
    """The recurrent state carried from one target step to the next."""

    hidden: Hidden  # (L, B, D), or (h, c) for LSTM
    feed: torch.Tensor | None  # (B, 1, O) previous attentional vector (luong input feeding) or None

    def select(self, index: torch.Tensor) -> DecoderState:
        if isinstance(self.hidden, tuple):
            hidden = tuple(h.index_select(1, index) for h in self.hidden)
        else:
            hidden = self.hidden.index_select(1, index)
        feed = None if self.feed is None else self.feed.index_select(0, index)
        return DecoderState(hidden, feed)

    def join(self, other: DecoderState) -> DecoderState:
        """The rows of this state, then those of `other`."""
        if isinstance(self.hidden, tuple):
            hidden = tuple(
                torch.cat([a, b], dim=1) for a, b in zip(self.hidden, other.hidden, strict=True)
            )
        else:
            hidden = torch.cat([self.hidden, other.hidden], dim=1)
        feed = None if self.feed is None else torch.cat([self.feed, other.feed])
        return DecoderState(hidden, feed)


class Decoder(nn.Module):
    row_bucket = 0  # search steps pad their rows to a multiple of this (see `padded_rows`)

    def __init__(self, config: ModelConfig, embedding: nn.Embedding, memory_size: int):
        super().__init__()
        self.style = config.decoder_style
        self.embedding = embedding
        self.dropout = nn.Dropout(config.dropout)
        size = config.decoder_size
        self.attention = build_attention(config.attention, size, memory_size)
        self.input_feed = config.input_feed and self.style == "luong" and self.attention is not None
        self.output_size = config.emb_size if config.tie_embeddings else size
        self.rnn = rnn_class(config.cell)(
            config.emb_size + self._extra_input(memory_size),
            size,
            num_layers=config.layers,
            batch_first=True,
            dropout=config.dropout if config.layers > 1 else 0.0,
        )
        self.combine = nn.Linear(
            self._combine_input(size, memory_size, config.emb_size), self.output_size, bias=False
        )

    def _extra_input(self, memory_size: int) -> int:
        if self.attention is None:
            return 0
        if self.style == "bahdanau":
            return memory_size
        return self.output_size if self.input_feed else 0

    def _combine_input(self, size: int, memory_size: int, emb_size: int) -> int:
        if self.attention is None:
            return size
        return size + memory_size + (emb_size if self.style == "bahdanau" else 0)

    @property
    def fusable(self) -> bool:
        """True when nothing recurs through attention, so all steps can run at once."""
        return self.style == "luong" and not self.input_feed or self.attention is None

    def init_state(self, final: Hidden, batch: int) -> DecoderState:
        feed = None
        if self.input_feed:
            ref = final[0] if isinstance(final, tuple) else final
            feed = ref.new_zeros(batch, 1, self.output_size)
        return DecoderState(final, feed)

    def step(
        self, prev: torch.Tensor, state: DecoderState, memory: Memory
    ) -> tuple[torch.Tensor, DecoderState, torch.Tensor | None]:
        """One target step for prev (B,): attentional vector (B, 1, O), new state, weights (B, S)."""
        return self._step(self._drop(self.embedding(prev.unsqueeze(1))), state, memory)

    def _step(
        self, embedded: torch.Tensor, state: DecoderState, memory: Memory
    ) -> tuple[torch.Tensor, DecoderState, torch.Tensor | None]:
        """`step` for the embedded previous pieces (B, 1, E)."""
        if self.attention is None:
            output, hidden = self._rnn_step(embedded, state.hidden)
            return self._project(output), DecoderState(hidden, None), None
        if self.style == "bahdanau":
            return self._bahdanau_step(embedded, state, memory)
        rnn_input = embedded if state.feed is None else torch.cat([embedded, state.feed], dim=-1)
        output, hidden = self._rnn_step(rnn_input, state.hidden)  # (B, 1, D)
        context, weights = memory.attend(self.attention, output)
        vector = self._project(torch.cat([context, output], dim=-1))
        return vector, DecoderState(hidden, vector if self.input_feed else None), weights.squeeze(1)

    def _bahdanau_step(
        self, embedded: torch.Tensor, state: DecoderState, memory: Memory
    ) -> tuple[torch.Tensor, DecoderState, torch.Tensor]:
        top = state.hidden[0] if isinstance(state.hidden, tuple) else state.hidden
        query = top[-1].unsqueeze(1)  # (B, 1, D): d_{t-1}, the top layer
        context, weights = memory.attend(self.attention, query)
        output, hidden = self._rnn_step(torch.cat([embedded, context], dim=-1), state.hidden)
        vector = self._project(torch.cat([output, context, embedded], dim=-1))
        return vector, DecoderState(hidden, None), weights.squeeze(1)

    def _project(self, features: torch.Tensor) -> torch.Tensor:
        # row_bucket is 0 but in a bfloat16 model for search; training pads only under CPU
        # autocast (`low_linear`)
        if self.training:
            return self._drop(torch.tanh(low_linear(self.combine, features)))
        return torch.tanh(padded_rows(self.combine, self.row_bucket, features))

    def _drop(self, x: torch.Tensor) -> torch.Tensor:
        """Dropout while training; at inference `x` itself, without a module call per step."""
        return self.dropout(x) if self.training else x

    def _rnn_step(self, x: torch.Tensor, hidden: Hidden) -> tuple[torch.Tensor, Hidden]:
        """One RNN step for x (B, 1, I): output (B, 1, D) and the new hidden state. A GRU at
        inference runs through `torch.gru_cell` layer by layer: the module's result to the bit,
        with less work around it (a search calls this once per token). An LSTM's cell function
        rounds differently from the module, so an LSTM (and an int8 GRU) runs the module."""
        if self.training or torch.is_grad_enabled() or not isinstance(self.rnn, nn.GRU):
            return self.rnn(x, hidden)
        rnn, layer_input, states = self.rnn, x.squeeze(1), []
        for layer in range(rnn.num_layers):
            weights = [getattr(rnn, f"{name}_l{layer}") for name in _CELL_WEIGHTS]

            def cell(rows: torch.Tensor, state: torch.Tensor, weights=weights) -> torch.Tensor:
                return torch.gru_cell(rows, state, *weights)

            layer_input = padded_rows(cell, self.row_bucket, layer_input, hidden[layer])
            states.append(layer_input)
        new = states[0].unsqueeze(0) if len(states) == 1 else torch.stack(states)
        return layer_input.unsqueeze(1), new

    def forward(
        self, tgt_in: torch.Tensor, state: DecoderState, memory: Memory, attention: bool = False
    ) -> torch.Tensor | tuple[torch.Tensor, torch.Tensor]:
        """Teacher-forced attentional vectors (B, T, O) for target inputs (B, T); with
        `attention`, also the weights (B, T, S) of every step (row t: the step that predicts
        target t, in either decoder style), for the guided-alignment loss."""
        run = self.forward_fused if self.fusable else self.forward_steps
        vectors, weights = run(tgt_in, state, memory, attention)
        return (vectors, weights) if attention else vectors

    def forward_fused(
        self, tgt_in: torch.Tensor, state: DecoderState, memory: Memory, attention: bool = False
    ) -> tuple[torch.Tensor, torch.Tensor | None]:
        """All steps at once: one RNN call over the target, one batched attention."""
        embedded = self.dropout(self.embedding(tgt_in))  # (B, T, E)
        if isinstance(self.rnn, FastGRU) and self.rnn.use_fast_path(embedded):
            output, _ = self.rnn.forward_padded(embedded, None, state.hidden)  # (B, T, D)
        else:
            output, _ = self.rnn(embedded, state.hidden)  # (B, T, D)
        if self.attention is None:
            return self._project(output), None
        context, weights = self.attention(output, memory.keys, memory.states, memory.mask)
        return self._project(torch.cat([context, output], dim=-1)), weights  # (B, T, O), (B, T, S)

    def forward_steps(
        self, tgt_in: torch.Tensor, state: DecoderState, memory: Memory, attention: bool = False
    ) -> tuple[torch.Tensor, torch.Tensor | None]:
        """The step loop, for decoders whose attention feeds the recurrence. The embeddings do
        not recur: they are looked up (and dropped out) for all steps at once, so their
        gradient is one sparse-to-dense sum, not one per step."""
        embedded = self._drop(self.embedding(tgt_in))  # (B, T, E)
        if feeding.applies(self, embedded):  # the same steps with a backward pass of their own
            vectors, weights = feeding.run(self, embedded, state.hidden, memory)
            return vectors, weights if attention else None
        vectors, weights = [], []
        for t in range(tgt_in.size(1)):
            vector, state, step_weights = self._step(embedded[:, t : t + 1], state, memory)
            vectors.append(vector)
            if attention:
                weights.append(step_weights)
        return torch.cat(vectors, dim=1), torch.stack(weights, dim=1) if attention else None
