"""Checks of the benchmark's own logic: log parsing, config edits, FLOPs, goals, child processes.

Run with `.venv/bin/python -m pytest bench -q`; nothing here trains or installs anything.
"""

from __future__ import annotations

import json
from pathlib import Path

import configs
import flops
import goals
import machine
import measure
import metrics
import procs
import profile_report
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


def _training(system: str, rate: float, rss: float, per_update: float = 2000.0):
    speed = throughput.Throughput(rate, rate / per_update, per_update, 100.0, 10, 0, 100, 60, 180)
    return TrainingResult(system, 180.0, speed, [rate] * 3, 47.5e6, 0.3, rss, 200.0, 0, "", "")


def _results(systems: list[str]) -> metrics.BenchResults:
    options = {"systems": systems, "data": "", "bench_minutes": 3, "warmup_s": 60}
    options.update(latency_runs=3, rounds=3)
    return metrics.BenchResults(machine.describe(), {}, options, 100.0, "", {})


def _translation(system, search, runs_s, bleu, int8=False, batch=64):
    """A translation row of 1,000 sentences, one round per time in `runs_s`."""
    rounds = [
        TranslationResult(
            system, search, int8, batch, 1000, s, 1000 / s, 10.0, 500.0, bleu, "", 0, ""
        )
        for s in runs_s
    ]
    return measure.combine(rounds)


def test_goals_compare_with_the_better_peer():
    results = _results(["onmt", "joey", "nmt"])
    results.training = [
        _training("onmt", 800, 1500),
        _training("joey", 440, 1400),
        _training("nmt", 1700, 1000),
    ]
    results.import_torch = LatencyResult("import torch", [2.0] * 3, 2.0, 300.0, "", "")
    results.latency = [LatencyResult("nmt", [2.5, 2.4, 2.7], 2.5, 400.0, "", "")]
    results.goals = goals.goals(results)
    verdicts = {g.goal.split()[0]: g.passed for g in results.goals}
    assert verdicts == {
        "training": True,
        "beam": None,
        "greedy": None,
        "one-sentence": True,
        "peak": True,
    }
    table = report.markdown(results)
    assert "| nmt | 1,700 (1,700–1,700) | 1,600 | 2.12 | – | **pass** |" in table
    assert "| 1.25 (1.20–1.35) | – | **pass** |" in table  # the latency ratio per round


def test_the_automatic_layout_is_judged_as_trained_and_says_what_its_probe_chose(tmp_path):
    results = _results(["onmt", "nmt", "nmt-auto"])
    auto = _training("nmt-auto", 1700, 1000)
    auto.probe = ["layout probe: 1 process × 2 threads: 1,700 target tokens/s",
                  "training with 1 process × 2 threads"]  # fmt: skip
    results.training = [_training("onmt", 800, 1500), _training("nmt", 1700, 1000), auto]
    results.goals = goals.goals(results)
    judged = [(g.system, g.goal.split()[0], g.passed) for g in results.goals]
    assert ("nmt-auto", "training", True) in judged and ("nmt-auto", "peak", True) in judged
    assert not any(
        s == "nmt-auto" and g in ("beam", "greedy") for s, g, _ in judged
    )  # untranslated
    text = report.markdown(results)
    assert "`--nproc auto`" in text and "`training with 1 process × 2 threads`" in text
    assert report.load(report.write(results, tmp_path)[1]) == results  # its lines kept in the json


def test_training_rates_are_not_judged_at_different_batches():
    results = _results(["onmt", "nmt"])
    results.training = [_training("onmt", 800, 1500, 1744), _training("nmt", 1700, 1000, 1981)]
    goal = goals.goals(results)[0]
    assert goal.passed is None and "1,981 target tokens per update against 1,744" in goal.note


