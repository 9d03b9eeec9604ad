"""Checks of option values that several commands share, made before any model is loaded.

torch would reject a bad device or thread count with its own traceback, and a NaN length
penalty would make beam search loop: each is refused here with the option's name instead.
"""

from __future__ import annotations

import math
import re

_DEVICE = re.compile(r"^(auto|cpu|cuda(:\d+)?)$")


def check_device(device: str) -> None:
    from nmt_cli.errors import ConfigError

    if not _DEVICE.match(device):
        raise ConfigError(f"--device must be auto, cpu, cuda or cuda:N, got {device!r}")


def check_threads(threads: int) -> None:
    from nmt_cli.errors import ConfigError

    if threads < 0:
        raise ConfigError(f"--threads must be 0 (torch's default) or more, got {threads}")


def check_finite(option: str, value: float) -> None:
    from nmt_cli.errors import ConfigError

    if not math.isfinite(value):
        raise ConfigError(f"{option} must be a finite number, got {value}")
