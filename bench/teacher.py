"""The guided-alignment teacher (nmt_cli.guide: eflomal, grow-diag-final-and) on the dev sets.

For each corpus, `nmt prepare` writes a data directory whose training split is the training
text plus the pairs that have gold links (an unsupervised aligner sees the text it aligns,
never its gold; the Hansards text lowercased, as the shared task prescribes). Then, in each
round, `training_guides` runs from scratch (stored links removed first): the teacher over
every training pair, the links stored and mapped onto pieces; its wall time is measured, and
the teacher's links of the gold pairs, at word unit over the pieces grouped back into words,
are scored against the gold. Writes bench/teacher.json.

    .venv/bin/python bench/teacher.py                     # both corpora, 3 rounds
    .venv/bin/python bench/teacher.py --corpus demo --rounds 1
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import time
from dataclasses import dataclass
from pathlib import Path

import flops
import machine
from layout import OUR_NMT, REPO_DIR, SHARED_DIR

sys.path.insert(0, str(REPO_DIR))

from nmt_cli import guide  # noqa: E402
from nmt_cli.alignment import parse_pharaoh, read_gold, score_alignments  # noqa: E402
from nmt_cli.data.clean import normalize  # noqa: E402
from nmt_cli.data.datadir import alignments_name, load_data_dir  # noqa: E402
from nmt_cli.lines import read_lines  # noqa: E402

HANSARDS = SHARED_DIR / "data" / "hansards-enfr-dev"
DEMO = REPO_DIR / "data" / "demo"
RESULTS = REPO_DIR / "bench" / "teacher.json"


@dataclass(frozen=True)
class GoldSet:
    """Pairs with gold links, aligned as part of the training text."""

    name: str
    src: list[str]
    tgt: list[str]
    gold: Path


@dataclass(frozen=True)
class Corpus:
    name: str
    src: list[str]  # the training text, gold pairs included
    tgt: list[str]
    gold_sets: list[GoldSet]
    prepare_args: list[str]


def _lines(path: Path, lower: bool = False) -> list[str]:
    return [line.lower() if lower else line for line in read_lines(path)]


def hansards() -> Corpus:
    dev = GoldSet(
        "dev",
        _lines(HANSARDS / "dev.en", True),
        _lines(HANSARDS / "dev.fr", True),
        HANSARDS / "dev.wa",
    )
    return Corpus(
        "hansards",
        _lines(HANSARDS / "train.en.gz", True) + dev.src,
        _lines(HANSARDS / "train.fr.gz", True) + dev.tgt,
        [dev],
        ["--src-lang", "en", "--tgt-lang", "fr"],  # the default vocabulary
    )


def demo() -> Corpus:
    sets = [
        GoldSet(
            split,
            _lines(DEMO / f"{split}.en"),
            _lines(DEMO / f"{split}.zh"),
            DEMO / f"{split}.align",
        )
        for split in ("dev", "test")
    ]
    return Corpus(
        "demo",
        _lines(DEMO / "train.en") + sets[0].src + sets[1].src,
        _lines(DEMO / "train.zh") + sets[0].tgt + sets[1].tgt,
        sets,
        ["--src-lang", "en", "--tgt-lang", "zh", "--vocab-size", "800"],  # as make demo
    )


CORPORA = {"hansards": hansards, "demo": demo}


def prepare(corpus: Corpus, work: Path) -> Path:
    """`nmt prepare` on the corpus text (written to `work`); the data directory."""
    work.mkdir(parents=True, exist_ok=True)
    src, tgt, data = work / "all.src", work / "all.tgt", work / "data"
    src.write_text("".join(line + "\n" for line in corpus.src), encoding="utf-8")
    tgt.write_text("".join(line + "\n" for line in corpus.tgt), encoding="utf-8")
    command = [str(OUR_NMT), "prepare", "--src", str(src), "--tgt", str(tgt), "-o", str(data)]
    subprocess.run([*command, *corpus.prepare_args, "--force"], check=True)
    return data


def positions(data, gold_set: GoldSet) -> list[int | None]:
    """Where each gold pair is in the training split (the last copy; None if cleaning
    dropped it)."""
    where = {}
    train = zip(
        read_lines(data.text("train", "src")), read_lines(data.text("train", "tgt")), strict=True
    )
    for k, pair in enumerate(train):
        where[pair] = k
    return [
        where.get((normalize(s), normalize(t)))
        for s, t in zip(gold_set.src, gold_set.tgt, strict=True)
    ]


def one_round(data_path: Path, corpus: Corpus) -> dict:
    data = load_data_dir(data_path)
    (data.path / alignments_name("word")).unlink(missing_ok=True)
    aligning = []  # when the teacher started and ended

    def on_event(event):
        if event.kind == "count" and event.data["task"] == guide.ALIGNING:
            aligning.append(time.perf_counter())

    started = time.perf_counter()
    guides = guide.training_guides(data, on_event=on_event)
    seconds = time.perf_counter() - started
    stored = [parse_pharaoh(line) for line in read_lines(data.path / alignments_name("word"))]
    pairs = guide.training_pairs(data, "word", guide.ignore)
    scores = {}
    for gold_set in corpus.gold_sets:
        where = positions(data, gold_set)
        found = [k for k in where if k is not None]
        gold = read_gold(gold_set.gold)
        kept_gold = [g for g, k in zip(gold, where, strict=True) if k is not None]
        mismatched = sum(  # word units from pieces that are not the gold's whitespace words
            pairs[k].src_units != normalize(s).split() or pairs[k].tgt_units != normalize(t).split()
            for k, s, t in zip(where, gold_set.src, gold_set.tgt, strict=True)
            if k is not None
        )
        score = score_alignments([stored[k] for k in found], kept_gold)
        scores[gold_set.name] = {
            "pairs": len(gold),
            "found_in_train": len(found),
            "word_count_mismatches": mismatched,
            "aer": round(100 * score.aer, 2),
            "precision": round(100 * score.precision, 2),
            "recall": round(100 * score.recall, 2),
        }
    return {
        "seconds": round(seconds, 1),
        "teacher_seconds": round(aligning[-1] - aligning[0], 1),
        "piece_entries": int(guides.offsets[-1]),
        "scores": scores,
    }


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--corpus", default="hansards,demo", help="comma-separated: hansards, demo")
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--work", type=Path, default=REPO_DIR / "bench" / "work" / "teacher")
    parser.add_argument("--out", type=Path, default=RESULTS)
    args = parser.parse_args()
    results = {
        "command": "flock /tmp/nmt-heavy.lock .venv/bin/python bench/teacher.py "
        + " ".join(sys.argv[1:]),
        "date_utc": machine.now_utc(),
        "nproc": os.cpu_count(),
        "matmul_gflops": round(flops.matmul_gflops(), 1),
        "matmul_command": flops.MATMUL_COMMAND,
        "teacher": "eflomal " + machine.metadata.version("eflomal") + ", defaults, gdfa",
        "corpora": {},
    }
    for name in args.corpus.split(","):
        corpus = CORPORA[name]()
        data = prepare(corpus, args.work / name)
        rounds = [one_round(data, corpus) for _ in range(args.rounds)]
        summary = {
            "training_pairs": len(load_data_dir(data).ids("train", "src")),
            "rounds": rounds,
            "seconds_median": statistics.median(r["seconds"] for r in rounds),
        }
        for gold_set in corpus.gold_sets:
            aers = [r["scores"][gold_set.name]["aer"] for r in rounds]
            summary[f"{gold_set.name}_aer_median"] = statistics.median(aers)
            summary[f"{gold_set.name}_aer_range"] = [min(aers), max(aers)]
        results["corpora"][name] = summary
        print(json.dumps({name: summary}, indent=1), file=sys.stderr)
    results["matmul_gflops_end"] = round(flops.matmul_gflops(), 1)
    args.out.write_text(json.dumps(results, indent=1) + "\n", encoding="utf-8")
    return 0


if __name__ == "__main__":
    sys.exit(main())
