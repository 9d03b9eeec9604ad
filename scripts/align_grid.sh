#!/usr/bin/env bash
# docs/alignment-extraction.md and docs/results/alignment-extraction.json: attention alignments
# of an en→zh and a zh→en demo model trained without guided alignment (the update budget of
# data/configs/demo.toml each, --guided-alignment 0) scored against the demo gold links for
# every extraction choice, beside eflomal trained on the same data. Models already in runs/ are
# reused. (`make align-report` is the report on guided models and on the Hansards.)
set -euo pipefail
cd "$(dirname "$0")/.."
nmt=${NMT:-.venv/bin/nmt}
py=${PYTHON:-.venv/bin/python}
demo=data/demo
for pair in en-zh zh-en; do
    src=${pair%-*} tgt=${pair#*-} out=runs/demo-$pair
    if [ ! -f "$out/model/model.pt" ]; then
        $nmt prepare --src $demo/train.$src --tgt $demo/train.$tgt \
            --dev-src $demo/dev.$src --dev-tgt $demo/dev.$tgt \
            --test-src $demo/test.$src --test-tgt $demo/test.$tgt \
            --src-lang "$src" --tgt-lang "$tgt" --vocab-size 800 -o "$out/data" --force
        $nmt train "$out/data" -o "$out/model" --config data/configs/demo.toml \
            --guided-alignment 0 --force
    fi
done
$py bench/eflomal_align.py --out runs/eflomal
$py scripts/align_grid.py --forward runs/demo-en-zh/model --backward runs/demo-zh-en/model \
    --src $demo/test.en --tgt $demo/test.zh --gold $demo/test.align \
    --other "eflomal, en→zh=runs/eflomal/test.forward" \
    --other "eflomal, zh→en=runs/eflomal/test.reverse" \
    --other "eflomal, grow-diag-final-and=runs/eflomal/test.gdfa" \
    --results docs/results/alignment-extraction.json --out docs/alignment-extraction.md
