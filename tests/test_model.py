"""Properties of the attention encoder–decoder on tiny dimensions with fixed seeds."""

from __future__ import annotations

import itertools

import pytest
import torch

from nmt_cli.batching import collate, make_batches
from nmt_cli.config import ModelConfig
from nmt_cli.errors import ConfigError
from nmt_cli.loss import batch_loss
from nmt_cli.model.attention import build_attention
from nmt_cli.model.seq2seq import Seq2Seq
from nmt_cli.specials import BOS_ID, PAD_ID

VOCAB = 40


def tiny(**changes) -> ModelConfig:
    base = dict(src_vocab_size=VOCAB, tgt_vocab_size=VOCAB, emb_size=12, hidden_size=8, dropout=0.0)
    return ModelConfig(**{**base, **changes})


def toy_batch(seed: int = 0):
    gen = torch.Generator().manual_seed(seed)
    lengths = [7, 3, 5, 1]
    src = [torch.randint(4, VOCAB, (n,), generator=gen).numpy() for n in lengths]
    tgt = [torch.randint(4, VOCAB, (n + 1,), generator=gen).numpy() for n in lengths]
    return collate(src, tgt)


@pytest.mark.parametrize("name", ["dot", "general", "additive"])
def test_attention_weights_sum_to_one_and_ignore_padding(name):
    torch.manual_seed(0)
    attention = build_attention(name, 6, 6)
    memory = torch.randn(3, 5, 6)
    keys = attention.project_keys(memory)
    mask = torch.tensor([[1, 1, 1, 1, 1], [1, 1, 1, 0, 0], [1, 0, 0, 0, 0]], dtype=torch.bool)
    context, weights = attention(torch.randn(3, 4, 6), keys, memory, mask)
    assert context.shape == (3, 4, 6)
    assert torch.allclose(weights.sum(-1), torch.ones(3, 4), atol=1e-6)
    assert torch.all(weights.masked_select(~mask.unsqueeze(1).expand_as(weights)) == 0)
    assert torch.all(weights[2, :, 0] == 1)


def test_dot_attention_needs_matching_sizes():
    with pytest.raises(ConfigError, match="general or additive"):
        build_attention("dot", 6, 8)


VARIANTS = list(
    itertools.product(
        ["dot", "general", "additive", "none"],
        ["luong", "bahdanau"],
        [False, True],
        ["gru", "lstm"],
    )
)


@pytest.mark.parametrize(("attention", "style", "feed", "cell"), VARIANTS)
def test_teacher_forced_path_equals_step_loop(attention, style, feed, cell):
    torch.manual_seed(1)
    model = Seq2Seq(
        tiny(attention=attention, decoder_style=style, input_feed=feed, cell=cell, layers=2)
    )
    model.eval()
    batch = toy_batch()
    state, memory = model.encode(batch.src, batch.src_lengths)
    fast = model.decoder(batch.tgt_in, state, memory)
    loop, _ = model.decoder.forward_steps(batch.tgt_in, state, memory)
    assert torch.allclose(fast, loop, atol=1e-5)
    if attention != "none":  # the weights the guided loss reads are the step loop's, too
        fast, fast_weights = model.decoder(batch.tgt_in, state, memory, attention=True)
        loop, loop_weights = model.decoder.forward_steps(batch.tgt_in, state, memory, True)
        assert fast_weights.shape == (*batch.tgt_in.shape, batch.src.size(1))
        assert torch.allclose(fast_weights, loop_weights, atol=1e-6)
        assert torch.allclose(fast, loop, atol=1e-5)


def test_fused_path_used_only_without_recurrent_attention():
    assert Seq2Seq(tiny(attention="general", input_feed=False)).decoder.fusable
    assert Seq2Seq(tiny(attention="none", decoder_style="bahdanau")).decoder.fusable
    assert not Seq2Seq(tiny(attention="general", input_feed=True)).decoder.fusable
    assert not Seq2Seq(tiny(attention="additive", decoder_style="bahdanau")).decoder.fusable


