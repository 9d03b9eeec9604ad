"""The attention encoder–decoder: encode once, decode step by step or all at once, generate.

Shapes: B batch, S source length, T target length, O attentional vector, V target vocabulary.
"""

from __future__ import annotations

from dataclasses import dataclass

import torch
from torch import nn

from nmt_cli.config import ModelConfig
from nmt_cli.model.decoder import Decoder, DecoderState, Memory, padded_rows
from nmt_cli.model.encoder import Encoder
from nmt_cli.specials import BOS_ID, PAD_ID

SearchState = tuple[DecoderState, Memory]


class Seq2Seq(nn.Module):
    def __init__(self, config: ModelConfig):
        super().__init__()
        self.config = config
        src_embedding = nn.Embedding(config.src_vocab_size, config.emb_size, padding_idx=PAD_ID)
        shared = config.share_embeddings and config.src_vocab_size == config.tgt_vocab_size
        tgt_embedding = (
            src_embedding
            if shared
            else nn.Embedding(config.tgt_vocab_size, config.emb_size, padding_idx=PAD_ID)
        )
        self.encoder = Encoder(config, src_embedding)
        self.decoder = Decoder(config, tgt_embedding, self.encoder.output_size)
        self.generator = nn.Linear(self.decoder.output_size, config.tgt_vocab_size)
        self._columns = ColumnMajor()  # the output layer's weight as the search multiplies by it
        self._init_weights()
        if config.tie_embeddings:
            self.generator.weight = tgt_embedding.weight

    def train(self, mode: bool = True) -> Seq2Seq:
        if mode:  # the weights may change from here on: no copy of them is kept
            self._columns.clear()
        return super().train(mode)

    def _init_weights(self) -> None:
        # PyTorch's own initialisation (N(0, 1) embeddings, uniform ±1/√fan-in elsewhere). The
        # classic uniform ±0.1 makes embeddings and hence encoder states nearly identical at
        # the start, so attention scores stay flat and the decoder settles into a language
        # model that ignores the source for hundreds of updates.
        with torch.no_grad():
            self.encoder.embedding.weight[PAD_ID].zero_()
            self.decoder.embedding.weight[PAD_ID].zero_()

    def encode(
        self, src: torch.Tensor, src_lengths: torch.Tensor, embedded: torch.Tensor | None = None
    ) -> SearchState:
        """Encoder states and key projections (once per batch) and the decoder's initial state;
        `embedded` optionally stands in for the source embeddings (see `Encoder.forward`)."""
        states, final = self.encoder(src, src_lengths, embedded)
        mask = src != PAD_ID  # (B, S)
        attention = self.decoder.attention
        if attention is not None and attention.float32_memory:  # --bf16 (see attention.py)
            states = states.float()
        keys = attention.project_keys(states) if attention is not None else states
        origin = torch.arange(src.size(0), device=src.device)
        memory = Memory(states, keys, mask, origin)
        return self.decoder.init_state(final, src.size(0)), memory

    def forward(
        self,
        src: torch.Tensor,
        src_lengths: torch.Tensor,
        tgt_in: torch.Tensor,
        attention: bool = False,
    ) -> torch.Tensor | tuple[torch.Tensor, torch.Tensor]:
        """Teacher-forced attentional vectors (B, T, O), and with `attention` the weights
        (B, T, S) too; apply `generator` only where needed."""
        state, memory = self.encode(src, src_lengths)
        return self.decoder(tgt_in, state, memory, attention)

    def step_log_probs(
        self, prev: torch.Tensor, search_state: SearchState
    ) -> tuple[torch.Tensor, SearchState, torch.Tensor | None]:
        """Score the next token: log-probs (B, V) for prev (B,); PAD and BOS are never generated."""
        state, memory = search_state
        vector, state, weights = self.decoder.step(prev, state, memory)
        return self.output_log_probs(vector.squeeze(1)), (state, memory), weights

    def output_log_probs(self, vectors: torch.Tensor) -> torch.Tensor:
        """Float32 log-probs (N, V) of attentional vectors (N, O), PAD and BOS closed."""
        generator = self.generator
        if type(generator) is nn.Linear and ColumnMajor.applies(generator.weight):
            logits = self._columns.linear(generator.weight, generator.bias, vectors)
        else:
            logits = padded_rows(self.generator, self.decoder.row_bucket, vectors).float()
        logits[:, PAD_ID] = float("-inf")
        logits[:, BOS_ID] = float("-inf")
        return torch.log_softmax(logits, dim=-1)

    def shortlist_step(self, ids: torch.Tensor, allowed: torch.Tensor, output: OutputLayer):
        """A step function like `step_log_probs` over the target ids `ids` (K,) only.

        Tokens in and out are columns of `ids`. Row r may produce only the columns that
        `allowed` (B, K) opens for its sentence (`memory.row_origin()`), so a sentence's scores do
        not depend on the other sentences of its batch; the output layer (`output`, this
        model's `generator` unpacked once) still runs once, over the K columns of the batch.
        """
        project = output.rows(ids)
        closed = _ClosedColumns(~allowed | ((ids == PAD_ID) | (ids == BOS_ID)).unsqueeze(0))

        def step(prev: torch.Tensor, search_state: SearchState):
            state, memory = search_state
            vector, state, weights = self.decoder.step(ids[prev], state, memory)
            logits = padded_rows(project, self.decoder.row_bucket, vector.squeeze(1))
            logits.masked_fill_(closed.for_rows(memory), float("-inf"))  # a fresh tensor
            return torch.log_softmax(logits, -1, dtype=torch.float32), (state, memory), weights

        return step

    @staticmethod
    def reorder(search_state: SearchState, index: torch.Tensor) -> SearchState:
        state, memory = search_state
        return state.select(index), memory.select(index)

    @staticmethod
    def join(search_state: SearchState, other: SearchState) -> SearchState:
        """One search state of the rows of both (sentences joining a running search)."""
        return search_state[0].join(other[0]), search_state[1].join(other[1])


