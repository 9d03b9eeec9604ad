"""RESULTS.md and results.json of a `make bench` run: goals, the side-by-side table, method."""

from __future__ import annotations

import json
from dataclasses import asdict
from pathlib import Path

from goals import BLEU_TOLERANCE, TOKENS_PER_UPDATE_TOLERANCE, Goal
from machine import Machine
from measure import LatencyResult, TrainingResult, TranslationResult
from metrics import (
    BATCH1_SENTENCES,
    METRICS,
    OURS,
    PEERS,
    BenchResults,
    Metric,
    better_peer,
    paired_ratios,
    spread,
    training,
)
from steps import Step
from systems import MAX_OUTPUT, PEER_BATCH, STARTUP_S, SYSTEMS


def _fmt(value: float | None, digits: int = 0) -> str:
    if value is None:
        return "–"
    return f"{value:,.{digits}f}"


def _with_spread(value: float | None, spread: list[float] | None, digits: int) -> str:
    text = _fmt(value, digits)
    if value is not None and spread:
        text += f" ({_fmt(spread[0], digits)}–{_fmt(spread[1], digits)})"
    return text


def _ratio_text(ratio: list[float] | None) -> str:
    if not ratio:
        return "–"
    return _with_spread(ratio[0], ratio[1:] or None, 2)


def _cell(results: BenchResults, metric: Metric, system: str) -> str:
    text = _with_spread(
        metric.value(results, system), spread(metric, results, system), metric.digits
    )
    bleu = metric.bleu(results, system) if metric.bleu else None
    return text + (f" · BLEU {bleu:.2f}" if bleu is not None else "")


def _main_table(results: BenchResults) -> list[str]:
    systems = [name for name in (*PEERS, *OURS) if name in results.options["systems"]]
    ours = [name for name in OURS if name in systems]
    head = ["metric", *(SYSTEMS[s].label for s in systems), *(f"{s} ÷ better peer" for s in ours)]
    lines = ["| " + " | ".join(head) + " |", "|" + "---|" * len(head)]
    for metric in METRICS:
        if all(metric.value(results, s) is None for s in systems):
            continue  # e.g. --bf16 on a CPU without native bfloat16: never run
        peer = better_peer(results, metric)
        cells = [_cell(results, metric, s) for s in systems]
        ratios = [_ratio_text(peer and paired_ratios(results, metric, s, peer)) for s in ours]
        lines.append("| " + " | ".join([metric.label, *cells, *ratios]) + " |")
    return lines


def _goal_table(results: BenchResults) -> list[str]:
    lines = [
        "| goal | system | measured, median (min–max) | target | ÷ baseline, median (min–max "
        "of rounds) | BLEU: ours / baseline | result |",
        "|---|---|---|---|---|---|---|",
    ]
    for goal in results.goals:
        verdict = {True: "**pass**", False: "**FAIL**", None: "–"}[goal.passed]
        verdict += f" ({goal.note})" if goal.note else ""
        digits = 2 if "latency" in goal.goal else 0 if "training" in goal.goal else 1
        bleu = " / ".join(_fmt(b, 2) for b in goal.bleu) if goal.bleu else "–"
        lines.append(
            f"| {goal.goal} | {goal.system} | {_with_spread(goal.measured, goal.spread, digits)} | "
            f"{_fmt(goal.target, digits)} | {_ratio_text(goal.ratio)} | {bleu} | {verdict} |"
        )
    return lines


# Which profiled workload bounds each of nmt's speed goals (labels as goals.goals writes them).
ROOFLINE_WORKLOADS = (
    ("training tok/s", "training update"),
    ("beam 5 batch 64 sents/s", "beam 5, batch 64"),
    ("greedy batch 64 sents/s", "greedy, batch 64"),
    ("beam 5 batch 1 sents/s", "beam 5, batch 1"),
)


