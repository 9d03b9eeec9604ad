"""Where everything of a benchmark run lives: the git-ignored work folder and its parts."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

BENCH_DIR = Path(__file__).resolve().parent
REPO_DIR = BENCH_DIR.parent
SHARED_DIR = REPO_DIR.parent / "shared"
PEER_CONFIG_DIR = SHARED_DIR / "peers"
DEFAULT_DATA = SHARED_DIR / "data" / "multi30k"
REFERENCE_CONFIG = REPO_DIR / "data" / "configs" / "reference.toml"
OUR_PYTHON = REPO_DIR / ".venv" / "bin" / "python"
OUR_NMT = REPO_DIR / ".venv" / "bin" / "nmt"
PEERS_PLACEHOLDER = "<peers-workdir>"


@dataclass(frozen=True)
class Layout:
    """Paths inside the work folder; `peers` stands for <peers-workdir> of the shared configs.
    `device` is where every system trains and translates: "cpu", or "cuda" (the first GPU)."""

    work: Path
    device: str = "cpu"

    @property
    def logs(self) -> Path:
        """One log file per step."""
        return self.work / "logs"

    @property
    def nmt_data(self) -> Path:
        """The data directory written by `nmt prepare`."""
        return self.work / "nmt-data"

    @property
    def peers(self) -> Path:
        """What the shared peer configs call <peers-workdir>."""
        return self.work / "peers"

    @property
    def pieces(self) -> Path:
        """The peers' pieces files and vocab files."""
        return self.peers / "data"

    @property
    def configs(self) -> Path:
        """The configs generated for this run."""
        return self.work / "configs"

    @property
    def models(self) -> Path:
        """One model directory per training run."""
        return self.work / "models"

    @property
    def outputs(self) -> Path:
        """Translations and test subsets."""
        return self.work / "out"

    def venv(self, name: str) -> Path:
        """The virtual environment of one peer toolkit."""
        return self.work / f"venv-{name}"

    def log(self, name: str) -> Path:
        """The log file of one step."""
        self.logs.mkdir(parents=True, exist_ok=True)
        return self.logs / f"{name}.log"

    def make(self) -> None:
        """Create the folders every step writes into."""
        for path in (self.logs, self.pieces, self.configs, self.models, self.outputs):
            path.mkdir(parents=True, exist_ok=True)
