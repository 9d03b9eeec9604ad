"""Model FLOPs per target token, and the fp32 matmul rate (CPU or GPU) they are compared against.

Multiply-adds (MACs) per target token of one forward pass, a multiply-add being 2 FLOPs, for
embeddings E, encoder H per direction, decoder D, attention size A, vocabulary V, a mean
attended source length S and r source tokens per target token; forward + backward ≈ 3 ×
forward. For the reference architecture this is the peers' 47.5 MFLOP per target token.
"""

from __future__ import annotations

from dataclasses import dataclass

import procs
from layout import OUR_PYTHON

MATMUL_SCRIPT = """
import statistics, sys, time, torch
torch.set_num_threads(int(sys.argv[1]))
dtype = getattr(torch, sys.argv[2])
device = sys.argv[3]
n = 2048 if device == "cpu" else 8192
a, b = (torch.randn(n, n, device=device).to(dtype) for _ in range(2))
sync = torch.cuda.synchronize if device != "cpu" else (lambda: None)
for _ in range(3):
    a @ b
sync()
times = []
for _ in range(10):
    t = time.perf_counter(); a @ b; sync(); times.append(time.perf_counter() - t)
print(2 * n**3 / statistics.median(times) / 1e9)
"""
MATMUL_COMMAND = "2048³ fp32 matmul, torch.set_num_threads(2), median of 10 after 3 warm-ups"
# On a GPU: torch's default fp32 matmul (TF32 off, as both toolkits' products run), synchronised
# around each.
GPU_MATMUL_COMMAND = (
    "8192³ fp32 matmul on the GPU (TF32 off, torch's default), median of 10 after 3 warm-ups"
)


@dataclass(frozen=True)
class Arch:
    """The sizes that set the cost of one target token."""

    attention: str = "additive"  # additive (Bahdanau) or general (Luong dᵀWe)
    input_feed: bool = True
    emb: int = 256  # E
    enc: int = 256  # H, per direction
    dec: int = 512  # D
    att: int = 512  # A, additive attention size
    vocab: int = 8000  # V
    src_len: float = 16.0  # S
    src_per_tgt: float = 1.0  # r

    def macs(self) -> dict[str, float]:
        """Forward multiply-adds per target token, by part."""
        e, h, d, a, v, s, r = (
            self.emb,
            self.enc,
            self.dec,
            self.att,
            self.vocab,
            self.src_len,
            self.src_per_tgt,
        )
        key = a if self.attention == "additive" else d
        feed = d if self.input_feed else 0
        return {
            "encoder biGRU 2·3H(E+H)·r": 2 * 3 * h * (e + h) * r,
            "attention keys K·2H·r": key * 2 * h * r,
            "decoder GRU 3D(E+feed)+3D·D": 3 * d * (e + feed) + 3 * d * d,
            "attention query D·A (additive only)": d * a if self.attention == "additive" else 0,
            "scores + context S(K+2H)": s * (key + 2 * h),
            "attentional layer D(D+2H)": d * (d + 2 * h),
            "generator V·D": v * d,
        }

    def train_flops(self) -> float:
        """Forward + backward FLOPs per target token: 3 × 2 × MACs."""
        return 6 * sum(self.macs().values())

    def formula(self) -> str:
        """The sum spelled out, for the report."""
        parts = " + ".join(f"{name} = {value / 1e3:.0f}k" for name, value in self.macs().items())
        return f"3 × 2 × ({parts}) = {self.train_flops() / 1e6:.1f} MFLOP"


ARCHS = {
    "reference": Arch(),
    "fast": Arch(attention="general", input_feed=False),
}


def matmul_gflops(threads: int = 2, dtype: str = "float32", device: str = "cpu") -> float:
    """The matmul rate of this CPU (or of the GPU `device` names) with torch in our .venv, in
    GFLOP/s (fp32 unless `dtype` names another torch dtype, e.g. bfloat16)."""
    out = procs.capture([OUR_PYTHON, "-c", MATMUL_SCRIPT, str(threads), dtype, device])
    if not out:
        raise RuntimeError("the matmul measurement failed")
    return float(out)


def mfu(tokens_per_s: float, flops_per_token: float, peak_gflops: float) -> float:
    """Model-FLOPs utilisation: achieved model FLOP/s over the matmul rate."""
    return tokens_per_s * flops_per_token / (peak_gflops * 1e9)
