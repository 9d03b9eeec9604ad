"""What the numbers were measured on: the machine, its load, the software versions."""

from __future__ import annotations

import os
import platform
from dataclasses import dataclass
from datetime import UTC, datetime
from importlib import metadata

import procs
from layout import OUR_NMT, OUR_PYTHON, Layout

VERSION_SCRIPT = (
    "import importlib.metadata as m, sys\n"
    "for name in sys.argv[1:]:\n"
    "    print(name, m.version(name))\n"
)


@dataclass
class Machine:
    """The hardware and the date."""

    nproc: int
    cpu_model: str
    mem_gib: float
    python: str
    date_utc: str
    gpu: str = ""  # the GPU's name on a GPU run, else empty


def _cpuinfo(key: str) -> str:
    try:
        with open("/proc/cpuinfo", encoding="utf-8") as info:
            for line in info:
                if line.startswith(key):
                    return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or "unknown"


def _mem_gib() -> float:
    try:
        with open("/proc/meminfo", encoding="utf-8") as info:
            for line in info:
                if line.startswith("MemTotal:"):
                    return round(int(line.split()[1]) / 2**20, 1)
    except OSError:
        pass
    return 0.0


def now_utc() -> str:
    """The current time, ISO 8601 in UTC."""
    return datetime.now(UTC).strftime("%Y-%m-%d %H:%M:%S UTC")


GPU_SCRIPT = "import torch; print(torch.cuda.get_device_name(0))"


def describe(device: str = "cpu") -> Machine:
    """The machine this process runs on, and its first GPU's name when `device` is cuda."""
    return Machine(
        os.cpu_count() or 0,
        _cpuinfo("model name"),
        _mem_gib(),
        platform.python_version(),
        now_utc(),
        procs.capture([OUR_PYTHON, "-c", GPU_SCRIPT]) or "?" if device == "cuda" else "",
    )


def loadavg() -> str:
    """The 1/5/15-minute load averages, to show whether anything else was running."""
    try:
        with open("/proc/loadavg", encoding="utf-8") as load:
            return " ".join(load.read().split()[:3])
    except OSError:
        return "?"


def _venv_versions(python, names: list[str]) -> dict[str, str]:
    out = procs.capture([python, "-c", VERSION_SCRIPT, *names])
    return dict(line.split(" ", 1) for line in out.splitlines() if " " in line)


def versions(layout: Layout, peers: list[str]) -> dict[str, str]:
    """Versions of our package, torch, the tokenizer, the scorer and the installed peers."""
    found = {"nmt": procs.capture([OUR_NMT, "--version"]).removeprefix("nmt ") or "?"}
    for name, version in _venv_versions(OUR_PYTHON, ["torch"]).items():
        found[name] = version
    for name in ("sentencepiece", "sacrebleu"):
        found[name] = metadata.version(name)
    packages = {"onmt": ["OpenNMT-py", "torch"], "joey": ["joeynmt", "torch"]}
    for peer in peers:
        python = layout.venv(peer) / "bin" / "python"
        for name, version in _venv_versions(python, packages[peer]).items():
            found[f"{peer}: {name}"] = version
    return found
