"""The results side by side: ratios to the faster peer, goals with pass/fail, RESULTS.md and JSON."""

from __future__ import annotations

import json
from collections.abc import Callable
from dataclasses import asdict, dataclass, field
from pathlib import Path

from machine import Machine
from measure import LatencyResult, TrainingResult, TranslationResult
from steps import Step
from systems import MAX_OUTPUT, PEER_BATCH, SYSTEMS

PEERS = ("onmt", "joey")
OURS = ("nmt", "nmt-2p", "nmt-fast")


BLEU_TOLERANCE = 0.3  # a faster system that loses more BLEU than this does not pass
TOKENS_PER_UPDATE_TOLERANCE = 0.05  # training rates are compared only at matched batches
MIN_ROUNDS = 3  # a speed goal is judged on at least this many interleaved rounds


@dataclass
class Goal:
    """One target with its measured value and verdict (None: not judged, `note` says why)."""

    goal: str
    system: str
    measured: float | None
    target: float | None
    passed: bool | None
    spread: list[float] | None = None  # min and max of the measured value over the rounds
    ratio: list[float] | None = None  # against the baseline: median, min, max over the rounds
    bleu: list[float | None] | None = None  # this system's and the baseline's
    note: str = ""


@dataclass
class BenchResults:
    """Everything one `make bench` run measured."""

    machine: Machine
    versions: dict[str, str]
    options: dict
    matmul_gflops: float | None
    matmul_command: str
    flops_formulas: dict[str, str]
    import_torch: LatencyResult | None = None
    training: list[TrainingResult] = field(default_factory=list)
    translation: list[TranslationResult] = field(default_factory=list)
    latency: list[LatencyResult] = field(default_factory=list)
    steps: list[Step] = field(default_factory=list)
    commands: list[str] = field(default_factory=list)
    goals: list[Goal] = field(default_factory=list)
    total_s: float = 0.0
    matmul_gflops_end: float | None = None  # the same measurement after the last step


@dataclass(frozen=True)
class Metric:
    """One row of the main table: how to read it from the results, and which way is better.

    `rounds` gives the value of each interleaved round (for the spread and, when `paired`,
    for per-round ratios); `bleu` the BLEU of the translations the value was measured on.
    """

    label: str
    value: Callable[[BenchResults, str], float | None]
    higher_is_better: bool = True
    digits: int = 0
    rounds: Callable[[BenchResults, str], list[float]] | None = None
    bleu: Callable[[BenchResults, str], float | None] | None = None
    paired: bool = False  # rounds of different systems ran side by side: ratios per round


def _training(results: BenchResults, system: str) -> TrainingResult | None:
    return next((t for t in results.training if t.system == system), None)


def _translation(results: BenchResults, system: str, search: str, quantized: bool = False):
    return next(
        (
            t
            for t in results.translation
            if t.system == system
            and t.search == search
            and t.quantized == quantized
            and t.returncode == 0
        ),
        None,
    )


def _rate(results: BenchResults, system: str) -> float | None:
    run = _training(results, system)
    return run.throughput.tokens_per_s if run and run.throughput else None


def _rate_thirds(results: BenchResults, system: str) -> list[float]:
    run = _training(results, system)
    return run.thirds_tokens_per_s if run else []


def _tokens_per_update(results: BenchResults, system: str) -> float | None:
    run = _training(results, system)
    return run.throughput.tokens_per_step if run and run.throughput else None


def _speed(label: str, search: str, quantized: bool = False) -> Metric:
    """Sentences/s of the translation rows with that search: the median over the rounds."""

    def value(results: BenchResults, system: str) -> float | None:
        run = _translation(results, system, search, quantized)
        return run.sents_per_s if run else None

    def rounds(results: BenchResults, system: str) -> list[float]:
        run = _translation(results, system, search, quantized)
        return run.rounds_sents_per_s() if run else []

    def bleu(results: BenchResults, system: str) -> float | None:
        run = _translation(results, system, search, quantized)
        return run.bleu if run else None

    return Metric(label, value, digits=1, rounds=rounds, bleu=bleu, paired=True)


