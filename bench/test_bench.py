"""Checks of the benchmark's own logic: log parsing, config edits, FLOPs, goals, child processes.

Run with `.venv/bin/python -m pytest bench -q`; nothing here trains or installs anything.
"""

from __future__ import annotations

import json
from pathlib import Path

import configs
import flops
import machine
import procs
import pytest
import report
import throughput
from layout import PEER_CONFIG_DIR
from measure import LatencyResult, TrainingResult, TranslationResult

PEER_LOGS = PEER_CONFIG_DIR / "logs"


@pytest.mark.skipif(not PEER_LOGS.exists(), reason="the shared peer logs are not here")
@pytest.mark.parametrize(
    ("kind", "name", "expected"), [("onmt", "onmt", 803), ("joey", "joey", 442)]
)
def test_peer_logs_give_the_published_rates(kind, name, expected):
    rate = throughput.measure(kind, PEER_LOGS / f"{name}_train.log.txt", 180, 1200)
    assert rate is not None and abs(rate.tokens_per_s - expected) / expected < 0.01


def test_nmt_windows_skip_validation_and_warmup():
    events = [
        {"event": "train", "step": 5, "elapsed": 10.0, "tokens_per_s": 100.0},
        {"event": "train", "step": 10, "elapsed": 20.0, "tokens_per_s": 200.0},
        {"event": "valid", "step": 10, "seconds": 3.0},
        {"event": "train", "step": 15, "elapsed": 35.0, "tokens_per_s": 999.0},
        {"event": "train", "step": 20, "elapsed": 45.0, "tokens_per_s": 300.0},
    ]
    windows = throughput.nmt_windows("\n".join(json.dumps(e) for e in events))
    rate = throughput.steady(windows, start_s=10.0, end_s=60.0)
    assert rate.windows == 2 and rate.tokens_per_s == pytest.approx(250.0)
    assert (rate.first_step, rate.last_step) == (5, 20)


def test_set_key_replaces_and_inserts_nested_keys():
    text = "a: 1\ntesting:\n    beam_size: 5  # comment\n    n_best: 1\ntraining:\n    x: 2\n"
    text = configs.set_key(text, "testing.beam_size", 1)
    text = configs.set_key(text, "testing.load_model", "/m/9.ckpt")
    text = configs.set_key(text, "a", 3)
    assert "    beam_size: 1\n" in text and '    load_model: "/m/9.ckpt"\n' in text
    assert text.startswith("a: 3\ntesting:\n") and "training:\n    x: 2" in text


def test_flops_per_target_token():
    assert flops.ARCHS["reference"].train_flops() / 1e6 == pytest.approx(47.48, abs=0.01)
    assert flops.ARCHS["fast"].train_flops() / 1e6 == pytest.approx(41.19, abs=0.01)


def _training(system: str, rate: float, rss: float) -> TrainingResult:
    speed = throughput.Throughput(rate, 1.0, rate, 100.0, 10, 0, 100, 60.0, 180.0)
    return TrainingResult(system, 180.0, speed, 47.5e6, 0.3, rss, 200.0, 0, "", "")


def test_goals_compare_with_the_better_peer():
    options = {"systems": ["onmt", "joey", "nmt"], "data": "", "bench_minutes": 3, "warmup_s": 60}
    options["latency_runs"] = 1
    results = report.BenchResults(machine.describe(), {}, options, 100.0, "", {})
    results.training = [
        _training("onmt", 800, 1500),
        _training("joey", 440, 1400),
        _training("nmt", 1700, 1000),
    ]
    results.import_torch = LatencyResult("import torch", [2.0], 2.0, 300.0, "", "")
    results.latency = [LatencyResult("nmt", [2.5], 2.5, 400.0, "", "")]
    results.goals = report.goals(results)
    verdicts = {g.goal.split()[0]: g.passed for g in results.goals}
    assert verdicts == {
        "training": True,
        "beam": None,
        "greedy": None,
        "one-sentence": True,
        "peak": True,
    }
    table = report.markdown(results)
    assert "| training tok/s ≥ 2× the faster peer | nmt | 1,700.0 | 1,600.0 | **pass** |" in table
    assert "| training: target tokens/s, steady state | 800 | 440 | 1,700 | 2.12 |" in table


def _translation(system: str, search: str, sents_per_s: float, words: float, int8=False):
    return TranslationResult(
        system, search, int8, 64, 1000, 1000 / sents_per_s, sents_per_s, words, 500.0, 5.0, "",
        0, "",
    )  # fmt: skip


def test_output_word_goals_and_a_report_rendered_again_from_its_json(tmp_path: Path):
    options = {"systems": ["onmt", "joey", "nmt"], "data": "", "bench_minutes": 3, "warmup_s": 60}
    options["latency_runs"] = 1
    results = report.BenchResults(machine.describe(), {}, options, 100.0, "", {})
    results.training = [_training("onmt", 800, 1500), _training("nmt", 1700, 1000)]
    results.translation = [
        _translation("onmt", "beam5", 40.0, 10.0),  # 400 words/s
        _translation("joey", "beam5", 20.0, 12.0),
        _translation("nmt", "beam5", 70.0, 10.0),  # 700 words/s: 1.75x
        _translation("nmt", "beam5", 90.0, 10.0, int8=True),  # 900 words/s: 2.25x
    ]
    results.goals = report.goals(results)
    verdicts = {g.goal: (g.measured, g.target, g.passed) for g in results.goals}
    assert verdicts["beam 5 batch 64 output words/s ≥ 2× the faster peer"] == (700, 800, False)
    int8 = "beam 5 --quantize batch 64 output words/s ≥ 2× the faster peer (its beam 5)"
    assert verdicts[int8] == (900, 800, True)
    assert verdicts["beam 5 batch 64 sents/s ≥ 2× the faster peer"] == (70, 80, False)
    _, js = report.write(results, tmp_path)
    again = report.load(js)
    assert again == results
    assert report.markdown(again) == report.markdown(results)


def test_run_measures_time_memory_and_budget(tmp_path: Path):
    log = tmp_path / "log"
    grown = procs.run(["python3", "-c", "b = bytearray(100 * 2**20)"], log)
    assert grown.returncode == 0 and grown.max_rss_mib > 100
    stopped = procs.run(["sleep", "5"], log, budget_s=0.5, grace_s=1.0)
    assert stopped.interrupted and stopped.seconds < 3