def test_fused_and_loop_give_same_loss_and_gradients():
    torch.manual_seed(2)
    model = Seq2Seq(tiny(attention="additive"))
    batch = toy_batch(3)
    loss_fast, _ = batch_loss(model, batch, 0.1)
    loss_fast.backward()
    grads_fast = [p.grad.clone() for p in model.parameters()]
    model.zero_grad()
    state, memory = model.encode(batch.src, batch.src_lengths)
    vectors, _ = model.decoder.forward_steps(batch.tgt_in, state, memory)
    real = batch.tgt_out != PAD_ID
    loss_loop = (
        torch.nn.functional.cross_entropy(
            model.generator(vectors[real]),
            batch.tgt_out[real],
            label_smoothing=0.1,
            reduction="sum",
        )
        / batch.n_tokens
    )
    loss_loop.backward()
    assert torch.allclose(loss_fast, loss_loop, atol=1e-6)
    for fast, loop in zip(grads_fast, (p.grad for p in model.parameters()), strict=True):
        assert torch.allclose(fast, loop, atol=1e-5)


def test_padding_does_not_change_a_sentence_encoding():
    torch.manual_seed(3)
    model = Seq2Seq(tiny(attention="general")).eval()
    batch = toy_batch()
    alone = collate([batch.src[1, :3].numpy()], [batch.tgt_out[1, :4].numpy()])
    vec_batch = model(batch.src, batch.src_lengths, batch.tgt_in)[1, :4]
    vec_alone = model(alone.src, alone.src_lengths, alone.tgt_in)[0, :4]
    assert torch.allclose(vec_batch, vec_alone, atol=1e-5)


def test_step_log_probs_never_emit_pad_or_bos():
    model = Seq2Seq(tiny()).eval()
    batch = toy_batch()
    state = model.encode(batch.src, batch.src_lengths)
    log_probs, _, weights = model.step_log_probs(batch.tgt_in[:, 0], state)
    assert torch.all(torch.isinf(log_probs[:, :3][:, [0, 2]]))
    assert torch.allclose(log_probs.exp().sum(-1), torch.ones(4), atol=1e-5)
    assert weights.shape == batch.src.shape


def test_token_batches_cover_every_pair_once_with_bounded_padding():
    import numpy as np

    rng = np.random.default_rng(0)
    tgt = rng.integers(1, 40, 500)
    src = rng.integers(1, 40, 500)
    batches = make_batches(src, tgt, 400, seed=7, epoch=0)
    rows = np.concatenate(batches)
    assert sorted(rows.tolist()) == list(range(500))
    assert all(len(b) * (tgt[b].max() + 1) <= 400 or len(b) == 1 for b in batches)
    again = make_batches(src, tgt, 400, seed=7, epoch=0)
    assert all(np.array_equal(a, b) for a, b in zip(batches, again, strict=True))
    other = make_batches(src, tgt, 400, seed=7, epoch=1)
    assert not all(np.array_equal(a, b) for a, b in zip(batches, other, strict=False))


