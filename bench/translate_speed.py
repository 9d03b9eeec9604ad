"""`make bench-translate`: `nmt translate` on a trained Multi30k model, every way it can run.

For one model directory: sentences per second and BLEU on the test set for greedy and beam 5,
batch 1 and 64, with and without --quantize (wall time from process start to exit, as the
peers were measured in ../shared/peers/RESULTS.md); the one-sentence latency from the shell
next to a bare `python -c "import torch"` (median of N, alternating); and streaming — the
line count and peak memory for 2,000 and 200,000 copies of one line, and for 2,000 and
20,000 distinct lines. Writes bench/TRANSLATE.md and bench/translate.json.

    .venv/bin/python bench/translate_speed.py --model runs/m30k-ref
"""

from __future__ import annotations

import argparse
import gzip
import json
import statistics
import sys
import time
from pathlib import Path

import machine
import procs
from layout import BENCH_DIR, DEFAULT_DATA, OUR_NMT, OUR_PYTHON, REPO_DIR

SENTENCE = "Ein Mann fährt Fahrrad."
REPEATED = "Ein Hund läuft über die Wiese."
PEERS = {  # ../shared/peers/RESULTS.md, batch 64, process start to exit, 1,000 sentences
    "OpenNMT-py 3.5.1": {"greedy": 58.5, "beam 5": 27.3, "latency": 6.98},
    "Joey NMT 2.3.0": {"greedy": 17.4, "beam 5": 15.4, "latency": 6.64},
}


def parse_args() -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--model", type=Path, required=True, help="an `nmt train` model dir")
    parser.add_argument("--data", type=Path, default=DEFAULT_DATA, help="the Multi30k folder")
    parser.add_argument("--runs", type=int, default=5, help="runs of the one-sentence latency")
    parser.add_argument("--work", type=Path, default=BENCH_DIR / "work" / "translate")
    parser.add_argument("--out", type=Path, default=BENCH_DIR)
    parser.add_argument(
        "--repeats",
        type=int,
        default=3,
        help="rounds of the batch-64 runs (interleaved); their median time is reported",
    )
    parser.add_argument("--skip-streaming", action="store_true")
    return parser.parse_args()


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


def speed_grid(args, src: Path, ref: Path, sentences: int) -> list[dict]:
    """Every search setting once, then the batch-64 ones again for `args.repeats` rounds in
    all: this machine's timings move by up to a third between runs, and a median of
    interleaved rounds is steadier than one run."""
    grid = [(b, bs, q, False, False) for b in (1, 5) for bs in (64, 1) for q in (False, True)]
    grid += [(5, 64, q, True, False) for q in (False, True)]  # the peers' stopping rule
    grid += [(b, 64, q, False, True) for b in (5, 1) for q in (False, True)]  # --shortlist
    times: dict[tuple, list[float]] = {setting: [] for setting in grid}
    rows: dict[tuple, dict] = {}
    for round_ in range(max(1, args.repeats)):
        for setting in grid:
            beam, batch, quantize, early, shortlist = setting
            if round_ and batch != 64:
                continue
            name = f"beam{beam}-bs{batch}{'-int8' if quantize else ''}{'-early' if early else ''}"
            name += "-shortlist" if shortlist else ""
            out = args.work / f"{name}.txt"
            cmd = [OUR_NMT, "translate", "-m", args.model, "-i", src, "--beam", beam]
            cmd += ["--batch-size", batch, *(["--quantize"] if quantize else [])]
            cmd += ["--early-stop"] if early else []
            cmd += ["--shortlist"] if shortlist else []
            run = procs.run(cmd, args.work / "logs" / f"{name}.log", stdout=out)
            procs.check(run, name, args.work / "logs" / f"{name}.log")
            times[setting].append(round(run.seconds, 2))
            score, signature = bleu(out, ref)
            row = rows.setdefault(
                setting,
                {
                    "search": "greedy" if beam == 1 else f"beam {beam}",
                    "early_stop": early,
                    "shortlist": shortlist,
                    "batch_size": batch,
                    "quantized": quantize,
                    "bleu": score,
                    "signature": signature,
                    "max_rss_mib": 0,
                    "command": run.command,
                },
            )
            if score != row["bleu"]:
                print(f"warning: {name} BLEU {score} in round {round_ + 1}, {row['bleu']} "
                      "in the first", file=sys.stderr)  # fmt: skip
            seconds = statistics.median(times[setting])
            row.update(
                seconds=seconds,
                runs_s=times[setting],
                sents_per_s=round(sentences / seconds, 1),
                max_rss_mib=max(row["max_rss_mib"], round(run.max_rss_mib)),
            )
            print(json.dumps(row), file=sys.stderr, flush=True)
    return [rows[setting] for setting in grid]


def latency(args) -> dict:
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
            procs.run(ours, log, input_text=SENTENCE + "\n", stdout=out), "latency", log
        )
        times["nmt"].append(run.seconds)
        commands["nmt"] = run.command
    result = {
        k: {"runs_s": [round(t, 3) for t in v], "median_s": round(statistics.median(v), 3)}
        for k, v in times.items()
    }
    result["ratio"] = round(result["nmt"]["median_s"] / result["torch"]["median_s"], 3)
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


def ratio(value: float, reference: float) -> str:
    return f"{value / reference:.2f}×"


