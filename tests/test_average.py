"""`train --keep-checkpoints` and `nmt average`: the mean of the last checkpoints, as a model."""

from __future__ import annotations

import shutil

import pytest
import torch
from cli_runner import invoke

from nmt_cli import checkpoint

LINES = "apple river\ngreen bird sun\nquick small house\n"


@pytest.fixture(scope="module")
def kept_model_dir(toy_data_dir, tmp_path_factory):
    """A toy model that kept its last 2 checkpoints of saves at updates 15, 30 and 45."""
    out = tmp_path_factory.mktemp("kept") / "model"
    args = ["--emb-size", "32", "--hidden-size", "32", "--batch-tokens", "400", "--lr", "0.01"]
    result = invoke(
        "train", toy_data_dir, "-o", out, *args, "--max-steps", "45", "--valid-every", "15",
        "--keep-checkpoints", "2", "--threads", "1",
    )  # fmt: skip
    assert result.exit_code == 0, result.output
    return out


def _weights(model_dir):
    return checkpoint.load(model_dir / checkpoint.MODEL_FILE)["weights"]


def test_training_keeps_the_last_n_checkpoints(kept_model_dir):
    kept = checkpoint.kept_checkpoints(kept_model_dir)
    assert [path.name for path in kept] == ["step-00000030.pt", "step-00000045.pt"]
    assert [checkpoint.load(path)["meta"]["step"] for path in kept] == [30, 45]
    assert not list((kept_model_dir / "checkpoints").glob(".*.tmp"))


def test_the_average_of_identical_checkpoints_is_that_checkpoint(toy_model_dir, tmp_path):
    model_dir = tmp_path / "model"
    shutil.copytree(toy_model_dir, model_dir)
    payload = checkpoint.load(model_dir / checkpoint.MODEL_FILE)
    for step in (10, 20, 30):
        checkpoint.save_kept(model_dir, step, payload, keep=3)
    result = invoke("average", model_dir, "--last", "3", "-o", tmp_path / "avg")
    assert result.exit_code == 0, result.output
    original, averaged = _weights(toy_model_dir), _weights(tmp_path / "avg")
    assert original.keys() == averaged.keys()
    assert all(torch.equal(original[name], averaged[name]) for name in original)
    single = invoke("translate", "-m", toy_model_dir, input=LINES)
    again = invoke("translate", "-m", tmp_path / "avg", input=LINES)
    assert again.exit_code == 0 and again.stdout == single.stdout


def test_the_average_of_two_checkpoints_differs_from_both_and_translates(kept_model_dir, tmp_path):
    out = tmp_path / "avg"
    result = invoke("average", kept_model_dir, "--last", "2", "-o", out)
    assert result.exit_code == 0, result.output
    averaged = _weights(out)
    kept = [checkpoint.load(p)["weights"] for p in checkpoint.kept_checkpoints(kept_model_dir)]
    for one in kept:
        assert any(not torch.equal(averaged[name], one[name]) for name in one)
    mean = {name: (kept[0][name] + kept[1][name]) / 2 for name in averaged}
    assert all(torch.allclose(averaged[name], mean[name], atol=1e-6) for name in averaged)
    translated = invoke("translate", "-m", out, input=LINES)
    assert translated.exit_code == 0, translated.output
    assert len(translated.stdout.splitlines()) == 3
    assert (out / "tgt.model").read_bytes() == (kept_model_dir / "tgt.model").read_bytes()


def test_too_few_kept_checkpoints_say_how_many_and_how_to_keep_them(kept_model_dir, tmp_path):
    result = invoke("average", kept_model_dir, "--last", "5", "-o", tmp_path / "avg")
    assert result.exit_code == 3
    assert "keeps 2 checkpoints" in result.stderr and "--keep-checkpoints 5" in result.stderr
    assert len(result.stderr.strip().splitlines()) == 1
    assert not (tmp_path / "avg").exists()


