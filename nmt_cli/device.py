"""Where torch runs: the device a command asks for, and the number of CPU threads."""

from __future__ import annotations

import os
import re
from typing import TYPE_CHECKING

from nmt_cli.errors import ConfigError

if TYPE_CHECKING:
    import torch

DEVICE_CHOICES = "auto, cpu, cuda or cuda:N"
_DEVICE = re.compile(r"^(auto|cpu|cuda(:\d+)?)$")


def check_device(name: str) -> str:
    """`name` if it names a device (auto, cpu, cuda, cuda:N); else ConfigError (exit 2)."""
    if not _DEVICE.match(name):
        raise ConfigError(f"--device must be {DEVICE_CHOICES}, got {name!r}")
    return name


MAX_THREADS = 1024  # more threads than any machine's cores help; far more crash the runtime


def check_threads(threads: int) -> int:
    """`threads` if it is 0 (torch's default) to MAX_THREADS; else ConfigError (exit 2)."""
    if not 0 <= threads <= MAX_THREADS:
        raise ConfigError(
            f"--threads must be from 0 (torch's default) to {MAX_THREADS}, got {threads} "
            f"(this machine has {available_cores()} cores)"
        )
    return threads


def pick_device(name: str) -> torch.device:
    """`auto` (CUDA when present, else CPU), `cpu`, or `cuda[:N]` when a GPU is there."""
    import torch

    check_device(name)
    if name == "auto":
        return torch.device("cuda" if torch.cuda.is_available() else "cpu")
    if name.startswith("cuda") and not torch.cuda.is_available():
        raise ConfigError(
            f"--device {name} was asked for but no CUDA device is available; use --device cpu"
        )
    return torch.device(name)


def set_threads(threads: int) -> None:
    """Use `threads` CPU threads in torch (0: leave torch's default)."""
    import torch

    if check_threads(threads):
        torch.set_num_threads(threads)


def available_cores() -> int:
    """The CPU cores this process may run on (its affinity where the system tells it)."""
    if hasattr(os, "sched_getaffinity"):
        return max(1, len(os.sched_getaffinity(0)))
    return os.cpu_count() or 1


def native_bf16() -> bool:
    """Whether this CPU computes bfloat16 in hardware (AMX or AVX-512 BF16); elsewhere torch
    emulates it, slower than float32."""
    import torch

    checks = ("_is_amx_tile_supported", "_is_avx512_bf16_supported")  # torch 2.x, private
    return any(getattr(torch.cpu, name, lambda: False)() for name in checks)


def check_bf16(device: torch.device, flag: str, fix: str) -> None:
    """Refuse bfloat16 (asked for by `flag`; `fix` says how to do without) on a device that
    would only emulate it: a CPU without AMX or AVX-512 BF16, where it runs slower than
    float32, or a GPU older than Ampere (compute capability 8.0)."""
    import torch

    if device.type == "cpu" and not native_bf16():
        raise ConfigError(
            f"{flag} needs a CPU with AMX or AVX-512 BF16 (without them bfloat16 runs slower "
            f"than float32): {fix}"
        )
    if device.type == "cuda" and not gpu_bf16(device):
        raise ConfigError(
            f"{flag}: {torch.cuda.get_device_name(device)} has no bfloat16 hardware (CUDA "
            f"compute capability 8.0 or later): {fix}"
        )


def gpu_bf16(device: torch.device) -> bool:
    """Whether this GPU computes bfloat16 in hardware: compute capability 8.0 (Ampere) or later,
    or ROCm. (torch.cuda.is_bf16_supported() counts emulation too, on the current device.)"""
    import torch

    return bool(torch.version.hip) or torch.cuda.get_device_capability(device) >= (8, 0)


def autocast_dtype(device_type: str) -> torch.dtype | None:
    """The dtype autocast runs matrix products in on `device_type` ("cpu", "cuda") where it is
    on here, else None: what training's own autograd functions (model/gru.py,
    model/feeding.py, loss.py) cast their products to, and whether `low_linear` pads."""
    import torch

    return torch.get_autocast_dtype(device_type) if torch.is_autocast_enabled(device_type) else None


# Low-precision products on the CPU (`nmt train --bf16`) run through oneDNN, which compiles a
# kernel for every new shape and keeps it: about 1 MiB each, measured with torch 2.13 on an
# AMX Xeon, where every batch brings new row counts (B·S, B·T, B). The products below pad
# their rows with zeros to one of eight sizes per octave, so a run sees few shapes.


def product_rows(rows: int) -> int:
    """`rows` rounded up to a multiple of 8 up to 64, and above to one of the eight sizes of
    its octave (at most 12.5 % more rows)."""
    if rows <= 64:
        return -(-rows // 8) * 8
    step = 1 << (rows.bit_length() - 4)
    return -(-rows // step) * step


def _padded(x: torch.Tensor, rows: int) -> torch.Tensor:
    """x (N, ·) followed by zero rows up to `rows`."""
    if x.size(0) == rows:
        return x
    out = x.new_zeros(rows, x.size(1))
    out[: x.size(0)] = x
    return out


def low_mm(a: torch.Tensor, b: torch.Tensor) -> torch.Tensor:
    """a @ b for a low-precision CPU product: a's rows padded to `product_rows` for the
    product, the result cut back to them."""
    rows = a.size(0)
    return (_padded(a, product_rows(rows)) @ b)[:rows]


def low_tmm(a: torch.Tensor, b: torch.Tensor) -> torch.Tensor:
    """aᵀ @ b, the sum over their rows, padded as in `low_mm` (zero rows add nothing); one of
    them may come padded already (with zero rows)."""
    rows = product_rows(max(a.size(0), b.size(0)))
    return _padded(a, rows).t() @ _padded(b, rows)


def low_linear(linear: torch.nn.Linear, x: torch.Tensor) -> torch.Tensor:
    """linear(x) for x (..., I); under CPU autocast its rows (every dimension but the last,
    flattened) padded as in `low_mm`, autograd and all."""
    import torch

    if autocast_dtype("cpu") is None or x.device.type != "cpu":
        return linear(x)
    flat = x.reshape(-1, x.size(-1))
    rows = flat.size(0)
    if product_rows(rows) > rows:
        flat = torch.nn.functional.pad(flat, (0, 0, 0, product_rows(rows) - rows))
    return linear(flat)[:rows].view(*x.shape[:-1], linear.out_features)
