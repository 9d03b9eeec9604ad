"""Writes that never leave a half-written file or directory behind.

A file is written to a temporary sibling, flushed to disk and renamed over the target, so a
kill at any moment leaves either the old content or the new. A directory is built under a
temporary sibling name and renamed into place only when complete.
"""

from __future__ import annotations

import contextlib
import os
import shutil
import tempfile
from collections.abc import Iterator
from pathlib import Path

from nmt_cli.errors import InputError, NmtError


def _umask() -> int:
    mask = os.umask(0)
    os.umask(mask)
    return mask


def _fsync_dir(path: Path) -> None:
    with contextlib.suppress(OSError):
        fd = os.open(path, os.O_RDONLY)
        try:
            os.fsync(fd)
        finally:
            os.close(fd)


@contextlib.contextmanager
def atomic_open(path: str | os.PathLike, mode: str = "wb", encoding: str | None = None) -> Iterator:
    """Open a temporary sibling of `path` for writing; rename it over `path` on success."""
    path = Path(path)
    fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", suffix=".tmp", dir=path.parent)
    os.chmod(tmp, 0o666 & ~_umask())  # mkstemp makes 0600; give the file the usual permissions
    try:
        with os.fdopen(fd, mode, encoding=encoding) as handle:
            yield handle
            handle.flush()
            os.fsync(handle.fileno())
        os.replace(tmp, path)
        _fsync_dir(path.parent)
    except BaseException:
        with contextlib.suppress(OSError):
            os.unlink(tmp)
        raise


def write_text(path: str | os.PathLike, text: str) -> None:
    with atomic_open(path, "w", encoding="utf-8") as handle:
        handle.write(text)


def write_bytes(path: str | os.PathLike, data: bytes) -> None:
    with atomic_open(path, "wb") as handle:
        handle.write(data)


@contextlib.contextmanager
def staged_directory(final: str | os.PathLike, force: bool = False) -> Iterator[Path]:
    """Yield an empty temporary directory that becomes `final` only if the block succeeds.

    An existing `final` is refused unless `force`, in which case it is replaced only after
    the new one is complete.
    """
    final = Path(final)
    if final.exists() and not force:
        raise InputError(f"{final} already exists: choose another output directory or add --force")
    if final.exists() and not final.is_dir():
        raise InputError(f"{final} exists and is not a directory: remove it or choose another path")
    parent = final.parent
    try:
        parent.mkdir(parents=True, exist_ok=True)
        stage = Path(tempfile.mkdtemp(prefix=f".{final.name}.", suffix=".partial", dir=parent))
    except OSError as exc:
        raise NmtError(f"cannot create {final}: {exc.strerror}") from exc
    try:
        yield stage
        if final.exists():
            old = parent / f".{final.name}.old"
            shutil.rmtree(old, ignore_errors=True)
            os.replace(final, old)
            os.replace(stage, final)
            shutil.rmtree(old, ignore_errors=True)
        else:
            os.replace(stage, final)
        _fsync_dir(parent)
    except BaseException:
        shutil.rmtree(stage, ignore_errors=True)
        raise