def at_best(bench: float, profiled: float, best: float) -> float | None:
    """The bench's rate had the work run at its best time: each unit's bench time less what the
    profile says the work could save per unit (start-up, loading and reading stay as they
    were); None when that leaves no time."""
    seconds = 1 / bench - (1 / profiled - 1 / best)
    return 1 / seconds if seconds > 0 else None


def _roofline(results: BenchResults) -> list[str]:
    """How far each speed goal nmt missed for speed could go: its bench figure with the
    profiled work at its best time, against the goal's target."""
    roofline = results.roofline
    if not roofline:
        return []
    rates = roofline["rates"]
    lines = [
        "## Roofline of the missed goals",
        "",
        "`bench/profile_report.py` on the nmt model this run trained (its command is among the "
        "commands below), on the same machine after the translation rounds: fp32 matmul "
        f"{rates['matmul_gflops']:.1f} GFLOP/s, {rates['op_us']:.1f} µs per tiny operator, "
        f"copy bandwidth {rates['copy_gbs']:.1f} GB/s. A workload's best time adds up, over its "
        "phases, the larger of its matrix FLOPs at the matmul rate and its operators at the "
        "per-operator cost. Both are lower bounds (element-wise work and memory traffic count "
        "nothing), so the rate at the best time is an upper bound on what this architecture "
        "could reach in fp32 here with as many operators as ours runs. The profile times the work alone, in-process, under its "
        "phase timers; the bench's figure also holds start-up, loading and data reading. So "
        "the last columns take from the bench's time per unit only what the profile says the "
        "work could save, 1/profiled − 1/best, and compare that rate with the goal's target.",
        "",
        "| goal | workload | profiled rate | rate at the best time | best ÷ profiled | bench "
        "figure | bench figure at the best time | target | goal at the best time |",
        "|---|---|---:|---:|---:|---:|---:|---:|---|",
    ]
    shown = 0
    for goal in results.goals:
        workload = next((w for p, w in ROOFLINE_WORKLOADS if goal.goal.startswith(p)), None)
        entry = roofline.get(workload) if workload else None
        missed = goal.passed is False and goal.target and goal.measured < goal.target
        if goal.system != "nmt" or not missed or not entry or not entry["best"]:
            continue  # a goal missed on BLEU alone is fast enough: no roofline needed
        digits = 0 if "training" in goal.goal else 1
        projected = at_best(goal.measured, entry["measured"], entry["best"])
        reach = "–" if projected is None else (
            "within reach" if projected >= goal.target else "out of reach"
        )  # fmt: skip
        lines.append(
            f"| {goal.goal} | {workload} | {_fmt(entry['measured'], digits)} | "
            f"{_fmt(entry['best'], digits)} | {entry['best'] / entry['measured']:.2f} | "
            f"{_fmt(goal.measured, digits)} | {_fmt(projected, digits)} | "
            f"{_fmt(goal.target, digits)} | {reach} |"
        )
        shown += 1
    return [*lines, ""] if shown else []


def _bf16_rate(results: BenchResults) -> list[str]:
    if results.bf16_matmul_gflops is None:
        return []
    return [
        f"- Its bfloat16 matmul rate (the same product in bfloat16, at the start; the `--bf16` "
        f"rows): {_fmt(results.bf16_matmul_gflops, 1)} GFLOP/s"
    ]


def _on_gpu(results: BenchResults) -> bool:
    return results.options.get("device", "cpu") == "cuda"


def _command(results: BenchResults) -> str:
    return "make bench-gpu" if _on_gpu(results) else "make bench"


