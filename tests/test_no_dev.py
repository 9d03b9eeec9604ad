"""Training on a data directory without a dev split: nothing is reported as a dev BLEU."""

from __future__ import annotations

import json

from cli_runner import invoke, write_toy_corpus


def test_without_a_dev_split_the_step_is_not_reported_as_bleu(tmp_path):
    src, tgt = write_toy_corpus(tmp_path, n=120)
    data = tmp_path / "data"
    prepared = invoke("prepare", "--src", src, "--tgt", tgt, "--vocab-size", "60", "-o", data)
    assert prepared.exit_code == 0, prepared.output
    model = tmp_path / "model"
    args = ["--emb-size", "16", "--hidden-size", "16", "--max-steps", "5", "--valid-every", "5"]
    result = invoke("train", data, "-o", model, *args)
    assert result.exit_code == 0, result.output
    assert "no dev split: the model is the last one saved, at step 5" in result.output
    assert "best dev BLEU" not in result.output and "None" not in result.output
    assert "checkpoint at step 5 (no dev split to validate on)" in result.output
    assert json.loads((model / "meta.json").read_text())["best_dev_bleu"] is None
    done = [json.loads(line) for line in (model / "train.jsonl").read_text().splitlines()][-1]
    assert done["event"] == "done" and done["best_by"] == "step"


def test_a_checkpoint_saved_before_best_by_resumes_without_calling_the_step_bleu(tmp_path):
    import torch

    src, tgt = write_toy_corpus(tmp_path, n=120)
    data, model = tmp_path / "data", tmp_path / "model"
    assert (
        invoke("prepare", "--src", src, "--tgt", tgt, "--vocab-size", "60", "-o", data).exit_code
        == 0
    )
    args = ["--emb-size", "16", "--hidden-size", "16", "--valid-every", "5"]
    assert invoke("train", data, "-o", model, *args, "--max-steps", "5").exit_code == 0
    last = model / "checkpoints" / "last.pt"
    payload = torch.load(last, weights_only=False)
    del payload["progress"]["best_by"]  # as an older nmt saved it
    torch.save(payload, last)
    result = invoke("train", data, "-o", model, *args, "--max-steps", "10", "--resume")
    assert result.exit_code == 0, result.output
    assert "best dev BLEU" not in result.output and "no dev split" in result.output


def test_a_resume_at_its_step_limit_neither_trains_nor_validates_again(toy_data_dir, tmp_path):
    model = tmp_path / "model"
    args = ["--emb-size", "16", "--hidden-size", "16", "--valid-every", "5", "--max-steps", "5"]
    assert invoke("train", toy_data_dir, "-o", model, *args).exit_code == 0
    log = model / "train.jsonl"
    before = [json.loads(line) for line in log.read_text().splitlines()]
    result = invoke("train", toy_data_dir, "-o", model, *args, "--resume")
    assert result.exit_code == 0, result.output
    events = [json.loads(line) for line in log.read_text().splitlines()]
    valid = [e["step"] for e in events if e["event"] == "valid"]
    assert valid == [e["step"] for e in before if e["event"] == "valid"] and valid[-1] == 5
    done = [e for e in events if e["event"] == "done"]
    assert [e["step"] for e in done] == [5, 5]
    assert done[1]["bad_validations"] == done[0]["bad_validations"]  # no validation again
