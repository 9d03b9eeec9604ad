"""Writes that never leave a half-written file or directory behind.

A file is written to a temporary sibling, flushed to disk and renamed over the target, so a
kill at any moment leaves either the old content or the new. A directory is built under a
temporary sibling name and renamed into place only when complete.
"""

from __future__ import annotations

import contextlib
import errno
import os
import shutil
import socket
import tempfile
from collections.abc import Iterable, Iterator
from pathlib import Path

from nmt_cli.errors import InputError, NmtError
from nmt_cli.lock import pid_alive


def _umask() -> int:
    mask = os.umask(0)
    os.umask(mask)
    return mask


def write_error(path: Path, exc: OSError) -> NmtError:
    """The one-line error for a write that failed, with what to do about it."""
    if exc.errno in (errno.ENOSPC, errno.EDQUOT):
        fix = "free some disk space and run again"
    elif exc.errno in (errno.EACCES, errno.EPERM, errno.EROFS):
        fix = f"check that {path.parent} is writable"
    else:
        fix = "check the disk and run again"
    reason = exc.strerror or str(exc)
    return NmtError(f"cannot write {path}: {reason}; {fix} (the previous version, if any, is kept)")


def _fsync_dir(path: Path) -> None:
    with contextlib.suppress(OSError):
        fd = os.open(path, os.O_RDONLY)
        try:
            os.fsync(fd)
        finally:
            os.close(fd)


@contextlib.contextmanager
def atomic_open(path: str | os.PathLike, mode: str = "wb", encoding: str | None = None) -> Iterator:
    """Open a temporary sibling of `path` for writing; rename it over `path` on success.

    A symbolic link is followed: the file it points to is replaced and the link stays. A path
    that is not a regular file (/dev/null, /dev/stdout, a named pipe) is written through as it
    is: renaming over it would put a regular file in the place of the device or pipe."""
    path = Path(path)
    if path.is_symlink():
        path = Path(os.path.realpath(path))
    if path.exists() and not path.is_file() and not path.is_dir():
        try:
            with open(path, mode, encoding=encoding) as handle:
                yield handle
        except OSError as exc:
            raise write_error(path, exc) from exc
        return
    try:
        fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", suffix=".tmp", dir=path.parent)
    except OSError as exc:
        raise write_error(path, exc) from exc
    try:
        os.chmod(tmp, 0o666 & ~_umask())  # mkstemp makes 0600; give the file the usual permissions
        with os.fdopen(fd, mode, encoding=encoding) as handle:
            yield handle
            handle.flush()
            os.fsync(handle.fileno())
        os.replace(tmp, path)
        _fsync_dir(path.parent)
    except BaseException as exc:
        with contextlib.suppress(OSError):
            os.unlink(tmp)
        if isinstance(exc, OSError):
            # A full disk or a lost permission is the user's to fix: one clean line, no traceback.
            raise write_error(path, exc) from exc
        raise


def write_text(path: str | os.PathLike, text: str) -> None:
    with atomic_open(path, "w", encoding="utf-8") as handle:
        handle.write(text)


def write_bytes(path: str | os.PathLike, data: bytes) -> None:
    with atomic_open(path, "wb") as handle:
        handle.write(data)


def _refuse_inner_folder(final: Path) -> None:
    """nmt writes only files into the directories it stages: a folder inside is someone
    else's (a model trained into its data directory, say), which replacing would delete."""
    inner = next((p for p in sorted(final.iterdir()) if p.is_dir() and not p.is_symlink()), None)
    if inner is not None:
        raise InputError(
            f"{final} holds a folder, {inner.name}, so --force does not replace it (it "
            "replaces only a directory of files this command wrote, no folder; a trained "
            f"model keeps checkpoints/): move {inner} out first, or choose another output "
            "directory"
        )


