"""The measurements: training throughput and memory, translation speed and BLEU, latency."""

from __future__ import annotations

import shutil
import statistics
from dataclasses import dataclass, field, replace
from pathlib import Path

import flops
import procs
import systems
import throughput
from dataset import TestSet, first_sentence
from layout import OUR_PYTHON, Layout
from systems import Command, System

TRANSLATE_LIMIT_S = 300.0  # a translation still running then is stopped and reported as failed


@dataclass
class TrainingResult:
    """One throughput run: steady-state rate, model-FLOPs utilisation, peak memory."""

    system: str
    seconds_budget: float  # training-loop seconds asked for
    throughput: throughput.Throughput | None
    thirds_tokens_per_s: list[float]  # the steady window cut in three: the rate's spread
    flops_per_token: float
    mfu: float | None
    max_rss_mib: float
    wall_s: float  # the whole process, start-up and saving included
    returncode: int
    command: str
    log: str
    others_cpu_s: float | None = None  # CPU seconds other processes used during the run
    probe: list[str] = field(default_factory=list)  # `--nproc auto`: its probe's lines
    # A peer: whether its loop-start line was looked for (runs before that rule did not), and
    # the seconds from its start to that line, where its budget began; None if not seen (its
    # budget then began at systems.STARTUP_S).
    loop_start_looked: bool = False
    loop_start_s: float | None = None


@dataclass
class TranslationResult:
    """One timed translation of the test set."""

    system: str
    search: str  # greedy, beam5, beam5-early / beam5-exact (ours with --early-stop /
    # --exact-stop), beam5-shortlist, greedy-full / beam5-full (ours with --no-shortlist)
    quantized: bool
    batch_size: int
    sentences: int
    wall_s: float  # process start to exit, model loading included (median of the rounds)
    sents_per_s: float
    words_per_output: float | None  # mean length of the translations, which sets decoding time
    max_rss_mib: float
    bleu: float | None  # of a short-trained model: not a quality figure
    bleu_signature: str
    returncode: int
    command: str
    runs_s: list[float] = field(default_factory=list)  # wall time of each interleaved round
    bf16: bool = False  # ours with --bf16

    def rounds_sents_per_s(self) -> list[float]:
        """Sentences per second in each round, in round order."""
        return [self.sentences / s for s in self.runs_s or [self.wall_s]]


@dataclass
class LatencyResult:
    """One sentence from the shell: process start to output, several runs."""

    system: str
    runs_s: list[float]
    median_s: float
    max_rss_mib: float
    output: str
    command: str


def _run(
    cmd: Command,
    log: Path,
    budget_s: float | None = None,
    grace_s: float = 120.0,
    loop_start: procs.LoopStart | None = None,
):
    return procs.run(
        cmd.argv,
        log,
        extra_env=cmd.extra_env,
        stdin=cmd.stdin,
        stdout=cmd.stdout,
        input_text=cmd.input_text,
        budget_s=budget_s,
        grace_s=grace_s,
        loop_start=loop_start,
    )


def train(
    layout: Layout,
    system: System,
    seconds: float,
    warmup_s: float,
    peak_gflops: float,
    tag: str = "speed",
) -> TrainingResult:
    """Train `system` for `seconds` and measure its steady rate over [warmup_s, seconds]."""
    run_dir = layout.models / f"{tag}-{system.name}"
    speed = tag == "speed"
    cmd = systems.train_command(layout, system, run_dir, seconds, speed)
    log = layout.log(f"{tag}-train-{system.name}")
    log.unlink(missing_ok=True)  # the log is parsed: only this run's lines
    shutil.rmtree(run_dir, ignore_errors=True)  # no checkpoint of an earlier run may be picked
    run_dir.mkdir(parents=True)
    # Ours stops itself after `seconds` of training loop (--max-time; SIGINT is a safety net).
    # A peer gets SIGINT `seconds` after the line that starts its loop (the line its
    # throughput clock starts at too), so both train as long.
    train_log = systems.train_log(system, run_dir, log)
    if system.ours:
        budget, start = seconds + systems.STARTUP_S + 120.0, None
    else:
        pattern = throughput.LOOP_START[system.kind]
        budget, start = seconds, procs.LoopStart(train_log, pattern, systems.STARTUP_S)
    result = procs.check(
        _run(cmd, log, budget_s=budget, loop_start=start), f"training {system.name}", log
    )
    rate = throughput.measure(system.kind, train_log, warmup_s, seconds)
    parts = throughput.thirds(system.kind, train_log, warmup_s, seconds)
    per_token = flops.ARCHS[system.arch].train_flops()
    utilisation = flops.mfu(rate.tokens_per_s, per_token, peak_gflops) if rate else None
    return TrainingResult(
        system=system.name,
        seconds_budget=seconds,
        throughput=rate,
        thirds_tokens_per_s=[part.tokens_per_s for part in parts if part],
        flops_per_token=per_token,
        mfu=utilisation,
        max_rss_mib=result.max_rss_mib,
        wall_s=result.seconds,
        returncode=result.returncode,
        command=result.command,
        log=str(log),
        others_cpu_s=result.others_cpu_s,
        probe=probe_lines(log) if system.ours else [],
        loop_start_looked=start is not None,
        loop_start_s=result.loop_start_s,
    )


PROBE_LINES = ("layout probe:", "training with ")


