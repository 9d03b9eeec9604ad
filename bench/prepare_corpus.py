"""Parallel corpora of any size for the `nmt prepare` benchmark, generated at bench time.

With ../shared/data/multi30k present: its 29,000 German–English training pairs, repeated with
the repetition number appended to both sides ("Ein Mann fährt Fahrrad. 17"), so every pair of
every repetition is distinct except Multi30k's own repeats, and sentence lengths and the
character set are those of real text. Without it: seeded synthetic sentences from a made-up
vocabulary of 6,000 words, with the same kind of lengths. Nothing is copied into the repository.
"""

from __future__ import annotations

import gzip
import random
from pathlib import Path

MULTI30K = Path(__file__).resolve().parents[2] / "shared" / "data" / "multi30k"


def base_pairs() -> tuple[str, list[tuple[str, str]]]:
    """The pairs that get repeated, and what they are ("multi30k" or "synthetic")."""
    src, tgt = MULTI30K / "train.de.gz", MULTI30K / "train.en.gz"
    if src.is_file() and tgt.is_file():
        with (
            gzip.open(src, "rt", encoding="utf-8") as de,
            gzip.open(tgt, "rt", encoding="utf-8") as en,
        ):
            pairs = [(s.rstrip("\n"), t.rstrip("\n")) for s, t in zip(de, en, strict=True)]
        return "multi30k", pairs
    return "synthetic", _synthetic_pairs(29_000)


def _synthetic_pairs(n: int, seed: int = 7) -> list[tuple[str, str]]:
    """Seeded sentence pairs: source words from a made-up vocabulary, target words mapped."""
    rng = random.Random(seed)
    letters = "abcdefghijklmnopqrstuvwxyzäöü"
    vocab = ["".join(rng.choices(letters, k=rng.randint(2, 10))) for _ in range(6_000)]
    target = {word: word[::-1].upper()[:1] + word[::-1][1:] for word in vocab}
    pairs = []
    for _ in range(n):
        words = rng.choices(vocab, k=rng.randint(4, 22))
        pairs.append((" ".join(words) + " .", " ".join(target[w] for w in words) + " ."))
    return pairs


def write_corpus(directory: Path, n_pairs: int) -> tuple[Path, Path, str]:
    """Write `n_pairs` line-aligned pairs to directory/train.{src,tgt}; return them and the kind."""
    kind, pairs = base_pairs()
    directory.mkdir(parents=True, exist_ok=True)
    src_path, tgt_path = directory / "train.src", directory / "train.tgt"
    with open(src_path, "w", encoding="utf-8") as src, open(tgt_path, "w", encoding="utf-8") as tgt:
        for start in range(0, n_pairs, len(pairs)):
            rep = start // len(pairs)
            block = pairs[: min(len(pairs), n_pairs - start)]
            src.write("".join(f"{s} {rep}\n" for s, _ in block))
            tgt.write("".join(f"{t} {rep}\n" for _, t in block))
    return src_path, tgt_path, kind
