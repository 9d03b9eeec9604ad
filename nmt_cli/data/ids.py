"""Token ids on disk: one flat array of all ids plus the offsets where each sentence starts.

For a prefix `train.src` the files are `train.src.ids.npy` (uint16, or uint32 when the
vocabulary has 65,536 pieces or more) and `train.src.offsets.npy` (int64, N + 1 entries,
sentence i is ids[offsets[i]:offsets[i + 1]]). Both are plain .npy files (no pickles), loaded
with memory mapping, so opening a large corpus is instant and costs no RAM until read.
"""

from __future__ import annotations

from array import array
from collections.abc import Iterable, Iterator, Sequence
from pathlib import Path

import numpy as np

from nmt_cli.atomic import atomic_open
from nmt_cli.errors import ArtifactError

IDS_SUFFIX = ".ids.npy"
OFFSETS_SUFFIX = ".offsets.npy"
_UINT16_LIMIT = 1 << 16


def ids_paths(prefix: Path) -> tuple[Path, Path]:
    """The ids file and the offsets file of `prefix`."""
    return Path(f"{prefix}{IDS_SUFFIX}"), Path(f"{prefix}{OFFSETS_SUFFIX}")


def id_dtype(vocab_size: int) -> np.dtype:
    """The smallest unsigned integer type that holds every id of the vocabulary."""
    return np.dtype(np.uint16 if vocab_size < _UINT16_LIMIT else np.uint32)


def write_token_ids(prefix: Path, sequences: Iterable[Sequence[int]], vocab_size: int) -> None:
    """Write `sequences` (ids without BOS/EOS) under `prefix`; ValueError for an id out of range."""
    dtype = id_dtype(vocab_size)
    flat = array("H" if dtype == np.uint16 else "I")
    offsets = array("q", [0])
    for sequence in sequences:
        try:
            flat.extend(sequence)
        except OverflowError:
            raise ValueError(f"a token id in {list(sequence)} does not fit {dtype}") from None
        offsets.append(len(flat))
    ids = np.frombuffer(flat, dtype=dtype) if flat else np.zeros(0, dtype)
    if ids.size and int(ids.max()) >= vocab_size:
        raise ValueError(f"token id {int(ids.max())} is outside the vocabulary of {vocab_size}")
    ids_path, offsets_path = ids_paths(prefix)
    _save(ids_path, ids)
    _save(offsets_path, np.frombuffer(offsets, dtype=np.int64))


def _save(path: Path, array_: np.ndarray) -> None:
    with atomic_open(path, "wb") as handle:
        np.save(handle, array_, allow_pickle=False)


class TokenIds:
    """The token ids of one side of one split, memory-mapped; `ids[i]` is sentence i."""

    def __init__(self, ids: np.ndarray, offsets: np.ndarray) -> None:
        self.ids = ids  # (total tokens,) uint16 or uint32
        self.offsets = offsets  # (N + 1,) int64
        self.lengths = np.diff(offsets)  # (N,) int64

    def __len__(self) -> int:
        return len(self.offsets) - 1

    def __getitem__(self, i: int) -> np.ndarray:
        """The ids of sentence `i` (no BOS/EOS); negative indices count from the end."""
        n = len(self)
        if not -n <= i < n:
            raise IndexError(f"sentence {i} out of range for {n} sentences")
        i %= n
        return self.ids[self.offsets[i] : self.offsets[i + 1]]

    def __iter__(self) -> Iterator[np.ndarray]:
        return (self[i] for i in range(len(self)))


def read_token_ids(prefix: Path) -> TokenIds:
    """Open the ids written under `prefix`; ArtifactError naming the file if unusable."""
    ids_path, offsets_path = ids_paths(prefix)
    ids = _load(ids_path, (np.dtype(np.uint16), np.dtype(np.uint32)))
    offsets = _load(offsets_path, (np.dtype(np.int64),))
    if not _offsets_match(offsets, len(ids)):
        raise ArtifactError(
            f"{offsets_path} does not match {ids_path.name} (corrupt or half-written): "
            "re-create the data directory with `nmt prepare`"
        )
    return TokenIds(ids, offsets)


def _load(path: Path, dtypes: tuple[np.dtype, ...]) -> np.ndarray:
    """Memory-map a one-dimensional .npy of one of `dtypes`."""
    try:
        array_ = np.load(path, mmap_mode="r", allow_pickle=False)
    except FileNotFoundError:
        raise ArtifactError(
            f"{path} is missing: re-create the data directory with `nmt prepare`"
        ) from None
    except (OSError, ValueError) as exc:
        raise ArtifactError(
            f"{path} is not a valid .npy file ({exc}): re-run `nmt prepare`"
        ) from None
    if array_.ndim != 1 or array_.dtype not in dtypes:
        raise ArtifactError(
            f"{path} holds a {array_.dtype} array of shape {array_.shape}, "
            f"expected a flat {' or '.join(map(str, dtypes))} array: re-run `nmt prepare`"
        )
    return array_


def _offsets_match(offsets: np.ndarray, total: int) -> bool:
    """True when offsets start at 0, never decrease and end at the number of ids."""
    if len(offsets) == 0 or offsets[0] != 0 or offsets[-1] != total:
        return False
    return bool(np.all(offsets[1:] >= offsets[:-1]))
