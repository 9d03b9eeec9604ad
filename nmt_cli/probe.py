"""`nmt train --nproc auto`: how many training processes, from a short probe on the run's own data.

On a CPU, one process runs torch's operators on all its threads, or N processes of fewer
threads each (DistributedDataParallel) split every update's batch between them. Which is faster
depends on the machine and the model: on a 2-core Xeon one process of 2 threads trained the
reference architecture at 3,675 target tokens/s and two of 1 thread at 3,296 (bench/RESULTS.md),
while the step loop of a small model leaves threads idle that a second process would use.

The probe trains each layout for a few updates, in fresh processes, with the run's settings and
the same target tokens per update (each of N processes takes batch_tokens / N), and keeps the
fastest; one process unless another is faster by more than `MARGIN`.
"""

from __future__ import annotations

import contextlib
import dataclasses
import multiprocessing
import queue
import signal
import tempfile
import threading
import time
from dataclasses import dataclass
from pathlib import Path

from nmt_cli.config import Config
from nmt_cli.distributed import free_port, rank_environment
from nmt_cli.errors import ConfigError, NmtError

WARMUP_UPDATES = 3  # not timed: the first updates allocate and build their kernels
TIMED_UPDATES = 8
MARGIN = 0.05  # more processes must be this much faster than one to be chosen
MOST_LAYOUTS = 4  # 1, 2, 4 and 8 processes at most
PROBE_TIMEOUT_S = 600.0  # a layout not timed by then is given up


@dataclass(frozen=True)
class Layout:
    processes: int
    threads: int  # torch threads per process

    def __str__(self) -> str:
        p, t = self.processes, self.threads
        return f"{p} process{'es' if p > 1 else ''} × {t} thread{'s' if t > 1 else ''}"


@dataclass(frozen=True)
class Measurement:
    layout: Layout
    tokens_per_s: float  # target tokens per second over the timed updates, all processes
    problem: str = ""  # why the layout could not be timed (its rate is then 0)


