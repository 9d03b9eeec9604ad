"""run_in_threads: works side by side, the first failure raised, the others stopped."""

from __future__ import annotations

import threading

import pytest

from nmt_cli.threads import Stopped, run_in_threads


def test_works_run_side_by_side_and_tick_while_they_do():
    barrier = threading.Barrier(2, timeout=5)  # passes only when both works are running at once
    done, ticks = [], []

    def work(name):
        def run(stop):
            barrier.wait()
            done.append(name)

        return run

    run_in_threads([work("a"), work("b")], tick=lambda: ticks.append(1))
    assert sorted(done) == ["a", "b"] and ticks


def test_a_failure_stops_the_other_works_and_is_raised():
    stopped = threading.Event()

    def failing(stop):
        raise ValueError("bad chunk")

    def patient(stop):
        if not stop.wait(5):
            return
        stopped.set()
        raise Stopped

    with pytest.raises(ValueError, match="bad chunk"):
        run_in_threads([patient, failing])
    assert stopped.is_set()


def test_an_interrupt_inside_a_work_reaches_the_caller():
    def interrupted(stop):
        raise KeyboardInterrupt

    with pytest.raises(KeyboardInterrupt):
        run_in_threads([interrupted])
