"""A run interrupted and resumed reaches the same weights as one that was not."""

from __future__ import annotations

import json

import pytest
import torch
from cli_runner import invoke

from nmt_cli import checkpoint

TINY = (
    "--emb-size",
    "16",
    "--hidden-size",
    "16",
    "--valid-every",
    "5",
    "--batch-tokens",
    "300",
    "--lr",
    "0.01",
    "--seed",
    "11",
    "--threads",
    "1",
)


def test_resumed_run_matches_uninterrupted_run(toy_data_dir, tmp_path):
    straight, split = tmp_path / "straight", tmp_path / "split"
    assert invoke("train", toy_data_dir, "-o", straight, *TINY, "--max-steps", "20").exit_code == 0
    assert invoke("train", toy_data_dir, "-o", split, *TINY, "--max-steps", "10").exit_code == 0
    resumed = invoke("train", toy_data_dir, "-o", split, *TINY, "--max-steps", "20", "--resume")
    assert resumed.exit_code == 0, resumed.output
    assert "resumed: step 10" in resumed.stderr
    a = checkpoint.load(straight / checkpoint.LAST_FILE)
    b = checkpoint.load(split / checkpoint.LAST_FILE)
    assert a["progress"]["step"] == b["progress"]["step"] == 20
    for name, tensor in a["weights"].items():
        assert torch.equal(tensor, b["weights"][name]), name


def test_runs_resumed_after_budget_stops_off_the_validation_schedule_match_one_run(
    toy_data_dir, tmp_path
):
    """Stopped by --max-steps off the --valid-every schedule, a run validates its last weights
    (for the best model). That validation must not decay the learning rate nor count against
    --patience, and must not stand in for a validation the schedule makes at that step (the
    end of an epoch), or the resumed run trains on at another rate than an uninterrupted one.
    Stops: before the first validation, mid-epoch, and at the end of the first epoch."""
    config = tmp_path / "schedule.toml"  # the rate decays from the first update on, unbounded
    config.write_text("[train]\nwarmup_steps = 0\nmin_lr = 0.0\n", encoding="utf-8")
    flags = (*TINY, "--config", config, "--patience", "0", "--lr", "0.001", "--valid-every", "7")
    straight = tmp_path / "straight"
    done = invoke("train", toy_data_dir, "-o", straight, *flags, "--max-steps", "30")
    assert done.exit_code == 0, done.output
    log = [json.loads(line) for line in (straight / "train.jsonl").read_text().splitlines()]
    per_epoch = next(event["batches"] for event in log if event["event"] == "epoch")
    assert per_epoch % 7 and 17 < per_epoch < 30  # the epoch ends off the schedule, in the run
    a = checkpoint.load(straight / checkpoint.LAST_FILE)
    assert a["progress"]["lr_scale"] < 1.0  # the schedule did decay: the test tells apart
    # 17: a stop whose validation finds no better dev score (the rate was halved there)
    for stop in (3, 17, per_epoch):
        split = tmp_path / f"split-{stop}"
        first = invoke("train", toy_data_dir, "-o", split, *flags, "--max-steps", str(stop))
        assert first.exit_code == 0, first.output
        stopped = checkpoint.load(split / checkpoint.LAST_FILE)["progress"]
        assert stopped["validated_step"] == stop  # it did validate where it stopped
        resumed = invoke(
            "train", toy_data_dir, "-o", split, *flags, "--max-steps", "30", "--resume"
        )
        assert resumed.exit_code == 0, resumed.output
        b = checkpoint.load(split / checkpoint.LAST_FILE)
        for field in ("step", "lr_scale", "bad_validations", "schedule_best"):
            assert a["progress"].get(field) == b["progress"].get(field), (stop, field)
        for name, tensor in a["weights"].items():
            assert torch.equal(tensor, b["weights"][name]), (stop, name)


def _files(model_dir):
    return {p.name: p.read_bytes() for p in model_dir.iterdir() if p.is_file()}


def test_a_refused_resume_writes_nothing(toy_data_dir, tmp_path):
    from cli_runner import write_toy_corpus

    model = tmp_path / "model"
    assert invoke("train", toy_data_dir, "-o", model, *TINY, "--max-steps", "5").exit_code == 0
    before = _files(model)
    bigger = invoke("train", toy_data_dir, "-o", model, *TINY, "--max-steps", "10", "--resume",
                    "--hidden-size", "24")  # fmt: skip
    assert bigger.exit_code == 2 and "--hidden-size 16 → 24" in " ".join(bigger.stderr.split())
    assert "Traceback" not in bigger.output and _files(model) == before
    src, tgt = write_toy_corpus(tmp_path / "other", n=300, seed=5)
    other = tmp_path / "other-data"
    prepared = invoke("prepare", "--src", src, "--tgt", tgt, "--vocab-size", "50", "-o", other)
    assert prepared.exit_code == 0, prepared.output
    foreign = invoke("train", other, "-o", model, *TINY, "--max-steps", "10", "--resume")
    assert foreign.exit_code == 2 and "trained on other data" in foreign.stderr
    assert _files(model) == before  # tokenizers and config.json untouched
    resumed = invoke("train", toy_data_dir, "-o", model, *TINY, "--max-steps", "10", "--resume")
    assert resumed.exit_code == 0 and "resumed: step 5" in resumed.stderr


def test_a_training_seed_out_of_range_is_refused_before_anything_is_written(toy_data_dir, tmp_path):
    for seed in ("-1", "4294967296"):
        result = invoke("train", toy_data_dir, "-o", tmp_path / "m", f"--seed={seed}")
        assert result.exit_code == 2 and "--seed must be in 0..4294967295" in result.stderr
        assert not (tmp_path / "m").exists()


