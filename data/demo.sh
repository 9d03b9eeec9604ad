#!/usr/bin/env bash
# The whole workflow on the embedded English→Chinese demo corpus (data/demo/, synthetic):
# prepare → train → translate → eval → align. Usage: data/demo.sh [OUTPUT_DIR] (default runs/demo).
# DEMO_TIME sets the training budget (default 5m).
set -euo pipefail
cd "$(dirname "$0")/.."
out=${1:-runs/demo}
nmt=${NMT:-.venv/bin/nmt}
demo=data/demo
budget=${DEMO_TIME:-5m}

step() { printf '\n\033[1m== %s\033[0m\n' "$*" >&2; }

step "prepare: clean the corpus, train SentencePiece, store token ids"
$nmt prepare --src $demo/train.en --tgt $demo/train.zh \
    --dev-src $demo/dev.en --dev-tgt $demo/dev.zh --test-src $demo/test.en --test-tgt $demo/test.zh \
    --src-lang en --tgt-lang zh --vocab-size 800 -o "$out/data" --force

step "train: attention encoder-decoder, $budget on this machine"
$nmt train "$out/data" -o "$out/model" --config data/configs/demo.toml --max-time "$budget" --force

step "translate: five test sentences (greedy)"
head -n 5 $demo/test.en | tee /dev/stderr | $nmt translate -m "$out/model" --beam 1

step "eval: the 500 test sentences, beam 5, BLEU by source length"
$nmt eval -m "$out/model" --src $demo/test.en --ref $demo/test.zh --beam 5 --by-length \
    --save-hyp "$out/test.hyp.zh"

step "align: forced alignment of the test split, scored against the generator's gold links"
$nmt align -m "$out/model" --src $demo/test.en --tgt $demo/test.zh --gold $demo/test.align \
    --view none > "$out/test.align"

step "align: the same in two passes, with how often each word pair was linked across the test split as a prior"
$nmt align -m "$out/model" --src $demo/test.en --tgt $demo/test.zh --gold $demo/test.align \
    --method mutual --grow-threshold 0.2 --corpus-prior 0.5 --view none > "$out/test.prior.align"

step "align: where the model looked, for two test sentences"
paste -d '|' <(head -n 2 $demo/test.en) <(head -n 2 $demo/test.zh) | sed 's/|/ ||| /' |
    $nmt align -m "$out/model" --view heatmap > /dev/null
