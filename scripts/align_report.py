"""Score `nmt align` commands and other aligners' Pharaoh files against gold links.

One call per corpus runs each `--row "NAME=COMMAND"` (an `nmt align` command line, shown in the
report exactly as run), reads its Pharaoh output, scores it (AER, precision, recall), scores
each `--file "NAME=PATH"` the same way, and stores the corpus's section in the results JSON.
A NAME given several times is one row measured over rounds (models trained from other seeds,
aligners run again): the table shows the median and the range. `--goal "OURS<=THEIRS"`
compares two rows' median AER; `--model NAME=DIR` records how much training a model had (its
updates and epochs, from train.jsonl) and `--machine FILE` this machine's fp32 matmul rate
(written before the training by `--measure-machine FILE`), since the models are trained for a
time budget. `--speed` adds the training speed of guided and unguided
runs of one configuration (median and range over rounds, from their train.jsonl). `--render`
writes the Markdown report from the results JSON. scripts/align_report.sh
(`make align-report`) holds the calls.
"""

from __future__ import annotations

import argparse
import json
import shlex
import statistics
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from nmt_cli.alignment import parse_pharaoh, read_gold, score_alignments  # noqa: E402


def _named(value: str) -> tuple[str, str]:
    name, _, rest = value.partition("=")
    if not rest:
        raise SystemExit(f"expected NAME=VALUE, got {value!r}")
    return name.strip(), rest.strip()


def _scores(links: list[set], gold) -> dict:
    score = score_alignments(links, gold)
    return {
        "aer": round(score.aer * 100, 2),
        "precision": round(score.precision * 100, 2),
        "recall": round(score.recall * 100, 2),
        "links": score.predicted,
    }


def _run(command: str) -> tuple[list[set], float]:
    started = time.monotonic()
    done = subprocess.run(shlex.split(command), cwd=ROOT, capture_output=True, text=True)
    if done.returncode != 0:
        raise SystemExit(f"{command} failed:\n{done.stderr[-2000:]}")
    return [parse_pharaoh(line) for line in done.stdout.splitlines()], time.monotonic() - started


def _speed(runs: list[str]) -> dict:
    """tokens/s of each run (the mean over its train events), guided vs unguided, by round."""

    def rate(model_dir: str) -> float:
        events = [json.loads(line) for line in (Path(model_dir) / "train.jsonl").open()]
        rates = [e["tokens_per_s"] for e in events if e["event"] == "train"][1:]  # warm-up out
        return statistics.mean(rates)

    pairs = [run.split(",") for run in runs]
    guided = [rate(g) for g, _ in pairs]
    plain = [rate(p) for _, p in pairs]
    ratios = [g / p for g, p in zip(guided, plain, strict=True)]
    return {
        "rounds": len(pairs),
        "guided_tokens_per_s": [round(x, 1) for x in guided],
        "plain_tokens_per_s": [round(x, 1) for x in plain],
        "ratio_median": round(statistics.median(ratios), 3),
        "ratio_min": round(min(ratios), 3),
        "ratio_max": round(max(ratios), 3),
    }


def _row(name: str, mark: str, rounds: list[dict]) -> dict:
    """One aligner's row: its rounds, and their median (and range) of each score."""
    row = {"name": name, "mark": mark, "rounds": rounds}
    for key in ("aer", "precision", "recall", "links"):
        row[key] = statistics.median(r[key] for r in rounds)
    row["aer_min"] = min(r["aer"] for r in rounds)
    row["aer_max"] = max(r["aer"] for r in rounds)
    row["command"] = rounds[0].get("command", "")
    return row


def _trained(name: str, model_dir: str) -> dict:
    """How much training a model had: the final event of its train.jsonl."""
    events = [json.loads(line) for line in (Path(model_dir) / "train.jsonl").open()]
    done = [e for e in events if e["event"] == "done"]
    if not done:
        raise SystemExit(f"{model_dir}: its training did not finish (no done event): retrain it")
    done = done[-1]
    return {"name": name, "dir": model_dir, "updates": done["step"],
            "epochs": done.get("epochs_finished", done["epoch"]), "train_seconds": round(done["train_seconds"], 1)}  # fmt: skip


