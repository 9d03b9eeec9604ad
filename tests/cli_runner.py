"""Running the CLI in-process, and a tiny synthetic corpus, for tests anywhere in tests/."""

from __future__ import annotations

import random
from pathlib import Path

from typer.testing import CliRunner

from nmt_cli.cli.app import app

TESTS = Path(__file__).resolve().parent
SHARED = TESTS.parent.parent / "shared"
WORDS = "apple river stone cloud green quick small house light water bird tree night sun".split()


def write_toy_corpus(
    directory: Path, n: int = 400, seed: int = 0, lengths: tuple[int, int] = (2, 8)
) -> tuple[Path, Path]:
    """Source sentences of 2–8 words (or `lengths`) and their reversed, upper-cased targets."""
    rng = random.Random(seed)
    src_lines, tgt_lines = [], []
    for _ in range(n):
        words = [rng.choice(WORDS) for _ in range(rng.randint(*lengths))]
        src_lines.append(" ".join(words))
        tgt_lines.append(" ".join(w.upper() for w in reversed(words)))
    directory.mkdir(parents=True, exist_ok=True)
    src, tgt = directory / "toy.src", directory / "toy.tgt"
    src.write_text("\n".join(src_lines) + "\n", encoding="utf-8")
    tgt.write_text("\n".join(tgt_lines) + "\n", encoding="utf-8")
    return src, tgt


def invoke(*args, input: str | bytes | None = None):
    """Run the CLI in-process; stdout and stderr kept apart."""
    return CliRunner().invoke(app, [str(a) for a in args], input=input)