def _gpu_lines(results: BenchResults) -> list[str]:
    if not _on_gpu(results):
        return []
    return [
        "- On the GPU: every system trains and translates on the first GPU, in float32 with "
        "torch's defaults unless a row says `--bf16`: no TF32 in matrix products, while "
        "cuDNN's recurrent kernels may use TF32 (torch allows it by default); OpenNMT-py "
        "with `world_size: 1`, `gpu_ranks: [0]` and `onmt_translate -gpu 0`, ours with "
        "`--device cuda`. The search rows are greedy and beam 5 at batch 64, beam 5 at batch 1 "
        "and our `--early-stop` (`--quantize` and `--shortlist` are CPU speed-ups). MFU is "
        "taken against the GPU's fp32 matmul rate.",
        "- Our precision on the GPU: `amp = false` in [train] for `nmt`, so it trains in float32 "
        "as the peers do; nmt-bf16 trains with `--bf16`."
        if results.options.get("gpu_amp") is False
        else "- Our precision on the GPU: `nmt` trained with its default on CUDA, `amp = true` "
        "(bfloat16 autocast on this GPU), not in float32: its training row is mixed precision, "
        "like nmt-bf16's, against OpenNMT-py in float32. Translation is float32 in every row "
        "but the `--bf16` ones.",
    ]


def _header(results: BenchResults) -> list[str]:
    m = results.machine
    versions = ", ".join(f"{k} {v}" for k, v in results.versions.items())
    rates = f"{_fmt(results.matmul_gflops, 1)} GFLOP/s at the start"
    if results.matmul_gflops_end is not None:
        rates += f", {_fmt(results.matmul_gflops_end, 1)} GFLOP/s at the end"
    return [
        "# nmt against OpenNMT-py and Joey NMT: speed, memory, quality",
        "",
        f"Generated by `{_command(results)}` (bench/run.py); every figure below was measured in this one "
        "run on this machine, and every ratio and verdict is computed from figures of this run "
        "only (none quoted from elsewhere).",
        "",
        f"- Date: {m.date_utc}; whole run {results.total_s / 60:.1f} min",
        f"- Machine: {m.nproc} cores ({m.cpu_model}), {m.mem_gib} GiB RAM, Python {m.python}"
        + (f"; every system trains and translates on its GPU, {m.gpu}" if m.gpu else ""),
        f"- This machine's fp32 matmul rate in this run ({results.matmul_command}): {rates}",
        *_bf16_rate(results),
        f"- Versions: {versions}",
        f"- Options: `{json.dumps(results.options)}`",
        "",
        "A speed goal against a peer is judged on the medians of interleaved rounds and passes "
        f"only at matched quality: ours at most {BLEU_TOLERANCE} BLEU below the peer it is "
        "compared with (the minutes-trained models differ in quality, so this decides many "
        "verdicts), and for a speed-up (--quantize, --bf16, --early-stop, --shortlist) also at most "
        f"{BLEU_TOLERANCE} below our own search without it, and every speed goal of ours "
        "(the default may use the shortlist) also at most that below our exact search "
        "(`--no-shortlist`), where it was measured. A training-rate goal is judged "
        "only when the measured target tokens per "
        f"update match within {TOKENS_PER_UPDATE_TOLERANCE:.0%}.",
        "",
    ]


