"""The attention encoder–decoder: encode once, decode step by step or all at once, generate.

Shapes: B batch, S source length, T target length, O attentional vector, V target vocabulary.
"""

from __future__ import annotations

import torch
from torch import nn

from nmt_cli.config import ModelConfig
from nmt_cli.model.decoder import Decoder, DecoderState, Memory
from nmt_cli.model.encoder import Encoder

PAD_ID, UNK_ID, BOS_ID, EOS_ID = 0, 1, 2, 3

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
        self._init_weights()
        if config.tie_embeddings:
            self.generator.weight = tgt_embedding.weight

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
        keys = attention.project_keys(states) if attention is not None else states
        origin = torch.arange(src.size(0), device=src.device)
        memory = Memory(states, keys, mask, origin)
        return self.decoder.init_state(final, src.size(0)), memory

    def forward(
        self, src: torch.Tensor, src_lengths: torch.Tensor, tgt_in: torch.Tensor
    ) -> torch.Tensor:
        """Teacher-forced attentional vectors (B, T, O); apply `generator` only where needed."""
        state, memory = self.encode(src, src_lengths)
        return self.decoder(tgt_in, state, memory)

    def step_log_probs(
        self, prev: torch.Tensor, search_state: SearchState
    ) -> tuple[torch.Tensor, SearchState, torch.Tensor | None]:
        """Score the next token: log-probs (B, V) for prev (B,); PAD and BOS are never generated."""
        state, memory = search_state
        vector, state, weights = self.decoder.step(prev, state, memory)
        return self.output_log_probs(vector.squeeze(1)), (state, memory), weights

    def output_log_probs(self, vectors: torch.Tensor) -> torch.Tensor:
        """Float32 log-probs (N, V) of attentional vectors (N, O), PAD and BOS closed."""
        logits = self.generator(vectors).float()
        logits[:, PAD_ID] = float("-inf")
        logits[:, BOS_ID] = float("-inf")
        return torch.log_softmax(logits, dim=-1)

    def shortlist_step(self, ids: torch.Tensor, allowed: torch.Tensor):
        """A step function like `step_log_probs` over the target ids `ids` (K,) only.

        Tokens in and out are columns of `ids`. Row r may produce only the columns that
        `allowed` (B, K) opens for its sentence (`memory.row_origin()`), so a sentence's scores do
        not depend on the other sentences of its batch; the output layer still runs once, over
        the K columns of the whole batch.
        """
        project = _output_rows(self.generator, ids, self._unpacked_generator())
        closed = ~allowed | ((ids == PAD_ID) | (ids == BOS_ID)).unsqueeze(0)  # (B, K)
        rows_closed: list = [None, None]  # (memory, its rows' closed ids): the rows change rarely

        def step(prev: torch.Tensor, search_state: SearchState):
            state, memory = search_state
            vector, state, weights = self.decoder.step(ids[prev], state, memory)
            logits = project(vector.squeeze(1)).float()
            if rows_closed[0] is not memory:  # `Memory.select` keeps it while the rows stay
                rows_closed[:] = memory, closed[memory.row_origin()]
            logits = logits.masked_fill(rows_closed[1], float("-inf"))
            return torch.log_softmax(logits, dim=-1), (state, memory), weights

        return step

    def _unpacked_generator(self) -> tuple[torch.Tensor, torch.Tensor | None] | None:
        """An int8 output layer's weight and bias, unpacked once (not per batch), else None."""
        if not callable(self.generator.weight):  # a float nn.Linear
            return None
        cached = self.__dict__.get("_generator_int8")
        if cached is None or cached[0] is not self.generator:
            cached = (self.generator, self.generator.weight(), self.generator.bias())
            self.__dict__["_generator_int8"] = cached
        return cached[1], cached[2]

    @staticmethod
    def reorder(search_state: SearchState, index: torch.Tensor) -> SearchState:
        state, memory = search_state
        return state.select(index), memory.select(index)


def _output_rows(
    generator: nn.Module,
    ids: torch.Tensor,
    unpacked: tuple[torch.Tensor, torch.Tensor | None] | None = None,
):
    """The output layer restricted to the target ids `ids` (K,): a function (N, O) → (N, K),
    int8 again when the layer is (see `--quantize`; `unpacked`: its weight and bias, if known)."""
    if not callable(generator.weight):  # a float nn.Linear
        weight = generator.weight.detach().index_select(0, ids)
        bias = None if generator.bias is None else generator.bias.detach().index_select(0, ids)
        return lambda vectors: nn.functional.linear(vectors, weight, bias)
    import warnings

    from torch.ao.nn.quantized.dynamic import Linear as DynamicLinear

    weight, bias = unpacked or (generator.weight(), generator.bias())  # accessor methods
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # torch's deprecation notices are not the user's concern
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
