"""What `make demo` tells the user: the time estimate before training, the summary after.

`estimate PROBE_DIR CONFIG` reads the train.jsonl of a short probe run and prints how long
the full update budget of CONFIG will take on this machine. `summary OUT_DIR CONFIG SECONDS`
gathers the run's figures from the files the commands wrote into OUT_DIR/summary.json and
prints them on one screen; `--record FILE` also writes that JSON to FILE (the committed copy
the README's figures are checked against).
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import re
import statistics
import sys
import tomllib
from datetime import UTC, datetime
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
AER_LINE = re.compile(
    r"AER (?P<aer>[\d.]+)%\s+precision (?P<precision>[\d.]+)%\s+recall (?P<recall>[\d.]+)%"
)


def _events(model_dir: Path, kind: str) -> list[dict]:
    lines = (model_dir / "train.jsonl").read_text(encoding="utf-8").splitlines()
    return [e for e in map(json.loads, lines) if e["event"] == kind]


def _train_config(config: Path) -> dict:
    with open(config, "rb") as handle:
        return tomllib.load(handle)["train"]


def _minutes(seconds: float) -> str:
    return f"{seconds / 60:.1f} min" if seconds >= 90 else f"{seconds:.0f} s"


def estimate(probe: Path, config: Path, probe_wall: float) -> str:
    """Time for the whole budget: start-up + updates at the probe's rate + validations."""
    train = _train_config(config)
    reports = _events(probe, "train")
    first, last = reports[0], reports[-1]
    rate = (last["step"] - first["step"]) / max(last["elapsed"] - first["elapsed"], 1e-3)
    valid_s = max(e["seconds"] for e in _events(probe, "valid"))
    done = _events(probe, "done")[-1]
    startup = max(0.0, probe_wall - done["train_seconds"] - valid_s)
    steps = train["max_steps"]
    epochs = steps / first["batches"]
    validations = steps // train["valid_every"] + int(epochs) + 1
    seconds = startup + steps / rate + validations * valid_s
    return (
        f"{rate:.1f} updates/s measured over updates {first['step']}–{last['step']} "
        f"({last['tokens_per_s']:,.0f} target tokens/s): the {steps:,} updates take about "
        f"{_minutes(seconds)} on this machine ({validations} validations of about "
        f"{valid_s:.0f} s each included), then scoring and alignment"
    )


def _matmul(threads: int) -> float | None:
    """The fp32 matmul rate with `threads` threads, measured the way `make bench` does."""
    sys.path.insert(0, str(REPO / "bench"))
    try:
        import flops

        return round(flops.matmul_gflops(threads), 1)
    except (ImportError, RuntimeError, ValueError):
        return None


def _cpu_model() -> str:
    try:
        with open("/proc/cpuinfo", encoding="utf-8") as info:
            for line in info:
                if line.startswith("model name"):
                    return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or "unknown"


def _aer(log: Path) -> dict:
    match = AER_LINE.search(log.read_text(encoding="utf-8"))
    if match is None:
        raise SystemExit(f"demo: no AER line in {log}")
    return {key: float(value) for key, value in match.groupdict().items()}