class _ClosedColumns:
    """The closed columns (B, K) of each sentence, gathered for the rows of the current memory.

    The search's rows change only when a sentence finishes (`Memory.select` keeps the same
    memory otherwise), so the gathered mask is kept until the memory changes.
    """

    def __init__(self, closed: torch.Tensor):
        self.closed = closed
        self.memory: Memory | None = None
        self.rows: torch.Tensor | None = None

    def for_rows(self, memory: Memory) -> torch.Tensor:
        if self.memory is not memory:
            self.memory, self.rows = memory, self.closed[memory.row_origin()]
        return self.rows


class ColumnMajor:
    """A float32 CPU layer's weight (V, O), kept transposed and contiguous (O, V) for inference.

    nn.Linear hands MKL the transposed view of its weight; for the few rows of a search step,
    MKL multiplies by the contiguous transpose much faster: at 8,000 × 512 on a 2-core Xeon,
    5 rows took 0.34 ms instead of 0.60, 32 rows 1.20 instead of 1.76, and 64 rows or more
    the same. The product is the same sum; for fewer than about 20 rows MKL adds it up in
    another order, so a logit may differ in its last bit. The copy is dropped whenever the
    model goes back to training (a fused optimizer's step changes the weight without counting
    a new version of it) and rebuilt when the weight has changed in place otherwise, so
    validation during training sees the current weights. With gradients on, or for int8,
    bfloat16 and GPU layers, nn.Linear runs.
    """

    def __init__(self):
        self._key: tuple[int, int] | None = None
        self._columns: torch.Tensor | None = None

    @staticmethod
    def applies(weight: torch.Tensor) -> bool:
        return (
            weight.dtype == torch.float32
            and weight.device.type == "cpu"
            and not torch.is_grad_enabled()
        )

    def clear(self) -> None:
        self._key = self._columns = None

    def linear(
        self, weight: torch.Tensor, bias: torch.Tensor | None, rows: torch.Tensor
    ) -> torch.Tensor:
        """nn.functional.linear(rows, weight, bias) for rows (N, O): (N, V)."""
        # an inference tensor (made under torch.inference_mode) has no version; nothing trains it
        key = (weight.data_ptr(), -1 if weight.is_inference() else weight._version)
        if self._key != key:
            self._columns, self._key = weight.detach().t().contiguous(), key
        if bias is None:
            return torch.mm(rows, self._columns)
        return torch.addmm(bias, rows, self._columns)


@dataclass(frozen=True)
class OutputLayer:
    """The output layer's weight (V, O) and bias, read once: float tensors, or int8 ones for a
    quantized model (unpacking those is a copy, too slow to repeat for every batch)."""

    weight: torch.Tensor
    bias: torch.Tensor | None
    quantized: bool

    @classmethod
    def of(cls, generator: nn.Module) -> OutputLayer:
        if not callable(generator.weight):  # a float nn.Linear
            bias = None if generator.bias is None else generator.bias.detach()
            return cls(generator.weight.detach(), bias, False)
        return cls(generator.weight(), generator.bias(), True)  # int8: accessor methods

    def rows(self, ids: torch.Tensor):
        """The output layer restricted to the target ids `ids` (K,): a function (N, O) → (N, K),
        int8 again when the layer is (see `--quantize`)."""
        weight, bias = self.weight, self.bias
        if not self.quantized:
            weight = weight.index_select(0, ids)
            bias = None if bias is None else bias.index_select(0, ids)
            if ColumnMajor.applies(weight):
                columns = ColumnMajor()
                return lambda vectors: columns.linear(weight, bias, vectors)
            return lambda vectors: nn.functional.linear(vectors, weight, bias)
        import warnings

        from torch.ao.nn.quantized.dynamic import Linear as DynamicLinear

        with warnings.catch_warnings():
            warnings.simplefilter("ignore")  # torch's deprecation notices are not the user's
            rows = DynamicLinear(weight.size(1), len(ids), dtype=torch.qint8)
            if weight.qscheme() == torch.per_tensor_affine:
                selected = weight.index_select(0, ids)
            else:  # per-channel: the same int8 values under the selected channels' scales
                selected = torch.quantize_per_channel(
                    weight.dequantize().index_select(0, ids),
                    weight.q_per_channel_scales().index_select(0, ids),
                    weight.q_per_channel_zero_points().index_select(0, ids),
                    0,
                    torch.qint8,
                )
            rows.set_weight_bias(selected, None if bias is None else bias.index_select(0, ids))
        return rows
