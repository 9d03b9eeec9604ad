"""Running C++ work (SentencePiece) in threads without holding up Ctrl-C, and starting child
processes deaf to it.

SentencePiece trains and encodes in C++ that releases the GIL but never checks for signals:
called from the main thread, a long call would keep KeyboardInterrupt waiting until it ends.
`run_in_threads` runs the work in threads of its own and waits in short joins instead, so the
interrupt reaches the caller at once, and works given separately run side by side.
"""

from __future__ import annotations

import contextlib
import signal
import threading
from collections.abc import Callable, Sequence

_POLL_SECONDS = 0.1


class Stopped(Exception):
    """Raised inside a work that saw its stop event set: the caller was interrupted or another
    work failed, so it gives up between two steps."""


def run_in_threads(
    works: Sequence[Callable[[threading.Event], object]],
    tick: Callable[[], None] | None = None,
    wait_on_interrupt: bool = True,
) -> None:
    """Run each of `works` in a thread of its own, calling `tick` every 0.1 s, until all end.

    Each work gets a stop event, set when the caller is interrupted or a work fails; a work
    that writes files checks it between steps and raises Stopped. With `wait_on_interrupt` the
    threads are waited for before the interrupt goes on, so nothing writes after the caller
    has cleaned up; without, they are left to end with the process (for work that cannot be
    stopped and writes only to memory). The first failure of a work is raised here.
    """
    stop = threading.Event()
    failures: list[BaseException] = []

    def run(work: Callable[[threading.Event], object], done: threading.Event) -> None:
        try:
            work(stop)
        except Stopped:
            pass
        except BaseException as exc:  # handed to the waiting thread below
            failures.append(exc)
            stop.set()
        finally:
            done.set()

    # Waiting on each work's own event, not Thread.join: on Python 3.11 and 3.12 a Ctrl-C
    # inside join() can mark a thread stopped while it still runs (the bpo-45274 workaround).
    started: list[threading.Event] = []
    try:
        for work in works:
            done = threading.Event()
            threading.Thread(target=run, args=(work, done), daemon=True).start()
            started.append(done)
        for done in started:
            while not done.wait(_POLL_SECONDS):
                if tick is not None:
                    tick()
            if tick is not None:
                tick()
    except BaseException:
        stop.set()
        if wait_on_interrupt:
            _wait_through_interrupts(started)
        raise
    if failures:
        raise failures[0]


def _wait_through_interrupts(started: list[threading.Event]) -> None:
    """Wait until every started work has ended, whatever further Ctrl-Cs arrive meanwhile
    (each work ends at its next check of the stop event)."""
    for done in started:
        while True:
            try:
                if done.wait(_POLL_SECONDS):
                    break
            except KeyboardInterrupt:
                continue


STOP_SIGNALS = {signal.SIGINT, signal.SIGTERM}


@contextlib.contextmanager
def signals_ignored():
    """SIGINT and SIGTERM ignored meanwhile, so that a process started now begins deaf to them
    (the parent stops it). Outside the main thread, where handlers cannot be set, they are
    blocked in this thread instead: the child inherits the mask and unblocks them once it has
    set them to be ignored."""
    if threading.current_thread() is not threading.main_thread():
        # The first process multiprocessing starts also starts its resource tracker, and that
        # unblocks SIGINT and SIGTERM in the calling thread once done (CPython 3.11): started
        # first, it leaves the mask below alone.
        from multiprocessing import resource_tracker

        resource_tracker.ensure_running()
        mask = signal.pthread_sigmask(signal.SIG_BLOCK, STOP_SIGNALS)
        try:
            yield
        finally:
            signal.pthread_sigmask(signal.SIG_SETMASK, mask)
        return
    saved = {sig: signal.signal(sig, signal.SIG_IGN) for sig in (signal.SIGINT, signal.SIGTERM)}
    try:
        yield
    finally:
        for sig, handler in saved.items():
            signal.signal(sig, handler)


def deaf_to_stop_signals() -> None:
    """In a child started under `signals_ignored`: keep ignoring SIGINT and SIGTERM (the
    parent stops it), and take them out of the mask it may have inherited."""
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    signal.signal(signal.SIGTERM, signal.SIG_IGN)
    signal.pthread_sigmask(signal.SIG_UNBLOCK, STOP_SIGNALS)
