"""`make bench-translate`: `nmt translate` on a trained Multi30k model, every way it can run.

For one model directory (by default the `nmt` model `make bench` trained, so nothing needs
training first): sentences per second and BLEU on the test set for greedy and beam 5, batch 64
(and batch 1 on the first sentences), in float32, int8 (--quantize) and bfloat16 (--bf16,
where the CPU has AMX or AVX-512 BF16), with --early-stop, --exact-stop (beam 5, float32) and --shortlist, in interleaved rounds, with the median and the spread; each setting's speed-up
over the float run of the same search and batch, per round and measured in the same run; the
one-sentence latency from the shell beside a bare `python -c "import torch"` (alternating);
and streaming: the line count and peak memory for 2,000 and 200,000 copies of one line, and
for 2,000 and 20,000 distinct lines. Writes bench/TRANSLATE.md and bench/translate.json.

Only our own modes are compared here, against our own float baseline of the same run: the
peers are measured beside ours in `make bench` (bench/RESULTS.md), where they train in the same
run; this script trains nothing, so it has no peer models to run, and no figure quoted from
another run or machine enters a ratio.

    .venv/bin/python bench/translate_speed.py [--model bench/work/models/speed-nmt]
"""

from __future__ import annotations

import argparse
import gzip
import json
import statistics
import sys
import time
from pathlib import Path

import flops
import machine
import procs
from layout import BENCH_DIR, DEFAULT_DATA, OUR_NMT, OUR_PYTHON, REPO_DIR

BENCH_MODEL = BENCH_DIR / "work" / "models" / "speed-nmt"  # the `nmt` model of `make bench`
REPEATED = "Ein Hund läuft über die Wiese."
MIN_ROUNDS = 3


def parse_args() -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    add = parser.add_argument
    default = BENCH_MODEL if (BENCH_MODEL / "config.json").exists() else None
    add("--model", type=Path, default=default,
        help=f"an `nmt train` model dir (default: {BENCH_MODEL.relative_to(REPO_DIR)}, when there)")  # fmt: skip
    add("--data", type=Path, default=DEFAULT_DATA, help="the Multi30k folder")
    add("--runs", type=int, default=5, help="rounds of the one-sentence latency")
    add("--work", type=Path, default=BENCH_DIR / "work" / "translate")
    add("--out", type=Path, default=BENCH_DIR)
    add("--rounds", type=int, default=3, help="interleaved rounds of every setting")
    add("--batch1-sentences", type=int, default=200, help="test sentences of the batch-1 rows")
    add("--test-sentences", type=int, default=0, help="test sentences of the rest (0: all)")
    add("--skip-streaming", action="store_true")
    add(
        "--render",
        action="store_true",
        help="measure nothing: rewrite OUT/TRANSLATE.md from OUT/translate.json",
    )
    args = parser.parse_args()
    if args.model is None and not args.render:
        parser.error(f"--model is required: there is no {BENCH_MODEL.relative_to(REPO_DIR)} yet")
    return args


def unzip(path: Path, out: Path, limit: int | None = None) -> Path:
    with gzip.open(path, "rt", encoding="utf-8") as handle:
        lines = handle.read().split("\n")
    if lines and lines[-1] == "":
        lines.pop()
    out.write_text("\n".join(lines[:limit]) + "\n", encoding="utf-8")
    return out


def bleu(hyp: Path, ref: Path) -> tuple[float, str]:
    from sacrebleu.metrics import BLEU

    hyps = hyp.read_text(encoding="utf-8").split("\n")[:-1]
    refs = ref.read_text(encoding="utf-8").split("\n")[:-1]
    metric = BLEU()
    return round(metric.corpus_score(hyps, [refs]).score, 2), str(metric.get_signature())


def line_count(path: Path) -> int:
    with open(path, "rb") as handle:
        return sum(chunk.count(b"\n") for chunk in iter(lambda: handle.read(1 << 20), b""))


FLOAT = "fp32"
PRECISION_FLAGS = {FLOAT: [], "int8": ["--quantize"], "bf16": ["--bf16"]}


def _name(beam: int, batch: int, precision: str, stop: str, shortlist: bool) -> str:
    kind = "" if precision == FLOAT else f"-{precision}"
    return f"beam{beam}-bs{batch}{kind}{f'-{stop}' if stop else ''}" + (
        "-shortlist" if shortlist else ""
    )


def grid(precisions: tuple[str, ...]) -> list[tuple]:
    """(beam, batch, precision, stop, shortlist) of every setting, `stop` "", "early" or
    "exact"; the float rows first."""
    return [
        *((b, 64, p, "", False) for b in (1, 5) for p in precisions),
        *((5, 64, p, "early", False) for p in precisions),  # the peers' stopping rule
        (5, 64, FLOAT, "exact", False),  # what the default stopping bound saves
        *((b, 64, p, "", True) for b in (5, 1) for p in precisions),  # --shortlist
        *((b, 1, p, "", False) for b in (1, 5) for p in precisions),  # batch 1: a subset
        (5, 1, FLOAT, "exact", False),
    ]


