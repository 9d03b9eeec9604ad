"""run_in_threads: works side by side, the first failure raised, the others stopped."""

from __future__ import annotations

import os
import signal
import threading
import time

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


def test_ctrl_c_returns_only_once_every_work_has_stopped():
    # A work in the middle of a long step when Ctrl-C comes must end before the caller goes on
    # (it would otherwise write into a directory the caller is removing).
    steps, returned = [], []

    def slow(stop):
        for _ in range(20):
            if stop.is_set():
                raise Stopped
            time.sleep(0.3)
            steps.append(time.monotonic())

    def quick(stop):
        deadline = time.monotonic() + 30  # a lost Ctrl-C fails the test instead of hanging it
        while not stop.is_set() and time.monotonic() < deadline:
            time.sleep(0.01)
        raise Stopped

    timer = threading.Timer(0.1, lambda: os.kill(os.getpid(), signal.SIGINT))
    previous = signal.signal(signal.SIGINT, signal.default_int_handler)  # Ctrl-C as in a shell
    timer.start()
    try:
        _interrupted_while_running(slow, quick, returned)
    finally:
        signal.signal(signal.SIGINT, previous)
    time.sleep(0.4)
    assert len(steps) == 1 and steps[0] <= returned[0]  # the step under way, and nothing after


def _interrupted_while_running(slow, quick, returned) -> None:
    with pytest.raises(KeyboardInterrupt):
        try:
            run_in_threads([slow, quick])
        finally:
            returned.append(time.monotonic())


def test_a_process_started_from_another_thread_inherits_the_blocked_stop_signals(tmp_path):
    """`signals_ignored` outside the main thread blocks SIGINT and SIGTERM, and the child must
    start with them blocked, also when it is the first process multiprocessing starts (its
    resource tracker, started then, used to unblock them in the launching thread). Run in a
    fresh interpreter, where no tracker runs yet."""
    import subprocess
    import sys

    script = tmp_path / "launch.py"
    script.write_text(
        "import multiprocessing, signal, sys, threading\n"
        "from nmt_cli.threads import signals_ignored\n"
        "def child():\n"
        "    blocked = signal.pthread_sigmask(signal.SIG_BLOCK, [])\n"
        "    sys.exit(0 if {signal.SIGINT, signal.SIGTERM} <= blocked else 3)\n"
        "def launch(out):\n"
        "    with signals_ignored():\n"
        "        process = multiprocessing.get_context('spawn').Process(target=child)\n"
        "        process.start()\n"
        "    process.join()\n"
        "    out.append(process.exitcode)\n"
        "if __name__ == '__main__':\n"
        "    out = []\n"
        "    thread = threading.Thread(target=launch, args=(out,))\n"
        "    thread.start()\n"
        "    thread.join()\n"
        "    print(out[0])\n",
        encoding="utf-8",
    )
    result = subprocess.run(
        [sys.executable, str(script)], capture_output=True, text=True, timeout=120, check=False
    )
    assert result.returncode == 0, result.stderr
    assert result.stdout.strip() == "0", "the child started with SIGINT or SIGTERM unblocked"
