"""Gradient × input saliency as alignment weights: its batched computation, and `--weights`."""

from __future__ import annotations

from dataclasses import replace

import numpy as np
import pytest
import torch
from cli_runner import invoke

from nmt_cli.aligner import AlignOptions, align_pair
from nmt_cli.batching import collate
from nmt_cli.errors import ConfigError
from nmt_cli.model.seq2seq import Seq2Seq
from nmt_cli.specials import BOS_ID, PAD_ID
from nmt_cli.translator import Translator

PAIR = ("green bird sun", "SUN BIRD GREEN")


def one_step_at_a_time(translator: Translator, source: str, target: str) -> np.ndarray:
    """The saliency rows the slow way: one sentence, one backward pass per target step."""
    src_ids, tgt_ids = translator._forced_ids(source, target)
    batch = collate([src_ids], [tgt_ids])
    model = translator.model
    rows = []
    for t in range(len(tgt_ids) + 1):
        embedded = model.encoder.embedding(batch.src).detach().requires_grad_()
        state, memory = model.encode(batch.src, batch.src_lengths, embedded)
        logits = model.generator(model.decoder(batch.tgt_in, state, memory)[0, t]).float()
        logits[[PAD_ID, BOS_ID]] = float("-inf")
        logits.log_softmax(dim=-1)[batch.tgt_out[0, t]].backward()
        row = (embedded.grad[0] * embedded[0]).sum(dim=-1).abs().detach()
        rows.append((row / row.sum()).numpy())
    return np.stack(rows)


def test_saliency_rows_equal_one_backward_pass_per_step(toy_model_dir):
    translator = Translator.load(toy_model_dir)
    src_pieces, tgt_pieces, saliency = translator.forced_saliency(*PAIR)
    attention_shape = translator.forced_attention(*PAIR)[2].shape
    assert saliency.shape == attention_shape == (len(tgt_pieces) + 1, len(src_pieces))
    np.testing.assert_allclose(saliency.sum(axis=1), 1.0, rtol=1e-5)
    np.testing.assert_allclose(saliency, one_step_at_a_time(translator, *PAIR), atol=1e-5)


def test_saliency_needs_no_attention_layer(toy_model_dir):
    translator = Translator.load(toy_model_dir)
    translator.model = Seq2Seq(replace(translator.config.model, attention="none")).eval()
    with pytest.raises(ConfigError, match="--weights saliency"):
        translator.forced_attention(*PAIR)
    pair = align_pair(translator, *PAIR, AlignOptions(weights="saliency"))
    assert pair.weights.shape == (3, 3)
    np.testing.assert_allclose(pair.weights.sum(axis=1), 1.0, rtol=1e-5)


def test_both_is_the_mean_of_attention_and_saliency(toy_model_dir):
    translator = Translator.load(toy_model_dir)
    weights = {
        kind: align_pair(translator, *PAIR, AlignOptions(weights=kind)).weights
        for kind in ("attention", "saliency", "both")
    }
    assert not np.allclose(weights["attention"], weights["saliency"])
    np.testing.assert_allclose(
        weights["both"], (weights["attention"] + weights["saliency"]) / 2, atol=1e-6
    )


def test_align_cli_with_saliency_weights(toy_model_dir, toy_reverse_dir, tmp_path):
    text = "apple river ||| RIVER APPLE\ngreen bird sun ||| SUN BIRD GREEN\n"
    gold = tmp_path / "gold.align"
    gold.write_text("0-1 1-0\n0-2 1-1 2-0\n")
    result = invoke(
        "align", "-m", toy_model_dir, "--view", "none", "--weights", "saliency",
        "--reverse-model", toy_reverse_dir, "--gold", gold, input=text,
    )  # fmt: skip
    assert result.exit_code == 0, result.output
    lines = result.stdout.splitlines()
    assert len(lines) == 2 and all(lines)
    assert "AER" in result.stderr


