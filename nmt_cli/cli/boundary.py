"""The single error boundary between the library and the terminal.

Library code raises `NmtError`s; every command is wrapped by `command_boundary`, which prints
one line on stderr and exits with the error's code, so users never see a traceback for their
own mistakes. Unexpected exceptions still show a traceback: those are our bugs.
"""

from __future__ import annotations

import contextlib
import errno
import functools
import os
import signal
import sys
import threading
from collections.abc import Callable
from typing import Any, TypeVar

import typer

F = TypeVar("F", bound=Callable[..., Any])

_console = None


def stderr_console():
    """A rich console on stderr: colour only on a terminal, NO_COLOR respected (rich does both);
    written to a file or pipe, a line of text stays one line (grep finds it whole). If its
    reader goes away (`nmt train ... 2>&1 | head`), it falls silent and the command goes on:
    rich would point stdout (not stderr) at /dev/null and exit 1, which stopped a training
    before it had saved anything, or cut a translation's output short."""
    global _console
    if _console is None:
        from rich.console import Console

        class _Console(Console):
            def on_broken_pipe(self) -> None:
                self.quiet = True
                _to_devnull(self.file)

        _console = _Console(stderr=True, highlight=False)
        _console.soft_wrap = not _console.is_terminal
        if _console.width < 1:  # COLUMNS=0, which rich takes as it stands: nothing would fit
            _console.width = 80
    return _console


def _to_devnull(stream) -> None:
    """Point the file descriptor of `stream` at /dev/null, so later writes to it succeed."""
    with contextlib.suppress(OSError, ValueError, AttributeError):
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, stream.fileno())
        os.close(devnull)


def _one_line(message: str) -> str:
    from rich.markup import escape

    return escape(" ".join(str(message).split()))  # one line, and brackets are text, not markup


def error_line(message: str) -> None:
    stderr_console().print(f"[bold red]error:[/] {_one_line(message)}", soft_wrap=True)


def interrupted_line(message: str = "") -> None:
    """What a command stopped by Ctrl-C or SIGTERM says: the user asked for it, so no `error:`."""
    text = f" {_one_line(message)}" if message else ""
    stderr_console().print(
        f"[bold yellow]interrupted:[/]{text}" if text else "[bold yellow]interrupted[/]",
        soft_wrap=True,
    )


def warn(message: str) -> None:
    stderr_console().print(f"[yellow]warning:[/] {_one_line(message)}", soft_wrap=True)


class LineWarnings:
    """Warnings about single lines: the first `SHOWN` of each kind named one by one, then one
    count at the end, so that a file whose every line hits a limit does not flood stderr."""

    SHOWN = 5

    def __init__(self) -> None:
        self.counts: dict[str, int] = {}  # per summary: the lines of its kind so far

    def line(self, message: str, summary: str) -> None:
        """Warn `message`, or count it under `summary` once `SHOWN` such lines were named."""
        count = self.counts[summary] = self.counts.get(summary, 0) + 1
        if count <= self.SHOWN:
            warn(message)

    def finish(self) -> None:
        for summary, count in self.counts.items():
            if count > self.SHOWN:
                more = count - self.SHOWN
                warn(f"{more:,} more line{'s' * (more != 1)} {summary}")


def _sigterm_as_ctrl_c():
    """SIGTERM (`kill`, a service manager) stops a command as Ctrl-C does: cleaned up, exit
    130. Only where it would end the process at once (its default); train and serve set
    their own. Returns the handler to restore, or None if none was set."""
    if threading.current_thread() is not threading.main_thread():
        return None
    if signal.getsignal(signal.SIGTERM) is not signal.SIG_DFL:
        return None

    def as_ctrl_c(_signum, _frame):
        raise KeyboardInterrupt

    return signal.signal(signal.SIGTERM, as_ctrl_c)


def command_boundary(func: F) -> F:
    """Turn NmtError, Ctrl-C and a closed stdout into a clean exit."""

    @functools.wraps(func)
    def wrapper(*args: Any, **kwargs: Any) -> Any:
        from nmt_cli.errors import Interrupted, NmtError

        # every rank of a training stops alike; the main one (RANK 0) says so for all
        said_by_another = os.environ.get("RANK", "0") != "0"
        on_term = _sigterm_as_ctrl_c()
        try:
            return func(*args, **kwargs)
        except Interrupted as exc:
            if not said_by_another:
                interrupted_line(str(exc))
            raise typer.Exit(exc.exit_code) from None
        except NmtError as exc:
            error_line(str(exc))
            raise typer.Exit(exc.exit_code) from None
        except KeyboardInterrupt:
            if not said_by_another:
                interrupted_line()
            raise typer.Exit(130) from None
        except BrokenPipeError:
            # The reader went away (`nmt translate | head`): stop quietly, like other filters.
            _stdout_to_devnull()
            raise typer.Exit(141) from None
        except OSError as exc:
            if exc.errno not in _FULL:  # not the output's medium: a bug, with its traceback
                raise
            # Library code turns its own files' write errors into NmtErrors: this one is stdout
            # (`> /dev/full`, a full disk under a redirect).
            error_line(
                f"cannot write the output: {exc.strerror}; free some space or send it elsewhere"
            )
            _stdout_to_devnull()  # else Python's last flush at exit fails again, with a traceback
            raise typer.Exit(1) from None
        finally:
            if on_term is not None:
                signal.signal(signal.SIGTERM, on_term)
            lines = sys.modules.get("nmt_cli.lines")  # (imported only by commands that read)
            if lines is not None:
                lines.release_pipes()  # the named pipes the command read are its own

    return wrapper  # type: ignore[return-value]


_FULL = (errno.ENOSPC, errno.EDQUOT, errno.EFBIG, errno.EIO)


_skip_teardown = False


def skip_teardown_on_success() -> None:
    """End this process at once when the command succeeds, without Python's teardown.

    With torch imported and a model loaded, the interpreter's cleanup at exit (freeing every
    module, tensor and torch's own state) took 0.15-0.2 s on 2 cores: a sixth of translating
    one sentence from the shell. For commands that leave nothing to clean up: no child
    process or thread, every file they wrote closed, no exit hook of their own (translate,
    eval, align). Only a success ends this way; stdout and stderr are flushed first."""
    global _skip_teardown
    _skip_teardown = True


def keep_teardown() -> None:
    global _skip_teardown
    _skip_teardown = False


def end_without_teardown(code: int | None) -> None:
    """os._exit(0) after a command that asked for it (`skip_teardown_on_success`) succeeded;
    returns, for the usual exit, on anything else (or when the last flush fails)."""
    if not _skip_teardown or code not in (0, None):
        return
    try:
        for stream in (sys.stdout, sys.stderr):
            if stream is not None:
                stream.flush()
    except (OSError, ValueError):  # a closed pipe or a full disk: the usual exit reports it
        return
    os._exit(0)


def _stdout_to_devnull() -> None:
    _to_devnull(sys.stdout)