def _output_words_rate(results: BenchResults, system: str) -> float | None:
    """Output words per second at beam 5: sentences/s × words per output (informative)."""
    run = _translation(results, system, "beam5")
    if run is None or run.words_per_output is None:
        return None
    return run.sents_per_s * run.words_per_output


def _words_per_output(results: BenchResults, system: str) -> float | None:
    run = _translation(results, system, "beam5")
    return run.words_per_output if run else None


def _latency_run(results: BenchResults, system: str) -> LatencyResult | None:
    return next((r for r in results.latency if r.system == system), None)


def _latency(results: BenchResults, system: str) -> float | None:
    run = _latency_run(results, system)
    return run.median_s if run else None


def _latency_rounds(results: BenchResults, system: str) -> list[float]:
    run = _latency_run(results, system)
    return run.runs_s if run else []


def _train_attr(name: str, scale: float = 1.0):
    """A metric reading `name` of the training run (or of its throughput), times `scale`."""

    def value(results: BenchResults, system: str) -> float | None:
        run = _training(results, system)
        if run is None:
            return None
        if name in ("mfu", "flops_per_token", "max_rss_mib", "wall_s"):
            raw = getattr(run, name)
        else:
            raw = getattr(run.throughput, name) if run.throughput else None
        return None if raw is None else raw * scale

    return value


def _translate_rss(results: BenchResults, system: str) -> float | None:
    runs = [t.max_rss_mib for t in results.translation if t.system == system and t.returncode == 0]
    return max(runs) if runs else None


TRAIN_RATE = Metric(
    "training: target tokens/s, steady state (min–max over its thirds)",
    _rate,
    rounds=_rate_thirds,
)
TOKENS_PER_UPDATE = Metric("training: target tokens per update (measured)", _tokens_per_update)
TRAIN_RSS = Metric("training: peak RSS, MiB", _train_attr("max_rss_mib"), higher_is_better=False)
GREEDY = _speed("translate test set, greedy, batch 64: sentences/s", "greedy")
BEAM = _speed("translate test set, beam 5, batch 64: sentences/s", "beam5")
GREEDY_INT8 = _speed("… with --quantize, greedy: sentences/s", "greedy", True)
BEAM_INT8 = _speed("… with --quantize, beam 5: sentences/s", "beam5", True)
BEAM_EARLY = _speed(
    "… with --early-stop (the peers' stopping rule), beam 5: sentences/s", "beam5-early"
)
BEAM_EARLY_INT8 = _speed("… with --early-stop --quantize, beam 5: sentences/s", "beam5-early", True)
BEAM_SHORTLIST = _speed("… with --shortlist, beam 5: sentences/s", "beam5-shortlist")
BEAM_SHORTLIST_INT8 = _speed(
    "… with --shortlist --quantize, beam 5: sentences/s", "beam5-shortlist", True
)
LATENCY = Metric(
    "one sentence from the shell, beam 5: s", _latency, False, digits=2, rounds=_latency_rounds,
    paired=True,
)  # fmt: skip
METRICS = [
    TRAIN_RATE,
    Metric("training: updates/s", _train_attr("steps_per_s"), digits=3),
    TOKENS_PER_UPDATE,
    Metric(
        "training: MFLOP per target token (fwd+bwd)", _train_attr("flops_per_token", 1e-6), digits=1
    ),
    Metric("training: MFU, % of the matmul rate", _train_attr("mfu", 100.0), digits=1),
    Metric("training: process wall time, s (start-up and saving included)", _train_attr("wall_s")),
    TRAIN_RSS,
    GREEDY,
    BEAM,
    GREEDY_INT8,
    BEAM_INT8,
    BEAM_EARLY,
    BEAM_EARLY_INT8,
    BEAM_SHORTLIST,
    BEAM_SHORTLIST_INT8,
    Metric("translation, beam 5: words per output (informative)", _words_per_output, digits=1),
    Metric("translation, beam 5: output words/s (informative, no goal)", _output_words_rate),
    Metric(
        "translation: peak RSS, MiB (max over its runs)", _translate_rss, higher_is_better=False
    ),
    LATENCY,
]


