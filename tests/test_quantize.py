"""`--quantize`: int8 dynamic quantization of the linear and recurrent layers for CPU search."""

from __future__ import annotations

import torch
from cli_runner import invoke
from torch.ao.nn.quantized import dynamic as qdynamic

from nmt_cli.checkpoint import quantize_model
from nmt_cli.config import ModelConfig
from nmt_cli.model.gru import FastGRU
from nmt_cli.model.seq2seq import Seq2Seq
from nmt_cli.specials import BOS_ID
from nmt_cli.translator import Translator


def test_every_linear_and_recurrent_layer_is_quantized(toy_model_dir):
    model = Translator.load(toy_model_dir, device="cpu", quantize=True).model
    float_layers = [
        name
        for name, module in model.named_modules()
        if type(module) in (torch.nn.Linear, torch.nn.GRU, torch.nn.LSTM)
        or isinstance(module, torch.nn.RNNBase)
    ]
    assert float_layers == []
    assert isinstance(model.encoder.rnn, qdynamic.GRU)
    assert isinstance(model.decoder.rnn, qdynamic.GRU)
    assert isinstance(model.generator, qdynamic.Linear)


def test_additive_attention_keeps_its_score_vector_in_float():
    """v's input is the (rows, S, A) tensor of every step: quantizing it costs more than the
    int8 product saves, so v alone stays a float layer."""
    config = ModelConfig(
        src_vocab_size=30, tgt_vocab_size=30, emb_size=8, hidden_size=4, attention="additive"
    )
    model = quantize_model(Seq2Seq(config).eval())
    float_layers = [
        name for name, module in model.named_modules() if type(module) is torch.nn.Linear
    ]
    assert float_layers == ["decoder.attention.v"]
    assert isinstance(model.decoder.attention.query_proj, qdynamic.Linear)
    assert isinstance(model.decoder.attention.key_proj, qdynamic.Linear)
    assert isinstance(model.decoder.rnn, qdynamic.GRU)


def test_quantizing_leaves_the_given_model_as_it_was(toy_model_dir):
    model = Translator.load(toy_model_dir, device="cpu").model
    before = {name: value.clone() for name, value in model.state_dict().items()}
    quantized = quantize_model(model)
    assert quantized is not model
    assert type(model.encoder.rnn) is FastGRU and type(model.decoder.rnn) is FastGRU
    assert type(model.generator) is torch.nn.Linear
    after = model.state_dict()
    assert before.keys() == after.keys()
    assert all(torch.equal(before[name], after[name]) for name in before)


@torch.inference_mode()
def probs_after_three_steps(model) -> tuple[torch.Tensor, set[torch.dtype]]:
    """The next-token probabilities of two sentences after three decoder steps, and the
    dtypes of every step's log-probs and attention weights (what search reads)."""
    src = torch.tensor([[5, 9, 12, 7, 3], [6, 11, 3, 0, 0]])
    lengths = torch.tensor([5, 3])
    inputs = [torch.full((2,), BOS_ID), torch.tensor([5, 9]), torch.tensor([12, 7])]
    state, dtypes = model.encode(src, lengths), set()
    for prev in inputs:
        log_probs, state, weights = model.step_log_probs(prev, state)
        dtypes |= {log_probs.dtype, weights.dtype}
    return log_probs.exp(), dtypes


def test_quantized_model_scores_like_the_float_one(toy_model_dir):
    exact = Translator.load(toy_model_dir, device="cpu")
    int8 = Translator.load(toy_model_dir, device="cpu", quantize=True)
    probs = [probs_after_three_steps(t.model)[0] for t in (exact, int8)]
    assert (probs[0] - probs[1]).abs().max() < 0.05


def test_quantized_translate_keeps_every_line(toy_model_dir):
    lines = ["apple river", "", "green bird sun", "stone"]
    result = invoke("translate", "-m", toy_model_dir, "--quantize", input="\n".join(lines) + "\n")
    assert result.exit_code == 0, result.output
    out = result.stdout.split("\n")
    assert len(out) - 1 == len(lines) and out[1] == ""
    assert out[0] and out[2] and out[3]
