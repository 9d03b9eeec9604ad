"""Test BLEU on Multi30k de→en of checkpoint averaging and of ensembles, one command each.

    .venv/bin/python scripts/average_ensemble_report.py averaging   # make average-report (~45 min)
    .venv/bin/python scripts/average_ensemble_report.py ensembles   # make ensemble-report (~65 min)

averaging: the reference configuration (data/configs/reference.toml) and the defaults, each
trained for 20 minutes keeping its last 5 checkpoints (a save every 200 updates); test BLEU
(beam 5) of the best checkpoint (model.pt) beside the average of the last 3 and of the last 5.
ensembles: the defaults trained for 20 minutes from seeds 1, 2 and 3; test BLEU of each model
alone, of the first two and of all three as an ensemble. Models already trained are reused.
Writes docs/results/{averaging,ensembles}.json and docs/{averaging,ensembles}.md.
(--minutes, --vocab-size, --data, --runs and --docs make a quick trial run elsewhere.)
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
from datetime import UTC, datetime
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
NMT = REPO / ".venv" / "bin" / "nmt"
CONFIGS = {"reference": REPO / "data" / "configs" / "reference.toml", "default": None}


def parse_args() -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    add = parser.add_argument
    add("kind", choices=("averaging", "ensembles"))
    add("--minutes", type=float, default=20.0, help="training time of each model")
    add("--vocab-size", type=int, default=8000)
    add("--data", type=Path, default=REPO.parent / "shared" / "data" / "multi30k")
    add("--runs", type=Path, default=REPO / "runs" / "average-ensemble")
    add("--docs", type=Path, default=REPO / "docs")
    add("--render-only", action="store_true", help="rewrite the .md from its results .json")
    return parser.parse_args()


ARGS = argparse.Namespace()  # set by main


def run(*args) -> str:
    done = subprocess.run([str(a) for a in args], capture_output=True, text=True)
    if done.returncode:
        tail = done.stderr.strip().splitlines()[-1:] or ["(no message)"]
        raise SystemExit(f"{' '.join(map(str, args[:2]))} failed ({done.returncode}): {tail[0]}")
    return done.stdout


def prepared() -> Path:
    out, data = ARGS.runs / "data", ARGS.data
    if not (out / "prepare.json").exists():
        splits = {"": "train", "dev-": "val", "test-": "test_2016_flickr"}
        argv = [arg for p, stem in splits.items()
                for arg in (f"--{p}src", data / f"{stem}.de.gz", f"--{p}tgt", data / f"{stem}.en.gz")]  # fmt: skip
        run(NMT, "prepare", *argv, "--src-lang", "de", "--tgt-lang", "en", "--joint",
            "--vocab-size", ARGS.vocab_size, "-o", out, "--force")  # fmt: skip
    return out


def trained(name: str, config: Path | None, *flags) -> Path:
    out = ARGS.runs / name
    if not (out / "model.pt").exists():
        config_args = ["--config", config] if config else []
        run(NMT, "train", prepared(), "-o", out, *config_args, "--max-time", f"{ARGS.minutes}m",
            "--force", *flags)  # fmt: skip
    return out


def training(model: Path) -> dict:
    """Updates and seconds of a model's training, from the last line of its train.jsonl."""
    lines = (model / "train.jsonl").read_text(encoding="utf-8").splitlines()
    done = json.loads(lines[-1])
    return {"updates": done["step"], "train_seconds": round(done["train_seconds"], 1)}


def matmul_rate() -> dict:
    """The machine's fp32 matmul rate, measured as bench/ measures it."""
    sys.path.insert(0, str(REPO / "bench"))
    import flops

    return {
        "matmul_gflops": round(flops.matmul_gflops(), 1),
        "matmul_command": flops.MATMUL_COMMAND,
    }


def test_bleu(*models: Path) -> dict:
    models_args = [arg for model in models for arg in ("-m", model)]
    test = ARGS.data / "test_2016_flickr"
    report = json.loads(run(NMT, "eval", *models_args, "--src", f"{test}.de.gz", "--ref", f"{test}.en.gz",
                            "--metrics", "bleu", "--beam", "5", "--no-shortlist", "--json"))  # fmt: skip
    # (exact search for every model: the default would use the shortlist for some only)
    (bleu,) = report["metrics"]
    return {"bleu": round(bleu["score"], 2), "signature": bleu["signature"]}