def better_peer(results: BenchResults, metric: Metric) -> str | None:
    """The peer with the better value of `metric` (higher or lower as the metric says)."""
    values = {p: v for p in PEERS if (v := metric.value(results, p)) is not None}
    if not values:
        return None
    pick = max if metric.higher_is_better else min
    return pick(values, key=values.get)


def best_peer(results: BenchResults, metric: Metric) -> float | None:
    """The better of the two peers' values for `metric`."""
    peer = better_peer(results, metric)
    return None if peer is None else metric.value(results, peer)


def paired_ratios(
    results: BenchResults, metric: Metric, system: str, base: str, base_metric: Metric | None = None
) -> list[float] | None:
    """`system` ÷ `base`: the median ratio, then the min and max of the per-round ratios (the
    rounds interleave, so round i of one ran beside round i of the other)."""
    base_metric = base_metric or metric
    ours, theirs = metric.value(results, system), base_metric.value(results, base)
    if ours is None or not theirs:
        return None
    ratio = ours / theirs
    if not (metric.paired and metric.rounds and base_metric.rounds):
        return [ratio]
    a, b = metric.rounds(results, system), base_metric.rounds(results, base)
    if len(a) != len(b) or len(a) < 2:
        return [ratio]
    per_round = [x / y for x, y in zip(a, b, strict=True)]
    return [ratio, min(per_round), max(per_round)]


def _spread(metric: Metric, results: BenchResults, system: str) -> list[float] | None:
    values = metric.rounds(results, system) if metric.rounds else []
    return [min(values), max(values)] if len(values) >= 2 else None


def _speed_goal(
    results: BenchResults, label: str, metric: Metric, system: str, factor: float,
    base_metric: Metric | None = None,
) -> Goal:  # fmt: skip
    """`system`'s `metric` ≥ `factor` × the faster peer's `base_metric` (default: the same),
    at matched quality: its BLEU at most BLEU_TOLERANCE below that peer's."""
    base_metric = base_metric or metric
    peer = better_peer(results, base_metric)
    ours = metric.value(results, system)
    goal = Goal(label, system, ours, None, None, _spread(metric, results, system))
    if peer is None or ours is None:
        goal.note = "not measured"
        return goal
    goal.target = factor * base_metric.value(results, peer)
    goal.ratio = paired_ratios(results, metric, system, peer, base_metric)
    goal.bleu = [metric.bleu(results, system), base_metric.bleu(results, peer)]
    rounds = len(metric.rounds(results, system))
    if rounds < MIN_ROUNDS:
        goal.note = f"not judged: {rounds} round(s), fewer than {MIN_ROUNDS}"
        return goal
    faster = ours >= goal.target
    same_quality = None not in goal.bleu and goal.bleu[0] >= goal.bleu[1] - BLEU_TOLERANCE
    goal.passed = faster and same_quality
    if faster and not same_quality:
        goal.note = f"fast enough, but BLEU more than {BLEU_TOLERANCE} below {peer}'s"
    return goal


def _training_goal(results: BenchResults, system: str, factor: float) -> Goal:
    """Training tokens/s ≥ `factor` × the faster peer's, judged only when the target tokens per
    update match within TOKENS_PER_UPDATE_TOLERANCE."""
    label = f"training tok/s ≥ {factor:g}× the faster peer, at equal target tokens per update"
    peer, ours = better_peer(results, TRAIN_RATE), _rate(results, system)
    goal = Goal(label, system, ours, None, None, _spread(TRAIN_RATE, results, system))
    if peer is None or ours is None:
        goal.note = "not measured"
        return goal
    goal.target = factor * _rate(results, peer)
    goal.ratio = paired_ratios(results, TRAIN_RATE, system, peer)
    mine, theirs = _tokens_per_update(results, system), _tokens_per_update(results, peer)
    if abs(mine / theirs - 1) > TOKENS_PER_UPDATE_TOLERANCE:
        goal.note = (
            f"not judged: {mine:,.0f} target tokens per update against {theirs:,.0f} for {peer}"
        )
        return goal
    goal.passed = ours >= goal.target
    return goal


