#!/usr/bin/env bash
# The whole workflow on the embedded English→Chinese demo corpus (data/demo/, synthetic):
# prepare → train → translate → eval → align, then a one-screen summary (OUT/summary.json).
# Usage: data/demo.sh [OUTPUT_DIR] (default runs/demo).
# Training runs for the update budget of data/configs/demo.toml (max_steps), whatever the
# machine's speed; DEMO_MAX_TIME (default 60m) is only a safety cap. DEMO_RECORD=FILE also
# writes the summary to FILE (docs/results/demo.json is the committed copy the README quotes).
set -euo pipefail
cd "$(dirname "$0")/.."
out=${1:-runs/demo}
nmt=${NMT:-.venv/bin/nmt}
py=${PY:-.venv/bin/python}
demo=data/demo
config=${DEMO_CONFIG:-data/configs/demo.toml}
cap=${DEMO_MAX_TIME:-60m}
started=$(date +%s.%N)

# Bold headers only on a terminal that wants colour (NO_COLOR is respected), as nmt's own output
if [ -t 2 ] && [ -z "${NO_COLOR:-}" ]; then
    step() { printf '\n\033[1m== %s\033[0m\n' "$*" >&2; }
else
    step() { printf '\n== %s\n' "$*" >&2; }
fi
since() { awk -v a="$1" -v b="$(date +%s.%N)" 'BEGIN { printf "%.1f", b - a }'; }

step "prepare: clean the corpus, train SentencePiece, store token ids"
$nmt prepare --src $demo/train.en --tgt $demo/train.zh \
    --dev-src $demo/dev.en --dev-tgt $demo/dev.zh --test-src $demo/test.en --test-tgt $demo/test.zh \
    --src-lang en --tgt-lang zh --vocab-size 800 -o "$out/data" --force

step "warm-up: 60 updates to measure this machine's speed"
probe_start=$(date +%s.%N)
# The demo corpus comes with its generator's word links for the training pairs: guided
# alignment (demo.toml) trains the attention towards them (without --alignments, nmt train
# would compute links with eflomal instead).
links="--alignments $demo/train.align"
if ! $nmt train "$out/data" -o "$out/probe" --config $config $links --max-steps 60 --log-every 20 \
    --force > "$out/probe.log" 2>&1; then
    cat "$out/probe.log" >&2
    exit 1
fi
$py data/demo_report.py estimate "$out/probe" $config "$(since "$probe_start")" >&2
rm -rf "$out/probe" "$out/probe.log"

step "train: attention encoder-decoder, the update budget of $config (safety cap $cap)"
$nmt train "$out/data" -o "$out/model" --config $config $links --max-time "$cap" --force

step "translate: five test sentences (greedy), each under its source"
head -n 5 $demo/test.en | $nmt translate -m "$out/model" --beam 1 \
    | paste -d '\n' <(head -n 5 $demo/test.en) <(sed 's/^/→ /')

step "eval: the 500 test sentences, beam 5, BLEU by source length"
$nmt eval -m "$out/model" --src $demo/test.en --ref $demo/test.zh --beam 5 --by-length \
    --save-hyp "$out/test.hyp.zh" --json > "$out/test.eval.json"

step "align: forced alignment of the test split, scored against the generator's gold links"
$nmt align -m "$out/model" --src $demo/test.en --tgt $demo/test.zh --gold $demo/test.align \
    --view none 2>&1 > "$out/test.align" | tee "$out/test.align.log" >&2

step "align: the same in two passes, with how often each word pair was linked across the test split as a prior"
$nmt align -m "$out/model" --src $demo/test.en --tgt $demo/test.zh --gold $demo/test.align \
    --method mutual --grow-threshold 0.2 --corpus-prior 0.5 --view none \
    2>&1 > "$out/test.prior.align" | tee "$out/test.prior.log" >&2

step "align: where the model looked, for two test sentences"
paste -d '|' <(head -n 2 $demo/test.en) <(head -n 2 $demo/test.zh) | sed 's/|/ ||| /' |
    $nmt align -m "$out/model" --view heatmap > /dev/null

step "summary ($out/summary.json)"
$py data/demo_report.py summary "$out" $config "$(since "$started")" \
    ${DEMO_RECORD:+--record "$DEMO_RECORD"} >&2
