"""Writing the cleaned text splits of a data directory in one streaming pass over the corpus.

The training corpus is read, normalised, filtered and de-duplicated a chunk at a time and
written out as it goes, so memory holds one chunk of pairs plus 8 bytes per distinct pair
(nmt_cli.data.dedup), whatever the size of the corpus. Held-out dev/test pairs are chosen
after cleaning by a seeded permutation of the cleaned pairs' positions, which needs only
their number (never the pairs); a second pass over the cleaned text then routes each line to
its split. Given dev/test files are streamed too, only normalised.
"""

from __future__ import annotations

import contextlib
import itertools
import multiprocessing
import queue
import signal
import sys
import threading
from collections.abc import Iterable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import TypeVar

from nmt_cli.data.clean import CleanCounts, CleanOptions, FilteredChunk, PairCleaner, filter_chunk
from nmt_cli.data.corpus import ParallelSource, read_pairs
from nmt_cli.data.datadir import SIDES, text_name
from nmt_cli.errors import ConfigError, InputError, NmtError
from nmt_cli.progress import OnEvent, count

_CHUNK = 10_000  # pairs cleaned and written at a time
_SERIAL_CHUNKS = 5  # chunks cleaned in this process before worker processes take over
_WORKERS = 2  # processes that normalise and filter (the machines we aim at have 2+ cores)
_IN_FLIGHT = 2 * _WORKERS + 1  # chunks handed to workers and not yet back
_ALL = "cleaned"  # the cleaned training pairs before dev/test are held out of them
T = TypeVar("T")


@dataclass(frozen=True)
class WrittenSplit:
    """One split as written to `{name}.src` / `{name}.tgt`: where it came from and its counts."""

    name: str
    origin: str  # "corpus" (cleaned), "given" (only normalised) or "held out" (from train)
    counts: CleanCounts
    pairs: int


def chunked(items: Iterable[T], size: int) -> Iterator[list[T]]:
    """`items` in lists of `size` (the last one shorter), read as they are needed."""
    iterator = iter(items)
    while chunk := list(itertools.islice(iterator, size)):
        yield chunk


def _cleaned(
    chunks: Iterator[list[tuple[str, str]]], cleaner: PairCleaner
) -> Iterator[tuple[str, str]]:
    """The kept source and target lines of each chunk, in order; past the first few chunks,
    filtered (and fingerprinted) in worker processes.

    Normalising and filtering is pure Python and most of the reading pass, so from the
    _SERIAL_CHUNKS-th chunk on, _WORKERS processes filter while this one reads, drops repeats
    and writes; at most _IN_FLIGHT chunks are on their way, so memory stays bounded. A small
    corpus never pays for starting them.
    """
    job = (cleaner.options, cleaner.wants_keys, cleaner.lowercase)
    for chunk in itertools.islice(chunks, _SERIAL_CHUNKS):
        yield cleaner.keep(filter_chunk(chunk, *job))
    first = next(chunks, None)
    if first is None:
        return
    if sys.platform != "linux":  # fork is Linux's default and safe here; elsewhere stay serial
        for chunk in itertools.chain([first], chunks):
            yield cleaner.keep(filter_chunk(chunk, *job))
        return
    with _Filterers(job) as workers:
        pending = 0
        for chunk in itertools.chain([first], chunks):
            workers.submit(chunk)
            pending += 1
            if pending >= _IN_FLIGHT:
                yield cleaner.keep(workers.result())
                pending -= 1
        for _ in range(pending):
            yield cleaner.keep(workers.result())