def _method(results: BenchResults) -> list[str]:
    o = results.options
    rate = _fmt(results.matmul_gflops, 1)
    lines = [
        "## How it was measured",
        "",
        f"- Data: Multi30k de→en from `{o['data']}`, cleaned by `nmt prepare` with one joint "
        "8000-piece SentencePiece model; the peers train on the same kept pairs, encoded with "
        "that model to space-separated pieces, with the piece list built from train.sp.{de,en}.",
        f"- Training: one run per system, one after the other, each {o['bench_minutes']:g} min "
        "of training-loop time. "
        "Throughput counts non-pad target tokens (EOS included) and is time-weighted over the "
        f"progress windows that lie between {o['warmup_s']:.0f} s (the warm-up ends) and "
        f"{o['bench_minutes'] * 60:.0f} s after the training loop began, leaving out any window "
        "with a validation or checkpoint save; the spread is the rate over each third of that "
        "window. OpenNMT-py: `bsz` target tokens × updates per `report_every` window; Joey NMT: "
        "its `Tokens per Sec`; ours: the `tokens_per_s` of the `train` events in "
        "MODEL_DIR/train.jsonl.",
        "- Start-up and validation, for every system alike: the clock of the throughput starts "
        "with the training loop (OpenNMT-py: its `Start training loop` line; Joey NMT: its "
        "`EPOCH 1` line; ours: the loop's own `elapsed`), so imports, data loading, vocabulary "
        "and bucket building and model creation are outside it, and so is the first "
        f"{o['warmup_s']:.0f} s of the loop. No system validates or saves a periodic "
        "checkpoint inside the budget (OpenNMT-py `valid_steps` and `save_checkpoint_steps`, Joey "
        "`validation_freq`, ours `--valid-every`, all 1,000,000). The process wall time in the "
        "table includes start-up and the final save.",
        "- Equal target tokens per update: the peers count a batch in padded max(source, target) "
        "tokens, ours in target tokens, so the peers' `batch_size` is raised to give the same "
        f"target tokens per update as ours (OpenNMT-py {PEER_BATCH['onmt']:,}, Joey NMT "
        f"{PEER_BATCH['joey']:,}; ours `batch_tokens = 2000`; nmt-2p 1,000 per process, so its "
        "global batch is the same); the counts measured in this run are in the table.",
        "- Other changes to the shared peer configs (besides paths): progress reports every 5 "
        f"updates (OpenNMT-py `report_every`, Joey `logging_freq`); {_peer_stop(results)} (Joey "
        "saves its weights on SIGINT; OpenNMT-py through bench/onmt_train_sigint.py). Ours: "
        "data/configs/reference.toml plus `log_every = 5`, `valid_sentences = 100` in [train], "
        "`--max-time` (training-loop time) and `--valid-every 1000000`.",
        *_gpu_lines(results),
        f"- MFU = target tokens/s × FLOPs per target token ÷ the fp32 matmul rate, {rate} GFLOP/s "
        f"({results.matmul_command}, measured at the start of this run).",
    ]
    lines += [f"  - {arch}: {formula}" for arch, formula in results.flops_formulas.items()]
    lines += [
        f"- Translation: the test_2016_flickr sentences, batch 64, greedy and beam 5, and beam 5 "
        f"at batch 1 on the first {BATCH1_SENTENCES}, "
        f"{o.get('rounds', 1)} interleaved rounds (each round runs every row once, in the order "
        "of the table), median and min–max over the rounds; wall time of the whole process "
        "(start-up and model loading included); peak RSS from wait4 of the child. BLEU: sacreBLEU "
        "against the raw reference, peers' pieces decoded with the same SentencePiece model. "
        f"The same output length limit for every system: at most {MAX_OUTPUT} pieces "
        f"(OpenNMT-py `-max_length {MAX_OUTPUT}`, Joey NMT `max_output_length: {MAX_OUTPUT}`, "
        f"ours `--max-len {MAX_OUTPUT}`). Ratios: the medians' ratio, and in brackets the min "
        "and max of the per-round ratios.",
        *_shortlist_lines(results),
        "- nmt-fast: `--attention general --no-input-feed --decoder-style luong` on top of "
        "reference.toml, so the decoder RNN runs over all target steps in one call.",
        "- nmt-2p: reference.toml trained with `--nproc 2 --threads 1 --batch-tokens 1000` (two "
        "DDP processes of one thread, gloo; the global batch is two 1,000-token batches). Its "
        "peak RSS is that of the larger process (wait4 reports the maximum over descendants, "
        "not the sum); its model is trained the same way as nmt's, so it is not translated.",
        *_auto_lines(results),
        "- nmt-bf16: reference.toml trained with `--bf16` (bfloat16 mixed precision: the matrix "
        "products in bfloat16, weights, Adam and the loss in float32), run only where the CPU "
        "(or, in a GPU run, the GPU) "
        "computes bfloat16 in hardware. It is a different model, so it is translated (without "
        "the speed-up rows), and its training goal passes only if its beam-5 BLEU is at most "
        "0.3 below nmt's, trained for the same time. Its MFU is still taken against the fp32 "
        "matmul rate.",
        *_latency_method(results),
        f"- Threads: OMP_NUM_THREADS=MKL_NUM_THREADS={results.machine.nproc} for every process "
        "(nmt-2p: one per process"
        + ("; nmt-auto: those its probe chose)." if _auto_lines(results) else ")."),
        "",
    ]
    return lines