def precisions() -> tuple[str, ...]:
    """float32 and int8 everywhere; bfloat16 where this CPU runs it natively (`nmt translate
    --bf16` refuses elsewhere)."""
    from nmt_cli.device import native_bf16

    return (FLOAT, "int8", "bf16") if native_bf16() else (FLOAT, "int8")


def _spread(values: list[float]) -> list[float]:
    """The median, min and max."""
    return [round(statistics.median(values), 3), round(min(values), 3), round(max(values), 3)]


def _row(setting: tuple, inputs: dict, command: str, signature: str) -> dict:
    beam, batch, precision, stop, shortlist = setting
    return {
        "search": "greedy" if beam == 1 else f"beam {beam}",
        "early_stop": stop == "early",
        "exact_stop": stop == "exact",
        "shortlist": shortlist,
        "batch_size": batch,
        "precision": precision,
        "sentences": inputs[batch][2],
        "signature": signature,
        "max_rss_mib": 0,
        "runs_s": [],
        "command": command,
    }


def speed_grid(args, inputs: dict) -> dict[str, dict]:
    """Every setting once per round, `args.rounds` rounds, so a slow phase of this machine
    meets every setting alike. `inputs` maps a batch size to (source, reference, sentences)."""
    rows: dict[str, dict] = {}
    for round_ in range(args.rounds):
        for setting in grid(args.precisions):
            beam, batch, precision, stop, shortlist = setting
            name = _name(*setting)
            src, ref, sentences = inputs[batch]
            out = args.work / f"{name}.txt"
            cmd = [OUR_NMT, "translate", "-m", args.model, "-i", src, "--beam", beam]
            cmd += ["--batch-size", batch, *PRECISION_FLAGS[precision]]
            cmd += [f"--{stop}-stop"] if stop else []
            # each setting says whether it uses the shortlist: the model's default may
            cmd += ["--shortlist"] if shortlist else ["--no-shortlist"]
            log = args.work / "logs" / f"{name}.log"
            run = procs.check(procs.run(cmd, log, stdout=out), name, log)
            score, signature = bleu(out, ref)
            row = rows.setdefault(name, _row(setting, inputs, run.command, signature))
            row.setdefault("bleu", score)
            if score != row["bleu"]:
                print(f"warning: {name} BLEU {score} in round {round_ + 1}, {row['bleu']} "
                      "in the first", file=sys.stderr)  # fmt: skip
            row["runs_s"].append(round(run.seconds, 2))
            row["max_rss_mib"] = max(row["max_rss_mib"], round(run.max_rss_mib))
            row["seconds"] = round(statistics.median(row["runs_s"]), 2)
            row["sents_per_s"] = round(sentences / row["seconds"], 1)
            print(json.dumps({name: row}), file=sys.stderr, flush=True)
    for row in rows.values():
        search = 1 if row["search"] == "greedy" else 5
        base = rows[_name(search, row["batch_size"], FLOAT, "", False)]
        per_round = [b / s for s, b in zip(row["runs_s"], base["runs_s"], strict=True)]
        row["speedup"] = [round(base["seconds"] / row["seconds"], 3), *_spread(per_round)[1:]]
        row["bleu_delta"] = round(row["bleu"] - base["bleu"], 2)
        row["sents_per_s_spread"] = [
            round(row["sentences"] / max(row["runs_s"]), 1),
            round(row["sentences"] / min(row["runs_s"]), 1),
        ]
    return rows


def latency(args, sentence: str) -> dict:
    """Alternate the two commands so a slow moment of the machine hits both alike."""
    ours = [OUR_NMT, "translate", "-m", args.model]
    bare = [OUR_PYTHON, "-c", "import torch"]
    times: dict[str, list[float]] = {"nmt": [], "torch": []}
    out = args.work / "latency.txt"
    log = args.work / "logs" / "latency.log"
    commands = {}
    for _ in range(args.runs):
        run = procs.check(procs.run(bare, log), "import torch", log)
        times["torch"].append(run.seconds)
        commands["torch"] = run.command
        run = procs.check(
            procs.run(ours, log, input_text=sentence + "\n", stdout=out), "latency", log
        )
        times["nmt"].append(run.seconds)
        commands["nmt"] = run.command
    result = {k: {"runs_s": [round(t, 3) for t in v], "median_s": round(statistics.median(v), 3)}
              for k, v in times.items()}  # fmt: skip
    per_round = [a / b for a, b in zip(times["nmt"], times["torch"], strict=True)]
    result["ratio"] = [
        round(result["nmt"]["median_s"] / result["torch"]["median_s"], 3),
        *_spread(per_round)[1:],
    ]
    result["sentence"] = sentence
    result["output"] = out.read_text(encoding="utf-8").strip()
    result["commands"] = commands
    return result