def layouts(cores: int) -> list[Layout]:
    """One process on every core, then 2, 4, … processes sharing the cores evenly."""
    found, processes = [], 1
    while processes <= cores and len(found) < MOST_LAYOUTS:
        found.append(Layout(processes, cores // processes))
        processes *= 2
    return found


def choose(measured: list[Measurement], margin: float = MARGIN) -> Layout:
    """The fastest layout; the first (one process) unless another beats it by `margin`."""
    first, best = measured[0], max(measured, key=lambda m: m.tokens_per_s)
    return first.layout if first.tokens_per_s * (1 + margin) >= best.tokens_per_s else best.layout


def split_batch(config: Config, processes: int) -> Config:
    """The run's settings for one of `processes` processes: its share of the tokens per update."""
    tokens = max(1, config.train.batch_tokens // processes)
    return dataclasses.replace(config, train=dataclasses.replace(config.train, batch_tokens=tokens))


def probe(config: Config, data_dir: Path, cores: int, on_layout=None) -> list[Measurement]:
    """Train each of `layouts(cores)` for TIMED_UPDATES updates (after WARMUP_UPDATES), each in
    fresh processes; `on_layout(measurement)` is called as each ends. A layout of several
    processes that cannot be timed (fewer batches than processes, a process killed for
    memory, a port taken meanwhile) measures 0 and says why; only the one-process layout's
    failure is an error."""
    measured = []
    with _terminate_interrupts():  # a SIGTERM stops the children too
        for layout in layouts(cores):
            try:
                rate, problem = _run_layout(config, data_dir, layout)
            except NmtError as exc:
                if layout.processes == 1:
                    raise
                rate, problem = 0.0, str(exc)
            measured.append(Measurement(layout, rate, problem))
            if on_layout is not None:
                on_layout(measured[-1])
    return measured


class _Terminated(KeyboardInterrupt):
    """SIGTERM during the probe: stops it as Ctrl-C does (the children are killed on the way)."""


@contextlib.contextmanager
def _terminate_interrupts():
    if threading.current_thread() is not threading.main_thread():
        yield
        return

    def stop(signum, frame):
        raise _Terminated

    previous = signal.signal(signal.SIGTERM, stop)
    try:
        yield
    finally:
        signal.signal(signal.SIGTERM, previous)


def _run_layout(config: Config, data_dir: Path, layout: Layout) -> tuple[float, str]:
    """(rate, "") once every process of the layout has ended its timed updates, or
    (0, why) if it cannot split this data; NmtError if a process fails or hangs."""
    from nmt_cli.threads import signals_ignored

    context = multiprocessing.get_context("spawn")
    results = context.Queue()
    port = free_port()
    settings = split_batch(config, layout.processes)
    workers = [
        context.Process(
            target=_probe_rank,
            args=(rank, layout, port, settings, Path(data_dir), results),
            name=f"nmt-probe-{rank}",
            daemon=True,
        )
        for rank in range(layout.processes)
    ]
    finished = False
    try:
        with signals_ignored():  # Ctrl-C is the parent's: it stops them below
            for worker in workers:
                worker.start()
        outcome = _results(results, workers, layout)
        finished = True
        return outcome
    finally:
        for worker in workers:  # done: a moment to exit on its own; else (Ctrl-C) at once
            if finished:
                worker.join(timeout=5)
            if worker.is_alive():
                worker.kill()
            worker.join()


def _results(results, workers, layout: Layout, timeout: float = PROBE_TIMEOUT_S):
    """Wait for every process's message: (rate, "") from rank 0's, (0, why) for a layout that
    cannot split this data; NmtError for a failure, a process that died, or no answer in
    `timeout` seconds."""
    fix = "give the layout yourself with --nproc N"
    deadline, rate, skipped, told = time.monotonic() + timeout, 0.0, "", 0
    while told < len(workers):
        try:
            kind, value = results.get(timeout=0.5)
        except queue.Empty:
            problem = _stalled(workers, results, deadline, timeout)
            if problem:
                raise NmtError(f"the layout probe ({layout}) {problem}: {fix}") from None
            continue
        told += 1
        if kind == "error":
            raise NmtError(f"the layout probe ({layout}) failed: {value}; {fix}")
        if kind == "skip":
            skipped = value
        elif kind == "rate":
            rate = value
    return (0.0, skipped) if skipped else (rate, "")


def _stalled(workers, results, deadline: float, timeout: float) -> str:
    """Why waiting on for the processes' messages is no use ("" while it is)."""
    dead = [w for w in workers if w.exitcode not in (None, 0)]
    if dead:
        return f"lost a process (exit code {dead[0].exitcode})"
    if all(w.exitcode is not None for w in workers) and results.empty():
        return "ended without a result"
    if time.monotonic() > deadline:
        return f"took over {timeout:.0f} s"
    return ""


_RANK_VARIABLES = ("RANK", "LOCAL_RANK", "WORLD_SIZE", "LOCAL_WORLD_SIZE", "MASTER_ADDR",
                   "MASTER_PORT")  # fmt: skip


def _probe_rank(rank: int, layout: Layout, port: int, config: Config, data_dir: Path, results):
    """One process of a layout: the run's Trainer in a scratch directory, timed updates; it
    ends by sending one message (its rate from rank 0, "done" from the others)."""
    import os

    from nmt_cli.threads import STOP_SIGNALS

    signal.signal(signal.SIGINT, signal.SIG_IGN)  # Ctrl-C is the parent's, which stops it
    signal.signal(signal.SIGTERM, signal.SIG_DFL)  # a SIGTERM to the whole group ends it
    signal.pthread_sigmask(signal.SIG_UNBLOCK, STOP_SIGNALS)
    for name in _RANK_VARIABLES:  # none of a torchrun around the command
        os.environ.pop(name, None)
    try:
        if layout.processes > 1:
            os.environ.update(rank_environment(rank, layout.processes, port))
        rate = _timed_updates(config, data_dir, layout)
    except ConfigError as exc:  # this layout cannot train this data (too few batches)
        results.put(("skip", str(exc)))
        return
    except Exception as exc:  # sent as one line; the parent raises it
        results.put(("error", f"{type(exc).__name__}: {exc}"))
        return
    results.put(("rate", rate) if rank == 0 else ("done", None))


def _timed_updates(config: Config, data_dir: Path, layout: Layout) -> float:
    from nmt_cli.batching import iterate_batches
    from nmt_cli.data.datadir import load_data_dir
    from nmt_cli.distributed import barrier, from_environment, shutdown
    from nmt_cli.trainer import Trainer

    train = dataclasses.replace(
        config.train, threads=layout.threads, device="cpu", guided_alignment=0.0
    )  # guided alignment's teacher is left out: it runs once, not per update
    config = dataclasses.replace(config, train=train)
    ranks = from_environment(use_cuda=False)
    try:
        with tempfile.TemporaryDirectory(prefix="nmt-probe-") as scratch:
            trainer = Trainer(config, load_data_dir(data_dir), Path(scratch), ranks=ranks)
            mine = trainer.epoch_batches(0)  # taken again from the start if too few
            batches = [mine[k % len(mine)] for k in range(WARMUP_UPDATES + TIMED_UPDATES)]
            tokens, start = 0, 0.0
            steps = iterate_batches(trainer.train_src, trainer.train_tgt, batches)
            for index, batch in steps:
                if index == WARMUP_UPDATES:
                    barrier(ranks)
                    start = time.perf_counter()
                measured = trainer.update(batch, index + 1)
                if index >= WARMUP_UPDATES and measured is not None:
                    tokens += measured.tokens
            seconds = time.perf_counter() - start
    finally:
        shutdown()
    return tokens / seconds
