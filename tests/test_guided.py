"""Guided alignment: the loss on the attention, its gradient, and what it does to training."""

from __future__ import annotations

import json

import pytest
import torch
from cli_runner import invoke, write_toy_corpus

from nmt_cli.alignment import parse_pharaoh, read_gold, score_alignments
from nmt_cli.batching import Guide, collate
from nmt_cli.config import ModelConfig
from nmt_cli.loss import Objective, guided_alignment_loss
from nmt_cli.model.seq2seq import Seq2Seq
from nmt_cli.specials import EOS_ID, PAD_ID


def _guide(entries) -> Guide:
    rows, steps, sources, weights = zip(*entries, strict=True)
    return Guide(
        torch.tensor(rows),
        torch.tensor(steps),
        torch.tensor(sources),
        torch.tensor(weights, dtype=torch.float32),
    )


# Two rows of a batch, 3 target steps, 4 source positions: row 0 step 0 is linked to source
# 1 only, row 0 step 2 to sources 0 and 3 (a word linked to two), row 1 step 1 to source 2;
# the other steps (unaligned words) have no entries.
ENTRIES = [(0, 0, 1, 1.0), (0, 2, 0, 0.5), (0, 2, 3, 0.5), (1, 1, 2, 1.0)]


def _target_distribution(shape=(2, 3, 4)) -> torch.Tensor:
    q = torch.full(shape, 0.25, dtype=torch.float64)  # steps without links: any distribution
    for row, step, _, _ in ENTRIES:
        q[row, step] = 0.0
    for row, step, source, weight in ENTRIES:
        q[row, step, source] = weight
    return q


def test_guided_loss_is_smallest_at_the_target_distribution_and_equals_its_entropy():
    guide = _guide(ENTRIES)
    q = _target_distribution()
    entropy = -sum(w * torch.log(torch.tensor(w)) for *_, w in ENTRIES).item()  # 2 × ½ log 2
    at_target = guided_alignment_loss(q.float(), guide).item()
    assert at_target == pytest.approx(entropy, abs=1e-5)
    assert entropy == pytest.approx(torch.log(torch.tensor(2.0)).item(), abs=1e-6)
    generator = torch.Generator().manual_seed(0)
    for _ in range(20):  # any other attention costs more
        other = torch.softmax(torch.randn(2, 3, 4, generator=generator), dim=-1)
        assert guided_alignment_loss(other, guide).item() > at_target + 1e-4
    nearby = torch.softmax(torch.log(q.clamp_min(1e-6)) + 0.05 * torch.randn(2, 3, 4), dim=-1)
    assert guided_alignment_loss(nearby.float(), guide).item() > at_target


def test_guided_loss_gradient_matches_finite_differences():
    guide = _guide(ENTRIES)
    guide = Guide(guide.rows, guide.steps, guide.sources, guide.weights.double())
    scores = torch.randn(2, 3, 4, dtype=torch.float64, requires_grad=True)

    def loss(s: torch.Tensor) -> torch.Tensor:
        return guided_alignment_loss(torch.softmax(s, dim=-1), guide)

    assert torch.autograd.gradcheck(loss, (scores,), eps=1e-6, atol=1e-6)
    (gradient,) = torch.autograd.grad(loss(scores), scores)
    expected = torch.softmax(scores, dim=-1) - _target_distribution()  # softmax CE: a − q
    guided_rows = torch.zeros(2, 3, dtype=torch.bool)
    for row, step, _, _ in ENTRIES:
        guided_rows[row, step] = True
    assert torch.allclose(gradient[guided_rows], expected[guided_rows].detach(), atol=1e-9)
    assert torch.all(gradient[~guided_rows] == 0)  # unguided steps get no gradient


def _tiny(**overrides) -> Seq2Seq:
    torch.manual_seed(0)
    config = ModelConfig(
        emb_size=16, hidden_size=16, src_vocab_size=20, tgt_vocab_size=20, **overrides
    )
    return Seq2Seq(config)


def _batch_with_guide():
    src = [torch.tensor([5, 6, 7, 8]).numpy(), torch.tensor([9, 10]).numpy()]
    tgt = [torch.tensor([11, 12, 13]).numpy(), torch.tensor([14, 15]).numpy()]
    guides = [
        (torch.tensor([0, 2, 2]).numpy(), torch.tensor([1, 0, 3]).numpy(), [1.0, 0.5, 0.5]),
        (torch.tensor([1]).numpy(), torch.tensor([1]).numpy(), [1.0]),
    ]
    guides = [(s, c, torch.tensor(w).numpy()) for s, c, w in guides]
    return collate(src, tgt, guides)