def test_fast_gru_matches_packed_nn_gru_outputs_finals_and_gradients():
    from torch.nn.utils.rnn import pack_padded_sequence, pad_packed_sequence

    from nmt_cli.model.gru import FastGRU

    torch.manual_seed(0)
    gru = FastGRU(5, 4, num_layers=2, bidirectional=True, batch_first=True).double()
    x = torch.randn(3, 6, 5, dtype=torch.double, requires_grad=True)
    h0 = torch.randn(4, 3, 4, dtype=torch.double, requires_grad=True)
    lengths = torch.tensor([6, 4, 1])
    mask = (torch.arange(6)[None, :] < lengths[:, None]).unsqueeze(-1)
    weights = torch.randn(3, 6, 8, dtype=torch.double)

    def reference():
        packed = pack_padded_sequence(x, lengths, batch_first=True, enforce_sorted=False)
        out, final = torch.nn.GRU.forward(gru, packed, h0)
        return pad_packed_sequence(out, batch_first=True, total_length=6)[0], final

    results = []
    for run in (lambda: gru.forward_padded(x, lengths, h0), reference):
        gru.zero_grad()
        x.grad = h0.grad = None
        out, final = run()
        ((out * mask * weights).sum() + final.sum()).backward()
        grads = [p.grad.clone() for p in gru.parameters()] + [x.grad.clone(), h0.grad.clone()]
        results.append((out * mask, final, grads))
    (out_a, fin_a, grads_a), (out_b, fin_b, grads_b) = results
    assert torch.allclose(out_a, out_b) and torch.allclose(fin_a, fin_b)
    assert all(torch.allclose(a, b) for a, b in zip(grads_a, grads_b, strict=True))


@pytest.mark.parametrize(
    ("attention", "style", "cell"),
    [("additive", "luong", "gru"), ("general", "bahdanau", "gru"), ("additive", "luong", "lstm")],
)
def test_rows_sharing_a_memory_entry_decode_as_rows_with_their_own_copy(attention, style, cell):
    """A beam's rows attend to one shared memory entry; the result equals a copy per row."""
    torch.manual_seed(2)
    config = tiny(attention=attention, decoder_style=style, input_feed=True, cell=cell)
    model = Seq2Seq(config).eval()
    batch = toy_batch()
    state, memory = model.encode(batch.src, batch.src_lengths)
    beam = torch.arange(4).repeat_interleave(3)  # 3 rows per sentence, sentence-major
    uneven = torch.tensor([0, 1, 1, 2, 2, 2, 3, 3, 3, 0, 0, 1])
    shared = memory.select(beam)
    assert shared.group == 3 and shared.keys is memory.keys  # nothing copied
    per_row = memory.select(uneven)
    assert per_row.group == 1 and per_row.keys.size(0) == 12
    for rows, grouped in ((beam, shared), (uneven, per_row)):
        copied = type(memory)(
            *(x.index_select(0, rows) for x in (memory.states, memory.keys, memory.mask))
        )
        prev = torch.randint(4, VOCAB, (12,))
        rows_state = state.select(rows)
        with torch.no_grad():
            got = model.decoder.step(prev, rows_state, grouped)
            want = model.decoder.step(prev, rows_state, copied)
        torch.testing.assert_close(got[0], want[0])
        torch.testing.assert_close(got[2], want[2])
        assert torch.equal(grouped.row_origin(), rows)


def test_memory_select_copies_nothing_while_each_sentence_keeps_its_rows():
    torch.manual_seed(3)
    model = Seq2Seq(tiny()).eval()
    batch = toy_batch()
    _, memory = model.encode(batch.src, batch.src_lengths)
    beam = memory.select(torch.arange(4).repeat_interleave(2))  # (8,) rows, 2 per sentence
    # the beams of each sentence reorder among themselves: the same memory object
    assert beam.select(torch.tensor([1, 1, 2, 3, 5, 4, 7, 7])) is beam
    # sentence 1 leaves: entries 0, 2, 3 remain, still two rows each
    fewer = beam.select(torch.tensor([0, 1, 4, 5, 6, 7]))
    assert fewer.group == 2 and torch.equal(fewer.origin, torch.tensor([0, 2, 3]))
    torch.testing.assert_close(fewer.keys, memory.keys[[0, 2, 3]])
    # a row of sentence 3 moved into sentence 2's run: each row gets its own entry
    mixed = beam.select(torch.tensor([0, 1, 4, 6, 6, 7]))
    assert mixed.group == 1 and torch.equal(mixed.origin, torch.tensor([0, 0, 2, 3, 3, 3]))


