"""The results side by side: ratios to the faster peer, goals with pass/fail, RESULTS.md and JSON."""

from __future__ import annotations

import json
from collections.abc import Callable
from dataclasses import asdict, dataclass, field
from pathlib import Path

from machine import Machine
from measure import LatencyResult, TrainingResult, TranslationResult
from steps import Step
from systems import SYSTEMS

PEERS = ("onmt", "joey")
OURS = ("nmt", "nmt-2p", "nmt-fast")


@dataclass
class Goal:
    """One target with its measured value and verdict (None: not measured)."""

    goal: str
    system: str
    measured: float | None
    target: float | None
    passed: bool | None


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


@dataclass(frozen=True)
class Metric:
    """One row of the main table: how to read it from the results, and which way is better."""

    label: str
    value: Callable[[BenchResults, str], float | None]
    higher_is_better: bool = True
    digits: int = 0


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


def _translation_attr(attr: str, search: str, quantized: bool = False):
    """A metric reading `attr` of the successful translation run with that search."""

    def value(results: BenchResults, system: str) -> float | None:
        run = _translation(results, system, search, quantized)
        return getattr(run, attr) if run else None

    return value


def _output_words_rate(search: str, quantized: bool = False):
    """Output words per second of a translation run: sentences/s × words per output. Decoding
    time grows with the output length, and minutes-trained models differ in it."""

    def value(results: BenchResults, system: str) -> float | None:
        run = _translation(results, system, search, quantized)
        if run is None or run.words_per_output is None:
            return None
        return run.sents_per_s * run.words_per_output

    return value


def _latency(results: BenchResults, system: str) -> float | None:
    run = next((r for r in results.latency if r.system == system), None)
    return run.median_s if run else None


def _train_attr(name: str, scale: float = 1.0):
    """A metric reading `name` of the training run (or of its throughput), times `scale`."""

    def value(results: BenchResults, system: str) -> float | None:
        run = _training(results, system)
        if run is None:
            return None
        if name in ("mfu", "flops_per_token", "max_rss_mib"):
            raw = getattr(run, name)
        else:
            raw = getattr(run.throughput, name) if run.throughput else None
        return None if raw is None else raw * scale

    return value


def _translate_rss(results: BenchResults, system: str) -> float | None:
    runs = [t.max_rss_mib for t in results.translation if t.system == system and t.returncode == 0]
    return max(runs) if runs else None


TRAIN_RATE = Metric("training: target tokens/s, steady state", _rate)
TRAIN_RSS = Metric("training: peak RSS, MiB", _train_attr("max_rss_mib"), higher_is_better=False)
GREEDY = Metric(
    "translate test set, greedy, batch 64: sentences/s",
    _translation_attr("sents_per_s", "greedy"),
    digits=1,
)
BEAM = Metric(
    "translate test set, beam 5, batch 64: sentences/s",
    _translation_attr("sents_per_s", "beam5"),
    digits=1,
)
BEAM_INT8 = Metric(
    "… with --quantize, beam 5: sentences/s",
    _translation_attr("sents_per_s", "beam5", True),
    digits=1,
)
BEAM_WORDS = Metric(
    "translate test set, beam 5, batch 64: output words/s", _output_words_rate("beam5")
)
BEAM_INT8_WORDS = Metric(
    "… with --quantize, beam 5: output words/s", _output_words_rate("beam5", True)
)
BEAM_EARLY = Metric(
    "… with --early-stop (the peers' stopping rule), beam 5: sentences/s",
    _translation_attr("sents_per_s", "beam5-early"),
    digits=1,
)
BEAM_SHORTLIST = Metric(
    "… with --shortlist, beam 5: sentences/s",
    _translation_attr("sents_per_s", "beam5-shortlist"),
    digits=1,
)
BEAM_SHORTLIST_INT8 = Metric(
    "… with --shortlist --quantize, beam 5: sentences/s",
    _translation_attr("sents_per_s", "beam5-shortlist", True),
    digits=1,
)
BEAM_SHORTLIST_INT8_WORDS = Metric(
    "… with --shortlist --quantize, beam 5: output words/s",
    _output_words_rate("beam5-shortlist", True),
)
METRICS = [
    TRAIN_RATE,
    Metric("training: updates/s", _train_attr("steps_per_s"), digits=3),
    Metric("training: target tokens per update", _train_attr("tokens_per_step")),
    Metric(
        "training: MFLOP per target token (fwd+bwd)", _train_attr("flops_per_token", 1e-6), digits=1
    ),
    Metric("training: MFU, % of the matmul rate", _train_attr("mfu", 100.0), digits=1),
    TRAIN_RSS,
    GREEDY,
    BEAM,
    Metric(
        "… with --quantize, greedy: sentences/s",
        _translation_attr("sents_per_s", "greedy", True),
        digits=1,
    ),
    BEAM_INT8,
    BEAM_EARLY,
    Metric(
        "… with --early-stop --quantize, beam 5: sentences/s",
        _translation_attr("sents_per_s", "beam5-early", True),
        digits=1,
    ),
    BEAM_SHORTLIST,
    BEAM_SHORTLIST_INT8,
    BEAM_WORDS,
    BEAM_INT8_WORDS,
    BEAM_SHORTLIST_INT8_WORDS,
    Metric(
        "translation: peak RSS, MiB (max over its runs)", _translate_rss, higher_is_better=False
    ),
    Metric(
        "translation, beam 5: words per output",
        _translation_attr("words_per_output", "beam5"),
        digits=1,
    ),
    Metric("one sentence from the shell, beam 5: s (median)", _latency, False, digits=2),
    Metric(
        "test BLEU, beam 5 (short training: not meaningful)",
        _translation_attr("bleu", "beam5"),
        digits=2,
    ),
    Metric(
        "test BLEU, beam 5 with --quantize (short training: not meaningful)",
        _translation_attr("bleu", "beam5", True),
        digits=2,
    ),
    Metric(
        "test BLEU, beam 5 with --shortlist --quantize (short training: not meaningful)",
        _translation_attr("bleu", "beam5-shortlist", True),
        digits=2,
    ),
    Metric(
        "test BLEU, beam 5 with --early-stop (short training: not meaningful)",
        _translation_attr("bleu", "beam5-early"),
        digits=2,
    ),
    Metric(
        "test BLEU, greedy (short training: not meaningful)",
        _translation_attr("bleu", "greedy"),
        digits=2,
    ),
]


