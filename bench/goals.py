"""The goals of `make bench`, each judged only on figures of the same run: speed against the
faster peer at matched quality, training rate at matched batches, latency, memory."""

from __future__ import annotations

from dataclasses import dataclass

from metrics import (
    BEAM,
    BEAM_BATCH1,
    BEAM_BATCH1_BF16,
    BEAM_BF16,
    BEAM_EARLY,
    BEAM_INT8,
    BEAM_SHORTLIST_BF16,
    BEAM_SHORTLIST_INT8,
    EXACT,
    GREEDY,
    GREEDY_BF16,
    GREEDY_INT8,
    LATENCY,
    OURS,
    TOKENS_PER_UPDATE,
    TRAIN_RATE,
    TRAIN_RSS,
    BenchResults,
    Metric,
    best_peer,
    better_peer,
    paired_ratios,
    spread,
)
from systems import SYSTEMS

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


def _speed_goal(
    results: BenchResults, label: str, metric: Metric, system: str, factor: float,
    base_metric: Metric | None = None,
) -> Goal:  # fmt: skip
    """`system`'s `metric` ≥ `factor` × the faster peer's `base_metric` (default: the same),
    at matched quality: its BLEU at most BLEU_TOLERANCE below that peer's and, for a speed-up
    (`metric` other than `base_metric`), below our own `base_metric` run's."""
    base_metric = base_metric or metric
    peer = better_peer(results, base_metric)
    ours = metric.value(results, system)
    goal = Goal(label, system, ours, None, None, spread(metric, results, system))
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
    # Ours must keep the BLEU of our own exact search (--no-shortlist, where it was measured:
    # the default may use the shortlist) and a speed-up (--quantize, ...) that of our plain
    # search too: it passes only within the tolerance of each.
    own = [(EXACT.get(base_metric.label), "the shortlist (--no-shortlist)")]
    if base_metric is not metric:
        own.append((base_metric, "it"))
    for plain_metric, without in own:
        if not goal.passed or plain_metric is None:
            continue
        if plain_metric is not base_metric and plain_metric.value(results, system) is None:
            continue  # no exact row (a GPU run, or a run before it existed)
        plain = plain_metric.bleu(results, system)
        if plain is None or goal.bleu[0] < plain - BLEU_TOLERANCE:
            goal.passed = False
            shown = "not measured" if plain is None else f"{plain:.2f}"
            goal.note = (
                f"fast enough, but BLEU more than {BLEU_TOLERANCE} below ours without "
                f"{without} ({shown})"
            )
    return goal


def _training_goal(results: BenchResults, system: str, factor: float) -> Goal:
    """Training tokens/s ≥ `factor` × the faster peer's, judged only when the target tokens per
    update match within TOKENS_PER_UPDATE_TOLERANCE."""
    label = f"training tok/s ≥ {factor:g}× the faster peer, at equal target tokens per update"
    peer, ours = better_peer(results, TRAIN_RATE), TRAIN_RATE.value(results, system)
    goal = Goal(label, system, ours, None, None, spread(TRAIN_RATE, results, system))
    if peer is None or ours is None:
        goal.note = "not measured"
        return goal
    goal.target = factor * TRAIN_RATE.value(results, peer)
    goal.ratio = paired_ratios(results, TRAIN_RATE, system, peer)
    mine = TOKENS_PER_UPDATE.value(results, system)
    theirs = TOKENS_PER_UPDATE.value(results, peer)
    if abs(mine / theirs - 1) > TOKENS_PER_UPDATE_TOLERANCE:
        goal.note = (
            f"not judged: {mine:,.0f} target tokens per update against {theirs:,.0f} for {peer}"
        )
        return goal
    goal.passed = ours >= goal.target
    base = SYSTEMS[system].quality_against
    if base:  # the faster training must also train as good a model in the same time
        goal.bleu = [BEAM.bleu(results, system), BEAM.bleu(results, base)]
        if None in goal.bleu:
            goal.passed, goal.note = None, f"not judged: no beam-5 BLEU of {system} and {base}"
        elif goal.bleu[0] < goal.bleu[1] - BLEU_TOLERANCE:
            goal.passed = False
            goal.note = f"beam-5 BLEU more than {BLEU_TOLERANCE} below {base}'s, trained as long"
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
            if BEAM_BATCH1.value(results, system) is not None:
                label = f"beam 5 batch 1 sents/s {two} at batch 1"
                found.append(_speed_goal(results, label, BEAM_BATCH1, system, 2))
            for search, flag, metric, base in (
                ("beam 5", "--quantize", BEAM_INT8, BEAM),
                ("beam 5", "--early-stop", BEAM_EARLY, BEAM),
                ("beam 5", "--shortlist --quantize", BEAM_SHORTLIST_INT8, BEAM),
                ("greedy", "--quantize", GREEDY_INT8, GREEDY),
                ("beam 5", "--bf16", BEAM_BF16, BEAM),
                ("beam 5", "--shortlist --bf16", BEAM_SHORTLIST_BF16, BEAM),
                ("greedy", "--bf16", GREEDY_BF16, GREEDY),
            ):
                if metric.value(results, system) is not None:
                    label = f"{search} {flag} batch 64 sents/s {two} (its {search})"
                    found.append(_speed_goal(results, label, metric, system, 2, base))
            if BEAM_BATCH1_BF16.value(results, system) is not None:
                label = f"beam 5 --bf16 batch 1 sents/s {two} at batch 1 (its beam 5)"
                found.append(_speed_goal(results, label, BEAM_BATCH1_BF16, system, 2, BEAM_BATCH1))
            found.append(_latency_goal(results, system))
        found.append(_rss_goal(results, system))
    return found


def _latency_goal(results: BenchResults, system: str) -> Goal:
    label = "one-sentence latency ≤ 1.3× bare `import torch` (medians)"
    ours = LATENCY.value(results, system)
    bare = results.import_torch
    goal = Goal(label, system, ours, None, None, spread(LATENCY, results, system))
    if ours is None or bare is None:
        goal.note = "not measured"
        return goal
    goal.target = 1.3 * bare.median_s
    pairs = [x / y for x, y in zip(LATENCY.rounds(results, system), bare.runs_s, strict=False)]
    goal.ratio = [ours / bare.median_s, *([min(pairs), max(pairs)] if len(pairs) > 1 else [])]
    if len(bare.runs_s) < MIN_ROUNDS:
        goal.note = f"not judged: {len(bare.runs_s)} round(s), fewer than {MIN_ROUNDS}"
        return goal
    goal.passed = ours <= goal.target
    return goal
