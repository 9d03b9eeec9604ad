"""The shared data: `nmt prepare` once, then the same SentencePiece pieces for the peers.

Every system trains on the pairs `nmt prepare` kept (cleaned, de-duplicated) and uses its one
joint SentencePiece model. The peers read those splits as space-separated pieces, with the
piece list built as the peers' notes describe: every piece seen in train.sp.{de,en}, most
frequent first (vocab.counts.txt for OpenNMT-py, vocab.txt for Joey NMT).
"""

from __future__ import annotations

import gzip
import shutil
from collections import Counter
from dataclasses import dataclass
from pathlib import Path

import procs
from layout import OUR_NMT, Layout

SPLITS = {"train": "train", "dev": "val", "test": "test_2016_flickr"}  # nmt name -> file stem
LANGS = {"src": "de", "tgt": "en"}


@dataclass(frozen=True)
class TestSet:
    """The test sentences every system translates: raw source, pieces, raw reference."""

    raw_src: Path
    pieces_src: Path
    ref: Path
    sentences: int


def prepare_command(data: Path, layout: Layout, vocab_size: int) -> list:
    """The `nmt prepare` command line for Multi30k de→en in `data`."""
    argv = [OUR_NMT, "prepare"]
    for prefix, split in (("--", "train"), ("--dev-", "dev"), ("--test-", "test")):
        stem = data / SPLITS[split]
        argv += [f"{prefix}src", f"{stem}.de.gz", f"{prefix}tgt", f"{stem}.en.gz"]
    argv += ["--src-lang", "de", "--tgt-lang", "en", "--vocab-size", str(vocab_size), "--joint"]
    return argv + ["-o", layout.nmt_data, "--force"]


def prepare(data: Path, layout: Layout, vocab_size: int) -> procs.ProcResult | None:
    """Run `nmt prepare` unless the data directory was made with the same command."""
    cmd = prepare_command(data, layout, vocab_size)
    stamp = layout.work / "nmt-data.stamp"
    text = procs.shown(cmd)
    if stamp.exists() and stamp.read_text() == text and (layout.nmt_data / "prepare.json").exists():
        return None
    stamp.unlink(missing_ok=True)
    log = layout.log("prepare")
    result = procs.check(procs.run(cmd, log), "nmt prepare", log)
    stamp.write_text(text)
    return result


def spm_model(layout: Layout) -> Path:
    """The joint SentencePiece model of the data directory."""
    return layout.nmt_data / "spm.model"


def _encode_file(processor, source: Path, target: Path) -> Counter:
    counts: Counter = Counter()
    with open(source, encoding="utf-8") as src, open(target, "w", encoding="utf-8") as out:
        for line in src:
            pieces = processor.encode(line.rstrip("\n"), out_type=str)
            counts.update(pieces)
            out.write(" ".join(pieces) + "\n")
    return counts


def _write_vocab(counts: Counter, folder: Path) -> int:
    ranked = sorted(counts.items(), key=lambda item: (-item[1], item[0]))
    with open(folder / "vocab.counts.txt", "w", encoding="utf-8") as out:
        out.writelines(f"{piece} {count}\n" for piece, count in ranked)
    with open(folder / "vocab.txt", "w", encoding="utf-8") as out:
        out.writelines(f"{piece}\n" for piece, _ in ranked)
    return len(ranked)


def export_pieces(layout: Layout) -> int:
    """Write {train,val,test_2016_flickr}.sp.{de,en} and the vocab files; returns the vocab size."""
    import sentencepiece

    processor = sentencepiece.SentencePieceProcessor(model_file=str(spm_model(layout)))
    folder = layout.pieces
    train_counts: Counter = Counter()
    for split, stem in SPLITS.items():
        for side, lang in LANGS.items():
            counts = _encode_file(
                processor, layout.nmt_data / f"{split}.{side}", folder / f"{stem}.sp.{lang}"
            )
            if split == "train":
                train_counts.update(counts)
    return _write_vocab(train_counts, folder)


def raw_test(data: Path, layout: Layout) -> tuple[Path, Path]:
    """The untouched test source and reference, decompressed into the work folder."""
    paths = []
    for lang in ("de", "en"):
        target = layout.pieces / f"test_2016_flickr.{lang}"
        with (
            gzip.open(data / f"test_2016_flickr.{lang}.gz", "rb") as src,
            open(target, "wb") as out,
        ):
            shutil.copyfileobj(src, out)
        paths.append(target)
    return paths[0], paths[1]


def _head(source: Path, target: Path, n: int) -> None:
    with open(source, encoding="utf-8") as src:
        lines = [line for _, line in zip(range(n), src, strict=False)]
    target.write_text("".join(lines), encoding="utf-8")


def test_set(data: Path, layout: Layout, limit: int) -> TestSet:
    """The test set to translate: all sentences, or the first `limit` for a quick run."""
    raw_src, ref = raw_test(data, layout)
    pieces = layout.pieces / "test_2016_flickr.sp.de"
    total = sum(1 for _ in open(raw_src, encoding="utf-8"))
    return head(TestSet(raw_src, pieces, ref, total), limit, layout)


def head(test: TestSet, limit: int, layout: Layout) -> TestSet:
    """The first `limit` sentences of `test` (all of it when `limit` is 0 or not smaller)."""
    if not limit or limit >= test.sentences:
        return test
    subset = []
    for path in (test.raw_src, test.pieces_src, test.ref):
        target = layout.outputs / f"head{limit}.{path.name}"
        _head(path, target, limit)
        subset.append(target)
    return TestSet(subset[0], subset[1], subset[2], limit)


def first_sentence(path: Path) -> str:
    """The first line of a file, for the one-sentence latency."""
    with open(path, encoding="utf-8") as src:
        return src.readline().rstrip("\n")


def make(data: Path, layout: Layout, vocab_size: int, limit: int) -> TestSet:
    """Prepare the data directory, export the pieces and return the test set."""
    if prepare(data, layout, vocab_size) is not None or not (layout.pieces / "vocab.txt").exists():
        export_pieces(layout)
    return test_set(data, layout, limit)