def best_peer(results: BenchResults, metric: Metric) -> float | None:
    """The better of the two peers' values for `metric` (higher or lower as the metric says)."""
    values = [v for p in PEERS if (v := metric.value(results, p)) is not None]
    if not values:
        return None
    return max(values) if metric.higher_is_better else min(values)


def _ratio(ours: float | None, peer: float | None) -> float | None:
    return ours / peer if ours is not None and peer else None


def _goal_vs_peer(results, label, metric, system, factor, at_most=False) -> Goal:
    ours, peer = metric.value(results, system), best_peer(results, metric)
    target = peer * factor if peer is not None else None
    if ours is None or target is None:
        return Goal(label, system, ours, target, None)
    return Goal(label, system, ours, target, ours <= target if at_most else ours >= target)


def goals(results: BenchResults) -> list[Goal]:
    """Every goal for each of our systems that was measured."""
    found = []
    for system in OURS:
        if not any(t.system == system for t in results.training):
            continue
        factor = 4.0 if system == "nmt-fast" else 2.0
        rate = f"training tok/s ≥ {factor:g}× the faster peer"
        found.append(_goal_vs_peer(results, rate, TRAIN_RATE, system, factor))
        if SYSTEMS[system].train_only:
            found.append(
                _goal_vs_peer(
                    results, "peak training RSS ≤ the lower peer", TRAIN_RSS, system, 1, True
                )
            )
            continue
        found += [
            _goal_vs_peer(results, "beam 5 batch 64 sents/s ≥ 2× the faster peer", BEAM, system, 2),
            _variant_goal(results, system, "--quantize", BEAM_INT8),
            _variant_goal(results, system, "--early-stop", BEAM_EARLY),
            _goal_vs_peer(
                results,
                "beam 5 batch 64 output words/s ≥ 2× the faster peer",
                BEAM_WORDS,
                system,
                2,
            ),
            _variant_goal(
                results, system, "--quantize", BEAM_INT8_WORDS, BEAM_WORDS, "output words/s"
            ),
            _variant_goal(results, system, "--shortlist --quantize", BEAM_SHORTLIST_INT8),
            _variant_goal(
                results,
                system,
                "--shortlist --quantize",
                BEAM_SHORTLIST_INT8_WORDS,
                BEAM_WORDS,
                "output words/s",
            ),
            _goal_vs_peer(
                results, "greedy batch 64 sents/s ≥ 2× the faster peer", GREEDY, system, 2
            ),
            _latency_goal(results, system),
            _goal_vs_peer(
                results, "peak training RSS ≤ the lower peer", TRAIN_RSS, system, 1, True
            ),
        ]
    return found


def _variant_goal(
    results: BenchResults,
    system: str,
    flag: str,
    metric: Metric,
    peer_metric: Metric = BEAM,
    unit: str = "sents/s",
) -> Goal:
    """The beam goal for ours with `flag` (measured as `metric`) against the peers' plain
    beam 5 (`peer_metric`): the peers have no such option."""
    label = f"beam 5 {flag} batch 64 {unit} ≥ 2× the faster peer (its beam 5)"
    ours, peer = metric.value(results, system), best_peer(results, peer_metric)
    if ours is None or peer is None:
        return Goal(label, system, ours, None if peer is None else 2 * peer, None)
    return Goal(label, system, ours, 2 * peer, ours >= 2 * peer)


