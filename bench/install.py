"""The peer toolkits, each in its own virtual environment in the work folder, on our torch.

pip must never swap torch: every install runs with a constraints file pinning torch to the
version in our .venv. OpenNMT-py 3.5.1 pins torch<2.3 in its metadata, so it goes in with
--no-deps and its run-time needs are installed by hand (spacy is imported by `import onmt`).
Joey NMT 2.3.0 imports importlib_metadata without declaring it. A stamp file marks a finished
install, so a second run skips it.
"""

from __future__ import annotations

import sys
from dataclasses import dataclass
from pathlib import Path

import procs
from layout import OUR_PYTHON, Layout

ONMT_VERSION = "3.5.1"
JOEY_VERSION = "2.3.0"
ONMT_NEEDS = [
    "numpy",
    "configargparse",
    "tensorboard",
    "flask",
    "waitress",
    "pyonmttok<2,>=1.37",
    "pyyaml",
    "sacrebleu",
    "rapidfuzz",
    "pyahocorasick",
    "six",
    "spacy",
    "fasttext-wheel",
]


@dataclass(frozen=True)
class PeerPackage:
    """One peer toolkit: how to install it and how to check that it imports."""

    name: str  # onmt or joey
    steps: tuple[tuple[str, ...], ...]  # pip arguments, run in order
    module: str  # imported to check the install


def our_torch_version() -> str:
    """The torch version of our .venv without the local label (2.13.0+cpu -> 2.13.0)."""
    version = procs.capture([OUR_PYTHON, "-c", "import torch; print(torch.__version__)"])
    if not version:
        raise RuntimeError(f"cannot import torch with {OUR_PYTHON}; run `make install` first")
    return version.split("+")[0]


def packages() -> list[PeerPackage]:
    """The install recipes of OpenNMT-py and Joey NMT."""
    onmt = PeerPackage(
        "onmt",
        (("--no-deps", f"opennmt-py=={ONMT_VERSION}"), tuple(ONMT_NEEDS)),
        "onmt.bin.train",
    )
    joey = PeerPackage("joey", ((f"joeynmt=={JOEY_VERSION}", "importlib_metadata"),), "joeynmt")
    return [onmt, joey]


def _stamp(layout: Layout, package: PeerPackage, torch_version: str) -> tuple[Path, str]:
    text = f"{package.name} {package.steps} torch=={torch_version}\n"
    return layout.venv(package.name) / ".bench-installed", text


def installed_torch(layout: Layout, name: str) -> str:
    """The torch version a peer venv imports ('' when it does not)."""
    python = layout.venv(name) / "bin" / "python"
    return procs.capture([python, "-c", "import torch; print(torch.__version__)"])


def commands(layout: Layout, package: PeerPackage, torch_version: str) -> list[list]:
    """The command lines that install `package` into its own venv on our torch version."""
    venv = layout.venv(package.name)
    pip = [venv / "bin" / "python", "-m", "pip", "install", "--disable-pip-version-check"]
    constraints = layout.work / "constraints.txt"
    return [
        [sys.executable, "-m", "venv", venv],
        [*pip, f"torch=={torch_version}"],
        *([*pip, "-c", constraints, *step] for step in package.steps),
    ]


def install(layout: Layout, package: PeerPackage, torch_version: str) -> None:
    """Create the venv of `package` and install it, unless a matching stamp says it is done."""
    stamp, text = _stamp(layout, package, torch_version)
    if stamp.exists() and stamp.read_text() == text:
        return
    log = layout.log(f"install-{package.name}")
    (layout.work / "constraints.txt").write_text(f"torch=={torch_version}\n")
    for cmd in commands(layout, package, torch_version):
        procs.check(procs.run(cmd, log), f"installing {package.name}", log)
    python = layout.venv(package.name) / "bin" / "python"
    check = [python, "-c", f"import {package.module}, torch; print(torch.__version__)"]
    procs.check(procs.run(check, log), f"importing {package.module}", log)
    found = installed_torch(layout, package.name).split("+")[0]
    if found != torch_version:
        raise RuntimeError(f"{python} has torch {found}, not {torch_version}; see {log}")
    stamp.write_text(text)


def install_peers(layout: Layout, names: list[str]) -> list[str]:
    """Install the peer toolkits among `names` (onmt, joey) not installed yet; returns the recipe."""
    torch_version = our_torch_version()
    recipe = []
    for package in packages():
        if package.name in names:
            install(layout, package, torch_version)
            recipe += [procs.shown(cmd) for cmd in commands(layout, package, torch_version)]
    return recipe


def check_installed(layout: Layout, names: list[str]) -> None:
    """Fail clearly when --skip-install is given but a peer environment is missing."""
    missing = [n for n in names if not (layout.venv(n) / ".bench-installed").exists()]
    if missing:
        raise RuntimeError(
            f"no finished install of {', '.join(missing)} in {layout.work}: run without --skip-install"
        )