@contextlib.contextmanager
def staged_directory(
    final: str | os.PathLike,
    force: bool = False,
    inputs: Iterable[str | os.PathLike] = (),
    marker: str | None = None,
) -> Iterator[Path]:
    """Yield an empty temporary directory that becomes `final` only if the block succeeds.

    An existing `final` that is not empty is refused unless `force`, in which case it is
    replaced only after the new one is complete, and only if it holds `marker` (the file
    that shows nmt wrote it) and no folder (nmt writes none there): another directory, or one
    a model was trained into, is never deleted. A `final` that is or holds
    one of the `inputs`, or the current directory, is refused, forced or not. A `final` that
    is a symbolic link is replaced itself: the directory it pointed to stays as it was (a
    link such as `latest` to versioned runs loses no run). The directory and the files in it
    get the user's usual permissions (temporary ones start private). The temporary
    directory's name holds this host and process id, so a later run removes one left by a
    process that was killed (SIGKILL, a power cut) instead of leaving its files on the disk
    for good.
    """
    final = Path(final)
    if final.exists() and not final.is_dir():
        raise InputError(f"{final} exists and is not a directory: remove it or choose another path")
    check_not_above(final, inputs)
    if final.exists() and final.resolve() in (Path.cwd(), *Path.cwd().parents):
        raise InputError(
            f"{final} is the current directory (or holds it), which cannot be replaced: "
            "give the new directory a name of its own"
        )
    occupied = final.exists() and any(final.iterdir())  # an empty one is taken as made
    if occupied and not force:
        raise InputError(f"{final} already exists: choose another output directory or add --force")
    if occupied and marker and not (final / marker).exists():
        raise InputError(
            f"{final} is not a directory nmt wrote (it has no {marker}), so --force does not "
            "replace it: choose another output directory"
        )
    if occupied and not final.is_symlink():  # (a link is replaced, the folder it names kept)
        _refuse_inner_folder(final)
    parent = final.parent
    if (blocking := _file_above(final)) is not None:
        raise InputError(
            f"cannot create {final}: {blocking} is a file, not a directory; "
            "choose another output path"
        )
    created: list[Path] = []  # the parent directories this call made, deepest first
    try:
        _make_parents(parent, created)
        _remove_stale_stages(final)
        prefix = f".{final.name}.{_HOST}.{os.getpid()}."
        stage = Path(tempfile.mkdtemp(prefix=prefix, suffix=".partial", dir=parent))
    except OSError as exc:
        _remove_empty(created)
        if exc.errno in _NOT_OURS:  # a place the user may not write: another path will do
            raise InputError(
                f"cannot create {final}: {exc.strerror}; choose another output directory"
            ) from None
        full = exc.errno in (errno.ENOSPC, errno.EDQUOT)
        raise NmtError(
            f"cannot create {final}: {exc.strerror}; "
            f"{'free some space or ' if full else ''}choose another output directory"
        ) from exc
    try:
        try:
            yield stage
        except OSError as exc:  # a full disk while the files are written: name what they are for
            if exc.errno not in (errno.ENOSPC, errno.EDQUOT, errno.EFBIG):
                raise
            raise write_error(final, exc) from exc
        try:
            mask = _umask()
            stage.chmod(0o777 & ~mask)
            for file in stage.iterdir():
                file.chmod(0o666 & ~mask)
            if occupied or final.is_symlink():
                _move_into_place(stage, final)
            else:
                _rename_onto_nothing(stage, final)
        except OSError as exc:
            raise write_error(final, exc) from exc
    except BaseException:
        shutil.rmtree(stage, ignore_errors=True)
        _remove_empty(created)  # the parent directories made for `final`, if still empty
        raise


# Errors of a place or name the user may not write (bad input, exit 2), unlike a full disk;
# ENOENT in a folder that exists: one that takes no new files, such as /proc.
_NOT_OURS = {errno.EACCES, errno.EPERM, errno.EROFS, errno.ENAMETOOLONG, errno.ENOENT}


def _file_above(path: Path) -> Path | None:
    """The first of `path`'s parents that exists and is not a directory, if any."""
    return next((p for p in path.parents if p.exists() and not p.is_dir()), None)