def streaming(args, train_src: Path) -> list[dict]:
    """Line counts and peak memory on long inputs: one line repeated, and distinct lines."""
    rows = []
    cases = [
        ("same line", 2_000, None),
        ("same line", 200_000, None),
        ("distinct lines", 2_000, train_src),
        ("distinct lines", 20_000, train_src),
    ]
    for kind, n, source in cases:
        inp = args.work / f"stream-{kind.replace(' ', '-')}-{n}.txt"
        if source is None:
            inp.write_text((REPEATED + "\n") * n, encoding="utf-8")
        else:
            unzip(source, inp, n)
        out = args.work / f"stream-{kind.replace(' ', '-')}-{n}.out"
        log = args.work / "logs" / "stream.log"
        cmd = [OUR_NMT, "translate", "-m", args.model, "--beam", "1", "--batch-size", "64"]
        run = procs.check(procs.run(cmd, log, stdin=inp, stdout=out), kind, log)
        rows.append(
            {
                "input": kind,
                "lines_in": n,
                "lines_out": line_count(out),
                "seconds": round(run.seconds, 1),
                "max_rss_mib": round(run.max_rss_mib),
                "command": run.command,
            }
        )
        print(json.dumps(rows[-1]), file=sys.stderr, flush=True)
    return rows


def _flags(row: dict) -> str:
    names = (("early_stop", "--early-stop"), ("exact_stop", "--exact-stop"),
             ("shortlist", "--shortlist"))  # fmt: skip
    flags = [name for key, name in names if row.get(key)]
    return "".join(f", {flag}" for flag in flags)


def ensure_shortlist(model: Path, work: Path) -> None:
    """Write the model's lexical shortlist from its training data when it has none (models
    trained before `nmt train` wrote one)."""
    if (model / "shortlist.npz").exists():
        return
    meta = json.loads((model / "meta.json").read_text(encoding="utf-8"))
    data = Path(meta["data_dir"])
    data = data if data.is_absolute() else REPO_DIR / data
    log = work / "logs" / "shortlist.log"
    procs.check(procs.run([OUR_NMT, "shortlist", data, model], log), "shortlist", log)


def _precision(row: dict) -> str:
    if "precision" not in row:  # results written before bfloat16 had rows
        return "int8" if row["quantized"] else FLOAT
    return row["precision"]


def _spread_text(values: list[float], unit: str = "") -> str:
    """`median (min–max)` from [median, min, max]."""
    return f"{values[0]:.2f}{unit} ({values[1]:.2f}–{values[2]:.2f})"


def _grid_table(rows: dict[str, dict]) -> list[str]:
    lines = [
        "| search | batch | precision | sentences | sent/s, median (min–max) | × the float run, "
        "median (min–max of rounds) | BLEU | BLEU − float | seconds, every round | peak RSS MiB |",
        "|---|---|---|---|---|---|---|---|---|---|",
    ]
    for row in rows.values():
        low, high = row["sents_per_s_spread"]
        lines.append(
            f"| {row['search']}{_flags(row)} | {row['batch_size']} | "
            f"{_precision(row)} | {row['sentences']:,} | "
            f"{row['sents_per_s']} ({low}–{high}) | {_spread_text(row['speedup'], '×')} | "
            f"{row['bleu']:.2f} | {row['bleu_delta']:+.2f} | "
            f"{', '.join(str(s) for s in row['runs_s'])} | {row['max_rss_mib']} |"
        )
    return lines


