"""AER of one guided model's alignments for each way of mixing in its training link rates.

For each dev set (a guided model, source and target text, gold links), reads the model's
attention once per pair (teacher-forced, as `nmt align --src --tgt` does) and its
`link_rates.tsv`, then extracts links with every choice of the grid: no prior; the linear mix
(1 − s)·A + s·R of `--corpus-prior`'s kind; and the product of experts of `--link-prior`,
A^(1 − s)·(R + floor)^s, for several shares, floors, thresholds and grow thresholds. Writes the
scores of every choice on every set, and each choice's mean AER over the sets, as JSON.

    python scripts/link_prior_grid.py --out docs/results/link-prior-grid.json \\
        --set "demo dev=runs/demo/model,data/demo/dev.en,data/demo/dev.zh,data/demo/dev.align" \\
        --set "hansards=MODEL,dev.en,dev.fr,dev.wa"
"""

from __future__ import annotations

import argparse
import itertools
import json
import sys
import time
from dataclasses import replace
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from nmt_cli.aligner import (  # noqa: E402
    LINK_PRIOR_EXTRACTION,
    LINK_PRIOR_SHARE,
    AlignOptions,
    pair_links,
    pair_weights,
)
from nmt_cli.alignment import LINK_PRIOR_FLOOR, read_gold, score_alignments  # noqa: E402
from nmt_cli.checkpoint import load_link_rates  # noqa: E402
from nmt_cli.lines import read_lines  # noqa: E402
from nmt_cli.translator import Translator  # noqa: E402

THRESHOLDS = (0.3, 0.35, 0.4, 0.5)
GROWS = (0.1, 0.2, 0.25)
LINEAR_SHARES = (0.3, 0.5, 0.7)
PRODUCT_SHARES = (0.5, 0.7, 0.75, 0.8, 0.85, 0.9)
FLOORS = (0.01, 0.05, 0.1)


def choices() -> list[tuple[str, dict]]:
    """(name, AlignOptions fields) of every choice, threshold extraction throughout."""
    grid = [("no prior", {"threshold": t, "grow_threshold": g}) for t in (0.5,) for g in (0.2,)]
    for share, t, g in itertools.product(LINEAR_SHARES, THRESHOLDS, GROWS):
        grid.append(("linear", {"corpus_prior": share, "threshold": t, "grow_threshold": g}))
    for share, floor, t, g in itertools.product(PRODUCT_SHARES, FLOORS, THRESHOLDS, GROWS):
        fields = {"link_prior": share, "link_floor": floor, "threshold": t, "grow_threshold": g}
        grid.append(("product", fields))
    return grid


def scores_of(spec: str) -> tuple[str, dict]:
    name, _, paths = spec.partition("=")
    model, src, tgt, gold = (Path(p) for p in paths.split(","))
    translator = Translator.load(model, threads=2)
    rates = load_link_rates(model)
    if rates is None:
        raise SystemExit(f"{model} has no link rates: train it with --guided-alignment")
    base = AlignOptions(
        unit=translator.config.train.align_unit,
        shift=translator.model.config.align_shift,
        method="threshold",
    )
    pairs = zip(read_lines(src), read_lines(tgt), strict=True)
    weights = [pair_weights(translator, s.strip(), t.strip(), base) for s, t in pairs]
    gold_links = read_gold(gold)
    rows = {}
    for kind, fields in choices():
        options = replace(base, **fields)
        # the linear mix is computed by pair_links when it is given rates and no link prior
        links = [
            pair_links(p, options, rates if kind != "no prior" else None).links for p in weights
        ]
        score = score_alignments(links, gold_links)
        key = kind + " " + " ".join(f"{k}={v}" for k, v in fields.items())
        rows[key] = {
            "aer": round(100 * score.aer, 2),
            "precision": round(100 * score.precision, 2),
            "recall": round(100 * score.recall, 2),
            "links": score.predicted,
        }
    return name, {
        "model": str(model),
        "src": str(src),
        "tgt": str(tgt),
        "gold": str(gold),
        "rows": rows,
    }


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--set", action="append", required=True, help="NAME=MODEL,SRC,TGT,GOLD")
    parser.add_argument("--out", type=Path, required=True)
    args = parser.parse_args()
    started = time.time()
    sets = dict(scores_of(spec) for spec in args.set)
    keys = list(next(iter(sets.values()))["rows"])
    mean = {k: round(sum(s["rows"][k]["aer"] for s in sets.values()) / len(sets), 2) for k in keys}
    best = min(mean, key=mean.get)
    default = "product " + " ".join(
        f"{k}={v}"
        for k, v in {
            "link_prior": LINK_PRIOR_SHARE,
            "link_floor": LINK_PRIOR_FLOOR,
            "threshold": LINK_PRIOR_EXTRACTION["threshold"],
            "grow_threshold": LINK_PRIOR_EXTRACTION["grow_threshold"],
        }.items()
    )
    result = {
        "command": "python scripts/link_prior_grid.py "
        + " ".join(f"--set '{s}'" for s in args.set),
        "date_utc": time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime()),
        "seconds": round(time.time() - started, 1),
        "sets": sets,
        "mean_aer": mean,
        "best": best,
        "default": default,
    }
    args.out.write_text(json.dumps(result, indent=1, ensure_ascii=False) + "\n", encoding="utf-8")
    print(f"best mean AER {mean[best]} %: {best}")
    print(f"default       {mean.get(default)} %: {default}")
    for name, s in sets.items():
        print(f"  {name}: best {s['rows'][best]['aer']} %, default {s['rows'][default]['aer']} %")
    return 0


if __name__ == "__main__":
    sys.exit(main())
