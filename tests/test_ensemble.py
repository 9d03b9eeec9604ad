"""Ensembles: the mean of several models' log-probs at every step of greedy and beam search."""

from __future__ import annotations

import shutil

import pytest
import torch
from cli_runner import invoke

from nmt_cli.search import beam_search, greedy_search, mean_step
from nmt_cli.specials import BOS_ID, EOS_ID
from nmt_cli.translator import Translator

LINES = "apple river\ngreen bird sun\n\nquick small house light\nwater\n"


@pytest.fixture(scope="module")
def translator(toy_model_dir):
    return Translator.load(toy_model_dir, device="cpu")


def _search(translator, beam: int, ensemble: int):
    """Hypotheses of a few sentences, from the model itself or an ensemble of it `ensemble` times."""
    model = translator.model
    sources = [translator._encode_source(line)[0] for line in ["apple river", "green bird sun"]]
    src = torch.nn.utils.rnn.pad_sequence([torch.from_numpy(s) for s in sources], batch_first=True)
    lengths = torch.tensor([len(s) for s in sources])
    state = model.encode(src, lengths)
    step, reorder = model.step_log_probs, model.reorder
    if ensemble:
        step, reorder = mean_step([step] * ensemble, [reorder] * ensemble)
        state = (state,) * ensemble
    limits = lengths * 2 + 10
    if beam == 1:
        return [[h] for h in greedy_search(step, reorder, state, 2, BOS_ID, EOS_ID, limits)]
    return beam_search(step, reorder, state, 2, BOS_ID, EOS_ID, limits, beam_size=beam, nbest=beam)


@pytest.mark.parametrize("beam", [1, 3])
@pytest.mark.parametrize("members", [1, 2])
def test_an_ensemble_of_one_model_or_its_copies_finds_what_the_model_finds(
    translator, beam, members
):
    single = _search(translator, beam, ensemble=0)
    ensemble = _search(translator, beam, ensemble=members)
    for alone, together in zip(single, ensemble, strict=True):
        assert [h.tokens for h in together] == [h.tokens for h in alone]
        assert [h.score for h in together] == [h.score for h in alone]  # exactly: (a + a) / 2 = a
        for a, b in zip(alone, together, strict=True):
            assert torch.equal(a.attention, b.attention)


def test_mean_step_averages_log_probs_and_keeps_the_first_attention():
    def scripted(log_probs, attention):
        return lambda prev, state: (log_probs, state + 1, attention)

    first = scripted(torch.tensor([[-1.0, -3.0]]), torch.tensor([[1.0]]))
    second = scripted(torch.tensor([[-3.0, -1.0]]), torch.tensor([[0.0]]))
    step, reorder = mean_step([first, second], [lambda s, i: s * 10, lambda s, i: s * 100])
    log_probs, state, attention = step(torch.tensor([0]), (0, 5))
    assert torch.equal(log_probs, torch.tensor([[-2.0, -2.0]]))
    assert state == (1, 6) and torch.equal(attention, torch.tensor([[1.0]]))
    assert reorder((1, 6), torch.tensor([0])) == (10, 600)


@pytest.mark.parametrize("args", [["--beam", "1"], ["--beam", "4"], ["--json"], ["--align"]])
def test_two_identical_models_translate_byte_for_byte_as_one(toy_model_dir, tmp_path, args):
    copy = tmp_path / "copy"
    shutil.copytree(toy_model_dir, copy)
    single = invoke("translate", "-m", toy_model_dir, *args, input=LINES)
    pair = invoke("translate", "-m", toy_model_dir, "-m", copy, *args, input=LINES)
    assert single.exit_code == 0 and pair.exit_code == 0, pair.output
    assert pair.stdout == single.stdout
    assert len(single.stdout.splitlines()) == LINES.count("\n")


def test_eval_of_an_ensemble_of_copies_scores_as_the_model(toy_data_dir, toy_model_dir):
    src, ref = toy_data_dir / "test.src", toy_data_dir / "test.tgt"
    args = ["--src", src, "--ref", ref, "--metrics", "bleu", "--beam", "2"]
    single = invoke("eval", "-m", toy_model_dir, *args)
    pair = invoke("eval", "-m", toy_model_dir, "-m", toy_model_dir, *args)
    assert single.exit_code == 0, single.output
    assert pair.stdout.split("BLEU")[1] == single.stdout.split("BLEU")[1]


def test_models_with_other_target_vocabularies_are_refused(toy_model_dir, tmp_path):
    other = tmp_path / "other"
    shutil.copytree(toy_model_dir, other)
    (other / "tgt.model").write_bytes((other / "tgt.model").read_bytes() + b"\0")
    result = invoke("translate", "-m", toy_model_dir, "-m", other, input="apple\n")
    assert result.exit_code == 3
    assert "same target vocabulary" in result.stderr and "Traceback" not in result.output
    assert len(result.stderr.strip().splitlines()) == 1


def test_models_of_other_directions_are_refused_though_their_vocabulary_is_one(
    toy_model_dir, tmp_path
):
    """en→zh and zh→en prepared from one corpus share every SentencePiece file: only the
    languages their training recorded tell the directions apart."""
    from nmt_cli import checkpoint

    first, reverse = tmp_path / "first", tmp_path / "reverse"
    for model, langs in ((first, ("en", "zh")), (reverse, ("zh", "en"))):
        shutil.copytree(toy_model_dir, model)
        payload = checkpoint.load(model / checkpoint.MODEL_FILE)
        payload["meta"] = {**payload["meta"], "src_lang": langs[0], "tgt_lang": langs[1]}
        checkpoint.save(model / checkpoint.MODEL_FILE, payload)
    result = invoke("translate", "-m", first, "-m", reverse, input="apple\n")
    assert result.exit_code == 3 and result.stdout == ""
    assert f"{reverse} translates zh→en and {first} en→zh" in " ".join(result.stderr.split())
    same = invoke("translate", "-m", first, "-m", first, input="apple\n")
    assert same.exit_code == 0 and same.stdout.strip()


def test_shortlist_takes_one_model(toy_model_dir):
    result = invoke(
        "translate", "-m", toy_model_dir, "-m", toy_model_dir, "--shortlist", input="apple\n"
    )
    assert result.exit_code == 2 and "--shortlist works with one model" in result.stderr
