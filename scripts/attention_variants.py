"""Every attention variant against the plain Seq2Seq on the demo corpus, in an equal budget.

Trains `--attention none` and each of dot, general and additive with each decoder style
(luong, bahdanau) on the embedded demo corpus with data/configs/demo.toml, the same
wall-clock budget each (two runs at a time, one CPU thread each), and writes the best dev
BLEU of every run to a Markdown table.

    python scripts/attention_variants.py --seconds 90 --out runs/variants
"""

from __future__ import annotations

import argparse
import json
import shlex
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
NMT = [sys.executable, "-m", "nmt_cli"]
DEMO = "data/demo"
VARIANTS = [("none", "luong")] + [
    (attention, style)
    for attention in ("dot", "general", "additive")
    for style in ("luong", "bahdanau")
]


def shown(command: list[str]) -> str:
    """A command as a person would type it from the repository root."""
    text = " ".join(shlex.quote(c) for c in ["nmt", *command[len(NMT) :]])
    return text.replace(f"{ROOT}/", "")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    budget = parser.add_mutually_exclusive_group()
    budget.add_argument("--seconds", type=int, help="wall-clock budget per model")
    budget.add_argument("--steps", type=int, help="updates per model (default 400)")
    parser.add_argument("--parallel", type=int, default=2, help="runs at a time (1 thread each)")
    parser.add_argument(
        "--reuse", action="store_true", help="keep runs that already finished (report only)"
    )
    parser.add_argument("--out", type=Path, default=ROOT / "runs" / "variants")
    parser.add_argument("--report", type=Path, default=ROOT / "docs" / "attention-variants.md")
    args = parser.parse_args()
    if args.seconds is None and args.steps is None:
        args.steps = 400
    limit = ["--max-time", f"{args.seconds}s"] if args.seconds else ["--max-steps", str(args.steps)]
    budget_text = f"{args.seconds} s of training" if args.seconds else f"{args.steps} updates"
    key = f"{args.seconds}s" if args.seconds else f"{args.steps}-updates"
    data = args.out / "data"
    prepare = [
        *NMT,
        "prepare",
        *("--src", f"{DEMO}/train.en", "--tgt", f"{DEMO}/train.zh"),
        *("--dev-src", f"{DEMO}/dev.en", "--dev-tgt", f"{DEMO}/dev.zh"),
        *("--test-src", f"{DEMO}/test.en", "--test-tgt", f"{DEMO}/test.zh"),
        *("--vocab-size", "800", "-o", str(data), "--force"),
    ]
    subprocess.run(prepare, cwd=ROOT, check=True, stdout=subprocess.DEVNULL)
    commands = {
        variant: [
            *NMT,
            "train",
            str(data),
            "-o",
            str(args.out / key / f"{variant[0]}-{variant[1]}"),
            *("--config", "data/configs/demo.toml"),
            # guided alignment off, as measured (before demo.toml turned it on): attention
            # learnt from translating alone, and --attention none has none to guide
            *("--guided-alignment", "0"),
            *("--attention", variant[0], "--decoder-style", variant[1]),
            *limit,
            *("--threads", "1", "--seed", "1", "--force"),
        ]
        for variant in VARIANTS
    }
    (args.out / key).mkdir(parents=True, exist_ok=True)
    pending = [v for v in commands if not (args.reuse and finished(args.out / key, v))]
    while pending:
        group, pending = pending[: args.parallel], pending[args.parallel :]
        procs = []
        for variant in group:
            print(f"$ {shown(commands[variant])}", file=sys.stderr, flush=True)
            log = open(args.out / key / f"{variant[0]}.{variant[1]}.log", "w", encoding="utf-8")
            procs.append((variant, subprocess.Popen(commands[variant], cwd=ROOT, stderr=log)))
        for variant, proc in procs:
            if proc.wait():
                sys.exit(f"{variant} failed: see {args.out}/{key}/{variant[0]}.{variant[1]}.log")
    rows = []
    for attention, style in VARIANTS:
        run = args.out / key / f"{attention}-{style}"
        meta = json.loads((run / "meta.json").read_text(encoding="utf-8"))
        events = (run / "train.jsonl").read_text(encoding="utf-8").splitlines()
        done = next(e for e in map(json.loads, reversed(events)) if e["event"] == "done")
        rows.append((attention, style, meta, done))
    baseline = rows[0][2]["best_dev_bleu"]
    config = json.loads((args.out / key / "none-luong" / "config.json").read_text(encoding="utf-8"))
    dev = config["train"]["valid_sentences"]
    flag = f"--seconds {args.seconds}" if args.seconds else f"--steps {args.steps}"
    lines = [
        f"<!-- budget:{key} -->",
        f"## The same budget: {budget_text}",
        "",
        f"Each model: data/configs/demo.toml, {budget_text} on one CPU thread "
        f"({args.parallel} runs at a time on this machine), seed 1; best dev BLEU (greedy, "
        f"{dev} dev sentences spread evenly over the split, sacreBLEU). Regenerate with "
        f"`python scripts/attention_variants.py {flag}`.",
        "",
        "| attention | decoder style | updates | training seconds | best dev BLEU | − none |",
        "|---|---|---|---|---|---|",
    ]
    for attention, style, meta, done in rows:
        style_shown = "–" if attention == "none" else style
        lines.append(
            f"| {attention} | {style_shown} | {done['step']} | {done['train_seconds']:.0f} | "
            f"{meta['best_dev_bleu']:.2f} | {meta['best_dev_bleu'] - baseline:+.2f} |"
        )
    lines += ["", "Commands:", "", "```", shown(prepare)]
    lines += [shown(commands[v]) for v in VARIANTS]
    lines += ["```", f"<!-- end:{key} -->"]
    write_section(args.report, key, "\n".join(lines))
    print("\n".join(lines[7 : 8 + len(rows)]), file=sys.stderr)


def finished(root: Path, variant: tuple[str, str]) -> bool:
    log = root / f"{variant[0]}-{variant[1]}" / "train.jsonl"
    return log.exists() and '"event": "done"' in log.read_text(encoding="utf-8")


def write_section(report: Path, key: str, section: str) -> None:
    """Write (or replace) one budget's section of the report."""
    text = report.read_text(encoding="utf-8") if report.exists() else HEADER
    start, end = f"<!-- budget:{key} -->", f"<!-- end:{key} -->"
    if start in text:
        text = text[: text.index(start)] + section + text[text.index(end) + len(end) :]
    else:
        text = text.rstrip() + "\n\n" + section + "\n"
    report.parent.mkdir(parents=True, exist_ok=True)
    report.write_text(text, encoding="utf-8")


HEADER = """# Attention variants against the plain Seq2Seq (demo corpus)

`--attention none` and dot, general and additive attention in both decoder styles, trained on
the embedded English→Chinese demo corpus with the same budget each: a number of updates
(the architectures compared step for step) or a wall-clock time (compared per CPU-second, where
the step-loop decoders pay for their recurrence through attention).
"""


if __name__ == "__main__":
    main()