class _Filterers:
    """_WORKERS forked processes that run `filter_chunk`, fed round-robin through a pipe each.

    Chunk i goes to process i % _WORKERS and its result comes back on that process's pipe, so
    results are read in corpus order. A thread per process sends the chunks (one is about a
    megabyte, more than a pipe holds), so this process reads on meanwhile. Stopping early
    (an error, Ctrl-C) kills the processes, and the senders end on the broken pipe: nothing
    waits for a pipe that no one reads, the way multiprocessing.Pool's shutdown can hang.

    fork, not spawn: spawn re-imports the caller's __main__, which an unguarded script would
    run again in every worker. The workers only run filter_chunk, which takes no lock.
    """

    def __init__(self, job: tuple) -> None:
        context = multiprocessing.get_context("fork")
        self._processes: list = []
        self._outboxes: list[queue.SimpleQueue] = []
        self._senders: list[threading.Thread] = []
        self._sent = self._received = 0
        pipes = [context.Pipe() for _ in range(_WORKERS)]  # (ours, theirs) for each worker
        self._pipes = [ours for ours, _ in pipes]
        try:
            # Every worker is forked before any sender thread starts (fork with threads running
            # is unsafe), with SIGINT held until it ignores it; each closes the ends that are
            # not its own, so a worker sees its pipe close (EOF) when this process dies.
            with _interrupts_held():
                for index, (_, theirs) in enumerate(pipes):
                    others = [*self._pipes, *(t for i, (_, t) in enumerate(pipes) if i != index)]
                    process = context.Process(
                        target=_filter_loop, args=(theirs, others, job), daemon=True
                    )
                    process.start()
                    self._processes.append(process)
        except BaseException:
            self._stop(killed=True)
            raise
        finally:
            for _, theirs in pipes:
                theirs.close()
        for ours in self._pipes:
            outbox: queue.SimpleQueue = queue.SimpleQueue()
            sender = threading.Thread(target=_send_all, args=(ours, outbox), daemon=True)
            sender.start()
            self._outboxes.append(outbox)
            self._senders.append(sender)

    def submit(self, chunk: list[tuple[str, str]]) -> None:
        self._outboxes[self._sent % _WORKERS].put(chunk)
        self._sent += 1

    def result(self) -> FilteredChunk:
        """The next chunk's result, in the order the chunks were submitted."""
        index = self._received % _WORKERS
        self._received += 1
        try:
            failed, value = self._pipes[index].recv()
        except (EOFError, OSError):  # the worker died: killed, or out of memory
            process = self._processes[index]
            process.join(1)
            raise NmtError(
                f"a cleaning worker process stopped unexpectedly (exit code {process.exitcode}; "
                "killed, or out of memory?): run nmt prepare again"
            ) from None
        if failed:
            raise value
        return value

    def __enter__(self) -> _Filterers:
        return self

    def __exit__(self, kind: type[BaseException] | None, *rest: object) -> None:
        self._stop(killed=kind is not None)

    def _stop(self, killed: bool) -> None:
        """End the workers (after their last chunk, or at once when `killed`) and the senders."""
        if killed:
            for process in self._processes:
                process.kill()
        for outbox in self._outboxes:
            outbox.put(None)  # a worker ends after its last chunk; a sender then, or at once
        for process in self._processes:
            process.join(5)
        for sender in self._senders:
            sender.join(5)
        for pipe in self._pipes:
            pipe.close()


@contextlib.contextmanager
def _interrupts_held() -> Iterator[None]:
    """SIGINT blocked in this thread meanwhile: a Ctrl-C then arrives when it ends, not lost,
    and the processes forked meanwhile start with it blocked (any thread may do this)."""
    previous = signal.pthread_sigmask(signal.SIG_BLOCK, {signal.SIGINT})
    try:
        yield
    finally:
        signal.pthread_sigmask(signal.SIG_SETMASK, previous)


def _filter_loop(pipe, others: list, job: tuple) -> None:
    """A worker: filter the chunks that come down `pipe` until None (or the pipe closes)."""
    signal.signal(signal.SIGINT, signal.SIG_IGN)  # Ctrl-C is the main process's to handle
    signal.pthread_sigmask(signal.SIG_UNBLOCK, {signal.SIGINT})  # held while it was forked
    for end in others:  # the other ends this fork inherited: closed, or EOF would never come
        end.close()
    while True:
        try:
            chunk = pipe.recv()
        except EOFError:
            return
        if chunk is None:
            return
        try:
            answer = (False, filter_chunk(chunk, *job))
        except Exception as exc:  # handed to the main process, which raises it
            answer = (True, exc)
        pipe.send(answer)


def _send_all(pipe, outbox: queue.SimpleQueue) -> None:
    """A sender thread: pass the outbox's chunks down `pipe`, None last."""
    while True:
        item = outbox.get()
        try:
            pipe.send(item)
        except OSError:  # the worker is gone: the main process is stopping
            return
        if item is None:
            return