@pytest.mark.parametrize("mode", ["pairs", "translate"])
def test_align_cli_with_corpus_prior_keeps_one_line_per_input_line(
    toy_model_dir, toy_reverse_dir, mode
):
    if mode == "pairs":
        text = "apple river ||| RIVER APPLE\ngreen bird sun ||| SUN BIRD GREEN\n" * 3
    else:
        text = "apple river\n\ngreen bird sun\n"
    args = ["--method", "mutual", "--grow-threshold", "0.2", "--symmetrize", "mean"]
    result = invoke(
        "align", "-m", toy_model_dir, "--reverse-model", toy_reverse_dir, "--view", "none",
        "--corpus-prior", "0.5", *args, input=text,
    )  # fmt: skip
    assert result.exit_code == 0, result.output
    lines = result.stdout.splitlines()
    assert len(lines) == len(text.splitlines())
    if mode == "translate":
        assert lines[1] == ""  # the empty line gives an empty alignment, in its place
    for line, pair in zip(lines, text.splitlines(), strict=True):
        n_src = len(pair.split("|||")[0].split())
        assert all(0 <= int(link.split("-")[0]) < n_src for link in line.split())


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["--weights", "gradients"], "--weights"),
        (["--weights", "saliency", "--shift", "1"], "--shift"),
        (["--method", "threshold", "--threshold", "0.3", "--grow-threshold", "0.3"], "below"),
        (["--grow-threshold", "1.5"], "--grow-threshold"),
        (["--corpus-prior", "1"], "--corpus-prior"),
        (["--corpus-prior", "-0.5"], "--corpus-prior"),
        (["--method", "both"], "argmax, mutual, threshold"),
    ],
)
def test_align_refuses_bad_weight_options(toy_model_dir, args, message):
    result = invoke("align", "-m", toy_model_dir, "--view", "none", *args, input="a ||| A\n")
    assert result.exit_code == 2 and message in result.stderr
    assert "Traceback" not in result.output


@pytest.mark.parametrize("mode", [torch.no_grad, torch.inference_mode])
def test_saliency_works_inside_a_no_grad_caller_and_leaves_no_gradient(toy_model_dir, mode):
    translator = Translator.load(toy_model_dir)
    expected = translator.forced_saliency(*PAIR)[2]
    with mode():
        saliency = translator.forced_saliency(*PAIR)[2]
    np.testing.assert_allclose(saliency, expected, atol=1e-6)
    assert all(p.grad is None for p in translator.model.parameters())


def test_saliency_chunks_give_the_same_rows(toy_model_dir, monkeypatch):
    import nmt_cli.translator as translator_module

    translator = Translator.load(toy_model_dir)
    whole = translator.forced_saliency(*PAIR)[2]
    monkeypatch.setattr(translator_module, "SALIENCY_CHUNK", 2)  # several chunks per pair
    np.testing.assert_allclose(translator.forced_saliency(*PAIR)[2], whole, atol=1e-6)


def test_a_bahdanau_model_is_read_two_steps_late_even_for_the_last_piece(toy_model_dir):
    """A Bahdanau decoder's query at step k has read the pieces up to k - 2, so the last piece
    aligns at the step after the EOS step: forced attention runs it, and that row is what a
    longer target gives at the same step (the query there is the same state)."""
    from nmt_cli.aligner import forced_weights

    translator = Translator.load(toy_model_dir)
    torch.manual_seed(0)
    config = replace(translator.config.model, decoder_style="bahdanau", align_shift=2)
    translator.model = Seq2Seq(config).eval()
    source, target = PAIR
    _, tgt_pieces, plain = translator.forced_attention(source, target)
    _, _, extended = translator.forced_attention(source, target, extra=1)
    _, longer_pieces, longer = translator.forced_attention(source, target + " BIRD")
    count = len(tgt_pieces)
    assert len(longer_pieces) == count + 1 and extended.shape[0] == count + 2
    np.testing.assert_array_equal(extended[: count + 1], plain)
    np.testing.assert_allclose(extended[count + 1], longer[count + 1], atol=1e-6)
    _, _, aligned = forced_weights(translator, source, target, "attention", shift=2)
    assert aligned.shape == plain.shape
    np.testing.assert_array_equal(aligned[count - 1], extended[count + 1])  # the last piece
    assert not np.allclose(aligned[count - 1], aligned[count - 2])


def test_a_bahdanau_translation_is_aligned_at_the_step_after_its_last_piece(toy_model_dir):
    """translate --align on a model read two steps late: the last piece's row is the
    attention of the step after EOS, as forced alignment of the same output gives it."""
    from nmt_cli.translator import SearchOptions

    translator = Translator.load(toy_model_dir)
    torch.manual_seed(0)
    config = replace(translator.config.model, decoder_style="bahdanau", align_shift=2)
    translator.model = Seq2Seq(config).eval()
    options = SearchOptions(beam_size=2, max_len=6)
    (translation,) = translator.translate_lines([PAIR[0]], options, with_attention=True)
    tokens = np.array([translator.tgt_tokenizer.piece_to_id(p) for p in translation.pieces])
    src_ids, _ = translator._forced_ids(PAIR[0], "")
    rows = translator._forced_rows(src_ids, tokens, 1)  # one step past EOS
    count = len(tokens)
    assert translation.attention.shape == (count + 1, len(src_ids))
    np.testing.assert_allclose(translation.attention[count - 1], rows[count + 1], atol=1e-5)
    np.testing.assert_allclose(translation.attention[: count - 1], rows[2 : count + 1], atol=1e-5)