def _rss_goal(results: BenchResults, system: str) -> Goal:
    ours, peer = TRAIN_RSS.value(results, system), best_peer(results, TRAIN_RSS)
    goal = Goal("peak training RSS ≤ the lower peer", system, ours, peer, None)
    if ours is None or peer is None:
        goal.note = "not measured"
    else:
        goal.passed = ours <= peer
    return goal


def goals(results: BenchResults) -> list[Goal]:
    """Every goal for each of our systems that was measured."""
    found = []
    for system in OURS:
        if not any(t.system == system for t in results.training):
            continue
        found.append(_training_goal(results, system, 4.0 if system == "nmt-fast" else 2.0))
        if not SYSTEMS[system].train_only:
            two = "≥ 2× the faster peer"
            found += [
                _speed_goal(results, f"beam 5 batch 64 sents/s {two}", BEAM, system, 2),
                _speed_goal(results, f"greedy batch 64 sents/s {two}", GREEDY, system, 2),
            ]
            for flag, metric in (
                ("--quantize", BEAM_INT8),
                ("--early-stop", BEAM_EARLY),
                ("--shortlist --quantize", BEAM_SHORTLIST_INT8),
            ):
                if metric.value(results, system) is not None:
                    label = f"beam 5 {flag} batch 64 sents/s {two} (its beam 5)"
                    found.append(_speed_goal(results, label, metric, system, 2, BEAM))
            found.append(_latency_goal(results, system))
        found.append(_rss_goal(results, system))
    return found


def _latency_goal(results: BenchResults, system: str) -> Goal:
    label = "one-sentence latency ≤ 1.3× bare `import torch` (medians)"
    ours = _latency(results, system)
    bare = results.import_torch
    goal = Goal(label, system, ours, None, None, _spread(LATENCY, results, system))
    if ours is None or bare is None:
        goal.note = "not measured"
        return goal
    goal.target = 1.3 * bare.median_s
    pairs = [x / y for x, y in zip(_latency_rounds(results, system), bare.runs_s, strict=False)]
    goal.ratio = [ours / bare.median_s, *([min(pairs), max(pairs)] if len(pairs) > 1 else [])]
    if len(bare.runs_s) < MIN_ROUNDS:
        goal.note = f"not judged: {len(bare.runs_s)} round(s), fewer than {MIN_ROUNDS}"
        return goal
    goal.passed = ours <= goal.target
    return goal


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
        metric.value(results, system), _spread(metric, results, system), metric.digits
    )
    bleu = metric.bleu(results, system) if metric.bleu else None
    return text + (f" · BLEU {bleu:.2f}" if bleu is not None else "")


def _main_table(results: BenchResults) -> list[str]:
    systems = [name for name in (*PEERS, *OURS) if name in results.options["systems"]]
    ours = [name for name in OURS if name in systems]
    head = ["metric", *(SYSTEMS[s].label for s in systems), *(f"{s} ÷ better peer" for s in ours)]
    lines = ["| " + " | ".join(head) + " |", "|" + "---|" * len(head)]
    for metric in METRICS:
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


