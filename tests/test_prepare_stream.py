"""Streaming `nmt prepare` against its in-memory definitions, on small corpora.

De-duplication by fingerprint keeps exactly the pairs an exact set keeps; the seeded choices
(held-out dev/test: a permutation of every position; the SentencePiece sample: sorting
every key) equal their in-memory definitions; ids written chunk by
chunk equal ids written at once; a corpus whose sides part deep in the file is refused with the
line number; an interrupted prepare leaves nothing behind.
"""

from __future__ import annotations

import json
import multiprocessing
import random
import re
import subprocess
import sys
import time
from pathlib import Path

import numpy as np
import pytest
from cli_runner import invoke

import nmt_cli.data.prepare as prepare_module
from nmt_cli.data import sample as sample_module
from nmt_cli.data import splits as splits_module
from nmt_cli.data.clean import (
    CleanOptions,
    PairCleaner,
    clean_pairs,
    count_tokens,
    filter_chunk,
    ratio_length,
)
from nmt_cli.data.corpus import ParallelSource
from nmt_cli.data.dedup import SeenFingerprints, fingerprints
from nmt_cli.data.ids import TokenIdsWriter, ids_paths, write_token_ids
from nmt_cli.data.prepare import PrepareOptions, prepare
from nmt_cli.data.sample import item_keys, smallest_keys
from nmt_cli.errors import InputError

WORDS = "der die ein Hund Katze Mann Frau sieht läuft auf unter Tisch Haus rot groß".split()


def _pairs(n: int, seed: int = 0, repeat: float = 0.3) -> list[tuple[str, str]]:
    """Pairs with repeats (some only equal after normalisation), empty sides and odd spacing."""
    rng = random.Random(seed)
    pairs: list[tuple[str, str]] = []
    for _ in range(n):
        if pairs and rng.random() < repeat:
            src, tgt = rng.choice(pairs)
            pairs.append((src.replace(" ", "  ", 1), tgt) if rng.random() < 0.5 else (src, tgt))
            continue
        words = rng.choices(WORDS, k=rng.randint(0 if rng.random() < 0.02 else 1, 6))
        pairs.append((" ".join(words), " ".join(w.upper() for w in reversed(words))))
    return pairs


def _write(directory: Path, pairs, name: str = "train") -> ParallelSource:
    directory.mkdir(parents=True, exist_ok=True)
    paths = []
    for side in (0, 1):
        path = directory / f"{name}.{side}"
        path.write_text("".join(pair[side] + "\n" for pair in pairs), encoding="utf-8")
        paths.append(path)
    return ParallelSource(src=paths[0], tgt=paths[1])


def _lines(path: Path) -> list[str]:
    return path.read_text(encoding="utf-8").splitlines()


# De-duplication -------------------------------------------------------------------------------


@pytest.mark.parametrize("chunk", [1, 7, 100, 5_000])
def test_streaming_dedup_keeps_what_the_exact_set_keeps(chunk):
    pairs = _pairs(3_000)
    exact = clean_pairs(pairs, CleanOptions())
    cleaner = PairCleaner(CleanOptions())  # fingerprints, chunk by chunk
    kept = [
        pair
        for start in range(0, len(pairs), chunk)
        for pair in cleaner.clean(pairs[start : start + chunk])
    ]
    assert kept == exact.pairs
    assert cleaner.counts == exact.counts
    assert exact.counts.duplicate > 500 and exact.counts.normalized > 100

    writer = PairCleaner(CleanOptions())  # the streaming pass: chunks packed for writing
    blocks = [
        writer.keep(filter_chunk(pairs[start : start + chunk], writer.options, writer.wants_keys))
        for start in range(0, len(pairs), chunk)
    ]
    src, tgt = ("".join(block[side] for block in blocks) for side in (0, 1))
    assert list(zip(src.splitlines(), tgt.splitlines(), strict=True)) == exact.pairs
    assert writer.counts == exact.counts


def test_fingerprint_levels_answer_like_a_set_over_many_chunks():
    rng = random.Random(3)
    seen, reference = SeenFingerprints(), set()
    for _ in range(60):
        chunk = [(str(rng.randrange(4_000)), "x") for _ in range(rng.randint(0, 300))]
        expected = []
        for pair in chunk:
            expected.append(pair not in reference)
            reference.add(pair)
        assert seen.first_time(chunk) == expected
    assert len(seen) == len(reference)