@pytest.mark.parametrize(
    ("style", "feed"), [("luong", False), ("luong", True), ("bahdanau", False)]
)
def test_objective_adds_the_weighted_guided_term_in_fused_and_step_paths(style, feed):
    model = _tiny(attention="additive", decoder_style=style, input_feed=feed)
    model.eval()
    batch = _batch_with_guide()
    assert batch.guide is not None and batch.guide.rows.tolist() == [0, 0, 0, 1]
    args = (batch.src, batch.src_lengths, batch.tgt_in, batch.tgt_out)
    plain, nll, none = Objective(model, 0.0)(*args)
    assert none is None
    unguided, _, _ = Objective(model, 0.0, 0.0)(*args, batch.guide)
    guided, guided_nll, alignment = Objective(model, 0.0, 0.7)(*args, batch.guide)
    assert torch.equal(unguided, plain)  # weight 0: the guide is not even read
    assert torch.allclose(guided_nll, nll)
    _, weights = model(*args[:3], attention=True)
    expected = guided_alignment_loss(weights, batch.guide)
    assert alignment.item() == pytest.approx(expected.item(), rel=1e-6)
    assert guided.item() == pytest.approx(plain.item() + 0.7 * expected.item(), rel=1e-6)
    model.zero_grad()
    guided.backward()  # the term reaches the attention's parameters
    assert model.decoder.attention.v.weight.grad.abs().sum() > 0


def test_a_bahdanau_decoder_is_guided_on_its_last_piece_at_the_step_after_eos():
    """align_shift 2: a Bahdanau decoder's query has read piece t at step t + 2, so the last
    piece's links train the attention of the step after the EOS step, which the objective runs
    for that attention only; each link reads the row forced decoding gives (pieces, then EOS)."""
    model = _tiny(attention="additive", decoder_style="bahdanau", align_shift=2)
    model.eval()
    batch = _batch_with_guide()  # both rows have a link on their last piece
    args = (batch.src, batch.src_lengths, batch.tgt_in, batch.tgt_out)
    plain, nll, _ = Objective(model, 0.0)(*args)
    guided, guided_nll, alignment = Objective(model, 0.0, 1.0)(*args, batch.guide)
    assert torch.allclose(guided_nll, nll)  # the extra step adds no prediction
    expected = 0.0
    with torch.no_grad():
        for row in range(2):
            length = int(batch.src_lengths[row])
            state = model.encode(
                batch.src[row : row + 1, :length], batch.src_lengths[row : row + 1]
            )
            pieces = int((batch.tgt_out[row] != PAD_ID).sum()) - 1
            attention = []
            for token in [*batch.tgt_in[row, : pieces + 1].tolist(), EOS_ID]:
                _, state, weights = model.step_log_probs(torch.tensor([token]), state)
                attention.append(weights[0])
            guide = batch.guide
            for r, piece, source, weight in zip(
                guide.rows.tolist(), guide.steps.tolist(), guide.sources.tolist(),
                guide.weights.tolist(), strict=True,
            ):  # fmt: skip
                if r == row:
                    expected -= weight * torch.log(attention[piece + 2][source]).item()
    assert alignment.item() == pytest.approx(expected, rel=1e-5)
    assert guided.item() == pytest.approx(plain.item() + expected, rel=1e-5)


def _links(n: int) -> str:
    """Pharaoh links of a reversal: source word i ↔ target word n − 1 − i."""
    return " ".join(f"{i}-{n - 1 - i}" for i in range(n))


