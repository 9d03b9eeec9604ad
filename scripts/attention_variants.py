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
    parser.add_argument("--seconds", type=int, default=90, help="training budget per model")
    parser.add_argument("--parallel", type=int, default=2, help="runs at a time (1 thread each)")
    parser.add_argument("--out", type=Path, default=ROOT / "runs" / "variants")
    parser.add_argument("--report", type=Path, default=ROOT / "docs" / "attention-variants.md")
    args = parser.parse_args()
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
            str(args.out / f"{variant[0]}-{variant[1]}"),
            *("--config", "data/configs/demo.toml"),
            *("--attention", variant[0], "--decoder-style", variant[1]),
            *("--max-time", f"{args.seconds}s", "--threads", "1", "--seed", "1", "--force"),
        ]
        for variant in VARIANTS
    }
    pending = list(commands)
    while pending:
        group, pending = pending[: args.parallel], pending[args.parallel :]
        procs = []
        for variant in group:
            print(f"$ {shown(commands[variant])}", file=sys.stderr, flush=True)
            log = open(args.out / f"{variant[0]}-{variant[1]}.log", "w", encoding="utf-8")
            procs.append((variant, subprocess.Popen(commands[variant], cwd=ROOT, stderr=log)))
        for variant, proc in procs:
            if proc.wait():
                sys.exit(f"{variant} failed: see {args.out}/{variant[0]}-{variant[1]}.log")
    rows = []
    for attention, style in VARIANTS:
        meta = json.loads(
            (args.out / f"{attention}-{style}" / "meta.json").read_text(encoding="utf-8")
        )
        rows.append((attention, style, meta))
    baseline = rows[0][2]["best_dev_bleu"]
    config = json.loads((args.out / "none-luong" / "config.json").read_text(encoding="utf-8"))
    dev = config["train"]["valid_sentences"]
    lines = [
        "# Attention variants against the plain Seq2Seq (demo corpus)",
        "",
        f"Each model: data/configs/demo.toml, {args.seconds} s of training on one CPU thread "
        f"({args.parallel} runs at a time on this machine), seed 1; best dev BLEU (greedy, "
        f"the first {dev} dev sentences, sacreBLEU). Regenerate with "
        f"`python scripts/attention_variants.py --seconds {args.seconds}`.",
        "",
        "| attention | decoder style | updates | best dev BLEU | − none |",
        "|---|---|---|---|---|",
    ]
    for attention, style, meta in rows:
        style_shown = "–" if attention == "none" else style
        lines.append(
            f"| {attention} | {style_shown} | {meta['step']} | {meta['best_dev_bleu']:.2f} | "
            f"{meta['best_dev_bleu'] - baseline:+.2f} |"
        )
    lines += ["", "Commands:", "", "```", shown(prepare)]
    lines += [shown(commands[v]) for v in VARIANTS]
    lines += ["```", ""]
    args.report.parent.mkdir(parents=True, exist_ok=True)
    args.report.write_text("\n".join(lines), encoding="utf-8")
    print("\n".join(lines[6 : 7 + len(rows)]), file=sys.stderr)


if __name__ == "__main__":
    main()