def _header(results: BenchResults) -> list[str]:
    m = results.machine
    versions = ", ".join(f"{k} {v}" for k, v in results.versions.items())
    rates = f"{_fmt(results.matmul_gflops, 1)} GFLOP/s at the start"
    if results.matmul_gflops_end is not None:
        rates += f", {_fmt(results.matmul_gflops_end, 1)} GFLOP/s at the end"
    return [
        "# nmt against OpenNMT-py and Joey NMT: speed, memory, quality",
        "",
        "Generated by `make bench` (bench/run.py); every figure below was measured in this one "
        "run on this machine, and every ratio and verdict is computed from figures of this run "
        "only (none quoted from elsewhere).",
        "",
        f"- Date: {m.date_utc}; whole run {results.total_s / 60:.1f} min",
        f"- Machine: {m.nproc} cores ({m.cpu_model}), {m.mem_gib} GiB RAM, Python {m.python}",
        f"- This machine's fp32 matmul rate in this run ({results.matmul_command}): {rates}",
        f"- Versions: {versions}",
        f"- Options: `{json.dumps(results.options)}`",
        "",
        "A speed goal against a peer is judged on the medians of interleaved rounds and passes "
        f"only at matched quality: ours at most {BLEU_TOLERANCE} BLEU below the peer it is "
        "compared with (the minutes-trained models differ in quality, so this decides many "
        "verdicts). A training-rate goal is judged only when the measured target tokens per "
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
        "updates (OpenNMT-py `report_every`, Joey `logging_freq`); the peers are stopped by "
        "SIGINT (Joey saves its weights; OpenNMT-py through bench/onmt_train_sigint.py). Ours: "
        "data/configs/reference.toml plus `log_every = 5`, `valid_sentences = 100` in [train], "
        "`--max-time` and `--valid-every 1000000`.",
        f"- MFU = target tokens/s × FLOPs per target token ÷ the fp32 matmul rate, {rate} GFLOP/s "
        f"({results.matmul_command}, measured at the start of this run).",
    ]
    lines += [f"  - {arch}: {formula}" for arch, formula in results.flops_formulas.items()]
    lines += [
        f"- Translation: the test_2016_flickr sentences, batch 64, greedy and beam 5, "
        f"{o.get('rounds', 1)} interleaved rounds (each round runs every row once, in the order "
        "of the table), median and min–max over the rounds; wall time of the whole process "
        "(start-up and model loading included); peak RSS from wait4 of the child. BLEU: sacreBLEU "
        "against the raw reference, peers' pieces decoded with the same SentencePiece model. "
        f"The same output length limit for every system: at most {MAX_OUTPUT} pieces "
        f"(OpenNMT-py `-max_length {MAX_OUTPUT}`, Joey NMT `max_output_length: {MAX_OUTPUT}`, "
        f"ours `--max-len {MAX_OUTPUT}`). Ratios: the medians' ratio, and in brackets the min "
        "and max of the per-round ratios.",
        "- nmt-fast: `--attention general --no-input-feed --decoder-style luong` on top of "
        "reference.toml, so the decoder RNN runs over all target steps in one call.",
        "- nmt-2p: reference.toml trained with `--nproc 2 --threads 1 --batch-tokens 1000` (two "
        "DDP processes of one thread, gloo; the global batch is two 1,000-token batches). Its "
        "peak RSS is that of the larger process (wait4 reports the maximum over descendants, "
        "not the sum); its model is trained the same way as nmt's, so it is not translated.",
        f"- Latency: the same sentence for every system (the first test sentence; the peers get "
        f"its pieces) piped into a fresh process, beam 5, max {MAX_OUTPUT} pieces, median and "
        f"min–max of {o['latency_runs']} rounds, each running a bare `import torch` and then "
        f"every system once; bare `import torch`: {_latency_text(results.import_torch)}.",
        f"- Threads: OMP_NUM_THREADS=MKL_NUM_THREADS={results.machine.nproc} for every process "
        "(nmt-2p: one per process).",
        "",
    ]
    return lines


def _latency_text(run: LatencyResult | None) -> str:
    if run is None:
        return "not measured"
    runs = ", ".join(f"{t:.2f}" for t in run.runs_s)
    return f"median {run.median_s:.2f} s ({runs})"


def _details(results: BenchResults) -> list[str]:
    lines = ["## Details", "", "| system | training window | latency runs, s | one-sentence output |",
             "|---|---|---|---|"]  # fmt: skip
    for system in results.options["systems"]:
        train = _training(results, system)
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