def test_a_faster_system_that_loses_bleu_does_not_pass():
    results = _results(["onmt", "joey", "nmt"])
    results.training = [_training("onmt", 800, 1500), _training("nmt", 1700, 1000)]
    results.translation = [
        _translation("onmt", "beam5", [25, 20, 22], bleu=8.0),  # the faster peer: 45.5 sents/s
        _translation("joey", "beam5", [50, 40, 45], bleu=9.0),
        _translation("nmt", "beam5", [10, 9, 11], bleu=7.6),  # 2.2x, 0.4 BLEU lower
        _translation("nmt", "beam5", [10, 10, 12], bleu=7.8, int8=True),  # 2.2x, 0.2 lower
        _translation("nmt", "greedy", [10, 9, 11], bleu=7.6),  # no peer greedy row
    ]
    found = {g.goal: g for g in goals.goals(results)}
    beam = found["beam 5 batch 64 sents/s ≥ 2× the faster peer"]
    assert beam.passed is False and "BLEU" in beam.note and beam.bleu == [7.6, 8.0]
    assert beam.ratio == pytest.approx([2.2, 2.0, 2.5])  # medians, then per round: 20/10, 25/10
    int8 = found["beam 5 --quantize batch 64 sents/s ≥ 2× the faster peer (its beam 5)"]
    assert int8.passed is True and int8.measured == pytest.approx(100.0)
    assert found["greedy batch 64 sents/s ≥ 2× the faster peer"].note == "not measured"


def test_a_speed_up_must_also_keep_our_own_bleu():
    results = _results(["onmt", "nmt"])
    results.training = [_training("onmt", 800, 1500), _training("nmt", 1700, 1000)]
    results.translation = [
        _translation("onmt", "beam5", [25, 20, 22], bleu=7.0),  # 45.5 sents/s
        _translation("nmt", "beam5", [20, 18, 22], bleu=8.0),
        _translation("nmt", "beam5-early", [10, 9, 11], bleu=7.5),  # 2.2x; 0.5 below ours
        _translation("nmt", "beam5", [10, 10, 12], bleu=7.8, int8=True),  # 2.2x; 0.2 below
        _translation("onmt", "greedy", [10, 10, 10], bleu=7.0),  # 100 sents/s
        _translation("nmt", "greedy", [6, 6, 6], bleu=8.0),  # 1.7x
        _translation("nmt", "greedy", [4, 5, 5], bleu=7.9, int8=True),  # 2x; 0.1 below ours
    ]
    found = {g.goal: g for g in goals.goals(results)}
    assert found["greedy batch 64 sents/s ≥ 2× the faster peer"].passed is False
    greedy = found["greedy --quantize batch 64 sents/s ≥ 2× the faster peer (its greedy)"]
    assert greedy.passed is True and greedy.ratio[0] == pytest.approx(2.0)
    early = found["beam 5 --early-stop batch 64 sents/s ≥ 2× the faster peer (its beam 5)"]
    assert early.passed is False and "below ours without it (8.00)" in early.note
    int8 = found["beam 5 --quantize batch 64 sents/s ≥ 2× the faster peer (its beam 5)"]
    assert int8.passed is True


def test_a_default_that_uses_the_shortlist_must_keep_the_bleu_of_our_exact_search():
    results = _results(["onmt", "nmt"])
    results.training = [_training("onmt", 800, 1500), _training("nmt", 1700, 1000)]
    results.translation = [
        _translation("onmt", "beam5", [25, 20, 22], bleu=7.0),  # 45.5 sents/s
        _translation("nmt", "beam5", [10, 9, 11], bleu=7.9),  # the default: 2.2x
        _translation("nmt", "beam5-full", [20, 18, 22], bleu=8.3),  # --no-shortlist: 0.4 above
        _translation("onmt", "greedy", [10, 10, 10], bleu=7.0),  # 100 sents/s
        _translation("nmt", "greedy", [4, 5, 5], bleu=8.0),  # 2x
        _translation("nmt", "greedy-full", [6, 6, 6], bleu=8.1),  # 0.1 above
        _translation("nmt", "beam5", [9, 9, 9], bleu=7.6, int8=True),  # 2.2x, 0.7 below exact
    ]
    found = {g.goal: g for g in goals.goals(results)}
    beam = found["beam 5 batch 64 sents/s ≥ 2× the faster peer"]
    assert (
        beam.passed is False
        and "below ours without the shortlist (--no-shortlist) (8.30)" in beam.note
    )
    assert found["greedy batch 64 sents/s ≥ 2× the faster peer"].passed is True
    int8 = found["beam 5 --quantize batch 64 sents/s ≥ 2× the faster peer (its beam 5)"]
    assert int8.passed is False and "(8.30)" in int8.note  # judged against the exact search
    assert "… with --no-shortlist (exact), beam 5: sentences/s" in report.markdown(results)


