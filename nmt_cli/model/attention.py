"""Attention as query, keys and values: score, mask, softmax, weighted sum.

Shapes: B batch, T query steps (1 inside the step loop), S source length, D query (decoder)
size, M memory (encoder state) size, A size of the projected keys.

The query is the decoder state d_t; keys and values are the encoder states e_1..e_S. A key
projection depends only on the source, so `project_keys` runs once per batch and its result
is passed back in explicitly at every step.

Weights are float32 in every model. In a bfloat16 model (`--bf16`) keys, values and scores
are float32 too, while the query arrives in bfloat16 and the context leaves in it: the
(B, T, S, A) tensor of additive attention is element-wise work, which CPUs do several times
slower in bfloat16, and the batched products here ran slower in bfloat16 too (see
`Attention.keep_keys_float32`). Under mixed-precision training on a GPU all of it follows
autocast; on a CPU (`nmt train --bf16`) the key projection runs in bfloat16 and the rest of
`Attention.forward` in float32 (the input-feeding step loop, model/feeding.py, runs its
query projection in bfloat16).
"""

from __future__ import annotations

import abc

import torch
from torch import nn

from nmt_cli.device import autocast_dtype, low_linear
from nmt_cli.errors import ConfigError


class Attention(nn.Module, abc.ABC):
    """Shared part: masked softmax over source positions and the context vector."""

    float32_memory = False  # keys and values kept float32 in a bfloat16 model (`--bf16`)

    def project_keys(self, memory: torch.Tensor) -> torch.Tensor:
        """Keys for every source position (B, S, K), computed once per batch."""
        return memory

    def keep_keys_float32(self) -> None:
        """Turn the layers that read keys or scores back to float32 after the model became
        bfloat16; the query projection stays bfloat16, a product of the decoder's size."""
        self.float32_memory = True
        for name in ("key_proj", "v"):
            if hasattr(self, name):
                getattr(self, name).float()

    @abc.abstractmethod
    def score(self, query: torch.Tensor, keys: torch.Tensor) -> torch.Tensor:
        """Scores (B, T, S) of queries (B, T, D) against keys (B, S, K)."""

    def forward(
        self, query: torch.Tensor, keys: torch.Tensor, memory: torch.Tensor, mask: torch.Tensor
    ) -> tuple[torch.Tensor, torch.Tensor]:
        """Context (B, T, M) and float32 weights (B, T, S) for queries (B, T, D); mask (B, S)
        is True on real tokens. (For a float32 model every conversion here returns its tensor
        itself.) Under CPU autocast (`nmt train --bf16`) it runs in float32, as the
        input-feeding step loop's attention does: oneDNN would compile a kernel for each new
        (B, T, S) of its batched products (see `device.low_mm`), and they are a small part of
        the work. (A bfloat16 model runs without autocast: see `float32_memory`.)"""
        cpu_autocast = query.device.type == "cpu" and autocast_dtype("cpu") is not None
        if cpu_autocast and not self.float32_memory:
            with torch.autocast("cpu", enabled=False):
                return self.forward(query.float(), keys.float(), memory.float(), mask)
        scores = self.score(query, keys)  # (B, T, S)
        scores = scores.masked_fill(~mask.unsqueeze(1), float("-inf"))
        # float32 weights that sum to 1, as alignments read them
        weights = torch.softmax(scores.float(), dim=-1)
        context = torch.bmm(weights.to(memory.dtype), memory)  # (B, T, M)
        return (context.to(query.dtype) if self.float32_memory else context), weights


class DotAttention(Attention):
    """score(d, e) = dᵀe (Luong et al. 2015, eq. 8 "dot")."""

    def __init__(self, query_size: int, memory_size: int):
        super().__init__()
        if query_size != memory_size:
            raise ConfigError(
                f"dot attention needs the decoder size ({query_size}) to equal the encoder "
                f"output size ({memory_size}); use --attention general or additive"
            )

    def score(self, query: torch.Tensor, keys: torch.Tensor) -> torch.Tensor:
        return torch.bmm(query.to(keys.dtype), keys.transpose(1, 2))


class GeneralAttention(Attention):
    """score(d, e) = dᵀ W e (Luong et al. 2015, eq. 8 "general"); W e is the precomputed key."""

    def __init__(self, query_size: int, memory_size: int):
        super().__init__()
        self.key_proj = nn.Linear(memory_size, query_size, bias=False)

    def project_keys(self, memory: torch.Tensor) -> torch.Tensor:
        return _keys(low_linear(self.key_proj, memory))  # (B, S, D)

    def score(self, query: torch.Tensor, keys: torch.Tensor) -> torch.Tensor:
        return torch.bmm(query.to(keys.dtype), keys.transpose(1, 2))


class AdditiveAttention(Attention):
    """score(d, e) = vᵀ tanh(W₁e + W₂d) (Bahdanau et al. 2015, eq. 6 and appendix A.1.2)."""

    def __init__(self, query_size: int, memory_size: int, attention_size: int | None = None):
        super().__init__()
        attention_size = attention_size or query_size
        self.key_proj = nn.Linear(memory_size, attention_size, bias=False)  # W₁
        self.query_proj = nn.Linear(query_size, attention_size, bias=True)  # W₂ (bias: b in tanh)
        self.v = nn.Linear(attention_size, 1, bias=False)

    def project_keys(self, memory: torch.Tensor) -> torch.Tensor:
        return _keys(low_linear(self.key_proj, memory))  # (B, S, A)

    def score(self, query: torch.Tensor, keys: torch.Tensor) -> torch.Tensor:
        projected = self.query_proj(query).to(keys.dtype)  # (B, T, A)
        hidden = (keys.unsqueeze(1) + projected.unsqueeze(2)).tanh_()  # (B, T, S, A)
        return self.v(hidden).squeeze(-1)  # (B, T, S)


def _keys(keys: torch.Tensor) -> torch.Tensor:
    """Projected keys, in float32 under CPU autocast, where attention runs in float32 (see
    `Attention.forward`): converted once per batch, not at every step of a step loop."""
    if keys.device.type == "cpu" and autocast_dtype("cpu") is not None:
        return keys.float()
    return keys


def build_attention(name: str, query_size: int, memory_size: int) -> Attention | None:
    """The score function named by --attention, or None for the plain Seq2Seq baseline."""
    if name == "none":
        return None
    classes = {"dot": DotAttention, "general": GeneralAttention, "additive": AdditiveAttention}
    return classes[name](query_size, memory_size)