def measure_machine(path: Path) -> None:
    """Write this machine's cores, CPU and fp32 matmul rate to `path` (JSON)."""
    sys.path.insert(0, str(ROOT / "bench"))
    import flops
    import machine

    described = machine.describe()
    facts = {"cpu": described.cpu_model, "cores": described.nproc, "date": described.date_utc,
             "matmul_gflops": round(flops.matmul_gflops(), 1), "measured": flops.MATMUL_COMMAND}  # fmt: skip
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(facts) + "\n")


def _goal(text: str, rows: list[dict]) -> dict:
    ours, _, theirs = text.partition("<=")
    by_name = {row["name"]: row for row in rows}
    if ours.strip() not in by_name or theirs.strip() not in by_name:
        raise SystemExit(f"--goal {text!r}: both sides must name a row")
    a, b = by_name[ours.strip()], by_name[theirs.strip()]
    return {"ours": a["name"], "theirs": b["name"], "ours_aer": a["aer"], "theirs_aer": b["aer"],
            "met": a["aer"] <= b["aer"]}  # fmt: skip


def score_corpus(args) -> None:
    gold = read_gold(args.gold)
    section = {"title": args.title, "gold": str(args.gold), "note": args.note, "rows": []}
    marks = dict(_named(m) for m in args.mark)
    rounds: dict[str, list[dict]] = {}
    for name, command in map(_named, args.row):
        links, seconds = _run(command)
        rounds.setdefault(name, []).append(
            {"command": command, "seconds": round(seconds, 1), **_scores(links, gold)}
        )
        print(f"{args.corpus}: {name}: AER {rounds[name][-1]['aer']}", file=sys.stderr)
    for name, path in map(_named, args.file):
        links = [parse_pharaoh(line) for line in Path(path).read_text().splitlines()]
        rounds.setdefault(name, []).append({"file": path, **_scores(links, gold)})
        print(f"{args.corpus}: {name}: AER {rounds[name][-1]['aer']}", file=sys.stderr)
    section["rows"] = [_row(name, marks.get(name, ""), own) for name, own in rounds.items()]
    section["goals"] = [_goal(goal, section["rows"]) for goal in args.goal]
    section["models"] = [_trained(*_named(model)) for model in args.model]
    if args.machine:
        section["machine"] = json.loads(args.machine.read_text())
    if args.speed:
        section["speed"] = _speed(args.speed)
    results = json.loads(args.results.read_text()) if args.results.exists() else {}
    results[args.corpus] = section
    args.results.write_text(json.dumps(results, indent=1, ensure_ascii=False) + "\n")


def render(args) -> None:
    results = json.loads(args.results.read_text())
    lines = [args.heading.strip(), ""]
    for section in results.values():
        if not isinstance(section, dict) or "rows" not in section:
            continue
        lines += [f"## {section['title']}", "", section["note"], ""]
        lines += _table(section["rows"])
        lines += _goals(section.get("goals", []), section["rows"])
        lines += _training(section.get("models", []), section.get("machine"))
        commands = [
            (row["name"], r["command"]) for row in section["rows"] for r in _rounds(row)
            if r.get("command")
        ]  # fmt: skip
        if commands:
            lines += ["Commands, as run (from the repository root):", ""]
            lines += [f"- {name}: `{command}`" for name, command in commands]
            lines.append("")
        if "speed" in section:
            s = section["speed"]
            lines += [
                f"Training speed with guided alignment on, over {s['rounds']} interleaved rounds "
                f"(target tokens/s, guided: {', '.join(f'{x:,.0f}' for x in s['guided_tokens_per_s'])}; "
                f"unguided: {', '.join(f'{x:,.0f}' for x in s['plain_tokens_per_s'])}): "
                f"{s['ratio_median']:.3f}× the unguided speed "
                f"(range {s['ratio_min']:.3f}–{s['ratio_max']:.3f}).",
                "",
            ]
    notes = args.out.read_text(encoding="utf-8") if args.out.exists() else ""
    start = notes.find(NOTES)
    lines.append(notes[start:].rstrip() if start >= 0 else NOTES + "\n\n(to be written)")
    args.out.write_text("\n".join(lines) + "\n", encoding="utf-8")