def averaging() -> dict:
    rows = []
    for name, config in CONFIGS.items():
        model = trained(f"avg-{name}", config, "--keep-checkpoints", "5", "--valid-every", "200")
        row = {"config": name, "training": training(model), "best": test_bleu(model)}
        for last in (3, 5):
            out = ARGS.runs / f"avg-{name}-last{last}"
            run(NMT, "average", model, "--last", last, "-o", out)
            row[f"last{last}"] = test_bleu(out)
        rows.append(row)
    return {"rows": rows}


def ensembles() -> dict:
    models = [trained(f"seed{seed}", None, "--seed", seed) for seed in (1, 2, 3)]
    singles = [test_bleu(model) for model in models]
    return {
        "training": [training(model) for model in models],
        "singles": singles,
        "single_mean": round(statistics.mean(s["bleu"] for s in singles), 2),
        "two": test_bleu(*models[:2]),
        "three": test_bleu(*models),
    }


def render(kind: str, results: dict) -> str:
    head = [f"# {kind.capitalize()} on Multi30k de→en", "",
            f"Written by `make {'average' if kind == 'averaging' else 'ensemble'}-report` "
            f"({results['date_utc']}) from docs/results/{kind}.json; test_2016_flickr, beam 5, "
            "sacreBLEU " + results["signature"] + f". Each training: {ARGS.minutes:g} minutes on this machine "
            f"({machine_line(results)}); the updates each model made are listed.", ""]  # fmt: skip
    if kind == "averaging":
        lines = ["| config | updates | best checkpoint | average of last 3 | average of last 5 |",
                 "|---|---:|---:|---:|---:|"]  # fmt: skip
        lines += [f"| {r['config']} | {updates(r.get('training'))} | {r['best']['bleu']:.2f} | "
                  f"{r['last3']['bleu']:.2f} | {r['last5']['bleu']:.2f} |" for r in results["rows"]]  # fmt: skip
    else:
        singles = ", ".join(f"{s['bleu']:.2f}" for s in results["singles"])
        steps = ", ".join(updates(t) for t in results.get("training", []))
        lines = ["| models | test BLEU |", "|---|---:|",
                 f"| one (seeds 1, 2, 3: {singles}) | {results['single_mean']:.2f} (mean) |",
                 f"| two (seeds 1 + 2) | {results['two']['bleu']:.2f} |",
                 f"| three | {results['three']['bleu']:.2f} |", "",
                 f"Updates of the models of seeds 1, 2, 3: {steps}."]  # fmt: skip
    return "\n".join(head + lines) + "\n"


def updates(training: dict | None) -> str:
    return f"{training['updates']:,}" if training else "–"


def machine_line(results: dict) -> str:
    rate = results.get("matmul_gflops")
    measured = (
        f"fp32 matmul {rate} GFLOP/s, {results['matmul_command']}"
        if rate
        else ("the matmul rate was not measured in this run")
    )
    return f"{measured}; load average {results.get('load_before', '–')} before the run"


def main() -> None:
    ARGS.__dict__.update(vars(parse_args()))
    kind = ARGS.kind
    if ARGS.render_only:  # the updates filled in from the models' train.jsonl where missing
        out = ARGS.docs / "results" / f"{kind}.json"
        results = json.loads(out.read_text(encoding="utf-8"))
        for row in results.get("rows", []):
            row.setdefault("training", training(ARGS.runs / f"avg-{row['config']}"))
        out.write_text(json.dumps(results, indent=2) + "\n", encoding="utf-8")
        (ARGS.docs / f"{kind}.md").write_text(render(kind, results), encoding="utf-8")
        return
    started = {"load_before": " ".join(f"{x:.2f}" for x in os.getloadavg()), **matmul_rate()}
    results = averaging() if kind == "averaging" else ensembles()
    results |= started
    first = results["rows"][0]["best"] if kind == "averaging" else results["singles"][0]
    results |= {"date_utc": datetime.now(UTC).strftime("%Y-%m-%d %H:%M UTC"),
                "signature": first["signature"]}  # fmt: skip
    (ARGS.docs / "results").mkdir(parents=True, exist_ok=True)
    out = ARGS.docs / "results" / f"{kind}.json"
    out.write_text(json.dumps(results, indent=2) + "\n", encoding="utf-8")
    (ARGS.docs / f"{kind}.md").write_text(render(kind, results), encoding="utf-8")


if __name__ == "__main__":
    main()
