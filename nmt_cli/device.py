"""The torch device a command runs on."""

from __future__ import annotations

import torch

from nmt_cli.errors import NmtError


def pick_device(name: str) -> torch.device:
    """`auto` (CUDA when present, else CPU), `cpu`, or `cuda[:N]` when a GPU is there."""
    if name == "auto":
        return torch.device("cuda" if torch.cuda.is_available() else "cpu")
    if name.startswith("cuda") and not torch.cuda.is_available():
        raise NmtError(
            "--device cuda was asked for but no CUDA device is available; use --device cpu"
        )
    return torch.device(name)