def test_memory_select_writes_only_the_places_that_sentences_left():
    """A beam search's sentences that go on keep their places, and those beyond the new count
    fill the places of the ones that ended (`search._holes_filled`): the memory is the first
    entries of the same tensors, with those places written, and equals a copy of the entries."""
    torch.manual_seed(3)
    model = Seq2Seq(tiny()).eval()
    batch = toy_batch()
    _, memory = model.encode(batch.src, batch.src_lengths)
    beam = memory.select(torch.arange(4).repeat_interleave(2))  # (8,) rows, 2 per sentence
    want = [x[[0, 3, 2]].clone() for x in (beam.states, beam.keys, beam.mask, beam.origin)]
    # sentence 1 ended: sentence 3 takes its place, and the rows of each keep their own entry
    fewer = beam.select(torch.tensor([0, 1, 7, 6, 4, 4]))
    assert fewer.group == 2 and fewer.keys.data_ptr() == beam.keys.data_ptr()  # not copied
    for got, expected in zip(
        (fewer.states, fewer.keys, fewer.mask, fewer.origin), want, strict=True
    ):
        assert torch.equal(got, expected)
    # only the last ended: the first entries as they are
    first = fewer.select(torch.tensor([1, 0, 3, 3]))
    assert first.states.data_ptr() == beam.states.data_ptr() and first.origin.tolist() == [0, 3]


def test_a_memory_encoded_under_inference_mode_is_selected_and_joined_outside_it():
    """Tensors made under inference mode cannot be written outside it: there the memory is
    copied, as before it was written in place."""
    torch.manual_seed(3)
    model = Seq2Seq(tiny()).eval()
    batch = toy_batch()
    with torch.inference_mode():
        _, memory = model.encode(batch.src, batch.src_lengths)
    with torch.no_grad():
        fewer = memory.select(torch.tensor([0, 3, 2]))
        joined = fewer.join(memory)
    assert torch.equal(fewer.keys, memory.keys[[0, 3, 2]])
    assert joined.keys.shape[0] == 7 and torch.equal(joined.keys[3:], memory.keys)


def _encoded_memory(model: Seq2Seq, sources: list) -> object:
    batch = collate(sources, [s[:1] for s in sources])
    return model.encode(batch.src, batch.src_lengths)[1]


def test_sentences_join_a_memory_in_its_room_and_get_what_a_copy_gives():
    """Joining copies both memories into tensors with room to spare, cut to the longer real
    source; a later join that fits is written into that room, not copied again. Either way
    the entries are the sentences' own, padded with zeros (False in the mask)."""
    torch.manual_seed(3)
    model = Seq2Seq(tiny()).eval()
    gen = torch.Generator().manual_seed(1)
    sources = [torch.randint(4, VOCAB, (n,), generator=gen).numpy() for n in (6, 2, 4, 3, 5)]
    parts = [_encoded_memory(model, group) for group in (sources[:2], sources[2:4], sources[4:])]
    origin = [(0, 0), (0, 1), (1, 0), (1, 1), (2, 0)]  # (part, its entry) of each joined entry

    def expected(memory, entry: int, width: int) -> None:
        part, own = parts[origin[entry][0]], origin[entry][1]
        length = len(sources[entry])
        assert torch.equal(memory.states[entry, :length], part.states[own, :length])
        assert torch.equal(memory.keys[entry, :length], part.keys[own, :length])
        assert memory.mask[entry].tolist() == [True] * length + [False] * (width - length)
        assert not memory.states[entry, length:].any() and not memory.keys[entry, length:].any()

    with torch.no_grad():
        joined = parts[0].join(parts[1])
        assert joined.states.shape[:2] == (4, 6) and joined.room[0].size(0) > 4
        more = joined.join(parts[2])  # source length 5 fits the room's 6
    assert more.states.shape[:2] == (5, 6) and more.states.data_ptr() == joined.states.data_ptr()
    for entry in range(5):
        expected(more, entry, 6)