def _aer(tmp_path, data_dir, guided: bool, links_file) -> float:
    out = tmp_path / ("guided" if guided else "plain")
    extra = ("--guided-alignment", "1.0", "--alignments", links_file) if guided else ()
    result = invoke(
        "train", data_dir, "-o", out, "--emb-size", "32", "--hidden-size", "32",
        "--max-steps", "40", "--valid-every", "40", "--batch-tokens", "400", "--lr", "0.01",
        "--threads", "1", "--attention", "general", *extra,
    )  # fmt: skip
    assert result.exit_code == 0, result.stderr
    log = [json.loads(line) for line in (out / "train.jsonl").read_text().splitlines()]
    trained = [e for e in log if e["event"] == "train"]
    assert all(("align_loss" in e) == guided for e in trained)
    test = tmp_path / "test"
    result = invoke(
        "align", "-m", out, "--src", test / "toy.src", "--tgt", test / "toy.tgt", "--view", "none"
    )
    assert result.exit_code == 0, result.stderr
    links = [parse_pharaoh(line) for line in result.stdout.splitlines()]
    return score_alignments(links, read_gold(test / "gold.align")).aer


def test_guided_training_on_a_reversal_task_aligns_better_than_the_same_run_without(tmp_path):
    src, tgt = write_toy_corpus(tmp_path / "corpus", n=400, seed=3)
    data_dir = tmp_path / "data"
    result = invoke("prepare", "--src", src, "--tgt", tgt, "--dev-size", "20", "--test-size", "20",
                    "--vocab-size", "60", "-o", data_dir)  # fmt: skip
    assert result.exit_code == 0, result.stderr
    train_src = (data_dir / "train.src").read_text(encoding="utf-8").splitlines()
    links_file = tmp_path / "train.links"
    links_file.write_text("".join(_links(len(s.split())) + "\n" for s in train_src))
    test_src, _ = write_toy_corpus(tmp_path / "test", n=30, seed=99)
    lengths = [len(line.split()) for line in test_src.read_text().splitlines()]
    (tmp_path / "test" / "gold.align").write_text("".join(_links(n) + "\n" for n in lengths))
    plain = _aer(tmp_path, data_dir, False, links_file)
    guided = _aer(tmp_path, data_dir, True, links_file)
    assert guided < plain - 0.1, (guided, plain)


@pytest.mark.parametrize(
    ("flags", "message"),
    [
        (("--guided-alignment", "-1"), "--guided-alignment must be a finite weight ≥ 0"),
        (("--guided-alignment", "nan"), "--guided-alignment must be a finite weight ≥ 0"),
        (("--guided-alignment", "inf"), "--guided-alignment must be a finite weight ≥ 0"),
        (("--guided-alignment", "1", "--attention", "none"), "--attention none has none"),
        (("--guided-alignment", "1", "--align-unit", "syllable"), "--align-unit must be one of"),
    ],
)
def test_bad_guided_alignment_settings_are_one_line_errors(toy_data_dir, tmp_path, flags, message):
    out = tmp_path / "model"
    result = invoke("train", toy_data_dir, "-o", out, "--max-steps", "1", *flags)
    assert result.exit_code == 2, result.stderr
    assert message in result.stderr and len(result.stderr.strip().splitlines()) == 1
    assert "Traceback" not in result.stderr and not (out / "model.pt").exists()


def test_a_relative_alignments_path_is_saved_absolute_so_resume_works_elsewhere(
    toy_data_dir, tmp_path, monkeypatch
):
    train_src = (toy_data_dir / "train.src").read_text(encoding="utf-8").splitlines()
    (tmp_path / "train.links").write_text("".join(_links(len(s.split())) + "\n" for s in train_src))
    monkeypatch.chdir(tmp_path)
    out = tmp_path / "model"
    flags = ("--emb-size", "16", "--hidden-size", "16", "--valid-every", "2", "--threads", "1")
    result = invoke("train", toy_data_dir, "-o", out, "--max-steps", "2", *flags,
                    "--guided-alignment", "1", "--alignments", "train.links")  # fmt: skip
    assert result.exit_code == 0, result.stderr
    saved = json.loads((out / "config.json").read_text())["train"]["alignments"]
    assert saved == str(tmp_path / "train.links")
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    monkeypatch.chdir(elsewhere)  # where "train.links" names nothing
    result = invoke("train", toy_data_dir, "-o", out, "--resume", "--max-steps", "4")
    assert result.exit_code == 0, result.stderr