def test_checkpoints_of_other_shapes_are_refused(kept_model_dir, tmp_path):
    model_dir = tmp_path / "model"
    shutil.copytree(kept_model_dir, model_dir)
    last = checkpoint.kept_checkpoints(model_dir)[-1]
    payload = checkpoint.load(last)
    payload["weights"]["generator.bias"] = torch.zeros(7)
    checkpoint.save(last, payload)
    result = invoke("average", model_dir, "--last", "2", "-o", tmp_path / "avg")
    assert result.exit_code == 3
    assert "generator.bias has shape (7,)" in result.stderr and "Traceback" not in result.output
    assert not (tmp_path / "avg" / checkpoint.MODEL_FILE).exists()


def _last_checkpoint_changed(kept_model_dir, tmp_path, other: str):
    """A copy of the kept model whose last checkpoint has another dropout, vocabulary size
    (`model`) or data fingerprint, as a checkpoint of another run would."""
    model_dir = tmp_path / "model"
    shutil.copytree(kept_model_dir, model_dir)
    last = checkpoint.kept_checkpoints(model_dir)[-1]
    payload = checkpoint.load(last)
    assert payload["meta"]["data_fingerprint"]  # kept checkpoints record their data
    if other == "dropout":
        payload["config"]["model"]["dropout"] = 0.5
    elif other == "model":
        payload["config"]["model"]["src_vocab_size"] += 1
    else:
        payload["meta"]["data_fingerprint"] = "another corpus"
    checkpoint.save(last, payload)
    return model_dir


@pytest.mark.parametrize("other", ["dropout", "data"])
def test_checkpoints_of_another_run_with_the_same_shapes_are_refused(
    kept_model_dir, tmp_path, other
):
    model_dir = _last_checkpoint_changed(kept_model_dir, tmp_path, other)
    result = invoke("average", model_dir, "--last", "2", "-o", tmp_path / "avg")
    told = "other model settings (dropout)" if other == "dropout" else "trained on other data"
    assert result.exit_code == 3 and told in result.stderr, result.stderr
    assert "one training run" in result.stderr and not (tmp_path / "avg").exists()


@pytest.mark.parametrize("other", ["model", "data"])
def test_a_checkpoint_of_another_model_copied_in_is_refused(kept_model_dir, tmp_path, other):
    """Alone (--last 1) it has no other checkpoint to differ from, but the averaged weights
    would get this directory's tokenizers: it must be of this model."""
    model_dir = _last_checkpoint_changed(kept_model_dir, tmp_path, other)
    result = invoke("average", model_dir, "--last", "1", "-o", tmp_path / "avg")
    told = "other vocabulary sizes" if other == "model" else "trained on other data"
    assert result.exit_code == 3 and told in result.stderr, result.stderr
    assert "is not a checkpoint of this model" in result.stderr
    assert not (tmp_path / "avg").exists()


def test_a_resumed_run_that_changed_its_dropout_still_averages(kept_model_dir, tmp_path):
    """--resume may change the dropout: its checkpoints are still this model's."""
    model_dir = tmp_path / "model"
    shutil.copytree(kept_model_dir, model_dir)
    config = checkpoint.read_json(model_dir / checkpoint.CONFIG_FILE)
    config["model"]["dropout"] = 0.3  # as a run resumed with --dropout 0.3 saves it
    checkpoint.write_json(model_dir / checkpoint.CONFIG_FILE, config)
    result = invoke("average", model_dir, "--last", "1", "-o", tmp_path / "avg")
    assert result.exit_code == 0, result.stderr
    assert (tmp_path / "avg" / checkpoint.MODEL_FILE).is_file()