def test_a_resume_may_change_dropout(toy_data_dir, tmp_path):
    model = tmp_path / "model"
    assert invoke("train", toy_data_dir, "-o", model, *TINY, "--max-steps", "5").exit_code == 0
    resumed = invoke("train", toy_data_dir, "-o", model, *TINY, "--max-steps", "8", "--resume",
                     "--dropout", "0.3")  # fmt: skip
    assert resumed.exit_code == 0, resumed.output


def test_the_model_directory_cannot_be_the_data_directory(toy_data_dir):
    before = sorted(p.name for p in toy_data_dir.iterdir())
    result = invoke("train", toy_data_dir, "-o", toy_data_dir, "--max-steps", "1")
    assert result.exit_code == 2 and "is the data directory" in result.stderr
    assert sorted(p.name for p in toy_data_dir.iterdir()) == before


def test_max_time_is_a_budget_for_the_whole_run_across_resumes(toy_data_dir, tmp_path):
    model = tmp_path / "model"
    assert invoke("train", toy_data_dir, "-o", model, *TINY, "--max-steps", "5").exit_code == 0
    spent = checkpoint.load(model / checkpoint.LAST_FILE)["progress"]["train_seconds"]
    assert spent > 0
    budget = f"{spent / 2:.6f}s"  # already spent: the resumed run trains no further
    resumed = invoke("train", toy_data_dir, "-o", model, *TINY, "--max-steps", "50",
                     "--max-time", budget, "--resume")  # fmt: skip
    assert resumed.exit_code == 0, resumed.output
    assert checkpoint.load(model / checkpoint.LAST_FILE)["progress"]["step"] == 5
    more = invoke("train", toy_data_dir, "-o", model, *TINY, "--max-steps", "8",
                  "--max-time", "1h", "--resume")  # fmt: skip
    assert (
        more.exit_code == 0
        and checkpoint.load(model / checkpoint.LAST_FILE)["progress"]["step"] == 8
    )


def test_the_logged_training_perplexity_is_of_the_plain_nll_not_the_smoothed_loss(
    toy_data_dir, tmp_path
):
    import json
    import math

    logged = {}
    for smoothing in ("0", "0.3"):
        out = tmp_path / f"ls{smoothing}"
        result = invoke("train", toy_data_dir, "-o", out, *TINY, "--max-steps", "40",
                        "--label-smoothing", smoothing, "--log-every", "10")  # fmt: skip
        assert result.exit_code == 0, result.stderr
        events = [json.loads(line) for line in (out / "train.jsonl").read_text().splitlines()]
        logged[smoothing] = [e for e in events if e["event"] == "train"]
        assert f"ppl {logged[smoothing][-1]['ppl']:.2f}" in result.stderr
    for event in logged["0"]:  # no smoothing: the loss is the NLL
        assert event["ppl"] == pytest.approx(math.exp(event["loss"]), rel=1e-3)
    last = logged["0.3"][-1]  # once the model has learnt, smoothing adds to the loss, not the NLL
    assert last["ppl"] < math.exp(last["loss"]) * 0.9


def test_meta_json_counts_epochs_as_the_log_does(toy_data_dir, tmp_path):
    import json

    model = tmp_path / "model"
    result = invoke("train", toy_data_dir, "-o", model, *TINY, "--max-steps", "3")
    assert result.exit_code == 0, result.stderr
    progress = checkpoint.load(model / checkpoint.LAST_FILE)["progress"]
    assert progress["epoch"] == 0 and progress["batch_index"] == 3  # inside the first epoch
    assert json.loads((model / "meta.json").read_text())["epoch"] == 1
    assert "done: 3 steps, epoch 1," in result.stderr


def test_a_resume_whose_budget_is_spent_says_so(toy_data_dir, tmp_path):
    model = tmp_path / "model"
    first = invoke(
        "train", toy_data_dir, "-o", model, *TINY, "--max-steps", "50", "--max-time", "0.2s"
    )
    assert first.exit_code == 0, first.stderr
    step = checkpoint.load(model / checkpoint.LAST_FILE)["progress"]["step"]
    assert step < 50  # stopped by time
    again = invoke("train", toy_data_dir, "-o", model, "--resume")  # the saved budget holds
    assert again.exit_code == 0, again.stderr
    said = " ".join(again.stderr.split())
    assert "--max-time 0.2s is spent" in said and "give a larger one" in said
    assert checkpoint.load(model / checkpoint.LAST_FILE)["progress"]["step"] == step


def test_a_state_saved_by_an_unfused_adam_resumes_with_the_fused_one():
    """Checkpoints written before training stepped with torch's fused Adam keep that choice in
    their parameter groups; a resumed run still steps fused, its moments carried over."""
    import torch

    from nmt_cli.config import ModelConfig, TrainConfig
    from nmt_cli.distributed import Ranks
    from nmt_cli.model.seq2seq import Seq2Seq
    from nmt_cli.updates import Updater

    config = ModelConfig(src_vocab_size=20, tgt_vocab_size=20, emb_size=8, hidden_size=4)
    model = Seq2Seq(config)
    old = torch.optim.Adam(model.parameters(), lr=0.001)  # as before: the default, unfused
    for p in model.parameters():
        p.grad = torch.ones_like(p)
    old.step()
    update = Updater(model, TrainConfig(), torch.device("cpu"), Ranks(), lambda event: None)
    update.restore({"optimizer": old.state_dict(), "scaler": None})
    assert all(group["fused"] for group in update.optimizer.param_groups)
    first = next(iter(model.parameters()))
    assert torch.equal(update.optimizer.state[first]["exp_avg"], old.state[first]["exp_avg"])
