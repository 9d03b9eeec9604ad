"""The encoder: embeddings → (bi)directional RNN, keeping every state e_1..e_S."""

from __future__ import annotations

import torch
from torch import nn
from torch.nn.utils.rnn import pack_padded_sequence, pad_packed_sequence

from nmt_cli.config import ModelConfig
from nmt_cli.model.gru import FastGRU

Hidden = torch.Tensor | tuple[torch.Tensor, torch.Tensor]  # GRU: h (L, B, D); LSTM: (h, c)


def rnn_class(cell: str) -> type[nn.RNNBase]:
    return nn.LSTM if cell == "lstm" else FastGRU


class Encoder(nn.Module):
    def __init__(self, config: ModelConfig, embedding: nn.Embedding):
        super().__init__()
        self.embedding = embedding
        self.dropout = nn.Dropout(config.dropout)
        self.rnn = rnn_class(config.cell)(
            config.emb_size,
            config.hidden_size,
            num_layers=config.layers,
            bidirectional=config.bidirectional,
            batch_first=True,
            dropout=config.dropout if config.layers > 1 else 0.0,
        )
        self.directions = 2 if config.bidirectional else 1
        self.output_size = config.hidden_size * self.directions

    def forward(
        self, src: torch.Tensor, lengths: torch.Tensor, embedded: torch.Tensor | None = None
    ) -> tuple[torch.Tensor, Hidden]:
        """States (B, S, M) for src (B, S) with lengths (B,), and the final state per layer (L, B, M).

        `embedded` (B, S, E), when given, replaces the looked-up embeddings of `src` (gradient
        saliency differentiates with respect to them).
        """
        if embedded is None:
            embedded = self.embedding(src)
        embedded = self.dropout(embedded)  # (B, S, E)
        if isinstance(self.rnn, FastGRU) and self.rnn.use_fast_path(embedded):
            states, final = self.rnn.forward_padded(embedded, lengths)
            states = states * (src != 0).unsqueeze(-1)  # zeros at padding, as packing gives
            return states, self._join_directions(final)
        packed = pack_padded_sequence(
            embedded, lengths.cpu(), batch_first=True, enforce_sorted=False
        )
        outputs, final = self.rnn(packed)
        states, _ = pad_packed_sequence(outputs, batch_first=True, total_length=src.size(1))
        if isinstance(final, tuple):
            return states, (self._join_directions(final[0]), self._join_directions(final[1]))
        return states, self._join_directions(final)

    def _join_directions(self, final: torch.Tensor) -> torch.Tensor:
        """(L·dirs, B, H) → (L, B, dirs·H): the forward and backward summaries side by side."""
        if self.directions == 1:
            return final
        layers2, batch, hidden = final.shape
        final = final.view(layers2 // 2, 2, batch, hidden)
        return torch.cat([final[:, 0], final[:, 1]], dim=-1)
