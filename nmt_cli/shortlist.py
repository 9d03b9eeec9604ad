"""Lexical shortlists: score only the target pieces that a batch's source pieces can produce.

Most of a decoder step on a CPU is the output layer: (rows × hidden) by (hidden × V). A
shortlist (as Marian NMT ships) restricts it to the target pieces likely for the sentences at
hand: for every source piece, its `per_source` most probable translations under an IBM Model 1
lexical table (Brown et al. 1993) estimated on the training split, plus the `frequent` most
frequent target pieces and the special ids. One batch uses the union over its sentences, so the
search sees a (rows × K) score matrix with K a fraction of V; the softmax is over those K.

`nmt train` writes `shortlist.npz` beside the model; `nmt translate --shortlist` reads it. For
a model trained before shortlists existed: `nmt shortlist DATA_DIR MODEL_DIR`.
"""

from __future__ import annotations

import io
import zipfile
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from nmt_cli.errors import ArtifactError

REWRITE = "nmt shortlist DATA_DIR MODEL_DIR"  # how to (re)write a model's shortlist
PER_SOURCE = 50  # translations kept per source piece
FREQUENT = 200  # most frequent target pieces, always in
EM_ITERATIONS = 5
MAX_PAIRS = 10_000_000  # (source, target) token pairs read for the table: about 1 GB at most


@dataclass(frozen=True)
class Shortlist:
    """Per source id its candidate target ids (rows padded with -1), and ids always kept."""

    candidates: np.ndarray  # (V_src, per_source) int32
    always: np.ndarray  # (n,) int32: frequent pieces and specials

    def ids_for(self, sources: Sequence[np.ndarray]) -> np.ndarray:
        """Sorted unique target ids a batch of source id arrays may produce."""
        src = np.unique(_concatenated(sources))
        src = src[(src >= 0) & (src < len(self.candidates))]
        ids = np.concatenate([self.candidates[src].ravel(), self.always])
        return np.unique(ids[ids >= 0])

    def check(self, src_vocab: int, tgt_vocab: int, path: Path) -> Shortlist:
        """This shortlist, if it fits a model of these vocabulary sizes; else ArtifactError."""
        candidates, always = self.candidates, self.always
        fits = (
            candidates.ndim == 2
            and candidates.shape[0] == src_vocab
            and np.issubdtype(candidates.dtype, np.integer)
            and np.issubdtype(always.dtype, np.integer)
            and int(candidates.max(initial=-1)) < tgt_vocab
            and int(always.max(initial=-1)) < tgt_vocab
            and int(always.min(initial=0)) >= 0
        )
        if not fits:
            raise ArtifactError(
                f"{path} does not fit the model ({src_vocab} source and {tgt_vocab} target "
                f"pieces): it was built from other data; rewrite it with `{REWRITE}` using "
                "the model's data directory, or translate without it (--no-shortlist)"
            )
        return self

    def save(self, path: Path) -> None:
        """Write atomically (temporary file, fsync, rename), as every model file is."""
        from nmt_cli import atomic

        buffer = io.BytesIO()
        np.savez(buffer, candidates=self.candidates, always=self.always)
        atomic.write_bytes(path, buffer.getvalue())

    @classmethod
    def load(cls, path: Path) -> Shortlist:
        try:
            with np.load(path) as data:
                return cls(data["candidates"], data["always"])
        except FileNotFoundError:
            raise ArtifactError(
                f"{path} does not exist (the model predates shortlists): write it with "
                f"`{REWRITE}`, or translate without it (--no-shortlist)"
            ) from None
        except (OSError, ValueError, KeyError, EOFError, zipfile.BadZipFile):
            # EOFError (an empty file) would otherwise reach click, which prints "Aborted."
            raise ArtifactError(
                f"{path} is damaged or not a shortlist: write it again with `{REWRITE}`, or "
                "translate without it (--no-shortlist)"
            ) from None