def write(args, results: dict) -> Path:
    rows, lat = results["rows"], results["latency"]
    rounds = len(next(iter(rows.values()))["runs_s"])
    lines = [
        "# `nmt translate` on a trained Multi30k model",
        "",
        f"Model `{results['model']}` ({results['model_note']}); test_2016_flickr; "
        f"{results['date']}; {results['machine']}; this machine's fp32 matmul rate in this run: "
        f"{results['matmul_gflops']:.1f} GFLOP/s ({flops.MATMUL_COMMAND}). Regenerate with "
        "`make bench-translate` (MODEL=<dir> for another model).",
        "",
        "Wall time from process start to exit (start-up and model load included), "
        f"{rounds} interleaved rounds (every setting once per round). Each setting is compared "
        "with the float run of the same search and batch size in the same run: the ratio of the "
        "medians, and in brackets the min and max of the per-round ratios. No other toolkit "
        "is compared here: the peers are measured beside ours, in the same run, in "
        "`make bench` (bench/RESULTS.md). The batch-1 rows translate the first "
        f"{results['batch1_sentences']:,} sentences only.",
        "",
        *_grid_table(rows),
        "",
        f"BLEU signature: `{next(iter(rows.values()))['signature']}`.",
        "",
        "## One sentence from the shell",
        "",
        f'`echo "{lat["sentence"]}" | nmt translate -m MODEL` (beam 5; the first test sentence, '
        f"as in `make bench`) → “{lat['output']}”: median **{lat['nmt']['median_s']} s** over "
        f"{len(lat['nmt']['runs_s'])} rounds ({', '.join(map(str, lat['nmt']['runs_s']))}); a "
        'bare `python -c "import torch"` in the same rounds, alternating with it: median '
        f"**{lat['torch']['median_s']} s** ({', '.join(map(str, lat['torch']['runs_s']))}). "
        f"Ratio **{_spread_text(lat['ratio'])}** (goal ≤ 1.3).",
        "",
    ]
    if results.get("streaming"):
        lines += [
            "## Streaming",
            "",
            "Greedy, batch 64, input on stdin, one run each. A line repeated within a chunk of "
            "512 lines is decoded once, so the distinct-lines rows are the ones that show the "
            "search's memory.",
            "",
            "| input | lines in | lines out | seconds | peak RSS MiB |",
            "|---|---|---|---|---|",
        ]
        for row in results["streaming"]:
            lines.append(
                f"| {row['input']} | {row['lines_in']:,} | {row['lines_out']:,} | "
                f"{row['seconds']} | {row['max_rss_mib']} |"
            )
        lines.append("")
    lines += ["## Commands", "", "```"]
    lines += [row["command"] for row in rows.values()]
    lines += list(lat["commands"].values())
    lines += [row["command"] for row in results.get("streaming", [])]
    lines += ["```", ""]
    path = args.out / "TRANSLATE.md"
    path.write_text("\n".join(lines), encoding="utf-8")
    (args.out / "translate.json").write_text(json.dumps(results, indent=1) + "\n", encoding="utf-8")
    return path


def _model_note(model: Path) -> str:
    meta = json.loads((model / "meta.json").read_text(encoding="utf-8"))
    config = json.loads((model / "config.json").read_text(encoding="utf-8"))
    arch = config.get("model", config)
    return (
        f"{arch.get('attention')} attention, {arch.get('decoder_style')} decoder, input feeding "
        f"{'on' if arch.get('input_feed') else 'off'}; the checkpoint of update {meta.get('step')}, "
        f"after {meta.get('train_seconds', 0) / 60:.1f} min of training"
    )


def _inputs(args) -> dict:
    """Batch size → (source, reference, sentences): the test set, its head for batch 1."""
    inputs = {}
    for batch, limit in ((64, args.test_sentences or None), (1, args.batch1_sentences)):
        src = unzip(args.data / "test_2016_flickr.de.gz", args.work / f"test-bs{batch}.de", limit)
        ref = unzip(args.data / "test_2016_flickr.en.gz", args.work / f"test-bs{batch}.en", limit)
        inputs[batch] = (src, ref, line_count(src))
    return inputs


def main() -> int:
    args = parse_args()
    if args.render:
        results = json.loads((args.out / "translate.json").read_text(encoding="utf-8"))
        print(f"rewrote {write(args, results)}", file=sys.stderr)
        return 0
    if args.rounds < MIN_ROUNDS:
        print(f"note: {args.rounds} round(s); the report's figures want {MIN_ROUNDS}", file=sys.stderr)  # fmt: skip
    args.model = args.model.resolve()
    args.work.mkdir(parents=True, exist_ok=True)
    started = time.perf_counter()
    inputs = _inputs(args)
    m = machine.describe()
    shown = args.model.relative_to(REPO_DIR) if args.model.is_relative_to(REPO_DIR) else args.model
    results = {
        "model": str(shown),
        "model_note": _model_note(args.model),
        "date": time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime()),
        "machine": f"{m.nproc} cores, {m.cpu_model}",
        "matmul_gflops": round(flops.matmul_gflops(), 1),
        "sentences": inputs[64][2],
        "batch1_sentences": inputs[1][2],
    }
    ensure_shortlist(args.model, args.work)
    args.precisions = precisions()
    results["rows"] = speed_grid(args, inputs)
    with open(inputs[64][0], encoding="utf-8") as src:
        results["latency"] = latency(args, src.readline().rstrip("\n"))
    if not args.skip_streaming:
        results["streaming"] = streaming(args, args.data / "train.de.gz")
    results["total_s"] = round(time.perf_counter() - started, 1)
    path = write(args, results)
    print(f"wrote {path} in {results['total_s'] / 60:.1f} min", file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main())