def test_fingerprints_are_stable_and_tell_source_from_target():
    keys = fingerprints([("a", "b"), ("a b", ""), ("a", "b")])
    assert keys.dtype == np.uint64 and keys[0] == keys[2] and keys[0] != keys[1]
    assert fingerprints([("a", "b")])[0] == keys[0]  # no per-process salt: runs agree


# Lengths for the filters ----------------------------------------------------------------------

_RATIO_WORD = re.compile(r"\S*\w\S*")


def test_length_fast_path_equals_the_regex_definition():
    rng = random.Random(5)
    latin1 = "".join(chr(code) for code in range(256))  # the bytes fast path: every character
    alphabet = latin1 + "ab Z9_.,;!?-'\u00e9\u00df     \u00a0\u2013\u2028\u4e00\u3002\uff01\u3042"
    for _ in range(20_000):
        text = "".join(rng.choice(alphabet) for _ in range(rng.randint(0, 20)))
        if not re.search("[\u3000-\u9fff\uff00-\uffef]", text):
            assert count_tokens(text) == len(text.split())
            assert ratio_length(text) == len(_RATIO_WORD.findall(text))
    assert ratio_length("Ein Mann . , fährt_ Rad.") == 4
    assert count_tokens("我喜欢 tea。") == 5


# Seeded choices -------------------------------------------------------------------------------


@pytest.mark.parametrize(("n", "k"), [(1, 1), (10, 3), (1_000, 0), (1_000, 37), (500, 500)])
def test_smallest_keys_in_blocks_equal_sorting_every_key(monkeypatch, n, k):
    expected = np.argsort(item_keys(0, n, seed=4, purpose="spm"))[:k]
    monkeypatch.setattr(sample_module, "_BLOCK", 9)  # many blocks, so the merge is exercised
    assert smallest_keys(n, k, seed=4, purpose="spm").tolist() == expected.tolist()
    assert len(set(item_keys(0, n, 4, "spm").tolist())) == n  # no ties


def _held_out_by_definition(pairs, dev: int, test: int, seed: int):
    """The in-memory definition: clean exactly, permute every position, hold out the front."""
    cleaned = clean_pairs(pairs, CleanOptions()).pairs
    order = np.random.default_rng(seed).permutation(len(cleaned)).tolist()
    dev_ids, test_ids = set(order[:dev]), set(order[dev : dev + test])
    rest = [p for i, p in enumerate(cleaned) if i not in dev_ids | test_ids]
    return rest, [cleaned[i] for i in sorted(dev_ids)], [cleaned[i] for i in sorted(test_ids)]


@pytest.mark.parametrize(("seed", "workers"), [(1, False), (2, True)])
def test_held_out_dev_and_test_follow_the_definition(tmp_path, monkeypatch, seed, workers):
    if workers:  # small chunks, so that worker processes filter most of them
        monkeypatch.setattr(splits_module, "_CHUNK", 97)
        monkeypatch.setattr(splits_module, "_SERIAL_CHUNKS", 2)
    pairs = _pairs(2_000)
    source = _write(tmp_path / "corpus", pairs)
    out = tmp_path / f"data{seed}"
    options = PrepareOptions(
        train=source, output=out, dev_size=50, test_size=30, seed=seed, vocab_size=80
    )
    report = prepare(options)
    train, dev, test = _held_out_by_definition(pairs, 50, 30, seed)
    for name, expected in (("train", train), ("dev", dev), ("test", test)):
        assert (
            list(zip(_lines(out / f"{name}.src"), _lines(out / f"{name}.tgt"), strict=True))
            == expected
        )
    counts = json.loads((out / "prepare.json").read_text())["counts"]
    exact = clean_pairs(pairs, CleanOptions()).counts
    assert counts["train"] == {"origin": "corpus", **exact.to_json(), "held_out": 80}
    assert [split.pairs for split in report.splits] == [exact.kept - 80, 50, 30]
    assert not list(out.glob("cleaned.*"))  # the pre-hold-out text is gone


def test_another_seed_holds_out_other_pairs(tmp_path):
    pairs = _pairs(2_000, repeat=0)
    a = _held_out_by_definition(pairs, 50, 0, seed=1)[1]
    b = _held_out_by_definition(pairs, 50, 0, seed=2)[1]
    assert a != b


