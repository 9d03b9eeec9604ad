"""A lock file that keeps two training runs out of the same model directory."""

from __future__ import annotations

import contextlib
import os
from collections.abc import Iterator
from pathlib import Path

from nmt_cli.errors import NmtError

LOCK_FILE = ".lock"


def pid_alive(pid: int) -> bool:
    """Whether a process with this id runs on this host (one we may not signal counts)."""
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


def check_not_in_use(directory: Path) -> None:
    """NmtError when another live process holds `directory/.lock`."""
    try:
        pid = int((directory / LOCK_FILE).read_text().strip() or 0)
    except (OSError, ValueError):  # no lock, or one cut short: nobody holds it
        return
    if pid and pid_alive(pid) and pid != os.getpid():
        raise NmtError(
            f"{directory} is in use by another nmt train (pid {pid}); wait for it to "
            "finish, stop it, or choose another output directory"
        )


@contextlib.contextmanager
def directory_lock(directory: Path) -> Iterator[None]:
    """Hold `directory/.lock` (with our pid) for the block; a lock left by a dead process is taken over."""
    path = directory / LOCK_FILE
    while True:
        try:
            fd = os.open(path, os.O_CREAT | os.O_EXCL | os.O_WRONLY, 0o644)
            break
        except FileExistsError:
            check_not_in_use(directory)
            with contextlib.suppress(FileNotFoundError):
                path.unlink()  # stale: its owner is gone
    with os.fdopen(fd, "w") as handle:
        handle.write(f"{os.getpid()}\n")
    try:
        yield
    finally:
        with contextlib.suppress(FileNotFoundError):
            path.unlink()