def gather(out: Path, config: Path, wall: float) -> dict:
    """Every figure of the run, from the files its commands wrote."""
    train_cfg = _train_config(config)
    model = out / "model"
    done = _events(model, "done")[-1]
    rates = [e["tokens_per_s"] for e in _events(model, "train")]
    batches = _events(model, "epoch")[-1]["batches"]
    threads = train_cfg.get("threads") or len(os.sched_getaffinity(0))
    metrics = {m["metric"]: m for m in json.loads((out / "test.eval.json").read_text())["metrics"]}
    if done["step"] >= train_cfg["max_steps"]:
        stopped = "update budget"
    elif train_cfg.get("patience") and done["bad_validations"] >= train_cfg["patience"]:
        stopped = "early stopping: dev BLEU stopped improving"
    else:
        stopped = "time cap"
    return {
        "command": "make demo",
        "date_utc": datetime.now(UTC).strftime("%Y-%m-%d %H:%M UTC"),
        "machine": {
            "cpus": len(os.sched_getaffinity(0)),
            "cpu_model": _cpu_model(),
            "train_threads": threads,
            "matmul_gflops": _matmul(threads),
            "matmul": f"2048³ fp32 matmul, {threads} thread(s), median of 10 after 3 warm-ups",
        },
        "train": {
            "updates": done["step"],
            "update_budget": train_cfg["max_steps"],
            "stopped_by": stopped,
            # epochs finished (the event's "epoch" counts the one under way) and the part done
            "epochs": round(
                done.get("epochs_finished", done["epoch"]) + done["batch_index"] / batches, 1
            ),
            "best_step": done["best_step"],
            "best_dev_bleu": round(done["best_bleu"], 2),
            "seconds": round(done["train_seconds"], 1),
            "tokens_per_s": round(statistics.median(rates)),
        },
        "test": {
            "sentences": 500,
            "beam": 5,
            "bleu": round(metrics["bleu"]["score"], 2),
            "chrf": round(metrics["chrf"]["score"], 2),
            "ter": round(metrics["ter"]["score"], 2),
            "bleu_line": metrics["bleu"]["text"],
            "bleu_signature": metrics["bleu"]["signature"],
        },
        "align": {"plain": _aer(out / "test.align.log"), "prior": _aer(out / "test.prior.log")},
        "wall_seconds": round(wall, 1),
        "model": str(model),
    }


def screen(s: dict) -> str:
    """The one-screen summary."""
    t, m, a = s["train"], s["machine"], s["align"]
    rate = "not measured" if m["matmul_gflops"] is None else f"{m['matmul_gflops']:.1f} GFLOP/s"
    lines = [
        f"test BLEU {s['test']['bleu']:.2f}  chrF {s['test']['chrf']:.2f}  "
        f"TER {s['test']['ter']:.2f}  (500 sentences, beam 5)",
        f"AER {a['plain']['aer']:.2f} % (nmt align defaults), {a['prior']['aer']:.2f} % "
        "(mutual + grow + corpus prior)",
        f"trained {t['updates']:,} updates ({t['stopped_by']}), best on dev at update "
        f"{t['best_step']:,} (dev BLEU {t['best_dev_bleu']:.2f})",
        f"training took {_minutes(t['seconds'])}, the whole demo {_minutes(s['wall_seconds'])}; "
        f"{t['tokens_per_s']:,} target tokens/s",
        f"machine: {m['cpus']} CPU(s), {m['cpu_model']}; matmul {rate} "
        f"({m['train_threads']} thread(s), as trained)",
        f"model: {s['model']}   (try: echo 'Where did you dance ?' | .venv/bin/nmt translate -m {s['model']})",
    ]
    if t["stopped_by"] == "time cap":
        lines.append(
            f"warning: the time cap stopped training at {t['updates']:,} of "
            f"{t['update_budget']:,} updates: this machine is slower than the demo allows for, "
            "so the scores are below the demo's; raise DEMO_MAX_TIME"
        )
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    sub = parser.add_subparsers(dest="what", required=True)
    est = sub.add_parser("estimate")
    est.add_argument("probe", type=Path)
    est.add_argument("config", type=Path)
    est.add_argument("probe_wall", type=float)
    summ = sub.add_parser("summary")
    summ.add_argument("out", type=Path)
    summ.add_argument("config", type=Path)
    summ.add_argument("wall", type=float)
    summ.add_argument("--record", type=Path)
    args = parser.parse_args(argv)
    if args.what == "estimate":
        print(estimate(args.probe, args.config, args.probe_wall))
        return
    summary = gather(args.out, args.config, args.wall)
    text = json.dumps(summary, ensure_ascii=False, indent=1) + "\n"
    (args.out / "summary.json").write_text(text, encoding="utf-8")
    if args.record:
        args.record.parent.mkdir(parents=True, exist_ok=True)
        args.record.write_text(text, encoding="utf-8")
    print(screen(summary))


if __name__ == "__main__":
    main()