def test_sentencepiece_sample_is_all_lines_in_order_when_small(tmp_path, monkeypatch):
    seen = []
    real = prepare_module.train_tokenizer

    def recording(sentences, *args, **kwargs):
        seen.append(list(sentences))
        return real(sentences, *args, **kwargs)

    monkeypatch.setattr(prepare_module, "train_tokenizer", recording)
    source = _write(tmp_path / "c", _pairs(600, repeat=0))
    out = tmp_path / "small"
    prepare(PrepareOptions(train=source, output=out, vocab_size=80))
    assert seen == [_lines(out / "train.src") + _lines(out / "train.tgt")]

    monkeypatch.setattr(prepare_module, "_SAMPLE_SENTENCES", 200)  # 100 pairs per side, joint
    seen.clear()
    out = tmp_path / "sampled"
    prepare(PrepareOptions(train=source, output=out, vocab_size=80, seed=3))
    n = len(_lines(out / "train.src"))
    chosen = sorted(np.argsort(item_keys(0, n, 3, "spm"))[:100].tolist())
    src, tgt = _lines(out / "train.src"), _lines(out / "train.tgt")
    assert seen == [[src[i] for i in chosen] + [tgt[i] for i in chosen]]
    assert sorted(p.name for p in out.iterdir()) == sorted(
        p.name for p in (tmp_path / "small").iterdir()
    )


# Token ids ------------------------------------------------------------------------------------


def test_ids_written_in_chunks_equal_ids_written_at_once(tmp_path):
    rng = random.Random(1)
    sequences = [[rng.randrange(300) for _ in range(rng.randint(0, 9))] for _ in range(1_000)]
    write_token_ids(tmp_path / "once", sequences, vocab_size=300)
    with TokenIdsWriter(tmp_path / "chunks", vocab_size=300) as writer:
        for start in range(0, len(sequences), 64):
            writer.add(sequences[start : start + 64])
    for once, chunks in zip(
        ids_paths(tmp_path / "once"), ids_paths(tmp_path / "chunks"), strict=True
    ):
        assert once.read_bytes() == chunks.read_bytes()
    assert np.load(ids_paths(tmp_path / "once")[0]).tolist() == [i for s in sequences for i in s]


def test_a_failed_ids_writer_leaves_no_file(tmp_path):
    with pytest.raises(ValueError), TokenIdsWriter(tmp_path / "x", vocab_size=10) as writer:
        writer.add([[1, 2]])
        writer.add([[10]])
    assert list(tmp_path.iterdir()) == []


# Refusals and interruptions -------------------------------------------------------------------


def _nothing_left(out: Path) -> None:
    assert not out.exists()
    assert not [p for p in out.parent.iterdir() if p.name.startswith(f".{out.name}.")]


def test_sides_that_part_at_line_900001_are_refused_with_the_line(tmp_path):
    src, tgt = tmp_path / "deep.de", tmp_path / "deep.en"
    src.write_bytes(b"ein Hund\n" * 900_001)
    tgt.write_bytes(b"a dog\n" * 900_000)
    out = tmp_path / "out"
    result = invoke("prepare", "--src", src, "--tgt", tgt, "--vocab-size", 80, "-o", out)
    assert result.exit_code == 2
    message = result.stderr.strip()
    assert "\n" not in message and "Traceback" not in result.output
    assert f"{src} has 900,001 lines but {tgt} has 900,000" in message
    assert f"line 900,001 of {src} has no partner" in message
    _nothing_left(out)


def test_a_longer_target_names_its_first_unpaired_line(tmp_path):
    source = _write(tmp_path / "c", [("a", "b")] * 5)
    source.tgt.write_text("b\n" * 7, encoding="utf-8")
    with pytest.raises(InputError, match=rf"line 6 of {re.escape(str(source.tgt))} has no partner"):
        prepare(PrepareOptions(train=source, output=tmp_path / "out", vocab_size=80))
    _nothing_left(tmp_path / "out")


@pytest.mark.parametrize("where", ["reading", "encoding"])
def test_an_interrupted_prepare_leaves_no_data_directory(tmp_path, monkeypatch, where):
    def interrupt(*args, **kwargs):
        raise KeyboardInterrupt

    if where == "reading":
        monkeypatch.setattr(PairCleaner, "keep", interrupt)
    else:
        monkeypatch.setattr(prepare_module.Tokenizer, "encode_batch", interrupt)
    source = _write(tmp_path / "c", _pairs(300))
    out = tmp_path / "out"
    with pytest.raises(KeyboardInterrupt):
        prepare(PrepareOptions(train=source, output=out, dev_size=10, vocab_size=80))
    _nothing_left(out)


