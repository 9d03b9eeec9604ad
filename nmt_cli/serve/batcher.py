"""Requests translated together, by one worker loop running a continuous batch (in a thread of
its own after `start`, or in the calling thread with `run`).

Every request becomes a job on a queue. The worker keeps one running search per (beam, align)
setting (a `Stream`, e.g. `TranslationStream`). Between two steps of the searches it takes the
jobs that have come, and puts their lines in once `_JOIN_LINES` lines wait, or once the first of
them has waited `_JOIN_WAIT` times as long as a join takes (each join runs the encoder once,
which costs about as much for one line as for eight, and writes the lines' memory beside the
searches'), but
never more than `_JOIN_STEPS` steps: lines join a large model's search at its next step, where
a step outweighs a join, and a small model's every few steps. No more than `max_lines` lines
are in the searches at once: the rest wait their turn, first come first served. After each step it hands every job whose
lines are all finished its results. So a line joins the batch within a few steps instead of
waiting for the whole batch before it, and leaves it as soon as it is done: its client's answer
does not wait for the longest sentence of the batch, and under many clients the batch stays
full. torch never runs in two threads at once (a second thread encoding beside the search was
slower: the two contend for the GIL between operators).

When the searches are empty, the first job waits for those that follow it while they come no
more than `window` apart (at most `_MAX_WAIT_WINDOWS` windows): a burst of requests then starts
as one batch, and a lone request waits only one window.
"""

from __future__ import annotations

import queue
import threading
import time
from collections import deque
from collections.abc import Callable, Hashable, Sequence
from concurrent.futures import Future, InvalidStateError
from dataclasses import dataclass, field
from typing import Any, Protocol

from nmt_cli.serve.requests import TranslateRequest

_MAX_WAIT_WINDOWS = 8  # an idle worker starts this many windows after the first job at the latest
# Lines join running searches once this many wait, or once the first has waited this many
# times as long as a join takes (the running mean of the last joins), and this many steps at
# most: each join runs the encoder for its lines and writes their memory beside the searches',
# which for a small model costs a few steps' time, and for a large one less than a step.
_JOIN_LINES = 16
_JOIN_WAIT = 4.0
_JOIN_STEPS = 8


class Stream(Protocol):
    """A running search over lines (see `nmt_cli.translator.TranslationStream`)."""

    @property
    def active(self) -> int: ...  # lines added and not yet returned

    def add(self, items: Sequence[tuple[Hashable, str]]) -> None: ...  # (tag, line) pairs

    def step(self) -> list[tuple[Hashable, Any]]: ...  # (tag, result) of the lines it finished


OpenStream = Callable[[int, bool], Stream]  # open_stream(beam, align) -> an empty stream


@dataclass(eq=False)
class _Job:
    request: TranslateRequest
    future: Future = field(default_factory=Future)
    results: list = field(default_factory=list)
    left: int = 0  # lines not yet translated
    came: float = field(default_factory=time.perf_counter)  # when it was submitted

    def __post_init__(self) -> None:
        self.results = [None] * len(self.request.lines)
        self.left = len(self.request.lines)


