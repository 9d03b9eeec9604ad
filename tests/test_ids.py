"""The binary token-id store: round trips, dtypes, memory mapping and refusing broken files."""

from __future__ import annotations

import numpy as np
import pytest

from nmt_cli.data.ids import ids_paths, read_token_ids, write_token_ids
from nmt_cli.errors import ArtifactError


def test_round_trip_with_empty_sequences(tmp_path):
    sequences = [[5, 6, 7], [], [8], [], [9, 10]]
    write_token_ids(tmp_path / "train.src", sequences, vocab_size=100)
    ids = read_token_ids(tmp_path / "train.src")
    assert len(ids) == 5
    assert [row.tolist() for row in ids] == sequences
    assert ids.lengths.tolist() == [3, 0, 1, 0, 2]
    assert ids.lengths.dtype == np.int64
    assert ids[-1].tolist() == [9, 10]
    with pytest.raises(IndexError):
        ids[5]


def test_small_vocabulary_is_uint16_and_memory_mapped(tmp_path):
    write_token_ids(tmp_path / "x", [[65_534, 0]], vocab_size=65_535)
    ids = read_token_ids(tmp_path / "x")
    assert ids.ids.dtype == np.uint16
    assert isinstance(ids.ids, np.memmap)
    assert ids[0].tolist() == [65_534, 0]


def test_large_vocabulary_is_uint32(tmp_path):
    write_token_ids(tmp_path / "x", [[70_000, 1], [65_536]], vocab_size=65_536 * 2)
    ids = read_token_ids(tmp_path / "x")
    assert ids.ids.dtype == np.uint32
    assert [row.tolist() for row in ids] == [[70_000, 1], [65_536]]
    write_token_ids(tmp_path / "y", [[1]], vocab_size=65_536)
    assert read_token_ids(tmp_path / "y").ids.dtype == np.uint32


def test_no_sequences_at_all(tmp_path):
    write_token_ids(tmp_path / "empty", [], vocab_size=10)
    ids = read_token_ids(tmp_path / "empty")
    assert len(ids) == 0
    assert ids.lengths.tolist() == []


@pytest.mark.parametrize("bad", [[[10]], [[-1]], [[70_000]]])
def test_ids_outside_the_vocabulary_are_refused(tmp_path, bad):
    with pytest.raises(ValueError):
        write_token_ids(tmp_path / "x", bad, vocab_size=10)


def test_missing_files_are_an_artifact_error(tmp_path):
    with pytest.raises(ArtifactError, match="is missing"):
        read_token_ids(tmp_path / "none")


def test_offsets_that_do_not_match_are_an_artifact_error(tmp_path):
    write_token_ids(tmp_path / "x", [[1, 2], [3]], vocab_size=10)
    _, offsets = ids_paths(tmp_path / "x")
    np.save(offsets, np.array([0, 2, 5], dtype=np.int64))
    with pytest.raises(ArtifactError, match="does not match"):
        read_token_ids(tmp_path / "x")


def test_wrong_dtype_or_garbage_is_an_artifact_error(tmp_path):
    write_token_ids(tmp_path / "x", [[1, 2]], vocab_size=10)
    ids_file, offsets_file = ids_paths(tmp_path / "x")
    np.save(ids_file, np.array([1.0, 2.0]))
    with pytest.raises(ArtifactError, match="float64"):
        read_token_ids(tmp_path / "x")
    offsets_file.write_bytes(b"garbage")
    with pytest.raises(ArtifactError):
        read_token_ids(tmp_path / "x")