def _seconds(row: dict) -> str:
    """The median time, with every run's when there were several."""
    runs = row.get("runs_s", [])
    if len(runs) < 2:
        return str(row["seconds"])
    return f"{row['seconds']} ({', '.join(str(r) for r in runs)})"


def _flags(row: dict) -> str:
    flags = [name for key, name in (("early_stop", "--early-stop"), ("shortlist", "--shortlist"))
             if row.get(key)]  # fmt: skip
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


def write(args, results: dict) -> Path:
    grid, lat = results["grid"], results["latency"]
    best_peer = {k: max(p[k] for p in PEERS.values()) for k in ("greedy", "beam 5")}
    lines = [
        "# `nmt translate` on a trained Multi30k model",
        "",
        f"Model `{results['model']}` ({results['model_note']}); {results['sentences']:,} "
        f"test_2016_flickr sentences; {results['date']}; {results['machine']}.",
        "Wall time from process start to exit (start-up and model load included); batch-64 "
        "rows are the median of interleaved rounds (every round's seconds in brackets). The peers' "
        "figures are **quoted**, not measured here: OpenNMT-py and Joey NMT translating with "
        "their own 20-minute models on a 2-core CPU in an earlier measurement, timed the same "
        "way. In `make bench` (bench/RESULTS.md), which measures them in the same run on "
        "minutes-trained models, they were faster than these quoted figures. Regenerate with "
        "`make bench-translate MODEL=<dir>`.",
        "",
        "| search | batch | int8 | sent/s | × faster peer (quoted, batch 64) | BLEU | seconds (median) | peak RSS MiB |",
        "|---|---|---|---|---|---|---|---|",
    ]
    for row in grid:
        lines.append(
            f"| {row['search']}{_flags(row)} | {row['batch_size']} | {'yes' if row['quantized'] else 'no'} | "
            f"{row['sents_per_s']} | {ratio(row['sents_per_s'], best_peer[row['search']])} | "
            f"{row['bleu']} | {_seconds(row)} | {row['max_rss_mib']} |"
        )
    for name, peer in PEERS.items():
        lines.append(
            f"| {name} (quoted): greedy / beam 5, batch 64 | | | "
            f"{peer['greedy']} / {peer['beam 5']} | | | | |"
        )
    lines += [
        "",
        f"BLEU signature: `{grid[0]['signature']}`.",
        "",
        "## One sentence from the shell",
        "",
        f'`echo "{SENTENCE}" | nmt translate -m MODEL` (beam 5) → “{lat["output"]}”: median '
        f"**{lat['nmt']['median_s']} s** over {len(lat['nmt']['runs_s'])} runs "
        f'({", ".join(map(str, lat["nmt"]["runs_s"]))}); a bare `python -c "import torch"` in '
        f"the same sitting, alternating with it: median **{lat['torch']['median_s']} s** "
        f"({', '.join(map(str, lat['torch']['runs_s']))}). Ratio **{lat['ratio']}** (goal ≤ 1.3). "
        f"The peers (quoted): OpenNMT-py {PEERS['OpenNMT-py 3.5.1']['latency']} s, Joey NMT "
        f"{PEERS['Joey NMT 2.3.0']['latency']} s.",
        "",
    ]
    if results.get("streaming"):
        lines += [
            "## Streaming",
            "",
            "Greedy, batch 64, input on stdin. A line repeated within a chunk of 512 lines is "
            "decoded once, so the distinct-lines rows are the ones that show the search's memory.",
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
    lines += [row["command"] for row in grid]
    lines += list(lat["commands"].values())
    lines += [row["command"] for row in results.get("streaming", [])]
    lines += ["```", ""]
    path = args.out / "TRANSLATE.md"
    path.write_text("\n".join(lines), encoding="utf-8")
    (args.out / "translate.json").write_text(json.dumps(results, indent=1) + "\n", encoding="utf-8")
    return path


def main() -> int:
    args = parse_args()
    args.model = args.model.resolve()
    args.work.mkdir(parents=True, exist_ok=True)
    started = time.perf_counter()
    src = unzip(args.data / "test_2016_flickr.de.gz", args.work / "test.de")
    ref = unzip(args.data / "test_2016_flickr.en.gz", args.work / "test.en")
    m = machine.describe()
    meta = json.loads((args.model / "meta.json").read_text(encoding="utf-8"))
    config = json.loads((args.model / "config.json").read_text(encoding="utf-8"))
    model = config.get("model", config)
    results = {
        "model": str(
            args.model.relative_to(REPO_DIR) if args.model.is_relative_to(REPO_DIR) else args.model
        ),
        "model_note": (
            f"{model.get('attention')} attention, {model.get('decoder_style')} decoder, "
            f"input feeding {'on' if model.get('input_feed') else 'off'}; the best checkpoint "
            f"(update {meta.get('step')}, {meta.get('train_seconds', 0) / 60:.1f} min) of a "
            f"{config.get('train', {}).get('max_time', 0) / 60:.0f}-minute run"
        ),
        "date": time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime()),
        "machine": f"{m.nproc} cores, {m.cpu_model}",
        "sentences": line_count(src),
    }
    ensure_shortlist(args.model, args.work)
    results["grid"] = speed_grid(args, src, ref, results["sentences"])
    results["latency"] = latency(args)
    if not args.skip_streaming:
        results["streaming"] = streaming(args, args.data / "train.de.gz")
    results["total_s"] = round(time.perf_counter() - started, 1)
    path = write(args, results)
    print(f"wrote {path} in {results['total_s'] / 60:.1f} min", file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main())
