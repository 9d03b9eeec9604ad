"""Seeded choices of k items out of n that need no list of all n: the training sentences
SentencePiece sees on a large corpus.

Item i gets the key splitmix64(base + i · γ), a bijection of i for a fixed base (γ is odd and
every step of the mixer is invertible), so no two items share a key; `base` comes from the
seed and the purpose, so choices made for different purposes are independent.
The k items with the smallest keys are chosen, in key order: the same as sorting all n keys
(`np.argsort(item_keys(0, n, ...))[:k]`), but computed a million keys at a time, so memory
holds k keys and one block, whatever n is.
"""

from __future__ import annotations

import hashlib

import numpy as np

_GAMMA = np.uint64(0x9E3779B97F4A7C15)
_BLOCK = 1 << 20


def _base(seed: int, purpose: str) -> np.uint64:
    digest = hashlib.blake2b(f"{purpose}:{seed}".encode(), digest_size=8).digest()
    return np.frombuffer(digest, dtype="<u8")[0]


def item_keys(start: int, stop: int, seed: int, purpose: str) -> np.ndarray:
    """(stop - start,) uint64: the keys of items start..stop-1 (Steele et al.'s splitmix64)."""
    z = np.arange(start, stop, dtype=np.uint64) * _GAMMA + _base(seed, purpose)
    z = (z ^ (z >> np.uint64(30))) * np.uint64(0xBF58476D1CE4E5B9)
    z = (z ^ (z >> np.uint64(27))) * np.uint64(0x94D049BB133111EB)
    return z ^ (z >> np.uint64(31))


def smallest_keys(n: int, k: int, seed: int, purpose: str) -> np.ndarray:
    """(min(k, n),) int64: the items with the k smallest keys among 0..n-1, smallest first."""
    k = min(k, n)
    best_keys = np.zeros(0, dtype=np.uint64)
    best_items = np.zeros(0, dtype=np.int64)
    for start in range(0, n, _BLOCK):
        stop = min(n, start + _BLOCK)
        keys = np.concatenate((best_keys, item_keys(start, stop, seed, purpose)))
        items = np.concatenate((best_items, np.arange(start, stop, dtype=np.int64)))
        if len(keys) > k:
            keep = np.argpartition(keys, k - 1)[:k] if k else np.zeros(0, dtype=np.int64)
            keys, items = keys[keep], items[keep]
        best_keys, best_items = keys, items
    return best_items[np.argsort(best_keys)]