def test_batch_1_is_judged_against_the_peers_at_batch_1_only():
    results = _results(["onmt", "joey", "nmt"])
    results.training = [_training("onmt", 800, 1500), _training("nmt", 1700, 1000)]
    results.translation = [
        _translation("onmt", "beam5", [10, 10, 10], bleu=8.0),  # batch 64: 100 sents/s
        _translation("onmt", "beam5", [50, 40, 45], bleu=8.0, batch=1),  # 22.2 sents/s
        _translation("joey", "beam5", [100, 90, 95], bleu=9.0, batch=1),
        _translation("nmt", "beam5", [20, 18, 22], bleu=8.0, batch=1),  # 50 sents/s: 2.25x
    ]
    found = {g.goal: g for g in goals.goals(results)}
    single = found["beam 5 batch 1 sents/s ≥ 2× the faster peer at batch 1"]
    assert single.target == pytest.approx(2 * 1000 / 45) and single.passed is True
    assert single.ratio == pytest.approx([2.25, (1000 / 22) / (1000 / 45), 2.5])  # per round
    assert found["beam 5 batch 64 sents/s ≥ 2× the faster peer"].note == "not measured"
    assert "batch 1: sentences/s" in report.markdown(results)


def test_speed_goals_need_three_rounds_and_a_report_renders_again_from_its_json(tmp_path):
    results = _results(["onmt", "nmt"])
    results.options["rounds"] = 2
    results.training = [_training("onmt", 800, 1500), _training("nmt", 1700, 1000)]
    results.translation = [
        _translation("onmt", "beam5", [25, 20], bleu=8.0),
        _translation("nmt", "beam5", [5, 6], bleu=9.0),
    ]
    results.goals = goals.goals(results)
    beam = next(g for g in results.goals if g.goal.startswith("beam 5 batch 64"))
    assert beam.passed is None and "fewer than 3" in beam.note
    assert "| 181.8 (166.7–200.0) · BLEU 9.00 |" in report.markdown(results)
    _, js = report.write(results, tmp_path)
    again = report.load(js)
    assert again == results
    assert report.markdown(again) == report.markdown(results)


def test_missed_goals_show_how_far_their_roofline_goes(tmp_path):
    results = _results(["onmt", "nmt"])
    results.training = [_training("onmt", 800, 1500), _training("nmt", 1000, 1000)]
    results.translation = [
        _translation("onmt", "beam5", [25, 20, 22], bleu=8.0),  # 45.5 sents/s: target 90.9
        _translation("nmt", "beam5", [20, 18, 22], bleu=8.0),  # 50 sents/s: missed
        _translation("onmt", "greedy", [10, 10, 10], bleu=8.0),  # 100 sents/s: target 200
        _translation("nmt", "greedy", [4, 4, 4], bleu=7.0),  # 250 sents/s, but 1 BLEU lower
    ]
    results.roofline = {
        "rates": {"matmul_gflops": 200.0, "op_us": 1.5, "copy_gbs": 7.0, "threads": 2},
        "beam 5, batch 64": {"unit": "sentences", "measured": 80.0, "best": 160.0},
        "greedy, batch 64": {"unit": "sentences", "measured": 300.0, "best": 900.0},
        "training update": {"unit": "target tokens", "measured": 1200.0, "best": 1500.0},
    }
    results.goals = goals.goals(results)
    table = report.markdown(results)
    # bench 50/s: 1/50 - (1/80 - 1/160) s per sentence = 1/72.7; the target is 2 x 45.5
    beam = "| beam 5 batch 64 sents/s ≥ 2× the faster peer | beam 5, batch 64 | 80.0 | 160.0 |"
    assert beam + " 2.00 | 50.0 | 72.7 | 90.9 | out of reach |" in table
    # 1/1000 - (1/1200 - 1/1500) s per token = 1/1200; the target is 2 x 800
    training = "| training update | 1,200 | 1,500 | 1.25 | 1,000 | 1,200 | 1,600 | out of reach |"
    assert training in table
    assert "| greedy batch 64 sents/s ≥ 2× the faster peer | greedy" not in table  # BLEU alone
    _, js = report.write(results, tmp_path)
    assert report.load(js).roofline == results.roofline
    results.roofline = {}
    assert "Roofline" not in report.markdown(results)


