"""Running C++ work (SentencePiece) in threads without holding up Ctrl-C.

SentencePiece trains and encodes in C++ that releases the GIL but never checks for signals:
called from the main thread, a long call would keep KeyboardInterrupt waiting until it ends.
`run_in_threads` runs the work in threads of its own and waits in short joins instead, so the
interrupt reaches the caller at once, and works given separately run side by side.
"""

from __future__ import annotations

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

    def run(work: Callable[[threading.Event], object]) -> None:
        try:
            work(stop)
        except Stopped:
            pass
        except BaseException as exc:  # handed to the waiting thread below
            failures.append(exc)
            stop.set()

    threads = [threading.Thread(target=run, args=(work,), daemon=True) for work in works]
    for thread in threads:
        thread.start()
    try:
        for thread in threads:
            while thread.is_alive():
                thread.join(_POLL_SECONDS)
                if tick is not None:
                    tick()
    except BaseException:
        stop.set()
        if wait_on_interrupt:
            for thread in threads:
                thread.join()
        raise
    if failures:
        raise failures[0]