NOTES = "## How the defaults were chosen"


def _rounds(row: dict) -> list[dict]:
    return row.get("rounds") or [row]  # a row written before rounds existed is one round


def _table(rows: list[dict]) -> list[str]:
    """The scores; over several rounds each is the median, AER with its range."""
    most = max(len(_rounds(row)) for row in rows)
    over, median = (" (median, range over rounds)", " (median)") if most > 1 else ("", "")
    lines = [f"| aligner | rounds | AER %{over} | precision %{median} | recall %{median} | "
             f"links{median} |",
             "|---|---:|---|---|---|---|"]  # fmt: skip
    for row in rows:
        mark = f" **({row['mark']})**" if row["mark"] else ""
        n = len(_rounds(row))
        aer = f"{row['aer']:.2f}"
        if n > 1:
            aer += f" ({row['aer_min']:.2f}–{row['aer_max']:.2f})"
        lines.append(
            f"| {row['name']}{mark} | {n} | {aer} | {row['precision']:.2f} | "
            f"{row['recall']:.2f} | {row['links']:,.0f} |"
        )
    return lines + [""]


def _goals(goals: list[dict], rows: list[dict]) -> list[str]:
    by_name = {row["name"]: row for row in rows}
    lines = []
    for goal in goals:
        ours, theirs = by_name[goal["ours"]], by_name[goal["theirs"]]
        each = ", ".join(f"{r['aer']:.2f}" for r in _rounds(ours))
        other = ", ".join(f"{r['aer']:.2f}" for r in _rounds(theirs))
        verdict = "met" if goal["met"] else "not met"
        lines.append(
            f"- Goal: {goal['ours']} at or below {goal['theirs']}, median AER: "
            f"{goal['ours_aer']:.2f} % against {goal['theirs_aer']:.2f} %, {verdict} "
            f"(rounds: {each}; against {other})."
        )
    return lines + [""] if lines else []


def _training(models: list[dict], machine: dict | None) -> list[str]:
    lines = []
    if machine:
        lines.append(
            f"Trained for a time budget on {machine['cores']} cores ({machine['cpu']}), fp32 matmul "
            f"{machine['matmul_gflops']:.1f} GFLOP/s ({machine['measured']}), measured {machine['date']}:"
        )
    for model in models:
        lines.append(
            f"- {model['name']} (`{model['dir']}`): {model['updates']:,} updates, "
            f"{model['epochs']} whole epochs, {model['train_seconds'] / 60:.1f} minutes."
        )
    return lines + [""] if lines else []


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--results", type=Path)
    parser.add_argument("--corpus", help="the section's key in the results JSON")
    parser.add_argument("--title", default="")
    parser.add_argument("--note", default="")
    parser.add_argument("--gold", type=Path)
    parser.add_argument("--row", action="append", default=[], metavar="NAME=COMMAND")
    parser.add_argument("--file", action="append", default=[], metavar="NAME=PATH")
    parser.add_argument("--mark", action="append", default=[], metavar="NAME=LABEL")
    parser.add_argument("--speed", action="append", default=[], metavar="GUIDED_DIR,PLAIN_DIR")
    parser.add_argument("--goal", action="append", default=[], metavar="OURS<=THEIRS")
    parser.add_argument("--model", action="append", default=[], metavar="NAME=DIR")
    parser.add_argument("--machine", type=Path, help="a --measure-machine file to record")
    parser.add_argument("--measure-machine", type=Path, metavar="FILE")
    parser.add_argument("--render", action="store_true")
    parser.add_argument("--out", type=Path, default=ROOT / "docs" / "alignment.md")
    parser.add_argument("--heading", default="# Word alignments from `nmt align`")
    args = parser.parse_args()
    if not args.measure_machine and not args.results:
        parser.error("--results is required")
    if args.measure_machine:
        measure_machine(args.measure_machine)
    elif args.render:
        render(args)
    else:
        score_corpus(args)


if __name__ == "__main__":
    main()
