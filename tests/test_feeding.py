"""Training's input-feeding step loop with its own backward pass (`model/feeding.py`) against
the module's step loop under autograd, and against numerical gradients."""

import pytest
import torch

from nmt_cli.config import ModelConfig
from nmt_cli.model import feeding
from nmt_cli.model.seq2seq import Seq2Seq
from tests.test_model import VOCAB, toy_batch


def config(**changes) -> ModelConfig:
    base = dict(
        src_vocab_size=VOCAB, tgt_vocab_size=VOCAB, emb_size=12, hidden_size=8, dropout=0.0,
        input_feed=True, tie_embeddings=False,
    )  # fmt: skip
    return ModelConfig(**{**base, **changes})


def steps_and_grads(model: Seq2Seq, batch, fast: bool, monkeypatch):
    """Vectors, weights and every parameter's gradient of a loss reading both."""
    monkeypatch.setattr(feeding, "applies", lambda *_: fast)
    model.zero_grad(set_to_none=True)
    state, memory = model.encode(batch.src, batch.src_lengths)
    vectors, weights = model.decoder.forward_steps(batch.tgt_in, state, memory, attention=True)
    gen = torch.Generator().manual_seed(5)
    loss = (vectors * torch.randn(vectors.shape, generator=gen).to(vectors.dtype)).sum()
    loss = loss + (weights * torch.randn(weights.shape, generator=gen).to(weights.dtype)).sum()
    loss.backward()
    grads = {name: p.grad.clone() for name, p in model.named_parameters() if p.grad is not None}
    return vectors.detach(), weights.detach(), grads


@pytest.mark.parametrize("attention", ["dot", "general", "additive"])
@pytest.mark.parametrize("tie", [False, True])
def test_same_outputs_and_gradients_as_the_modules_step_loop(attention, tie, monkeypatch):
    torch.manual_seed(3)
    model = Seq2Seq(config(attention=attention, tie_embeddings=tie, emb_size=16 if tie else 12))
    model.double().train()
    batch = toy_batch(1)
    assert feeding.applies(model.decoder, torch.zeros(1, 1, 1))  # the path is taken for real

    expected = steps_and_grads(model, batch, False, monkeypatch)
    got = steps_and_grads(model, batch, True, monkeypatch)

    # (float32 tolerances: the module takes the attention's softmax in float32 in any model)
    torch.testing.assert_close(got[0], expected[0], rtol=1e-5, atol=1e-6)
    torch.testing.assert_close(got[1].double(), expected[1].double(), rtol=1e-5, atol=1e-6)
    assert got[2].keys() == expected[2].keys()
    for name, grad in expected[2].items():
        torch.testing.assert_close(got[2][name], grad, rtol=1e-5, atol=1e-6, msg=name)


@pytest.mark.parametrize("attention", ["general", "additive"])
def test_gradients_match_numerical_ones_with_dropout(attention):
    torch.manual_seed(4)
    # small sizes: gradcheck evaluates the loop twice for every input and weight element
    model = Seq2Seq(config(attention=attention, emb_size=4, hidden_size=4)).double()
    decoder = model.decoder
    batch, steps, source = 3, 3, 4
    emb = torch.randn(batch, steps, 4, dtype=torch.double, requires_grad=True)
    h0 = torch.randn(batch, 8, dtype=torch.double, requires_grad=True)
    states = torch.randn(batch, source, 8, dtype=torch.double, requires_grad=True)
    keys = torch.randn(batch, source, 8, dtype=torch.double, requires_grad=True)
    mask = torch.tensor([[1, 1, 1, 1], [1, 1, 0, 0], [1, 1, 1, 0]], dtype=torch.bool)
    drop = (torch.rand(batch, steps, decoder.output_size) > 0.3).double() / 0.7
    rnn, additive = decoder.rnn, attention == "additive"
    params = [
        rnn.weight_ih_l0, rnn.weight_hh_l0, rnn.bias_ih_l0, rnn.bias_hh_l0, decoder.combine.weight,
        decoder.attention.query_proj.weight if additive else None,
        decoder.attention.query_proj.bias if additive else None,
        decoder.attention.v.weight if additive else None,
    ]  # fmt: skip

    def fn(*inputs):
        return feeding._Steps.apply(*inputs[:4], mask, drop, *inputs[4:])

    assert torch.autograd.gradcheck(fn, (emb, h0, keys, states, *params), eps=1e-6, atol=1e-5)


def test_bfloat16_autocast_stays_close_to_float32(monkeypatch):
    torch.manual_seed(6)
    model = Seq2Seq(config(attention="additive", emb_size=32, hidden_size=32)).train()
    batch = toy_batch(2)
    exact = steps_and_grads(model, batch, True, monkeypatch)
    with torch.autocast("cpu", dtype=torch.bfloat16):
        low = steps_and_grads(model, batch, True, monkeypatch)
    torch.testing.assert_close(low[0].float(), exact[0], rtol=0.05, atol=0.05)
    for name, grad in exact[2].items():
        scale = float(grad.abs().max())
        torch.testing.assert_close(low[2][name], grad, rtol=0.1, atol=0.05 * scale, msg=name)


class FixedDropout(torch.nn.Module):
    """The decoder's dropout, made deterministic: the attentional vector of step t (B, 1, O) is
    multiplied by mask[:, t]; anything else (the embeddings) passes unchanged."""

    def __init__(self, mask: torch.Tensor):
        super().__init__()
        self.mask, self.p, self.step = mask, 0.3, 0

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        if x.size(1) == 1 and x.size(-1) == self.mask.size(-1):
            self.step += 1
            return x * self.mask[:, self.step - 1 : self.step]
        return x


def test_dropout_of_the_fed_vector_as_the_modules_step_loop(monkeypatch):
    torch.manual_seed(7)
    model = Seq2Seq(config(attention="additive")).double().train()
    batch = toy_batch(3)
    steps = batch.tgt_in.size(1)
    mask = (torch.rand(batch.tgt_in.size(0), steps, model.decoder.output_size) > 0.3) / 0.7
    mask = mask.double()
    monkeypatch.setattr(feeding, "dropout_mask", lambda *_: mask)

    model.decoder.dropout = FixedDropout(mask)
    expected = steps_and_grads(model, batch, False, monkeypatch)
    assert model.decoder.dropout.step == steps  # the module's loop dropped every step's vector
    got = steps_and_grads(model, batch, True, monkeypatch)

    torch.testing.assert_close(got[0], expected[0], rtol=1e-5, atol=1e-6)
    for name, grad in expected[2].items():
        torch.testing.assert_close(got[2][name], grad, rtol=1e-5, atol=1e-6, msg=name)


@pytest.mark.parametrize(
    "changes",
    [
        dict(cell="lstm"),
        dict(layers=2),
        dict(decoder_style="bahdanau"),
        dict(input_feed=False),
        dict(attention="none"),
    ],
)
def test_other_decoders_keep_the_modules_loop(changes):
    decoder = Seq2Seq(config(**{"attention": "additive", **changes})).decoder
    assert not feeding.applies(decoder, torch.zeros(1, 1, 1))


def test_not_taken_without_gradients_or_for_a_bfloat16_model():
    model = Seq2Seq(config(attention="additive"))
    with torch.no_grad():
        assert not feeding.applies(model.decoder, torch.zeros(1, 1, 1))
    assert not feeding.applies(model.bfloat16().decoder, torch.zeros(1, 1, 1))