@pytest.mark.parametrize("layers", [1, 2])
@pytest.mark.parametrize("style", ["luong", "bahdanau"])
def test_inference_step_through_gru_cells_equals_the_gru_module(layers, style):
    """At inference a GRU decoder step runs through `torch.gru_cell` layer by layer; the
    outputs and states are the module's own, to the bit."""
    torch.manual_seed(3)
    model = Seq2Seq(tiny(attention="general", decoder_style=style, layers=layers))
    model.eval()
    batch = toy_batch()
    state, memory = model.encode(batch.src, batch.src_lengths)
    prev = batch.tgt_in[:, 0]
    with torch.no_grad():  # grad mode off: the cell path
        vector, new, weights = model.decoder.step(prev, state, memory)
    vector_ref, new_ref, weights_ref = model.decoder.step(prev, state, memory)  # the module
    assert torch.equal(vector, vector_ref.detach())
    assert torch.equal(weights, weights_ref.detach())
    assert new.hidden.shape == (layers, prev.numel(), model.config.decoder_size)
    assert torch.equal(new.hidden, new_ref.hidden.detach())


def _reference_log_probs(model: Seq2Seq, vectors: torch.Tensor) -> torch.Tensor:
    logits = torch.nn.functional.linear(vectors, model.generator.weight, model.generator.bias)
    logits[:, PAD_ID] = float("-inf")
    logits[:, BOS_ID] = float("-inf")
    return torch.log_softmax(logits, dim=-1)


@pytest.mark.parametrize("rows", [1, 5, 33, 70])
def test_search_output_layer_matches_the_linear_layer(rows):
    torch.manual_seed(0)
    model = Seq2Seq(tiny(tie_embeddings=False)).eval()
    vectors = torch.randn(rows, model.decoder.output_size)
    with torch.no_grad():
        got = model.output_log_probs(vectors)
        want = _reference_log_probs(model, vectors)
    assert torch.allclose(got, want, atol=1e-6)
    assert torch.equal(got.isinf(), want.isinf())


def test_search_output_layer_follows_the_weights_after_an_update():
    """Validation during training searches with the current weights, not a stale copy."""
    torch.manual_seed(0)
    model = Seq2Seq(tiny(tie_embeddings=False)).eval()
    vectors = torch.randn(4, model.decoder.output_size)
    with torch.no_grad():
        before = model.output_log_probs(vectors)
        model.generator.weight.mul_(-2.0)  # an optimizer step changes the weight in place
        after = model.output_log_probs(vectors)
        want = _reference_log_probs(model, vectors)
    assert not torch.allclose(before, after)
    assert torch.allclose(after, want, atol=1e-6)


def test_search_output_layer_follows_a_fused_optimizer_step():
    """torch's fused Adam (what `nmt train` steps with) changes the weights without counting a
    new version of them: validation after it must still see them."""
    torch.manual_seed(0)
    model = Seq2Seq(tiny(tie_embeddings=False))
    optimizer = torch.optim.Adam(model.parameters(), lr=0.1, fused=True)
    vectors = torch.randn(4, model.decoder.output_size)
    for _ in range(2):  # validate, train a step, validate again
        model.eval()
        with torch.no_grad():
            got = model.output_log_probs(vectors)
            want = _reference_log_probs(model, vectors)
        assert torch.allclose(got, want, atol=1e-6)
        model.train()
        model.output_log_probs(vectors)[:, 5:].sum().backward()
        optimizer.step()
        optimizer.zero_grad()


def test_output_layer_keeps_gradients_with_grad_enabled():
    torch.manual_seed(0)
    model = Seq2Seq(tiny(tie_embeddings=False))
    vectors = torch.randn(3, model.decoder.output_size)
    model.output_log_probs(vectors)[:, 5:].sum().backward()
    assert model.generator.weight.grad is not None
    assert model.generator.weight.grad.abs().sum() > 0
