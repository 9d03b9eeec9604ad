"""Which sentence pairs were seen before: exactly (a set of pairs) or by a 64-bit fingerprint.

Both answer the same question for a chunk of pairs in corpus order — is this the first time
this (source, target) pair appears? — so the first of several repeats is kept.

`SeenPairs` holds the pairs themselves: exact, but the memory of the whole corpus again.
`SeenFingerprints` holds 8 bytes per distinct pair (BLAKE2b of "source\\ntarget", 64 bits) in
sorted numpy arrays, 40 MB for 5 million pairs. Two different pairs share a fingerprint with
probability 2⁻⁶⁴; by the birthday bound the chance that any two of n distinct pairs collide is
about n² / 2⁶⁵: 3 × 10⁻⁸ for 1 million pairs, 7 × 10⁻⁷ for 5 million, 3 × 10⁻⁶ for 10 million,
and a collision would only drop one pair as if it were a repeat. That is far below anything
that matters for training, so 64 bits suffice and 128 would only double the memory.
"""

from __future__ import annotations

import hashlib
from collections.abc import Sequence

import numpy as np

_FINGERPRINT = np.dtype("<u8")


class SeenPairs:
    """Exact de-duplication: the set of pairs kept so far."""

    def __init__(self) -> None:
        self._seen: set[tuple[str, str]] = set()

    def first_time(self, pairs: Sequence[tuple[str, str]]) -> list[bool]:
        """For each pair in order, True when neither an earlier pair nor an earlier chunk had it."""
        fresh = []
        for pair in pairs:
            fresh.append(pair not in self._seen)
            self._seen.add(pair)
        return fresh


def fingerprints(pairs: Sequence[tuple[str, str]]) -> np.ndarray:
    """(N,) uint64: BLAKE2b-64 of each pair's "source\\ntarget" (cleaned text has no newline)."""
    digests = b"".join(
        hashlib.blake2b(f"{src}\n{tgt}".encode(), digest_size=8).digest() for src, tgt in pairs
    )
    return np.frombuffer(digests, dtype=_FINGERPRINT)


class SeenFingerprints:
    """De-duplication by fingerprint, in memory that grows by 8 bytes per distinct pair.

    The fingerprints live in a few sorted arrays ("levels") whose sizes roughly double from the
    newest to the oldest; a chunk is looked up in each by binary search and added as a new level,
    and two levels merge once the newer is at least half the size of the older, so every
    fingerprint is copied only about log₂(n / chunk) times.
    """

    def __init__(self) -> None:
        self._levels: list[np.ndarray] = []

    def __len__(self) -> int:
        return sum(len(level) for level in self._levels)

    def first_time(self, pairs: Sequence[tuple[str, str]]) -> list[bool]:
        """For each pair in order, True when neither an earlier pair nor an earlier chunk had it."""
        return self.fresh(fingerprints(pairs)).tolist()

    def fresh(self, keys: np.ndarray) -> np.ndarray:
        """(N,) bool: for each of a chunk's fingerprints `keys` (N,), in order, True when
        neither an earlier key of the chunk nor an earlier chunk had it."""
        unique, first = np.unique(keys, return_index=True)  # first: where each key first occurs
        new = ~self._contains(unique)
        fresh = np.zeros(len(keys), dtype=bool)
        fresh[first[new]] = True
        self._add(unique[new])
        return fresh

    def _contains(self, keys: np.ndarray) -> np.ndarray:
        """(K,) bool: which of the sorted `keys` some level already holds."""
        found = np.zeros(len(keys), dtype=bool)
        for level in self._levels:
            at = np.minimum(np.searchsorted(level, keys), len(level) - 1)
            found |= level[at] == keys
        return found

    def _add(self, keys: np.ndarray) -> None:
        """Add sorted keys that no level holds, merging levels of similar size."""
        if not len(keys):
            return
        self._levels.append(keys)
        while len(self._levels) > 1 and 2 * len(self._levels[-1]) >= len(self._levels[-2]):
            newer, older = self._levels.pop(), self._levels.pop()
            merged = np.concatenate((older, newer))
            merged.sort(kind="stable")  # two sorted runs: the merge is linear
            self._levels.append(merged)
