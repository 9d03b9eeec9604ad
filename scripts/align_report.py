"""Score `nmt align` commands and other aligners' Pharaoh files against gold links.

One call per corpus runs each `--row "NAME=COMMAND"` (an `nmt align` command line, shown in the
report exactly as run), reads its Pharaoh output, scores it (AER, precision, recall), scores
each `--file "NAME=PATH"` the same way, and stores the corpus's section in the results JSON.
`--speed` adds the training speed of guided and unguided runs of one configuration (median
and range over rounds, from their train.jsonl). `--render` writes the Markdown report from the
results JSON. scripts/align_report.sh (`make align-report`) holds the calls.
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


def score_corpus(args) -> None:
    gold = read_gold(args.gold)
    section = {"title": args.title, "gold": str(args.gold), "note": args.note, "rows": []}
    marks = dict(_named(m) for m in args.mark)
    for name, command in map(_named, args.row):
        links, seconds = _run(command)
        row = {"name": name, "command": command, "seconds": round(seconds, 1)}
        section["rows"].append({**row, "mark": marks.get(name, ""), **_scores(links, gold)})
        print(f"{args.corpus}: {name}: AER {section['rows'][-1]['aer']}", file=sys.stderr)
    for name, path in map(_named, args.file):
        links = [parse_pharaoh(line) for line in Path(path).read_text().splitlines()]
        section["rows"].append({"name": name, "command": "", "mark": marks.get(name, ""),
                                "file": path, **_scores(links, gold)})  # fmt: skip
        print(f"{args.corpus}: {name}: AER {section['rows'][-1]['aer']}", file=sys.stderr)
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
        lines += ["| aligner | AER % | precision % | recall % | links |", "|---|---|---|---|---|"]
        for row in section["rows"]:
            mark = f" **({row['mark']})**" if row["mark"] else ""
            lines.append(
                f"| {row['name']}{mark} | {row['aer']:.2f} | {row['precision']:.2f} | "
                f"{row['recall']:.2f} | {row['links']:,} |"
            )
        lines.append("")
        commands = [row for row in section["rows"] if row["command"]]
        if commands:
            lines += ["Commands, as run (from the repository root):", ""]
            lines += [f"- {row['name']}: `{row['command']}`" for row in commands]
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


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--results", type=Path, required=True)
    parser.add_argument("--corpus", help="the section's key in the results JSON")
    parser.add_argument("--title", default="")
    parser.add_argument("--note", default="")
    parser.add_argument("--gold", type=Path)
    parser.add_argument("--row", action="append", default=[], metavar="NAME=COMMAND")
    parser.add_argument("--file", action="append", default=[], metavar="NAME=PATH")
    parser.add_argument("--mark", action="append", default=[], metavar="NAME=LABEL")
    parser.add_argument("--speed", action="append", default=[], metavar="GUIDED_DIR,PLAIN_DIR")
    parser.add_argument("--render", action="store_true")
    parser.add_argument("--out", type=Path, default=ROOT / "docs" / "alignment.md")
    parser.add_argument("--heading", default="# Word alignments from `nmt align`")
    args = parser.parse_args()
    if args.render:
        render(args)
    else:
        score_corpus(args)


if __name__ == "__main__":
    main()
