"""data/demo_report.py: the demo's time estimate and its summary, on hand-made run files."""

from __future__ import annotations

import importlib.util
import json
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
CONFIG = "[train]\nmax_steps = 1000\nvalid_every = 250\npatience = 3\nthreads = 1\n"
AER = "AER {:.2f}%  precision 90.00%  recall 80.00%  (8 links predicted, 9 sure gold links, 2 pairs)\n"


@pytest.fixture(scope="module")
def report():
    spec = importlib.util.spec_from_file_location("demo_report", ROOT / "data" / "demo_report.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def _log(model: Path, events: list[dict]) -> None:
    model.mkdir(parents=True, exist_ok=True)
    (model / "train.jsonl").write_text("".join(json.dumps(e) + "\n" for e in events))


def _train(step: int, elapsed: float) -> dict:
    return {
        "event": "train",
        "step": step,
        "batches": 100,
        "elapsed": elapsed,
        "tokens_per_s": 5000.0,
    }


def _run(tmp_path: Path, last_step: int, bad_validations: int = 0) -> tuple[Path, Path]:
    out, config = tmp_path / "out", tmp_path / "demo.toml"
    config.write_text(CONFIG)
    events = [{"event": "epoch", "epoch": 1, "batches": 100}]
    events += [_train(step, step / 4) for step in range(20, last_step + 1, 20)]
    events.append(
        {"event": "done", "step": last_step, "epoch": last_step // 100,
         "batch_index": last_step % 100, "best_bleu": 91.234, "best_step": last_step - 20,
         "bad_validations": bad_validations, "tokens_seen": 1, "train_seconds": last_step / 4}
    )  # fmt: skip
    _log(out / "model", events)
    metrics = [
        {"metric": name, "score": score, "text": f"{name} = {score}", "signature": "sig"}
        for name, score in (("bleu", 93.391), ("chrf", 93.33), ("ter", 4.97))
    ]
    (out / "test.eval.json").write_text(json.dumps({"metrics": metrics}))
    (out / "test.align.log").write_text("warning: something\n" + AER.format(18.29))
    (out / "test.prior.log").write_text(AER.format(13.21))
    return out, config


def test_estimate_adds_start_up_updates_and_validations(tmp_path, report):
    probe, config = tmp_path / "probe", tmp_path / "demo.toml"
    config.write_text(CONFIG)
    _log(
        probe,
        [_train(20, 5.0), _train(40, 9.0), _train(60, 13.0),  # 5 updates/s after the first 20
         {"event": "valid", "seconds": 2.0},
         {"event": "done", "step": 60, "train_seconds": 15.0}],
    )  # fmt: skip
    # 1,000 updates / 5 per s = 200 s; 4 + 10 epoch-end + 1 final validations × 2 s = 30 s;
    # start-up = 20 s wall − 15 s training − 2 s validation = 3 s: 233 s ≈ 3.9 min.
    text = report.estimate(probe, config, probe_wall=20.0)
    assert "5.0 updates/s" in text and "about 3.9 min" in text and "15 validations" in text


def test_summary_of_a_run_that_spent_its_budget(tmp_path, report, monkeypatch):
    monkeypatch.setattr(report, "_matmul", lambda threads: 123.4)
    out, config = _run(tmp_path, last_step=1000)
    summary = report.gather(out, config, wall=300.0)
    assert summary["train"]["updates"] == 1000 and summary["train"]["stopped_by"] == "update budget"
    assert summary["test"]["bleu"] == 93.39 and summary["align"]["plain"]["aer"] == 18.29
    assert summary["align"]["prior"] == {"aer": 13.21, "precision": 90.0, "recall": 80.0}
    assert summary["machine"]["matmul_gflops"] == 123.4 and summary["machine"]["train_threads"] == 1
    screen = report.screen(summary)
    assert "test BLEU 93.39" in screen and "1,000 updates (update budget)" in screen
    assert "warning" not in screen and "123.4 GFLOP/s" in screen


@pytest.mark.parametrize(
    ("bad", "stopped", "warned"),
    [(0, "time cap", True), (3, "early stopping: dev BLEU stopped improving", False)],
)
def test_summary_says_why_a_run_stopped_short(tmp_path, report, monkeypatch, bad, stopped, warned):
    monkeypatch.setattr(report, "_matmul", lambda threads: None)
    out, config = _run(tmp_path, last_step=400, bad_validations=bad)
    summary = report.gather(out, config, wall=300.0)
    assert summary["train"]["stopped_by"] == stopped
    screen = report.screen(summary)
    assert ("400 of 1,000 updates" in screen) is warned
    assert "matmul not measured" in screen


def test_a_missing_aer_line_is_an_error_naming_the_log(tmp_path, report, monkeypatch):
    monkeypatch.setattr(report, "_matmul", lambda threads: None)
    out, config = _run(tmp_path, last_step=1000)
    (out / "test.prior.log").write_text("error: something went wrong\n")
    with pytest.raises(SystemExit, match="test.prior.log"):
        report.gather(out, config, wall=1.0)