def _stream(
    source: ParallelSource,
    cleaner: PairCleaner,
    stage: Path,
    name: str,
    progress: OnEvent,
) -> CleanCounts:
    """Read `source`, clean it with `cleaner` and write what is kept as split `name`."""
    step = f"reading {source.describe()}"
    with contextlib.ExitStack() as stack:
        paths = [stage / text_name(name, side) for side in SIDES]
        files = [
            stack.enter_context(open(path, "w", encoding="utf-8", newline="\n")) for path in paths
        ]
        for lines in _cleaned(chunked(read_pairs(source), _CHUNK), cleaner):
            for handle, text in zip(files, lines, strict=True):
                handle.write(text)
            progress(count(step, cleaner.counts.read, None))
    counts = cleaner.counts
    progress(count(step, counts.read, counts.read))
    return counts


def write_train(
    source: ParallelSource,
    options: CleanOptions,
    stage: Path,
    held_out: dict[str, int],
    seed: int,
    progress: OnEvent,
) -> list[WrittenSplit]:
    """Clean the training corpus into the train split and hold dev/test out of it.

    `held_out` maps "dev" and "test" to the number of pairs to hold out (0: none).
    """
    wanted = sum(held_out.values())
    counts = _stream(source, PairCleaner(options), stage, _ALL if wanted else "train", progress)
    if not counts.kept:
        raise InputError(_nothing_left(source, counts))
    if not wanted:
        return [WrittenSplit("train", "corpus", counts, counts.kept)]
    if wanted >= counts.kept:
        raise ConfigError(
            f"--dev-size {held_out['dev']} + --test-size {held_out['test']} would leave no "
            f"training pairs: only {counts.kept:,} remain after cleaning; lower them"
        )
    return _hold_out(stage, counts, held_out, seed, progress)


def _hold_out(
    stage: Path,
    counts: CleanCounts,
    held_out: dict[str, int],
    seed: int,
    progress: OnEvent,
) -> list[WrittenSplit]:
    """Route the cleaned lines to train and to the held-out splits chosen by the seed.

    The front of the permutation is held out (dev first, then test); each split
    keeps corpus order, so a held-out file reads like the corpus it came from.
    """
    import numpy as np

    # The seeded permutation of the cleaned pairs' positions, as `prepare` always drew it, so
    # a seed holds out the same pairs as before. It exists only now, when the number of
    # cleaned pairs is known: 8 bytes per pair for a moment (40 MB for 5 million), no text.
    order = np.random.default_rng(seed).permutation(counts.kept)
    chosen = order[: sum(held_out.values())].tolist()
    del order
    destination: dict[int, str] = {}
    for name, size in held_out.items():
        destination.update(dict.fromkeys(chosen[:size], name))
        chosen = chosen[size:]
    step = "holding out " + " and ".join(name for name, size in held_out.items() if size)
    names = ["train", *(name for name, size in held_out.items() if size)]
    for side in SIDES:
        source_path = stage / text_name(_ALL, side)
        with contextlib.ExitStack() as stack:
            outputs = {
                name: stack.enter_context(open(stage / text_name(name, side), "wb"))
                for name in names
            }
            with open(source_path, "rb") as lines:
                for number, line in enumerate(lines):
                    outputs[destination.get(number, "train")].write(line)
        source_path.unlink()
        progress(count(step, SIDES.index(side) + 1, len(SIDES)))
    splits = [WrittenSplit("train", "corpus", counts, counts.kept - len(destination))]
    for name in names[1:]:
        size = held_out[name]
        splits.append(WrittenSplit(name, "held out", CleanCounts(read=size, kept=size), size))
    return splits


def write_given(
    name: str, source: ParallelSource, stage: Path, progress: OnEvent, lowercase: bool = False
) -> WrittenSplit:
    """A given dev/test split: normalised (and lowercased, with `lowercase`) only, never
    filtered (it is a reference)."""
    counts = _stream(source, PairCleaner(None, lowercase=lowercase), stage, name, progress)
    if not counts.kept:
        raise InputError(f"{source.describe()} holds no sentences: give non-empty {name} files")
    return WrittenSplit(name, "given", counts, counts.kept)


def _nothing_left(source: ParallelSource, counts: CleanCounts) -> str:
    """The one-line message for a training corpus that cleaning emptied."""
    if counts.read == 0:
        return f"{source.describe()} holds no sentences: give a non-empty corpus"
    return (
        f"no training pairs left after cleaning {source.describe()}: {counts.read:,} read, "
        f"{counts.empty:,} with an empty side, {counts.too_long:,} too long, "
        f"{counts.ratio:,} over the length ratio: check the files or relax --max-len/--max-ratio"
    )