def probe_lines(log: Path) -> list[str]:
    """What `nmt train --nproc auto` said of its probe and its choice (none without it)."""
    text = log.read_text(encoding="utf-8", errors="replace") if log.is_file() else ""
    return [line.strip() for line in text.splitlines() if line.startswith(PROBE_LINES)]


def translate(
    layout: Layout,
    system: System,
    model: Path,
    test: TestSet,
    beam: int,
    quantize: bool = False,
    tag: str = "speed",
    stop: str = "",
    shortlist: bool | None = None,
    batch: int = 64,
    bf16: bool = False,
) -> TranslationResult:
    """Translate the test set once, timed, and score it against the raw reference."""
    search = ("greedy" if beam == 1 else f"beam{beam}") + (f"-{stop}" if stop else "")
    search += {True: "-shortlist", False: "-full", None: ""}[shortlist]
    name = f"{tag}-{system.name}-{search}{'-int8' if quantize else ''}{'-bf16' if bf16 else ''}"
    name += f"-batch{batch}" if batch != 64 else ""
    out = layout.outputs / f"{name}.txt"
    cmd = systems.translate_command(
        layout, system, model, beam, test, out, quantize, stop, shortlist, batch, bf16
    )
    log = layout.log(f"{tag}-translate-{system.name}")
    result = _run(cmd, log, budget_s=TRANSLATE_LIMIT_S, grace_s=30.0)
    returncode = 124 if result.interrupted else result.returncode  # 124: out of time, as timeout(1)
    bleu, signature, words = None, "", None
    if returncode == 0:
        hyps = systems.hypotheses(system, cmd.output, layout.nmt_data / "spm.model")
        bleu, signature = score(hyps, test.ref)
        words = sum(len(h.split()) for h in hyps) / max(1, len(hyps))
    return TranslationResult(
        system=system.name,
        search=search,
        quantized=quantize,
        batch_size=batch,
        sentences=test.sentences,
        wall_s=result.seconds,
        sents_per_s=test.sentences / result.seconds,
        words_per_output=words,
        max_rss_mib=result.max_rss_mib,
        bleu=bleu,
        bleu_signature=signature,
        returncode=returncode,
        command=result.command,
        bf16=bf16,
    )


def combine(rounds: list[TranslationResult]) -> TranslationResult:
    """One row from the rounds of the same translation: the median wall time, every round's
    time, the peak memory over all; BLEU of the first round (search is deterministic)."""
    ok = [r for r in rounds if r.returncode == 0] or rounds[:1]
    seconds = [r.wall_s for r in ok]
    median = statistics.median(seconds)
    return replace(
        ok[0],
        wall_s=median,
        sents_per_s=ok[0].sentences / median,
        max_rss_mib=max(r.max_rss_mib for r in ok),
        runs_s=seconds,
        returncode=next((r.returncode for r in rounds if r.returncode), 0),  # any failure shows
    )


def score(hyps: list[str], ref: Path) -> tuple[float | None, str]:
    """sacreBLEU (13a, cased) of `hyps` against the reference file, with its signature."""
    from sacrebleu.metrics import BLEU

    refs = ref.read_text(encoding="utf-8").split("\n")[: len(hyps)]
    if len(hyps) != len(refs):
        return None, f"{len(hyps)} outputs for {len(refs)} references"
    metric = BLEU()
    return round(metric.corpus_score(hyps, [refs]).score, 2), str(metric.get_signature())


def _rounds(
    commands: dict[str, Command], logs: dict[str, Path], runs: int
) -> dict[str, LatencyResult]:
    """Each command once per round, `runs` rounds, in fresh processes: a slow phase of the
    machine meets all of them alike. The median wall time and the peak memory of each."""
    done: dict[str, list] = {name: [] for name in commands}
    for _ in range(runs):
        for name, cmd in commands.items():
            done[name].append(procs.check(_run(cmd, logs[name]), name, logs[name]))
    return {
        name: LatencyResult(
            system=name,
            runs_s=[r.seconds for r in results],
            median_s=statistics.median(r.seconds for r in results),
            max_rss_mib=max(r.max_rss_mib for r in results),
            output="",
            command=results[0].command,
        )
        for name, results in done.items()
    }


def latency(
    layout: Layout, trained: list[tuple[System, Path]], test: TestSet, runs: int
) -> tuple[LatencyResult, list[LatencyResult]]:
    """A bare `python -c "import torch"` with our python (the floor of the latency goal) and,
    alternating with it, each system translating the first test sentence in a fresh process."""
    commands = {"import torch": Command([OUR_PYTHON, "-c", "import torch"])}
    logs = {"import torch": layout.log("import-torch")}
    outs = {}
    for system, model in trained:
        source = test.raw_src if system.ours else test.pieces_src
        outs[system.name] = layout.outputs / f"latency-{system.name}.txt"
        commands[system.name] = systems.latency_command(
            layout, system, model, first_sentence(source), outs[system.name]
        )
        logs[system.name] = layout.log(f"latency-{system.name}")
    measured = _rounds(commands, logs, runs)
    bare = measured.pop("import torch")
    for system, _ in trained:
        translations = systems.hypotheses(system, outs[system.name], layout.nmt_data / "spm.model")
        measured[system.name].output = translations[0] if translations else ""
    return bare, list(measured.values())
