"""What a `make bench` run measured, and the rows of its report: how to read each metric, the
better peer, and ratios per interleaved round."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from machine import Machine
from measure import LatencyResult, TrainingResult, TranslationResult
from steps import Step

if TYPE_CHECKING:
    from goals import Goal

PEERS = ("onmt", "joey")
OURS = ("nmt", "nmt-2p", "nmt-auto", "nmt-fast", "nmt-bf16")
# The batch-1 rows translate the head of the test set: one sentence at a time, the whole set
# would take each system minutes per round.
BATCH1_SENTENCES = 200


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
    roofline: dict = field(default_factory=dict)  # profile_report.roofline of our nmt model
    bf16_matmul_gflops: float | None = None  # where the CPU has native bfloat16 (--bf16 rows)
    shortlist_checks: dict = field(default_factory=dict)  # ours: meta.json's "shortlist" record


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


def training(results: BenchResults, system: str) -> TrainingResult | None:
    """The training run of `system`, if it was measured."""
    return next((t for t in results.training if t.system == system), None)


def _translation(
    results: BenchResults,
    system: str,
    search: str,
    quantized: bool = False,
    batch: int = 64,
    bf16: bool = False,
):
    return next(
        (
            t
            for t in results.translation
            if t.system == system
            and t.search == search
            and t.quantized == quantized
            and t.batch_size == batch
            and t.bf16 == bf16
            and t.returncode == 0
        ),
        None,
    )


def _rate(results: BenchResults, system: str) -> float | None:
    run = training(results, system)
    return run.throughput.tokens_per_s if run and run.throughput else None


def _rate_thirds(results: BenchResults, system: str) -> list[float]:
    run = training(results, system)
    return run.thirds_tokens_per_s if run else []


def _tokens_per_update(results: BenchResults, system: str) -> float | None:
    run = training(results, system)
    return run.throughput.tokens_per_step if run and run.throughput else None


def _speed(
    label: str, search: str, quantized: bool = False, batch: int = 64, bf16: bool = False
) -> Metric:
    """Sentences/s of the translation rows with that search: the median over the rounds."""

    def value(results: BenchResults, system: str) -> float | None:
        run = _translation(results, system, search, quantized, batch, bf16)
        return run.sents_per_s if run else None

    def rounds(results: BenchResults, system: str) -> list[float]:
        run = _translation(results, system, search, quantized, batch, bf16)
        return run.rounds_sents_per_s() if run else []

    def bleu(results: BenchResults, system: str) -> float | None:
        run = _translation(results, system, search, quantized, batch, bf16)
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
        run = training(results, system)
        if run is None:
            return None
        if name in ("mfu", "flops_per_token", "max_rss_mib", "wall_s", "others_cpu_s"):
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
BEAM_BATCH1 = _speed(
    f"translate the first {BATCH1_SENTENCES} test sentences, beam 5, batch 1: sentences/s",
    "beam5",
    batch=1,
)
BEAM_EARLY = _speed(
    "… with --early-stop (the peers' stopping rule), beam 5: sentences/s", "beam5-early"
)
BEAM_EARLY_INT8 = _speed("… with --early-stop --quantize, beam 5: sentences/s", "beam5-early", True)
BEAM_EXACT = _speed(
    "… with --exact-stop (each n-best provably final), beam 5: sentences/s",
    "beam5-exact",
)
BEAM_EXACT_BATCH1 = _speed(
    "… with --exact-stop, beam 5, batch 1: sentences/s", "beam5-exact", batch=1
)
GREEDY_FULL = _speed("… with --no-shortlist (exact), greedy: sentences/s", "greedy-full")
BEAM_FULL = _speed("… with --no-shortlist (exact), beam 5: sentences/s", "beam5-full")
BEAM_BATCH1_FULL = _speed(
    "… with --no-shortlist (exact), beam 5, batch 1: sentences/s", "beam5-full", batch=1
)
EXACT = {GREEDY.label: GREEDY_FULL, BEAM.label: BEAM_FULL, BEAM_BATCH1.label: BEAM_BATCH1_FULL}
BEAM_SHORTLIST = _speed("… with --shortlist, beam 5: sentences/s", "beam5-shortlist")
BEAM_SHORTLIST_INT8 = _speed(
    "… with --shortlist --quantize, beam 5: sentences/s", "beam5-shortlist", True
)
GREEDY_BF16 = _speed("… with --bf16, greedy: sentences/s", "greedy", bf16=True)
BEAM_BF16 = _speed("… with --bf16, beam 5: sentences/s", "beam5", bf16=True)
BEAM_BATCH1_BF16 = _speed(
    "… with --bf16, beam 5, batch 1: sentences/s", "beam5", batch=1, bf16=True
)
BEAM_SHORTLIST_BF16 = _speed(
    "… with --shortlist --bf16, beam 5: sentences/s", "beam5-shortlist", bf16=True
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
    Metric(
        "training: CPU s used by other processes meanwhile (the machine is shared)",
        _train_attr("others_cpu_s"),
        higher_is_better=False,
    ),
    TRAIN_RSS,
    GREEDY,
    BEAM,
    GREEDY_INT8,
    BEAM_INT8,
    BEAM_BATCH1,
    GREEDY_FULL,
    BEAM_FULL,
    BEAM_BATCH1_FULL,
    BEAM_EARLY,
    BEAM_EARLY_INT8,
    BEAM_EXACT,
    BEAM_EXACT_BATCH1,
    BEAM_SHORTLIST,
    BEAM_SHORTLIST_INT8,
    GREEDY_BF16,
    BEAM_BF16,
    BEAM_BATCH1_BF16,
    BEAM_SHORTLIST_BF16,
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


def spread(metric: Metric, results: BenchResults, system: str) -> list[float] | None:
    values = metric.rounds(results, system) if metric.rounds else []
    return [min(values), max(values)] if len(values) >= 2 else None
