"""Child processes measured from the outside: wall time, peak memory, a log file, a time budget."""

from __future__ import annotations

import os
import re
import shlex
import signal
import subprocess
import threading
import time
from contextlib import ExitStack
from dataclasses import dataclass
from pathlib import Path

from layout import REPO_DIR, SHARED_DIR

THREADS = str(os.cpu_count() or 1)


@dataclass
class ProcResult:
    """How one child process ran."""

    command: str  # the command line as it could be typed in a shell
    returncode: int
    seconds: float  # wall time from start to exit
    max_rss_mib: float  # peak resident memory of the child and its waited-for descendants
    interrupted: bool  # SIGINT was sent because the time budget ran out
    others_cpu_s: float | None = None  # CPU seconds the rest of the machine used meanwhile
    # With a LoopStart: seconds after the start when its line was seen; None if it was not
    # (the budget then ran from its start-up allowance on).
    loop_start_s: float | None = None


def child_env(extra: dict[str, str] | None = None) -> dict[str, str]:
    """The environment of every child: one thread per core, no colour, plus `extra`."""
    env = dict(os.environ)
    env.update(OMP_NUM_THREADS=THREADS, MKL_NUM_THREADS=THREADS, NO_COLOR="1")
    env.update(extra or {})
    return env


def _readable(text: str) -> str:
    """Paths relative to the repository root (where `make bench` runs), for the report."""
    return text.replace(f"{SHARED_DIR}/", "../shared/").replace(f"{REPO_DIR}/", "")


def shown(
    cmd: list[str],
    extra_env: dict[str, str] | None = None,
    stdin: Path | None = None,
    stdout: Path | None = None,
    input_text: str | None = None,
) -> str:
    """A shell spelling of a command with its environment, input and redirections."""
    env = " ".join(f"{k}={shlex.quote(v)}" for k, v in (extra_env or {}).items())
    text = " ".join(part for part in (env, shlex.join(str(c) for c in cmd)) if part)
    if input_text is not None:
        text = f"echo {shlex.quote(input_text.rstrip(chr(10)))} | {text}"
    if stdin is not None:
        text += f" < {shlex.quote(str(stdin))}"
    if stdout is not None:
        text += f" > {shlex.quote(str(stdout))}"
    return _readable(text)


def _default_sigint() -> None:
    """In the child: take SIGINT's default action, even when the parent was started ignoring it.

    A shell starts background jobs with SIGINT ignored, and Python then installs no
    KeyboardInterrupt handler; the budget's SIGINT would go unnoticed.
    """
    signal.signal(signal.SIGINT, signal.SIG_DFL)


@dataclass(frozen=True)
class LoopStart:
    """Where a child says that its timed work begins: the first line of `log`, written after
    the child started, that matches `pattern`. The budget then runs from that line, looked for
    every `poll_s`; a child that has not written it after `startup_s` (or whose log cannot be
    read) gets its budget from then, as if it had."""

    log: Path
    pattern: re.Pattern
    startup_s: float
    poll_s: float = 0.05


class _Budget:
    """SIGINT when the budget runs out, SIGKILL when the grace period after it ends too. The
    budget runs from the child's start, or from its `loop_start` line."""

    def __init__(
        self,
        proc: subprocess.Popen,
        budget_s: float | None,
        grace_s: float,
        loop_start: LoopStart | None = None,
    ):
        self.proc = proc
        self.fired = False
        self.timers: list[threading.Timer] = []
        self.done = threading.Event()
        self.lock = threading.Lock()
        self.started = time.perf_counter()
        self.loop_start_s: float | None = None  # when the loop-start line was seen
        if budget_s is None:
            return
        if loop_start is None:
            self._arm(budget_s, grace_s)
            return
        try:  # only lines written after the child started count
            offset = loop_start.log.stat().st_size
        except FileNotFoundError:
            offset = 0
        watcher = threading.Thread(
            target=self._watch, args=(loop_start, offset, budget_s, grace_s), daemon=True
        )
        watcher.start()

    def _arm(self, budget_s: float, grace_s: float) -> None:
        with self.lock:
            if self.done.is_set():
                return
            self.timers = [
                threading.Timer(budget_s, self._send, (signal.SIGINT,)),
                threading.Timer(budget_s + grace_s, self._send, (signal.SIGKILL,)),
            ]
            for timer in self.timers:
                timer.daemon = True
                timer.start()

    def _watch(self, start: LoopStart, seen: int, budget_s: float, grace_s: float) -> None:
        """Arm the timers when the loop-start line appears (or its start-up time is over);
        armed whatever happens here, so the child is always stopped. `seen`: bytes of the log
        already searched."""
        try:
            deadline = self.started + start.startup_s
            while time.perf_counter() < deadline and not self.done.wait(start.poll_s):
                try:
                    with open(start.log, "rb") as log:
                        if os.fstat(log.fileno()).st_size < seen:
                            seen = 0  # truncated or replaced: read it again
                        log.seek(seen)
                        chunk = log.read()
                except FileNotFoundError:
                    continue
                except OSError:  # cannot be read (a folder, no permission): from now on
                    break
                complete = chunk.rfind(b"\n") + 1  # search whole lines only
                lines = chunk[:complete].decode("utf-8", errors="replace").splitlines()
                if any(start.pattern.search(line) for line in lines):
                    self.loop_start_s = time.perf_counter() - self.started
                    break
                seen += complete
        finally:
            self._arm(budget_s, grace_s)

    def _send(self, sig: int) -> None:
        self.fired = True
        try:
            os.kill(self.proc.pid, sig)
        except ProcessLookupError:
            pass

    def cancel(self) -> None:
        """Stop the timers (and the watcher) once the child has exited."""
        with self.lock:
            self.done.set()
            for timer in self.timers:
                timer.cancel()