def test_roofline_reads_the_workloads_the_profile_writes():
    assert {w for _, w in report.ROOFLINE_WORKLOADS} == set(profile_report.WORKLOADS)
    phases = [{"best_s": 0.5}, {"best_s": 1.5}]
    profile = {"workloads": {"beam 5, batch 1": {"unit": "sentences", "units": 100,
                                                 "per_second": 20.0, "phases": phases}}}  # fmt: skip
    assert profile_report.roofline(profile) == {
        "beam 5, batch 1": {"unit": "sentences", "measured": 20.0, "best": 50.0}
    }
    assert report.at_best(50.0, 80.0, 160.0) == pytest.approx(1 / (1 / 50 - 1 / 160))
    assert report.at_best(50.0, 20.0, 1e9) is None  # more saved than the bench took


def test_run_measures_time_memory_and_budget(tmp_path: Path):
    log = tmp_path / "log"
    grown = procs.run(["python3", "-c", "b = bytearray(100 * 2**20)"], log)
    assert grown.returncode == 0 and grown.max_rss_mib > 100
    stopped = procs.run(["sleep", "5"], log, budget_s=0.5, grace_s=1.0)
    assert stopped.interrupted and stopped.seconds < 3


def test_a_budget_can_run_from_the_line_that_starts_the_loop(tmp_path: Path):
    import re

    pattern = re.compile(r"^loop starts")
    sleeper = "import sys, time; time.sleep({}); print({!r}, file=sys.stderr, flush=True); "
    late = sleeper.format(1.5, "loop starts") + "time.sleep(9)"
    log = tmp_path / "late.log"
    start = procs.LoopStart(log, pattern, startup_s=8.0)
    run = procs.run(["python3", "-c", late], log, budget_s=0.5, grace_s=5.0, loop_start=start)
    assert run.interrupted and 2.0 <= run.seconds < 4.0  # 1.5 s of start-up + 0.5 s budget
    assert 1.4 <= run.loop_start_s < 2.5
    # A line split over two writes counts once whole.
    split = (
        "import sys, time; sys.stderr.write('loop st'); sys.stderr.flush(); time.sleep(1); "
        "sys.stderr.write('arts\\n'); sys.stderr.flush(); time.sleep(9)"
    )
    log = tmp_path / "split.log"
    start = procs.LoopStart(log, pattern, startup_s=8.0)
    run = procs.run(["python3", "-c", split], log, budget_s=0.5, grace_s=5.0, loop_start=start)
    assert run.interrupted and 1.4 <= run.seconds < 3.5 and run.loop_start_s >= 0.9


def test_a_loop_budget_ignores_old_lines_and_always_stops_the_child(tmp_path: Path):
    import re

    pattern = re.compile(r"^loop starts")
    old = tmp_path / "old.log"
    old.write_text("loop starts (an earlier run)\n")
    start = procs.LoopStart(old, pattern, startup_s=1.5)
    run = procs.run(["sleep", "9"], old, budget_s=0.5, grace_s=5.0, loop_start=start)
    assert run.interrupted and 1.9 <= run.seconds < 4.0 and run.loop_start_s is None
    # No file can be read there (a folder): the budget still runs, from the start-up's end.
    broken = procs.LoopStart(tmp_path, pattern, startup_s=1.0)
    run = procs.run(["sleep", "9"], tmp_path / "b.log", budget_s=0.5, loop_start=broken)
    assert run.interrupted and run.seconds < 4.0
    # A child that ends first is not signalled.
    quick = procs.LoopStart(tmp_path / "quick.log", pattern, startup_s=0.2)
    run = procs.run(["true"], tmp_path / "quick.log", budget_s=0.1, loop_start=quick)
    assert not run.interrupted and run.returncode == 0


def test_profile_phases_count_their_own_time_and_add_up():
    import time as clock
    import types

    import profile_report

    phases = profile_report.Phases(rest="rest")
    box = types.SimpleNamespace()
    box.inner = lambda: clock.sleep(0.02)

    def outer():
        clock.sleep(0.01)
        box.inner()

    box.outer = outer
    phases.wrap(box, "inner", "inner")
    phases.wrap(box, "outer", "outer")
    box.outer()
    assert phases.calls == {"inner": 1, "outer": 1}
    assert 0.018 < phases.seconds["inner"] < 0.05
    assert 0.009 < phases.seconds["outer"] < 0.018  # the inner call's time is taken out
    assert phases.stack == ["rest"]


