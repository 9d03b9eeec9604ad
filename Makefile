# Every target installs what it needs into .venv by itself.
PYTHON ?= python3
VENV := .venv
PY := $(VENV)/bin/python
STAMP := $(VENV)/.installed
TORCH_CPU := torch==2.13.0
DEMO_DIR := runs/demo

.PHONY: install demo test test-all lint bench clean

install: $(STAMP)

$(STAMP): pyproject.toml
	test -x $(PY) || $(PYTHON) -m venv $(VENV)
	$(PY) -m pip install -q --upgrade pip
	# Take the CPU build of torch when none is present; leave an existing torch alone.
	$(PY) -c "import torch" 2>/dev/null || $(PY) -m pip install -q $(TORCH_CPU) \
		--extra-index-url https://download.pytorch.org/whl/cpu
	$(PY) -m pip install -q -e ".[dev]"
	touch $(STAMP)

demo: install
	bash data/demo.sh $(DEMO_DIR)

test: install
	$(PY) -m pytest -q

test-all: install
	$(PY) -m pytest -q -m ""

lint: install
	$(PY) -m ruff check nmt_cli tests data bench
	$(PY) -m ruff format --check nmt_cli tests data bench

clean:
	rm -rf runs .pytest_cache .ruff_cache