def _shortlist_lines(results: BenchResults) -> list[str]:
    """Which of our models searched with the lexical shortlist by default, as their
    training's check decided, and what that check found."""
    checks = results.shortlist_checks
    if not checks:
        return []
    found = []
    for system, record in checks.items():
        if not record:
            found.append(f"{system}: not checked (no record), so off")
            continue
        if record["dev_bleu"] is None:  # it kept too many pieces to be worth translating
            found.append(f"{system}: off (it keeps {record['kept']:.1%} of the pieces)")
            continue
        found.append(
            f"{system}: {'on' if record['default'] else 'off'} (dev BLEU "
            f"{record['dev_bleu']:.2f} with it, {record['dev_bleu_without']:.2f} without, "
            f"{record['sentences']:,} sentences; it keeps {record['kept']:.1%} of the pieces)"
        )
    return [
        "- Our default search: `nmt train` ends by translating the dev split at beam 5 with and "
        "without the model's lexical shortlist, and `nmt translate` uses the shortlist unless "
        "given `--no-shortlist` where it cost no BLEU there and keeps at most a tenth "
        "of the target pieces per sentence (approximate: the output layer scores those pieces "
        "only). Every row of ours without `--shortlist` or `--no-shortlist` (the speed-up rows "
        "too: `--quantize`, `--early-stop`, ...) takes that default; the `--no-shortlist` rows "
        "are our exact search, and a speed goal of ours also needs BLEU at most 0.3 below it. "
        "The check runs after the training loop, inside the process wall time and the peak RSS "
        "of training (the peers run no such check). " + "; ".join(found) + "."
    ]


def _latency_method(results: BenchResults) -> list[str]:
    o = results.options
    if not o["latency_runs"]:
        return ["- Latency: not measured in this run (`--latency-runs 0`)."]
    return [
        f"- Latency: the same sentence for every system (the first test sentence; the peers get "
        f"its pieces) piped into a fresh process, beam 5, max {MAX_OUTPUT} pieces, median and "
        f"min–max of {o['latency_runs']} rounds, each running a bare `import torch` and then "
        f"every system once; bare `import torch`: {_latency_text(results.import_torch)}."
    ]


def _peer_stop(results: BenchResults) -> str:
    """How the peers' training was stopped in this run (the rule changed: see systems.py)."""
    seconds = results.options["bench_minutes"] * 60
    if results.options.get("peer_stop") == "loop start":
        peers = [run for run in results.training if not SYSTEMS[run.system].ours]
        seen = [f"{run.system} {run.loop_start_s:.1f} s" for run in peers if run.loop_start_s]
        unseen = [r.system for r in peers if r.loop_start_looked and r.loop_start_s is None]
        text = (
            f"the peers are stopped by SIGINT {seconds:.0f} s after the line that starts their "
            "training loop, so they train as long as ours"
        )
        text += f" (that line came after {', '.join(seen)} of start-up)" if seen else ""
        if unseen:
            text += (
                f"; {', '.join(unseen)} wrote no such line within {STARTUP_S:.0f} s, so its "
                f"budget ran from then: its loop ran a different time from ours"
            )
        return text
    return (
        f"the peers were stopped by SIGINT {seconds + STARTUP_S:.0f} s after their process "
        f"started (a {STARTUP_S:.0f} s allowance for start-up), so their training loop ran up "
        f"to {STARTUP_S:.0f} s longer than ours: its BLEU is of a longer training"
    )


def _latency_text(run: LatencyResult | None) -> str:
    if run is None:
        return "not measured"
    runs = ", ".join(f"{t:.2f}" for t in run.runs_s)
    return f"median {run.median_s:.2f} s ({runs})"