def test_an_interrupt_while_workers_filter_stops_them_and_leaves_nothing(tmp_path, monkeypatch):
    # Chunks far larger than a pipe holds, so that workers and senders are busy when the
    # interrupt comes (multiprocessing.Pool's shutdown could hang on a full pipe then).
    monkeypatch.setattr(splits_module, "_CHUNK", 2_000)
    monkeypatch.setattr(splits_module, "_SERIAL_CHUNKS", 1)
    real, calls = PairCleaner.keep, []

    def keep_then_interrupt(self, chunk):
        calls.append(1)
        if len(calls) == 4:  # the third chunk from the workers
            raise KeyboardInterrupt
        return real(self, chunk)

    monkeypatch.setattr(PairCleaner, "keep", keep_then_interrupt)
    long_pairs = [(f"{src} {'lang ' * 40}{i}", tgt) for i, (src, tgt) in enumerate(_pairs(30_000))]
    source = _write(tmp_path / "c", long_pairs)
    out = tmp_path / "out"
    before = {child.pid for child in multiprocessing.active_children()}
    with pytest.raises(KeyboardInterrupt):
        prepare(PrepareOptions(train=source, output=out, vocab_size=80))
    _nothing_left(out)
    assert len(calls) == 4
    left = [c for c in multiprocessing.active_children() if c.pid not in before]
    assert not left  # the workers were stopped and reaped


@pytest.mark.skipif(sys.platform != "linux", reason="forked workers and /proc: Linux only")
def test_workers_see_their_pipe_close_when_the_main_process_dies(tmp_path):
    # Each worker closes the pipe ends it inherited but does not own, so EOF reaches it when
    # the process that feeds it is gone (else it would outlive a killed `nmt prepare`).
    script = tmp_path / "feeder.py"
    script.write_text(
        "import os, sys\n"
        "from nmt_cli.data import splits\n"
        "workers = splits._Filterers((None, False))\n"
        "workers.submit([('a', 'b')])\n"
        "workers.result()\n"
        "print(' '.join(str(p.pid) for p in workers._processes), flush=True)\n"
        "os._exit(0)  # no cleanup: as if killed\n",
        encoding="utf-8",
    )
    run = subprocess.run(
        [sys.executable, str(script)], capture_output=True, text=True, timeout=30, check=True
    )
    pids = [int(pid) for pid in run.stdout.split()]
    assert len(pids) == splits_module._WORKERS
    deadline = time.monotonic() + 10
    while time.monotonic() < deadline and any(_alive(pid) for pid in pids):
        time.sleep(0.05)
    assert not any(_alive(pid) for pid in pids)


def _alive(pid: int) -> bool:
    try:
        with open(f"/proc/{pid}/stat", encoding="ascii") as stat:
            return stat.read().split(") ")[-1][0] != "Z"  # a zombie has ended
    except FileNotFoundError:
        return False


def test_sentencepiece_trains_on_the_first_16k_characters_of_a_longer_line(tmp_path):
    """A line over the cut is cut for training only (encoded whole): a corpus of one document
    per line still trains, and a repetitive word of 100,000 letters costs no more than one of
    16,384 (it took 10 s)."""
    cut = prepare_module._TRAINING_LINE_CHARS
    path = tmp_path / "train.src"
    path.write_text("short line\n" + "a" * 100_000 + "\n" + "b" * cut + "\n", encoding="utf-8")
    seen = list(prepare_module._TrainingSample((path,)))
    assert seen == ["short line", "a" * cut, "b" * cut]
    rng = random.Random(0)
    words = ["alpha", "beta", "gamma", "delta", "zeta", "theta", "iota", "kappa"]
    src, tgt = tmp_path / "doc.src", tmp_path / "doc.tgt"  # 20 documents of ~20,000 characters
    src.write_text("".join(" ".join(rng.choices(words, k=3500)) + "\n" for _ in range(20)))
    tgt.write_text("".join(" ".join(rng.choices(words, k=3500)).upper() + "\n" for _ in range(20)))
    out = tmp_path / "data"
    result = invoke("prepare", "--src", src, "--tgt", tgt, "--max-len", "0", "--vocab-size", "60",
                    "-o", out)  # fmt: skip
    assert result.exit_code == 0, result.output
    from nmt_cli.specials import UNK_ID

    ids = np.load(out / "train.src.ids.npy")
    assert ids.size > 20 * 3500 and UNK_ID not in ids  # every word encoded, none unknown