class Batcher:
    """The queue of translation jobs and the worker thread that runs their searches."""

    def __init__(
        self,
        open_stream: OpenStream,
        window: float = 0.005,
        max_lines: int = 64,
        pace: Callable[[bool], None] | None = None,
    ):
        self.open_stream = open_stream
        self.pace = pace  # told True before each round of steps, False before waiting idle
        self.window = window  # seconds without a new job after which an idle worker starts
        self.max_lines = max_lines  # lines in the searches at once, at most
        self._jobs: queue.SimpleQueue[_Job | None] = queue.SimpleQueue()
        self._worker = threading.Thread(target=self._run, name="nmt-translate", daemon=True)
        self._streams: dict[tuple[int, bool], Stream] = {}
        self._running: dict[tuple[int, bool], set[_Job]] = {}  # jobs with lines in each search
        self._waiting: deque[tuple[_Job, int]] = deque()  # lines not yet in a search
        self._closing = False
        self._steps_waited = 0  # steps run since the first waiting line came
        self._waiting_since = 0.0  # when the first waiting line's request came (perf_counter)
        self._join_seconds = 0.0  # how long a join takes: a running mean

    def start(self) -> Batcher:
        self._worker.start()
        return self

    def submit(self, request: TranslateRequest) -> Future:
        """Queue a request; the future gets its results (or the error that stopped them)."""
        job = _Job(request)
        self._jobs.put(job)
        return job.future

    def run(self) -> None:
        """The worker's loop in the calling thread instead of a thread of its own, until `stop`."""
        self._run()

    def stop(self) -> None:
        """Let the worker finish the jobs already queued, then end its loop; do not wait."""
        self._jobs.put(None)

    def close(self) -> None:
        """Finish the jobs already queued, then stop the worker thread."""
        self.stop()
        self._worker.join()

    def _run(self) -> None:
        while True:
            if not self._busy():
                if self._closing:
                    return
                if self.pace:
                    self.pace(False)
                self._collect()
            else:
                self._take_queued()
            if self.pace:
                self.pace(True)
            if not any(s.active for s in self._streams.values()) or self._waited_enough():
                self._admit()
            self._steps_waited = self._steps_waited + 1 if self._waiting else 0
            for key, stream in list(self._streams.items()):
                if stream.active:
                    self._advance(key, stream)

    def _waited_enough(self) -> bool:
        """Whether the waiting lines should join the running searches now."""
        if len(self._waiting) >= _JOIN_LINES or self._steps_waited >= _JOIN_STEPS:
            return True
        waited = time.perf_counter() - self._waiting_since
        return bool(self._waiting) and waited >= _JOIN_WAIT * self._join_seconds

    def _busy(self) -> bool:
        return bool(self._waiting) or any(s.active for s in self._streams.values())

    def _queue(self, job: _Job | None) -> None:
        if job is None:
            self._closing = True
        elif not job.left:
            settle(job.future, [])
        else:
            if not self._waiting:
                self._waiting_since = job.came
            self._waiting.extend((job, i) for i in range(job.left))

    def _collect(self) -> None:
        """Wait for a job, and for those that follow it closely."""
        self._queue(self._jobs.get())
        latest = time.monotonic() + _MAX_WAIT_WINDOWS * self.window
        while not self._closing and len(self._waiting) < self.max_lines:
            wait = min(self.window, latest - time.monotonic())
            try:
                self._queue(self._jobs.get(timeout=max(0.0, wait)))
            except queue.Empty:
                return

    def _take_queued(self) -> None:
        """The jobs that have come while the searches ran."""
        while True:
            try:
                self._queue(self._jobs.get_nowait())
            except queue.Empty:
                return

    def _admit(self) -> None:
        """Put waiting lines into their searches, up to `max_lines` lines in all."""
        room = self.max_lines - sum(s.active for s in self._streams.values())
        taken: dict[tuple[int, bool], list[tuple[_Job, int]]] = {}
        while self._waiting and room > 0:
            job, index = self._waiting.popleft()
            if job.future.done():  # failed (an earlier line of it) or cancelled
                continue
            taken.setdefault((job.request.beam, job.request.align), []).append((job, index))
            room -= 1
        joining = any(s.active for s in self._streams.values())  # (not a start from idle)
        start = time.perf_counter()
        for key, lines in taken.items():
            jobs = {job for job, _ in lines}
            try:
                if key not in self._streams:
                    self._streams[key] = self.open_stream(*key)
                self._streams[key].add([((job, i), job.request.lines[i]) for job, i in lines])
            except Exception as exc:  # the stream is as it was: only these requests fail
                for job in jobs:
                    settle(job.future, error=exc)
                continue
            self._running.setdefault(key, set()).update(jobs)
        if taken and joining:  # what joining a running search costs
            took = time.perf_counter() - start
            self._join_seconds = (
                0.8 * self._join_seconds + 0.2 * took if self._join_seconds else took
            )

    def _advance(self, key: tuple[int, bool], stream: Stream) -> None:
        """One step of a search; the jobs it finishes get their results."""
        try:
            finished = stream.step()
        except Exception as exc:  # the search is lost: every job with a line in it fails
            del self._streams[key]
            for job in self._running.pop(key, set()):
                settle(job.future, error=exc)
            return
        running = self._running.setdefault(key, set())
        for (job, index), result in finished:
            job.results[index] = result
            job.left -= 1
            if not job.left:
                settle(job.future, job.results)
            if job.future.done():  # answered, failed or cancelled: the search holds no more of it
                running.discard(job)


def settle(future: Future, result: object = None, error: BaseException | None = None) -> None:
    """Give the future its result or error, unless it already has one or was cancelled."""
    try:
        if error is not None:
            future.set_exception(error)
        else:
            future.set_result(result)
    except InvalidStateError:
        pass
