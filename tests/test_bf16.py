"""`--bf16`: bfloat16 weights and products for search, float32 scores; refused where the CPU
would only emulate bfloat16."""

from __future__ import annotations

import json

import pytest
import torch
from cli_runner import invoke
from test_quantize import probs_after_three_steps

from nmt_cli import device
from nmt_cli.translator import Translator

NATIVE = device.native_bf16()
needs_bf16 = pytest.mark.skipif(not NATIVE, reason="this CPU has neither AMX nor AVX-512 BF16")
LINES = ["apple river", "", "green bird sun", "stone"]


@needs_bf16
def test_a_bf16_model_scores_like_the_float_one_in_float32(toy_model_dir):
    exact = Translator.load(toy_model_dir, device="cpu")
    half = Translator.load(toy_model_dir, device="cpu", bf16=True)
    assert {p.dtype for p in half.model.parameters()} == {torch.bfloat16}
    assert {p.dtype for p in exact.model.parameters()} == {torch.float32}  # not converted
    probs = []
    for translator in (exact, half):
        step_probs, dtypes = probs_after_three_steps(translator.model)
        assert dtypes == {torch.float32}  # the log-probs search sums, the attention it keeps
        probs.append(step_probs)
    assert (probs[0] - probs[1]).abs().max() < 0.05
    assert not torch.equal(probs[0], probs[1])  # the products did run in bfloat16


@needs_bf16
def test_bf16_translate_json_and_align_keep_every_line(toy_model_dir):
    text = "\n".join(LINES) + "\n"
    plain = invoke("translate", "-m", toy_model_dir, "--bf16", input=text)
    assert plain.exit_code == 0, plain.output
    out = plain.stdout.split("\n")
    assert len(out) - 1 == len(LINES) and out[1] == "" and out[0] and out[2] and out[3]
    records = invoke("translate", "-m", toy_model_dir, "--bf16", "--json", input=text)
    assert records.exit_code == 0, records.output
    rows = [
        row for line in records.stdout.splitlines() for row in json.loads(line)["attention"] or []
    ]
    assert len(rows) > len(LINES)  # a row per target piece of the three lines with text
    assert all(abs(sum(row) - 1) < 1e-3 for row in rows)  # float32 weights: rows sum to 1
    aligned = invoke("translate", "-m", toy_model_dir, "--bf16", "--align", "--shortlist",
                     input=text)  # fmt: skip
    assert aligned.exit_code == 0, aligned.output
    assert all(" ||| " in line for line in aligned.stdout.splitlines() if line.split(" ||| ")[0])


def test_bf16_is_refused_where_the_cpu_would_emulate_it(toy_model_dir, monkeypatch):
    monkeypatch.setattr(device, "native_bf16", lambda: False)
    result = invoke("translate", "-m", toy_model_dir, "--bf16", "--device", "cpu", input="a\n")
    assert result.exit_code == 2
    assert "--bf16 needs a CPU with AMX or AVX-512 BF16" in result.stderr
    assert "Traceback" not in result.output


def test_bf16_and_quantize_are_refused_together(toy_model_dir):
    result = invoke("translate", "-m", toy_model_dir, "--bf16", "--quantize", input="a\n")
    assert result.exit_code == 2
    assert "choose one" in result.stderr and "Traceback" not in result.output
