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

import dataclasses
import multiprocessing
import queue
import socket
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path

from nmt_cli.config import Config
from nmt_cli.errors import ConfigError, NmtError

WARMUP_UPDATES = 3  # not timed: the first updates allocate and build their kernels
TIMED_UPDATES = 8
MARGIN = 0.05  # more processes must be this much faster than one to be chosen
MOST_LAYOUTS = 4  # 1, 2, 4 and 8 processes at most


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
    fresh processes; `on_layout(measurement)` is called as each ends. A layout that cannot
    split this data (fewer batches than processes) measures 0."""
    measured = []
    for layout in layouts(cores):
        rate = _run_layout(config, data_dir, layout)
        measured.append(Measurement(layout, rate))
        if on_layout is not None:
            on_layout(measured[-1])
    return measured


def _run_layout(config: Config, data_dir: Path, layout: Layout) -> float:
    from nmt_cli.threads import signals_ignored

    context = multiprocessing.get_context("spawn")
    results = context.Queue()
    port = _free_port()
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
    try:
        with signals_ignored():  # Ctrl-C is the parent's: it stops them below
            for worker in workers:
                worker.start()
        return _result(results, workers, layout)
    finally:
        for worker in workers:
            if worker.is_alive():
                worker.kill()
            worker.join()


def _result(results, workers, layout: Layout) -> float:
    """Rank 0's rate, or the first failure's message as an NmtError."""
    while True:
        try:
            kind, value = results.get(timeout=0.5)
        except queue.Empty:
            dead = [w for w in workers if w.exitcode not in (None, 0)]
            if dead:
                raise NmtError(
                    f"the layout probe's process ({layout}) exited with code "
                    f"{dead[0].exitcode}: give the layout yourself with --nproc N"
                ) from None
            continue
        if kind == "error":
            raise NmtError(f"the layout probe ({layout}) failed: {value}")
        return 0.0 if kind == "skip" else value


def _free_port() -> int:
    with socket.socket() as probe_socket:
        probe_socket.bind(("127.0.0.1", 0))
        return probe_socket.getsockname()[1]


def _probe_rank(rank: int, layout: Layout, port: int, config: Config, data_dir: Path, results):
    """One process of a layout: the run's Trainer in a scratch directory, timed updates."""
    import os

    from nmt_cli.threads import deaf_to_stop_signals

    deaf_to_stop_signals()
    try:
        if layout.processes > 1:
            os.environ.update(
                RANK=str(rank), LOCAL_RANK=str(rank), WORLD_SIZE=str(layout.processes),
                MASTER_ADDR="127.0.0.1", MASTER_PORT=str(port),
            )  # fmt: skip
        rate = _timed_updates(config, data_dir, layout)
    except ConfigError as exc:  # this layout cannot train this data (too few batches)
        results.put(("skip", str(exc)))
        return
    except Exception as exc:  # sent as one line; the parent raises it
        results.put(("error", f"{type(exc).__name__}: {exc}"))
        return
    if rank == 0:
        results.put(("rate", rate))


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