def check_output_file(
    path: str | os.PathLike, option: str, inputs: Iterable[str | os.PathLike | None] = ()
) -> None:
    """Refuse, before any work, a file path (`option`'s) that cannot be written: a folder,
    in a folder that does not exist or is not writable, or one of `inputs` (None ones skipped)."""
    path = Path(path)
    if path.is_dir():
        raise InputError(f"cannot write {path} ({option}): it is a folder; give a file path")
    if not path.parent.is_dir():
        if (blocking := _file_above(path)) is not None:
            raise InputError(
                f"cannot write {path} ({option}): {blocking} is a file, not a directory; "
                "choose another path"
            )
        raise InputError(
            f"cannot write {path} ({option}): the folder {path.parent} does not exist; create "
            "it or choose another path"
        )
    if not os.access(path.parent, os.W_OK | os.X_OK) and not os.access(path, os.W_OK):
        raise InputError(
            f"cannot write {path} ({option}): the folder {path.parent} is not writable; "
            "choose another path"
        )
    if not path.exists() or path.is_file():  # (a device or a pipe is written through)
        try:  # the folder takes a new file (the write's temporary file), as /proc does not
            tempfile.NamedTemporaryFile(dir=path.parent, prefix=f".{path.name}.").close()
        except OSError as exc:
            raise InputError(
                f"cannot write {path} ({option}): the folder {path.parent} takes no new "
                f"files ({exc.strerror}); choose another path"
            ) from None
    check_not_above(path, [given for given in inputs if given is not None])


def check_not_above(output: str | os.PathLike, inputs: Iterable[str | os.PathLike]) -> None:
    """Refuse an output path that is one of `inputs` or a directory holding one (writing or
    replacing it would destroy what is being read)."""
    target = Path(output).resolve()
    for given in inputs:
        path = Path(given).resolve()
        if path == target:
            raise InputError(
                f"{output} is also an input here: writing it would destroy it; choose another "
                "output path"
            )
        if target in path.parents:
            raise InputError(
                f"{output} holds {given}, an input here: replacing it would delete it; choose "
                "another output directory"
            )


_HOST = socket.gethostname().replace("/", "_") or "host"


def _remove_stale_stages(final: Path) -> None:
    """Remove the temporary directories for `final` that a dead process of this host left."""
    head, tail = f".{final.name}.", ".partial"
    for stage in final.parent.glob(f"{_glob_escape(head)}*{tail}"):
        host, pid, _ = (stage.name[len(head) : -len(tail)].rsplit(".", 2) + ["", ""])[:3]
        if host == _HOST and pid.isdigit() and not pid_alive(int(pid)) and stage.is_dir():
            shutil.rmtree(stage, ignore_errors=True)


def _glob_escape(text: str) -> str:
    """`text` with glob's special characters matched literally."""
    return "".join(f"[{c}]" if c in "*?[" else c for c in text)


def _make_parents(parent: Path, created: list[Path]) -> None:
    """Make `parent` and the directories above it that are missing, recording in `created`
    (deepest first) only those this call made: one that exists, or that another process
    makes meanwhile, is not ours to remove."""
    for directory in reversed((parent, *parent.parents)):
        try:
            directory.mkdir()
        except FileExistsError:
            continue
        except OSError:
            if directory.is_dir():  # there, though not writable (a read-only mount): fine
                continue
            raise
        created.insert(0, directory)


def _remove_empty(directories: list[Path]) -> None:
    """Remove `directories` (deepest first) while they are empty."""
    for directory in directories:
        try:
            directory.rmdir()
        except FileNotFoundError:
            continue
        except OSError:  # not empty: leave it and everything above
            return


def _rename_onto_nothing(stage: Path, final: Path) -> None:
    """Rename the finished `stage` to `final`, which was missing or empty when this run
    began: a rename replaces no directory that holds files, so one that another run wrote
    meanwhile (both started without --force) is kept, and this run is refused."""
    try:
        os.rename(stage, final)
    except OSError as exc:
        if exc.errno not in (errno.ENOTEMPTY, errno.EEXIST):
            raise
        raise InputError(
            f"{final} was written by another process while this one ran, so this one's "
            "output is dropped: choose another output directory or add --force"
        ) from None
    _fsync_dir(final.parent)


def _move_into_place(stage: Path, final: Path) -> None:
    """Rename the finished `stage` to `final`, replacing an old `final` only now."""
    parent, old = final.parent, final.parent / f".{final.name}.old"
    _remove(old)  # a leftover of a replacement killed midway
    if final.exists() or final.is_symlink():
        os.replace(final, old)
    os.replace(stage, final)
    _remove(old)
    _fsync_dir(parent)


def _remove(path: Path) -> None:
    """Remove a directory tree, or a symbolic link (never what it points to), if there."""
    if path.is_symlink():
        path.unlink()
    else:
        shutil.rmtree(path, ignore_errors=True)