def busy_cpu_s() -> float | None:
    """CPU seconds this machine has spent busy since boot, all cores (None off Linux)."""
    try:
        with open("/proc/stat", encoding="utf-8") as stat:
            fields = [int(x) for x in stat.readline().split()[1:]]
    except (OSError, ValueError):
        return None
    idle = fields[3] + (fields[4] if len(fields) > 4 else 0)  # idle + iowait
    return (sum(fields[:8]) - idle) / os.sysconf("SC_CLK_TCK")


def _wait(proc: subprocess.Popen, input_text: str | None) -> tuple[int, float, float]:
    """Feed `input_text` to the child, reap it; its exit code, peak RSS in MiB and CPU s."""
    if input_text is not None:
        proc.stdin.write(input_text.encode("utf-8"))
        proc.stdin.close()
    _, status, usage = os.wait4(proc.pid, 0)
    proc.returncode = os.waitstatus_to_exitcode(status)
    cpu_s = usage.ru_utime + usage.ru_stime
    return proc.returncode, usage.ru_maxrss / 1024, cpu_s  # ru_maxrss is in KiB on Linux


def run(
    cmd: list,
    log: Path,
    *,
    extra_env: dict[str, str] | None = None,
    stdin: Path | None = None,
    stdout: Path | None = None,
    input_text: str | None = None,
    budget_s: float | None = None,
    grace_s: float = 120.0,
    loop_start: LoopStart | None = None,
) -> ProcResult:
    """Run `cmd` with stderr (and stdout unless redirected) into `log`; measure time and memory.
    With `budget_s`, SIGINT that long after the start (or after `loop_start`'s line)."""
    log.parent.mkdir(parents=True, exist_ok=True)
    text = shown(cmd, extra_env, stdin, stdout, input_text)
    with ExitStack() as files:
        log_file = files.enter_context(open(log, "a", encoding="utf-8"))
        log_file.write(f"$ {text}\n")
        log_file.flush()
        out_file = files.enter_context(open(stdout, "wb")) if stdout else log_file
        in_file = files.enter_context(open(stdin, "rb")) if stdin else None
        busy_before = busy_cpu_s()
        started = time.perf_counter()
        proc = subprocess.Popen(
            [str(c) for c in cmd],
            stdin=subprocess.PIPE if input_text is not None else in_file,
            stdout=out_file,
            stderr=log_file,
            env=child_env(extra_env),
            preexec_fn=_default_sigint,
        )
        budget = _Budget(proc, budget_s, grace_s, loop_start)
        returncode, max_rss_mib, cpu_s = _wait(proc, input_text)
        budget.cancel()  # at once: the child's pid is free again
        seconds = time.perf_counter() - started
        busy_after = busy_cpu_s()
        log_file.write(f"# exit {returncode} after {seconds:.1f} s\n")
    others = None if None in (busy_before, busy_after) else busy_after - busy_before - cpu_s
    return ProcResult(
        text, returncode, seconds, max_rss_mib, budget.fired, others, budget.loop_start_s
    )


def check(result: ProcResult, what: str, log: Path) -> ProcResult:
    """Raise with the log's name when a step failed."""
    if result.returncode != 0 and not result.interrupted:
        raise RuntimeError(f"{what} failed (exit {result.returncode}); see {log}")
    return result


def capture(cmd: list[str], extra_env: dict[str, str] | None = None) -> str:
    """Run a short command and return its stripped stdout ('' when it fails)."""
    try:
        done = subprocess.run(
            [str(c) for c in cmd],
            capture_output=True,
            text=True,
            env=child_env(extra_env),
            timeout=300,
        )
    except (OSError, subprocess.TimeoutExpired):
        return ""
    return done.stdout.strip() if done.returncode == 0 else ""