def test_an_alignments_file_that_does_not_fit_the_training_pairs_is_refused(toy_data_dir, tmp_path):
    links = tmp_path / "short.links"
    links.write_text("0-0\n1-1\n", encoding="utf-8")
    out = tmp_path / "model"
    result = invoke("train", toy_data_dir, "-o", out, "--max-steps", "1",
                    "--guided-alignment", "1", "--alignments", links)  # fmt: skip
    assert result.exit_code == 2, result.stderr
    assert str(links) in result.stderr and "one line per pair" in result.stderr
    assert len(result.stderr.strip().splitlines()) == 1 and not (out / "model.pt").exists()


def test_guided_loss_reads_the_step_where_the_word_is_input_and_stays_inside_each_row():
    guide = _guide(ENTRIES)  # steps 0..2 of rows 0 and 1
    weights = torch.softmax(torch.randn(2, 4, 4, generator=torch.Generator().manual_seed(1)), -1)
    shifted = guided_alignment_loss(weights, guide, shift=1, lengths=torch.tensor([3, 3]))
    assert shifted.item() == pytest.approx(guided_alignment_loss(weights[:, 1:], guide).item())
    # row 1 has 1 target piece: its steps are 0..1, so its link of step 1 (+1 = 2) is dropped
    short = guided_alignment_loss(weights, guide, shift=1, lengths=torch.tensor([3, 1]))
    row0 = _guide([e for e in ENTRIES if e[0] == 0])
    assert short.item() == pytest.approx(guided_alignment_loss(weights[:, 1:], row0).item())


@pytest.mark.parametrize(("style", "shift"), [("luong", 1), ("bahdanau", 2)])
def test_guided_training_records_the_step_its_attention_aligns_at(
    toy_data_dir, tmp_path, style, shift
):
    links = tmp_path / "train.links"
    sources = (toy_data_dir / "train.src").read_text(encoding="utf-8").splitlines()
    links.write_text("".join(_links(len(s.split())) + "\n" for s in sources), encoding="utf-8")
    out = tmp_path / "model"
    result = invoke("train", toy_data_dir, "-o", out, "--max-steps", "2", "--valid-every", "2",
                    "--emb-size", "16", "--hidden-size", "16", "--decoder-style", style,
                    "--attention", "additive", "--guided-alignment", "1", "--alignments", links)  # fmt: skip
    assert result.exit_code == 0, result.stderr
    saved = json.loads((out / "config.json").read_text())
    assert saved["model"]["align_shift"] == shift


def test_align_warns_when_a_guided_models_thresholds_meet_other_units(toy_data_dir, tmp_path):
    """A guided model's default extraction is a threshold on the units it was taught; over
    other units its weights spread and may give few links: said once, with the fix."""
    train_src = (toy_data_dir / "train.src").read_text(encoding="utf-8").splitlines()
    links = tmp_path / "train.links"
    links.write_text("".join(_links(len(s.split())) + "\n" for s in train_src))
    out = tmp_path / "guided"
    trained = invoke(
        "train", toy_data_dir, "-o", out, "--emb-size", "16", "--hidden-size", "16",
        "--max-steps", "4", "--valid-every", "4", "--threads", "1",
        "--guided-alignment", "1.0", "--alignments", links,
    )  # fmt: skip
    assert trained.exit_code == 0, trained.stderr
    pair = "apple river ||| RIVER APPLE\n"
    args = ("align", "-m", out, "--view", "none")
    own = invoke(*args, input=pair)
    other = invoke(*args, "--unit", "piece", input=pair)
    chosen = invoke(*args, "--unit", "piece", "--method", "argmax", input=pair)
    assert own.exit_code == other.exit_code == chosen.exit_code == 0, other.stderr
    assert "was trained to align" not in own.stderr
    # argmax keeps its links over other units, but the rates it would mix in are off: said
    said = " ".join(chosen.stderr.split())
    assert "its link rates (of word units) are left out; use --unit word to mix them in" in said
    assert "--threshold" not in said
    assert f"{out} was trained to align word units (guided alignment)" in other.stderr
    assert "use --unit word, or --method argmax" in other.stderr
    said = " ".join(other.stderr.split())  # the rates it would mix in by default are off too
    assert "its link rates (of word units) are left out" in said
    without = invoke(*args, "--unit", "piece", "--link-prior", "0", input=pair)
    assert "left out" not in without.stderr and "was trained to align" in without.stderr
    plain = invoke(*args, "--unit", "piece", "--method", "argmax", "--link-prior", "0", input=pair)
    assert plain.exit_code == 0 and "was trained to align" not in plain.stderr