def build_shortlist(
    src: Sequence[np.ndarray],
    tgt: Sequence[np.ndarray],
    src_vocab: int,
    tgt_vocab: int,
    specials: Sequence[int],
    per_source: int = PER_SOURCE,
    frequent: int = FREQUENT,
    iterations: int = EM_ITERATIONS,
    max_pairs: int = MAX_PAIRS,
) -> Shortlist:
    """A shortlist from parallel id sequences (the training split).

    IBM Model 1 with a NULL source word, `iterations` rounds of EM over the sentence pairs read
    until `max_pairs` (source token, target token) pairs are reached.
    """
    probs, pair_src, pair_tgt = lexical_table(src, tgt, src_vocab, tgt_vocab, iterations, max_pairs)
    # Per source id, its pairs by falling probability; keep the first `per_source`.
    order = np.lexsort((-probs, pair_src))
    pair_src, pair_tgt = pair_src[order], pair_tgt[order]
    starts = np.searchsorted(pair_src, np.arange(src_vocab + 1))
    rank = np.arange(len(pair_src)) - starts[pair_src]
    keep = (rank < per_source) & (pair_src < src_vocab)  # the NULL word's list is not needed
    candidates = np.full((src_vocab, per_source), -1, dtype=np.int32)
    candidates[pair_src[keep], rank[keep]] = pair_tgt[keep]
    flat = getattr(tgt, "ids", None)  # TokenIds: one memory-mapped array, no copies
    flat = _concatenated(tgt) if flat is None else flat
    counts = np.zeros(tgt_vocab, dtype=np.int64)
    for start in range(0, len(flat), 1 << 24):
        counts += np.bincount(flat[start : start + (1 << 24)], minlength=tgt_vocab)[:tgt_vocab]
    top = np.argsort(-counts, kind="stable")[:frequent]
    always = np.unique(np.concatenate([top, np.asarray(specials)]).astype(np.int32))
    return Shortlist(candidates, always)


def _concatenated(sequences: Sequence[np.ndarray]) -> np.ndarray:
    arrays = [np.asarray(ids, dtype=np.int64) for ids in sequences]
    return np.concatenate(arrays) if arrays else np.zeros(0, dtype=np.int64)


def lexical_table(
    src: Sequence[np.ndarray],
    tgt: Sequence[np.ndarray],
    src_vocab: int,
    tgt_vocab: int,
    iterations: int = EM_ITERATIONS,
    max_pairs: int = MAX_PAIRS,
) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """IBM Model 1 translation probabilities p(t | s) for every (s, t) that meet in a pair.

    Returns (probs, source ids, target ids), one entry per distinct pair; source id
    `src_vocab` is the NULL word. Vectorised EM: every (sentence, target position, source
    position) triple is one entry of flat arrays. A corpus with more than `max_pairs` token
    pairs is read at an even stride (every k-th pair), so all of it is sampled.
    """
    null = src_vocab
    if hasattr(src, "lengths") and hasattr(tgt, "lengths"):  # TokenIds: no pass over the ids
        sizes = (np.asarray(src.lengths) + 1) * np.asarray(tgt.lengths)
    else:
        sizes = np.array([(len(s) + 1) * len(t) for s, t in zip(src, tgt, strict=True)])
    stride = max(1, -(-int(sizes.sum()) // max_pairs))  # ceil
    keys, groups = [], []
    used, group = 0, 0
    for n in range(0, len(sizes), stride):
        s = np.append(np.asarray(src[n], dtype=np.int64), null)
        t = np.asarray(tgt[n], dtype=np.int64)
        if not len(t):
            continue
        if used + len(s) * len(t) > max_pairs:
            break
        keys.append((s[None, :] * tgt_vocab + t[:, None]).ravel())  # (|t| * |s|,), t-major
        groups.append(np.repeat(np.arange(group, group + len(t)), len(s)))
        used, group = used + len(s) * len(t), group + len(t)
    if not keys:
        empty = np.empty(0, dtype=np.int64)
        return np.empty(0), empty, empty
    key = np.concatenate(keys)
    position = np.concatenate(groups)  # which target token each entry belongs to
    pairs, entry = np.unique(key, return_inverse=True)
    pair_src = pairs // tgt_vocab
    probs = np.ones(len(pairs))
    for _ in range(iterations):
        p = probs[entry]
        posterior = p / np.bincount(position, weights=p)[position]  # E: share of each s in t
        counts = np.bincount(entry, weights=posterior, minlength=len(pairs))
        totals = np.bincount(pair_src, weights=counts, minlength=src_vocab + 1)
        probs = counts / totals[pair_src]  # M: p(t | s)
    return probs, pair_src, pairs % tgt_vocab


def shortlist_of(data) -> Shortlist:
    """The shortlist of a prepared data directory's training split."""
    from nmt_cli.data.tokenizer import Tokenizer
    from nmt_cli.specials import SPECIAL_IDS

    src, tgt = data.ids("train", "src"), data.ids("train", "tgt")
    src_vocab = Tokenizer(data.src_spm).vocab_size
    tgt_vocab = Tokenizer(data.tgt_spm).vocab_size
    return build_shortlist(src, tgt, src_vocab, tgt_vocab, SPECIAL_IDS)
