# Every target installs what it needs into .venv by itself.
PYTHON ?= python3
VENV := .venv
PY := $(VENV)/bin/python
STAMP := $(VENV)/.installed
TORCH_CPU := torch==2.13.0
DEMO_DIR := runs/demo

.PHONY: install demo test test-all lint bench bench-gpu bench-quality bench-translate bench-prepare bench-serve profile reproduce align-report align-grid average-report ensemble-report clean

install: $(STAMP)

$(STAMP): pyproject.toml
	test -x $(PY) || $(PYTHON) -m venv $(VENV)
	$(PY) -m pip install -q --upgrade pip
	# Take the CPU build of torch when none is present; leave an existing torch alone.
	$(PY) -c "import torch" 2>/dev/null || $(PY) -m pip install -q $(TORCH_CPU)
	$(PY) -m pip install -q -e ".[dev,serve]"
	# eflomal, guided alignment's teacher, is compiled here; without a compiler nmt still works
	# (guided training then needs --alignments FILE), so a failed build only warns.
	$(PY) -m pip install -q -e ".[dev,serve,align]" || echo "warning: eflomal did not build, so \
	guided alignment has no teacher: install a C compiler and run \`make install\` again, \
	or give nmt train --alignments FILE from another aligner" >&2
	touch $(STAMP)

# The demo trains for a fixed number of updates (data/configs/demo.toml), so every machine gets
# the same model; it says how long that takes here before it starts. DEMO_RECORD=FILE also
# writes the summary there: `make demo DEMO_RECORD=docs/results/demo.json` is the published run.
demo: install
	DEMO_RECORD="$(DEMO_RECORD)" bash data/demo.sh $(DEMO_DIR)

test: install
	$(PY) -m pytest -q

test-all: install
	$(PY) -m pytest -q -m ""

lint: install
	$(PY) -m ruff check nmt_cli tests data bench scripts
	$(PY) -m ruff format --check nmt_cli tests data bench scripts

# Speed, memory and BLEU beside OpenNMT-py and Joey NMT, all measured in one run (about 37 min
# on 2 cores, 31 without nmt-bf16, which runs only on CPUs with bfloat16 hardware, plus the
# peers' installation on a clean checkout), then the roofline of every
# speed goal nmt missed (bench/profile_report.py on the model it trained); writes bench/RESULTS.md.
# BENCH_ARGS="--systems nmt,nmt-fast --skip-install" for a subset.
bench: install
	$(PY) bench/run.py $(BENCH_ARGS)

# The same on a GPU: nmt (float32), nmt-bf16 and OpenNMT-py train and translate on the first
# GPU (bench/gpu/RESULTS.md; bench/GPU.md says how the committed run was made).
bench-gpu: install
	$(PY) bench/run.py --device cuda --systems nmt,onmt,nmt-bf16 --bench-minutes 0.6 \
	--warmup-minutes 0.2 --latency-runs 0 --out bench/gpu $(BENCH_ARGS)

# Test BLEU of every system after the same 20-minute training budget (about 1h30, 20 min more
# with nmt-bf16 on a CPU with bfloat16 hardware); bench/QUALITY.md.
bench-quality: install
	$(PY) bench/quality.py $(BENCH_ARGS)

# Attention vs the plain Seq2Seq by source length: docs/attention-vs-length.md (+ charts).
REPRODUCE_MINUTES ?= 15
reproduce: install
	$(PY) -m pip install -q "matplotlib>=3.7"
	$(PY) scripts/reproduce_attention.py --corpus multi30k --minutes $(REPRODUCE_MINUTES)
	$(PY) scripts/reproduce_attention.py --corpus demo --minutes 5

# nmt align with guided-alignment models beside eflomal, on the demo gold and the Hansards dev
# set (two 20-minute trainings; about 50 min on 2 cores): docs/alignment.md.
align-report: install
	bash scripts/align_report.sh

# Every extraction choice of nmt align on unguided en→zh and zh→en demo models vs the demo
# gold and eflomal: docs/alignment-extraction.md.
align-grid: install
	bash scripts/align_grid.sh

clean:
	rm -rf runs .pytest_cache .ruff_cache

# nmt translate on a trained model: sent/s and BLEU (greedy/beam 5 × batch 1/64 × int8,
# --early-stop, --exact-stop, --shortlist) in 3 interleaved rounds, each against our float run of the same
# search in the same run; one-sentence latency beside a bare `import torch`; streaming memory;
# bench/TRANSLATE.md (about 9 min). MODEL defaults to the nmt model `make bench` trained.
BENCH_MODEL := bench/work/models/speed-nmt
MODEL ?= $(if $(wildcard $(BENCH_MODEL)/config.json),$(BENCH_MODEL),runs/m30k-ref)
bench-translate: install
	$(PY) bench/translate_speed.py --model $(MODEL) $(BENCH_ARGS)

# nmt prepare on generated corpora of 1M and 5M pairs (3 rounds each), then the start of
# nmt train on the 5M data directory: pairs/s, peak RSS, time to the first update (about
# 15 min on 2 cores); bench/prepare.json, from which bench/PREPARE.md is written.
bench-prepare: install
	$(PY) bench/prepare_bench.py $(BENCH_ARGS)

# Where the time of beam search (batch 64 and 1), greedy search and a training update goes, by
# phase and operator, with each phase's compute and operator floors (about 1 min; needs a
# reference model: that of `make average-report`, or BENCH_ARGS="--model DIR --data DIR", e.g.
# make bench's bench/work/models/speed-nmt and bench/work/nmt-data); writes bench/PROFILE.md.
profile: install
	$(PY) bench/profile_report.py $(BENCH_ARGS)

# nmt serve at 1, 8 and 32 concurrent clients (sentences/s, p50/p95 latency) beside batched
# translation (batch 64) of the same 500 sentences, 3 interleaved rounds (2-5 min per model);
# bench/SERVE.md and bench/serve.json. BENCH_ARGS="--model DIR" for other models (default:
# runs/demo/model, and the first present of runs/m30k-ref, runs/average-ensemble/avg-reference
# and make bench's bench/work/models/speed-nmt).
bench-serve: install
	$(PY) bench/serve_bench.py $(BENCH_ARGS)

# Test BLEU on Multi30k of checkpoint averaging (best vs the mean of the last 3 and 5, reference
# and default configs, 20 min of training each: about 45 min) and of ensembles (1, 2, 3 models
# of the defaults from seeds 1-3, 10 min of training each: about 35 min); docs/averaging.md,
# docs/ensembles.md (+ docs/results/).
average-report: install
	$(PY) scripts/average_ensemble_report.py averaging

ensemble-report: install
	$(PY) scripts/average_ensemble_report.py ensembles --minutes 10
