"""Every attention variant beats the plain Seq2Seq on the same small budget.

The toy task reverses a sentence of 6–16 words: the decoder must find the right source word
at each step, which is exactly what attention gives and a single fixed vector struggles with.
"""

from __future__ import annotations

import json

import pytest
from cli_runner import invoke, write_toy_corpus

BUDGET = (
    "--emb-size",
    "64",
    "--hidden-size",
    "64",
    "--max-steps",
    "120",
    "--valid-every",
    "120",
    "--batch-tokens",
    "1000",
    "--lr",
    "0.003",
    "--dropout",
    "0.0",
    "--seed",
    "3",
)


@pytest.fixture(scope="module")
def reversal_data(tmp_path_factory):
    root = tmp_path_factory.mktemp("reversal")
    src, tgt = write_toy_corpus(root, n=1500, lengths=(6, 16))
    result = invoke(
        "prepare",
        "--src",
        src,
        "--tgt",
        tgt,
        "--dev-size",
        "50",
        "--test-size",
        "10",
        "--vocab-size",
        "75",
        "-o",
        root / "data",
    )
    assert result.exit_code == 0, result.output
    return root / "data"


def dev_bleu(data_dir, out, *flags) -> float:
    result = invoke("train", data_dir, "-o", out, *BUDGET, *flags)
    assert result.exit_code == 0, result.output
    return json.loads((out / "meta.json").read_text())["best_dev_bleu"]


@pytest.fixture(scope="module")
def baseline(reversal_data, tmp_path_factory) -> float:
    return dev_bleu(reversal_data, tmp_path_factory.mktemp("none") / "m", "--attention", "none")


@pytest.mark.parametrize("style", ["luong", "bahdanau"])
@pytest.mark.parametrize("attention", ["dot", "general", "additive"])
def test_attention_beats_no_attention(reversal_data, tmp_path, baseline, attention, style):
    score = dev_bleu(
        reversal_data, tmp_path / "m", "--attention", attention, "--decoder-style", style
    )
    assert score > baseline + 5, f"{attention}/{style}: {score:.1f} vs none {baseline:.1f}"
