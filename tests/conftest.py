"""Shared fixtures: a tiny prepared data directory and a tiny trained model, built once per run.

The corpus is a synthetic reversal task (target = source words reversed, upper-cased), the
fastest end-to-end proof that the pipeline learns something, and small enough to train in
seconds on a CPU.
"""

from __future__ import annotations

import os
from pathlib import Path

# One torch thread in the test process and in the processes the tests start (set before torch
# is imported). The models here are tiny, so a second thread buys little (that file took 51-73 s
# with two threads and 69-71 s with one on an idle 2-core machine, alternated runs), and on a
# 2-core machine with any other load two OpenMP threads spin-wait for each other: one training
# of tests/test_attention_variants.py took 95 s with two threads and 12 s with one while
# another process ran. A thread count given in the environment is kept.
os.environ.setdefault("OMP_NUM_THREADS", "1")

import pytest
from cli_runner import invoke, write_toy_corpus


@pytest.fixture(scope="session")
def toy_data_dir(tmp_path_factory) -> Path:
    root = tmp_path_factory.mktemp("toy")
    src, tgt = write_toy_corpus(root)
    out = root / "data"
    result = invoke(
        "prepare",
        "--src",
        src,
        "--tgt",
        tgt,
        "--dev-size",
        "40",
        "--test-size",
        "40",
        "--vocab-size",
        "60",
        "-o",
        out,
    )
    assert result.exit_code == 0, result.output
    return out


@pytest.fixture(scope="session")
def toy_model_dir(toy_data_dir, tmp_path_factory) -> Path:
    out = tmp_path_factory.mktemp("toy-model") / "model"
    result = invoke(
        "train",
        toy_data_dir,
        "-o",
        out,
        "--emb-size",
        "32",
        "--hidden-size",
        "32",
        "--max-steps",
        "60",
        "--valid-every",
        "30",
        "--batch-tokens",
        "400",
        "--lr",
        "0.01",
        "--threads",
        "1",
    )
    assert result.exit_code == 0, result.output
    return out


@pytest.fixture(scope="session")
def toy_reverse_dir(toy_model_dir, tmp_path_factory) -> Path:
    """The toy model standing in for a model of the other direction (`--reverse-model`): a copy
    whose meta.json names other training data, as a model trained the other way would. Only
    for tests of how the two directions' links are combined."""
    import json
    import shutil

    out = tmp_path_factory.mktemp("toy-reverse") / "model"
    shutil.copytree(toy_model_dir, out)
    meta = json.loads((out / "meta.json").read_text(encoding="utf-8"))
    meta["data_fingerprint"] = f"reverse-of-{meta.get('data_fingerprint')}"
    (out / "meta.json").write_text(json.dumps(meta), encoding="utf-8")
    return out


@pytest.fixture(scope="session")
def toy_plain_model_dir(toy_data_dir, tmp_path_factory) -> Path:
    """A model of the toy data without attention (`--attention none`), trained a few steps."""
    out = tmp_path_factory.mktemp("toy-plain") / "model"
    result = invoke(
        "train", toy_data_dir, "-o", out, "--attention", "none", "--emb-size", "16",
        "--hidden-size", "16", "--max-steps", "4", "--valid-every", "4", "--threads", "1",
    )  # fmt: skip
    assert result.exit_code == 0, result.output
    return out