def _details(results: BenchResults) -> list[str]:
    lines = ["## Details", "", "| system | training window | latency runs, s | one-sentence output |",
             "|---|---|---|---|"]  # fmt: skip
    for system in results.options["systems"]:
        train = training(results, system)
        window = "–"
        if train and train.throughput:
            t = train.throughput
            window = f"{t.seconds:.0f} s pure training, {t.windows} windows, updates {t.first_step}–{t.last_step}"
        lat = next((r for r in results.latency if r.system == system), None)
        runs = ", ".join(f"{x:.2f}" for x in lat.runs_s) if lat else "–"
        output = (lat.output[:80] if lat else "–").replace("|", "\\|")
        lines.append(f"| {system} | {window} | {runs} | {output} |")
    signatures = {t.bleu_signature for t in results.translation if t.bleu_signature}
    lines += ["", f"sacreBLEU signature: {', '.join(sorted(signatures)) or '–'}", ""]
    return lines


def _steps(results: BenchResults) -> list[str]:
    lines = ["## Steps", "", "| step | seconds | load (1/5/15 min) at start | error |",
             "|---|---|---|---|"]  # fmt: skip
    for step in results.steps:
        lines.append(f"| {step.name} | {step.seconds:.0f} | {step.load_at_start} | {step.error} |")
    return [*lines, ""]


def _commands(results: BenchResults) -> list[str]:
    return ["## Commands", "", "```bash", *results.commands, "```", ""]


def markdown(results: BenchResults) -> str:
    """RESULTS.md: goals, the side-by-side table, the method, details, steps and commands."""
    lines = [
        *_header(results),
        "## Goals",
        "",
        *_goal_table(results),
        "",
        *_roofline(results),
        "## Side by side",
        "",
        *_main_table(results),
        "",
        *_method(results),
        *_details(results),
        *_steps(results),
        *_commands(results),
    ]
    return "\n".join(lines)


def load(path: Path) -> BenchResults:
    """The results of an earlier run, read back from its results.json."""
    from throughput import Throughput

    data = json.loads(path.read_text(encoding="utf-8"))
    training = []
    for run in data.pop("training"):
        rate = run.pop("throughput")
        training.append(TrainingResult(throughput=rate and Throughput(**rate), **run))
    torch_import = data.pop("import_torch")
    return BenchResults(
        machine=Machine(**data.pop("machine")),
        import_torch=torch_import and LatencyResult(**torch_import),
        training=training,
        translation=[TranslationResult(**run) for run in data.pop("translation")],
        latency=[LatencyResult(**run) for run in data.pop("latency")],
        steps=[Step(**step) for step in data.pop("steps")],
        goals=[Goal(**goal) for goal in data.pop("goals")],
        **data,
    )


def write(results: BenchResults, folder: Path) -> tuple[Path, Path]:
    """Write RESULTS.md and results.json into `folder`."""
    folder.mkdir(parents=True, exist_ok=True)
    md, js = folder / "RESULTS.md", folder / "results.json"
    md.write_text(markdown(results), encoding="utf-8")
    js.write_text(
        json.dumps(asdict(results), indent=2, ensure_ascii=False) + "\n", encoding="utf-8"
    )
    return md, js


def _auto_lines(results: BenchResults) -> list[str]:
    """How nmt-auto was trained: the probe's rates and its choice, as the command printed them."""
    run = next((t for t in results.training if t.system == "nmt-auto"), None)
    if run is None:
        return []
    said = "; ".join(f"`{line}`" for line in run.probe) or "its lines are missing from the log"
    return [
        "- nmt-auto: reference.toml trained with `--nproc auto`: before the training loop (outside "
        "its clock, inside the process wall time) a probe times 8 updates of each layout of the "
        "machine's cores, each process taking its share of the tokens per update, and the "
        f"command picks the fastest (one process unless another is over 5 % faster): {said}. "
        "Its model is trained the same way as nmt's, so it is not translated."
    ]
