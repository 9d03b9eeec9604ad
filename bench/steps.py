"""The steps of a benchmark run: each timed, with the load when it began, and failures kept."""

from __future__ import annotations

import sys
import time
import traceback
from contextlib import contextmanager
from dataclasses import dataclass

import machine


@dataclass
class Step:
    """One step of the run: how long it took and the machine's load when it began."""

    name: str
    seconds: float
    load_at_start: str
    error: str = ""


class Recorder:
    """Times each step into `steps`, and keeps going past a failed one."""

    def __init__(self, steps: list[Step]):
        self.steps = steps
        self.failed = False

    @contextmanager
    def step(self, name: str):
        """Run one step; an error is printed and recorded, and the run goes on."""
        record = Step(name, 0.0, machine.loadavg())
        self.steps.append(record)
        print(
            f"[{machine.now_utc()}] {name} (load {record.load_at_start})",
            file=sys.stderr,
            flush=True,
        )
        started = time.perf_counter()
        try:
            yield
        except (RuntimeError, OSError, ValueError, KeyError) as exc:
            record.error = str(exc).replace("\n", " ")
            self.failed = True
            print(f"  failed: {record.error}", file=sys.stderr)
            traceback.print_exc(file=sys.stderr)
        finally:
            record.seconds = time.perf_counter() - started