def test_average_replaces_only_a_model_directory_and_only_with_force(kept_model_dir, tmp_path):
    kept_model = kept_model_dir
    out = tmp_path / "averaged"
    assert invoke("average", kept_model, "--last", "2", "-o", out).exit_code == 0
    before = (out / "model.pt").read_bytes()
    again = invoke("average", kept_model, "--last", "1", "-o", out)
    assert again.exit_code == 2 and "--force" in again.stderr
    assert (out / "model.pt").read_bytes() == before
    forced = invoke("average", kept_model, "--last", "1", "-o", out, "--force")
    assert forced.exit_code == 0 and (out / "model.pt").read_bytes() != before
    notes = tmp_path / "notes"
    notes.mkdir()
    (notes / "mine.txt").write_text("mine")
    refused = invoke("average", kept_model, "--last", "1", "-o", notes, "--force")
    assert refused.exit_code == 2 and "has no model.pt" in refused.stderr
    assert (notes / "mine.txt").read_text() == "mine"
    inside = invoke("average", kept_model, "--last", "1", "-o", kept_model / "checkpoints")
    assert inside.exit_code == 2 and "lies inside" in inside.stderr
    twice = invoke("average", out, "--last", "2", "-o", tmp_path / "twice")
    assert twice.exit_code == 3 and "it was written by nmt average" in twice.stderr
    assert "stopped after fewer validations" not in twice.stderr
    (out / "checkpoints").mkdir()  # as a trained model directory holds: never replaced
    forced = invoke("average", kept_model, "--last", "1", "-o", out, "--force")
    assert forced.exit_code == 2 and "holds a folder, checkpoints," in forced.stderr
    import shutil

    trained = tmp_path / "trained"  # a trained model's files without its checkpoints/ folder
    shutil.copytree(kept_model, trained, ignore=shutil.ignore_patterns("checkpoints"))
    log = (trained / "train.jsonl").read_bytes()
    forced = invoke("average", kept_model, "--last", "1", "-o", trained, "--force")
    assert forced.exit_code == 2 and "was not written by nmt average" in forced.stderr
    assert (trained / "train.jsonl").read_bytes() == log


def _trained(data_dir, model, steps: int, keep: int):
    """A tiny model of `steps` updates, validated every 2, keeping the last `keep` of them."""
    trained = invoke("train", data_dir, "-o", model, "--emb-size", "16", "--hidden-size", "16",
                     "--max-steps", str(steps), "--valid-every", "2", "--keep-checkpoints",
                     str(keep), "--threads", "1")  # fmt: skip
    assert trained.exit_code == 0, trained.stderr
    return model


def test_an_averaged_model_does_not_claim_its_sources_dev_score(tmp_path, toy_data_dir):
    import json

    model = _trained(toy_data_dir, tmp_path / "model", steps=6, keep=3)
    source = json.loads((model / "meta.json").read_text())
    assert source["best_dev_bleu"] is not None and source["shortlist"]["step"] == source["step"]
    out = tmp_path / "avg"
    assert invoke("average", model, "--last", "2", "-o", out).exit_code == 0
    meta = json.loads((out / "meta.json").read_text())
    assert meta["best_dev_bleu"] is None and meta["best_step"] is None
    assert "shortlist" not in meta  # nor was the shortlist checked on these weights
    assert meta["step"] == 6 and meta["averaged"] == ["step-00000004.pt", "step-00000006.pt"]
    last = checkpoint.load(model / checkpoint.LAST_FILE)["progress"]  # trained to step 6 too
    assert meta["tokens_seen"] == last["tokens_seen"] and meta["epoch"] >= 1


def test_a_model_that_validated_fewer_times_than_it_would_keep_is_told_so(tmp_path, toy_data_dir):
    model = _trained(toy_data_dir, tmp_path / "model", steps=4, keep=5)
    kept = len(list((model / "checkpoints").glob("step-*.pt")))
    assert 0 < kept < 5
    result = invoke("average", model, "--last", "5", "-o", tmp_path / "avg")
    assert result.exit_code == 3, result.stderr
    advice = " ".join(result.stderr.split())
    assert f"keeps {kept} checkpoints, fewer than --last 5" in advice
    assert "trained with --keep-checkpoints 5 but stopped after fewer validations" in advice
    assert "lower --last" in advice and "train it with --keep-checkpoints" not in advice
