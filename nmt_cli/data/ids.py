"""Token ids on disk: one flat array of all ids plus the offsets where each sentence starts.

For a prefix `train.src` the files are `train.src.ids.npy` (uint16, or uint32 when the
vocabulary has 65,536 pieces or more) and `train.src.offsets.npy` (int64, N + 1 entries,
sentence i is ids[offsets[i]:offsets[i + 1]]). Both are plain .npy files (no pickles), loaded
with memory mapping, so opening a large corpus is instant and costs no RAM until read.
"""

from __future__ import annotations

import contextlib
import io
import itertools
from collections.abc import Iterable, Iterator, Sequence
from pathlib import Path
from typing import BinaryIO

import numpy as np

from nmt_cli.atomic import atomic_open
from nmt_cli.errors import ArtifactError

IDS_SUFFIX = ".ids.npy"
OFFSETS_SUFFIX = ".offsets.npy"
_UINT16_LIMIT = 1 << 16
_OFFSET_DTYPE = np.dtype(np.int64)
_NPY_HEADER_BYTES = 128


def ids_paths(prefix: Path) -> tuple[Path, Path]:
    """The ids file and the offsets file of `prefix`."""
    return Path(f"{prefix}{IDS_SUFFIX}"), Path(f"{prefix}{OFFSETS_SUFFIX}")


def id_dtype(vocab_size: int) -> np.dtype:
    """The smallest unsigned integer type that holds every id of the vocabulary."""
    return np.dtype(np.uint16 if vocab_size < _UINT16_LIMIT else np.uint32)


def write_token_ids(prefix: Path, sequences: Iterable[Sequence[int]], vocab_size: int) -> None:
    """Write `sequences` (ids without BOS/EOS) under `prefix`; ValueError for an id out of range."""
    with TokenIdsWriter(prefix, vocab_size) as writer:
        writer.add(list(sequences))


class TokenIdsWriter:
    """Writes token ids chunk by chunk straight into the .npy files, holding only one chunk.

    Neither the number of ids nor the number of sentences need be known in advance: each
    file starts with the header of an empty array, which closing rewrites with the final
    length. A 1-D header is always 128 bytes (numpy pads it to a multiple of 64 and no length
    needs more than 20 digits), so the files are byte for byte what `np.save` writes.
    """

    def __init__(self, prefix: Path, vocab_size: int) -> None:
        self.vocab_size = vocab_size
        self.dtype = id_dtype(vocab_size)
        self.total = 0  # ids written so far
        self.sentences = 0  # sentences written so far
        self._stack = contextlib.ExitStack()
        ids_path, offsets_path = ids_paths(prefix)
        self._ids = self._stack.enter_context(atomic_open(ids_path, "wb"))
        self._offsets = self._stack.enter_context(atomic_open(offsets_path, "wb"))
        self._ids.write(_npy_header(self.dtype, 0))
        self._offsets.write(_npy_header(_OFFSET_DTYPE, 0))
        self._offsets.write(np.zeros(1, _OFFSET_DTYPE).tobytes())

    def add(self, sequences: Sequence[Sequence[int]]) -> None:
        """Append sentences (lists of ids without BOS/EOS); ValueError for an id out of range."""
        lengths = np.fromiter(map(len, sequences), dtype=_OFFSET_DTYPE, count=len(sequences))
        count = int(lengths.sum())
        try:
            flat = np.fromiter(itertools.chain.from_iterable(sequences), self.dtype, count=count)
        except (OverflowError, ValueError):
            raise ValueError(f"a token id in this chunk does not fit {self.dtype}") from None
        if flat.size and int(flat.max()) >= self.vocab_size:
            raise ValueError(
                f"token id {int(flat.max())} is outside the vocabulary of {self.vocab_size}"
            )
        self._ids.write(flat.tobytes())
        self._offsets.write((np.cumsum(lengths) + self.total).tobytes())
        self.total += count
        self.sentences += len(sequences)

    def __enter__(self) -> TokenIdsWriter:
        return self

    def __exit__(self, kind: type[BaseException] | None, *rest: object) -> None:
        if kind is None:
            self._finish_header(self._ids, self.dtype, self.total)
            self._finish_header(self._offsets, _OFFSET_DTYPE, self.sentences + 1)
        self._stack.__exit__(kind, *rest)  # renames into place, or removes the temporary files

    @staticmethod
    def _finish_header(handle: BinaryIO, dtype: np.dtype, length: int) -> None:
        handle.seek(0)
        handle.write(_npy_header(dtype, length))
        handle.seek(0, io.SEEK_END)


def _npy_header(dtype: np.dtype, length: int) -> bytes:
    """The .npy (version 1.0) header of a flat array of `length` items of `dtype`."""
    buffer = io.BytesIO()
    header = {"descr": np.lib.format.dtype_to_descr(dtype), "fortran_order": False}
    np.lib.format.write_array_header_1_0(buffer, {**header, "shape": (length,)})
    data = buffer.getvalue()
    assert len(data) == _NPY_HEADER_BYTES, "a 1-D .npy header is always 128 bytes"
    return data


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
