"""Numerical faults in training: a non-finite loss is skipped with a warning; a run of them stops
training with a clear message while the last good checkpoint stays loadable and resumable."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import torch
from cli_runner import invoke
from outcome import assert_refused

from nmt_cli import checkpoint, updates

SMALL = ("--emb-size", "8", "--hidden-size", "8", "--batch-tokens", "200", "--threads", "1")


class PoisonedLoss:
    """Makes the training loss NaN on chosen calls (1-based); validation is left alone."""

    def __init__(self, monkeypatch, poisoned):
        self.poisoned = poisoned
        self.calls = 0
        real = updates.Objective.forward

        def forward(module, *args, **kwargs):
            loss, *rest = real(module, *args, **kwargs)
            if torch.is_grad_enabled():  # a training step, not validation
                self.calls += 1
                if self.poisoned(self.calls):
                    loss = loss * float("nan")  # still part of the graph, as a real NaN is
            return loss, *rest

        monkeypatch.setattr(updates.Objective, "forward", forward)


def _events(out: Path) -> list[dict]:
    return [json.loads(line) for line in (out / "train.jsonl").read_text().splitlines()]


def _finite_weights(path: Path) -> dict:
    payload = checkpoint.load(path)
    assert all(torch.isfinite(w).all() for w in payload["weights"].values()), path
    return payload


def test_an_occasional_nan_loss_is_skipped_with_a_warning(toy_data_dir, tmp_path, monkeypatch):
    poison = PoisonedLoss(monkeypatch, lambda call: call in (3, 7))
    out = tmp_path / "model"
    result = invoke("train", toy_data_dir, "-o", out, "--max-steps", "10", "--valid-every", "5",
                    *SMALL)  # fmt: skip
    assert result.exit_code == 0, result.stderr
    warnings = [e for e in _events(out) if e["event"] == "warning"]
    assert [w["step"] for w in warnings] == [3, 6]  # the update that would have been step 3, 6
    assert all("non-finite loss" in w["message"] for w in warnings)
    assert result.stderr.count("non-finite loss") == 2
    assert poison.calls == 12  # ten updates plus the two skipped
    payload = _finite_weights(out / checkpoint.LAST_FILE)
    assert payload["progress"]["step"] == 10
    _finite_weights(out / checkpoint.MODEL_FILE)


def test_repeated_nan_losses_stop_training_and_keep_the_last_good_checkpoint(
    toy_data_dir, tmp_path, monkeypatch
):
    PoisonedLoss(monkeypatch, lambda call: call >= 5)  # steps 1–4 are good, then only NaN
    out = tmp_path / "model"
    args = ("-o", out, "--max-steps", "50", "--valid-every", "2", *SMALL)
    result = invoke("train", toy_data_dir, *args)
    message = assert_refused(result, 1, "not finite", "--resume", one_line=False)
    assert "checkpoint is kept" in message
    good = _finite_weights(out / checkpoint.LAST_FILE)
    assert good["progress"]["step"] == 4
    _finite_weights(out / checkpoint.MODEL_FILE)
    assert len([e for e in _events(out) if e["event"] == "warning"]) == updates.MAX_BAD_LOSSES
    assert not (out / ".lock").exists()

    monkeypatch.undo()  # the fault is gone (a lower --lr, cleaner data): resume from step 4
    resumed = invoke("train", toy_data_dir, "--resume", "-o", out, "--max-steps", "6",
                     "--valid-every", "2")  # fmt: skip
    assert resumed.exit_code == 0, resumed.stderr
    events = _events(out)
    assert [e["step"] for e in events if e["event"] == "resumed"] == [4]
    assert events[-1]["event"] == "done" and events[-1]["step"] == 6


@pytest.mark.parametrize("value", [float("inf"), float("-inf")])
def test_an_infinite_loss_is_treated_like_nan(toy_data_dir, tmp_path, monkeypatch, value):
    real = updates.Objective.forward
    calls = []

    def forward(module, *args, **kwargs):
        loss, *rest = real(module, *args, **kwargs)
        if torch.is_grad_enabled():
            calls.append(1)
            if len(calls) == 2:
                loss = loss * 0 + value
        return loss, *rest

    monkeypatch.setattr(updates.Objective, "forward", forward)
    out = tmp_path / "model"
    result = invoke("train", toy_data_dir, "-o", out, "--max-steps", "3", "--valid-every", "3",
                    *SMALL)  # fmt: skip
    assert result.exit_code == 0, result.stderr
    assert [e["step"] for e in _events(out) if e["event"] == "warning"] == [2]
    _finite_weights(out / checkpoint.LAST_FILE)
