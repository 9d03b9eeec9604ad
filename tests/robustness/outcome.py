"""What a refused command must look like, asserted the same way everywhere in this folder.

A user mistake gives: the documented exit code, exactly one line on stderr that starts with
`error:`, names the thing (a path, an option) and says what to do, no Python traceback, and
no half-written file left behind.
"""

from __future__ import annotations

import re
from pathlib import Path

# Words that start the "how to fix it" part of our messages.
FIX = re.compile(
    r"\b(check|give|pass|use|add|remove|fix|free|choose|convert|re-create|re-encode|re-run|"
    r"re-download|re-compress|decompress|retrain|nmt train|nmt prepare|drop|lower|raise|wait|resume|"
    r"only load|copy|keep|continue|must be|must look like|one of|such as|valid keys|at line)\b"
)


def assert_no_traceback(result) -> None:
    """No Python traceback and no exception other than a clean exit."""
    assert result.exception is None or isinstance(result.exception, SystemExit), repr(
        result.exception
    )
    assert "Traceback" not in result.stdout and "Traceback" not in result.stderr


def error_message(stderr: str, one_line: bool = True, label: str = "error") -> str:
    """The `error:` line of stderr (the only line when `one_line`); `label="interrupted"` for
    a command stopped by Ctrl-C or SIGTERM, which is not an error."""
    lines = [line for line in stderr.strip().splitlines() if line.strip()]
    assert lines, "nothing on stderr"
    if one_line:
        assert len(lines) == 1, f"expected one line on stderr, got:\n{stderr}"
    assert lines[-1].startswith(f"{label}: "), stderr
    message = lines[-1]
    assert FIX.search(message), f"no fix in: {message}"
    return message


def assert_refused(result, code: int, *names: str, one_line: bool = True) -> str:
    """Exit `code`, one error line naming each of `names` and a fix, no traceback."""
    assert_no_traceback(result)
    assert result.exit_code == code, f"exit {result.exit_code}, stderr: {result.stderr}"
    message = error_message(result.stderr, one_line)
    for name in names:
        assert str(name) in message, f"{name!r} not named in: {message}"
    return message


def assert_no_leftovers(directory: Path) -> None:
    """No temporary file or staged directory from an atomic write remains under `directory`."""
    stray = [p for p in directory.rglob("*") if p.name.endswith((".tmp", ".partial", ".old"))]
    assert not stray, stray
