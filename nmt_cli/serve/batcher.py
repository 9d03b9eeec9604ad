"""Requests that arrive together are translated together, by one worker thread.

Every request becomes a job on a queue. The worker takes the first job and keeps adding the
jobs that follow while they come no more than `window` apart (never past `max_lines` lines or
`_MAX_WAIT_WINDOWS` windows after the first), translates the lines of all jobs with the same
search settings as one chunk, and hands each job its own results. So torch never runs in two
threads at once, and under many clients the batches fill up as with `nmt translate`: clients
answered together come back over a spread longer than one window (each answer is written and
each new request read in turn), but a fixed window after the first would cut that stream in
two half batches; a lone request still waits only one window.
"""

from __future__ import annotations

import queue
import threading
import time
from collections.abc import Callable
from concurrent.futures import Future
from dataclasses import dataclass, field

from nmt_cli.serve.requests import TranslateRequest

# translate(lines, beam, align) -> one result per line, in order
TranslateFn = Callable[[list[str], int, bool], list]
_MAX_WAIT_WINDOWS = 8  # a batch closes this many windows after its first job at the latest


@dataclass
class _Job:
    request: TranslateRequest
    future: Future = field(default_factory=Future)


class Batcher:
    """The queue of translation jobs and the worker thread that empties it."""

    def __init__(self, translate: TranslateFn, window: float = 0.005, max_lines: int = 64):
        self.translate = translate
        self.window = window  # seconds without a new job after which a batch closes
        self.max_lines = max_lines  # a batch closes once it holds this many lines
        self._jobs: queue.SimpleQueue[_Job | None] = queue.SimpleQueue()
        self._worker = threading.Thread(target=self._run, name="nmt-translate", daemon=True)

    def start(self) -> Batcher:
        self._worker.start()
        return self

    def submit(self, request: TranslateRequest) -> Future:
        """Queue a request; the future gets its results (or the error that stopped them)."""
        job = _Job(request)
        self._jobs.put(job)
        return job.future

    def close(self) -> None:
        """Finish the jobs already queued, then stop the worker."""
        self._jobs.put(None)
        self._worker.join()

    def _run(self) -> None:
        closing = False
        while not closing:
            first = self._jobs.get()
            if first is None:
                return
            jobs, closing = self._collect(first)
            self._work(jobs)

    def _collect(self, first: _Job) -> tuple[list[_Job], bool]:
        """The first job and those that follow it closely; whether close() came."""
        jobs, lines = [first], len(first.request.lines)
        latest = time.monotonic() + _MAX_WAIT_WINDOWS * self.window
        while lines < self.max_lines:
            wait = min(self.window, latest - time.monotonic())
            try:
                job = self._jobs.get(timeout=max(0.0, wait))
            except queue.Empty:
                break
            if job is None:
                return jobs, True
            jobs.append(job)
            lines += len(job.request.lines)
        return jobs, False

    def _work(self, jobs: list[_Job]) -> None:
        """Translate the jobs, one chunk per (beam, align), and resolve their futures."""
        groups: dict[tuple[int, bool], list[_Job]] = {}
        for job in jobs:
            groups.setdefault((job.request.beam, job.request.align), []).append(job)
        for (beam, align), group in groups.items():
            lines = [line for job in group for line in job.request.lines]
            try:
                results = self.translate(lines, beam, align)
            except Exception as exc:  # handed to the requests that asked: the worker goes on
                for job in group:
                    job.future.set_exception(exc)
                continue
            start = 0
            for job in group:
                count = len(job.request.lines)
                job.future.set_result(results[start : start + count])
                start += count