def test_profile_counts_the_flops_inference_mode_keeps_whole():
    import profile_report
    import torch

    linear, gru = torch.nn.Linear(16, 40), torch.nn.GRU(16, 8, batch_first=True)
    phases = profile_report.Phases(rest="all")
    with torch.inference_mode(), profile_report.counting(phases) as counts:
        linear(torch.randn(3, 5, 16))
        gru(torch.randn(2, 7, 16))
        # a search step: the decoder's `torch.gru_cell` on 6 rows
        torch.gru_cell(torch.randn(6, 16), torch.randn(6, 8), *gru.all_weights[0])
    linear_flops = 2 * 15 * 16 * 40
    gru_flops = 2 * 14 * (3 * 8 * 16 + 3 * 8 * 8)  # 14 positions, both weight matrices
    cell_flops = 2 * 6 * (3 * 8 * 16 + 3 * 8 * 8)
    assert counts["all"]["flops"] == linear_flops + gru_flops + cell_flops


def test_a_gpu_run_puts_every_system_on_the_gpu(tmp_path):
    import systems
    from dataset import TestSet
    from layout import Layout

    def device_of(argv: list, flag: str) -> str | None:
        argv = [str(a) for a in argv]
        assert argv.count(flag) <= 1
        return argv[argv.index(flag) + 1] if flag in argv else None

    test = TestSet(tmp_path / "t.de", tmp_path / "t.sp.de", tmp_path / "t.en", 3)
    nmt, onmt = systems.SYSTEMS["nmt"], systems.SYSTEMS["onmt"]
    for device, ours, peer, ranks in (("cpu", None, "-1", "[]"), ("cuda", "cuda", "0", "[0]")):
        layout = Layout(tmp_path / device, device)
        train = systems.train_command(layout, nmt, tmp_path / "run", 60, True)
        translate = systems.translate_command(layout, nmt, tmp_path, 5, test, tmp_path / "o")
        latency = systems.latency_command(layout, nmt, tmp_path, "Ein Satz.", tmp_path / "o")
        assert device_of(train.argv, "--device") == ours
        our_config = Path(device_of(train.argv, "--config")).read_text(encoding="utf-8")
        assert ("amp = false" in our_config) == (device == "cuda")  # float32, as the peers
        assert device_of(translate.argv, "--device") == ours
        assert device_of(latency.argv, "--device") == ours
        peer_translate = systems.translate_command(layout, onmt, tmp_path, 5, test, tmp_path / "o")
        assert device_of(peer_translate.argv, "-gpu") == peer
        config = systems.train_command(layout, onmt, tmp_path / "run", 60, True).argv[-1]
        text = Path(config).read_text(encoding="utf-8")
        assert f"\ngpu_ranks: {ranks}" in text and "\nworld_size: 1" in text


def test_yaml_lists_are_written_as_flow_sequences():
    assert configs.set_key("a: 1\nb: []\n", "b", [0, 1]) == "a: 1\nb: [0, 1]\n"


def test_the_report_says_how_long_each_peer_trained():
    from dataclasses import replace

    results = _results(["onmt", "joey", "nmt"])
    onmt, joey = _training("onmt", 100.0, 900.0), _training("joey", 90.0, 900.0)
    results.training = [replace(onmt, loop_start_looked=True, loop_start_s=7.25)]
    results.training += [replace(joey, loop_start_looked=True), _training("nmt", 150.0, 800.0)]
    old = report._peer_stop(results)  # a run from before the loop-start rule
    assert "after their process started" in old and "up to 30 s longer" in old
    results.options["peer_stop"] = "loop start"
    text = report._peer_stop(results)
    assert "train as long as ours" in text and "onmt 7.2 s of start-up" in text
    assert "joey wrote no such line within 30 s" in text and "onmt wrote" not in text


def test_the_thirds_hold_every_window_of_the_steady_rate():
    # A GPU run's OpenNMT-py log with a 3.1 s corpus reload that straddles two thirds.
    log = Path(__file__).parent / "gpu" / "training" / "logs" / "speed-train-onmt.log"
    whole = throughput.measure("onmt", log, 12.0, 36.0)
    parts = throughput.thirds("onmt", log, 12.0, 36.0)
    assert len(parts) == 3 and sum(part.windows for part in parts) == whole.windows
    rates = [part.tokens_per_s for part in parts]
    assert min(rates) <= whole.tokens_per_s <= max(rates)