def _latency_goal(results: BenchResults, system: str) -> Goal:
    label = "one-sentence latency ≤ 1.3× bare `import torch`"
    ours = _latency(results, system)
    bare = results.import_torch.median_s if results.import_torch else None
    if ours is None or bare is None:
        return Goal(label, system, ours, None, None)
    return Goal(label, system, ours, 1.3 * bare, ours <= 1.3 * bare)


def _fmt(value: float | None, digits: int = 0) -> str:
    if value is None:
        return "–"
    return f"{value:,.{digits}f}"


def _main_table(results: BenchResults) -> list[str]:
    systems = [name for name in (*PEERS, *OURS) if name in results.options["systems"]]
    ours = [name for name in OURS if name in systems]
    head = ["metric", *(SYSTEMS[s].label for s in systems), *(f"{s} ÷ better peer" for s in ours)]
    lines = ["| " + " | ".join(head) + " |", "|" + "---|" * len(head)]
    for metric in METRICS:
        peer = best_peer(results, metric)
        cells = [_fmt(metric.value(results, s), metric.digits) for s in systems]
        ratios = [_fmt(_ratio(metric.value(results, s), peer), 2) for s in ours]
        lines.append("| " + " | ".join([metric.label, *cells, *ratios]) + " |")
    return lines


def _goal_table(results: BenchResults) -> list[str]:
    lines = ["| goal | system | measured | target | result |", "|---|---|---|---|---|"]
    for goal in results.goals:
        verdict = {True: "**pass**", False: "**FAIL**", None: "not measured"}[goal.passed]
        digits = 2 if "latency" in goal.goal else 1
        lines.append(
            f"| {goal.goal} | {goal.system} | {_fmt(goal.measured, digits)} | "
            f"{_fmt(goal.target, digits)} | {verdict} |"
        )
    return lines


def _header(results: BenchResults) -> list[str]:
    m = results.machine
    versions = ", ".join(f"{k} {v}" for k, v in results.versions.items())
    return [
        "# nmt against OpenNMT-py and Joey NMT: speed, memory, quality",
        "",
        "Generated by `make bench` (bench/run.py); every figure below was measured in one run.",
        "",
        f"- Date: {m.date_utc}; whole run {results.total_s / 60:.1f} min",
        f"- Machine: {m.nproc} cores ({m.cpu_model}), {m.mem_gib} GiB RAM, Python {m.python}",
        f"- Versions: {versions}",
        f"- Options: `{json.dumps(results.options)}`",
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
        f"- Training: each system trains for {o['bench_minutes']:g} min of training-loop time. "
        "Throughput counts non-pad target tokens (EOS included) and is time-weighted over the "
        f"progress windows that lie between {o['warmup_s']:.0f} s (the warm-up ends) and "
        f"{o['bench_minutes'] * 60:.0f} s after the training loop began, leaving out any window "
        "with a validation or checkpoint save. "
        "OpenNMT-py: `bsz` target tokens × updates per `report_every` window; Joey NMT: its "
        "`Tokens per Sec`; ours: the `tokens_per_s` of the `train` events in MODEL_DIR/train.jsonl.",
        "- Changes to the shared peer configs (besides paths): progress reports every 5 updates "
        "(OpenNMT-py `report_every`, Joey `logging_freq`) and no validation or periodic checkpoint "
        "inside the budget; the peers are stopped by SIGINT (Joey saves its weights; OpenNMT-py "
        "through bench/onmt_train_sigint.py). Ours: data/configs/reference.toml plus `log_every = 5`, "
        "`valid_sentences = 100` in [train], `--max-time` and `--valid-every 1000000`.",
        f"- MFU = target tokens/s × FLOPs per target token ÷ the fp32 matmul rate, {rate} GFLOP/s "
        f"({results.matmul_command}, measured in this run).",
    ]
    lines += [f"  - {arch}: {formula}" for arch, formula in results.flops_formulas.items()]
    lines += [
        "- Translation: the test_2016_flickr sentences, batch 64, greedy and beam 5, wall time of "
        "the whole process (start-up and model loading included); peak RSS from wait4 of the "
        "child. BLEU: sacreBLEU against the raw reference, peers' pieces decoded with the same "
        "SentencePiece model. Output length limits are each tool's: 100 pieces for the peers "
        "(`-max_length 100`, `max_output_length: 100`), 2 × source pieces + 10 for ours; the "
        "mean words per output are in the table because they set the decoding time.",
        "- nmt-fast: `--attention general --no-input-feed --decoder-style luong` on top of "
        "reference.toml, so the decoder RNN runs over all target steps in one call.",
        "- nmt-2p: reference.toml trained with `--nproc 2 --threads 1` (two DDP processes of "
        "one thread, gloo; the global batch is two 2,000-token batches). Its peak RSS is that of "
        "the larger process (wait4 reports the maximum over descendants, not the sum); its model "
        "is the same as nmt's, so it is not translated again.",
        f"- Latency: the first test sentence piped into a fresh process, beam 5, median of "
        f"{o['latency_runs']} rounds, each running a bare `import torch` and then every system "
        f"once; bare `import torch`: {_latency_text(results.import_torch)}.",
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
