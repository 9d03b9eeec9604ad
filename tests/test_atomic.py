"""Atomic writes replace a regular file, never a device, a named pipe or a symbolic link
(a pipe stands in for devices here: a failure would not replace /dev/null on the machine)."""

from __future__ import annotations

import os
import stat
import threading

import pytest

from nmt_cli.atomic import staged_directory, write_text
from nmt_cli.errors import InputError


def test_a_regular_file_is_replaced_whole(tmp_path):
    target = tmp_path / "out.txt"
    target.write_text("old\n")
    write_text(target, "new\n")
    assert target.read_text() == "new\n"
    assert [p.name for p in tmp_path.iterdir()] == ["out.txt"]  # no temporary file left


def test_a_symbolic_link_keeps_pointing_at_the_file_it_named(tmp_path):
    real = tmp_path / "runs" / "hyp.txt"
    real.parent.mkdir()
    real.write_text("old\n")
    link = tmp_path / "latest.txt"
    link.symlink_to(real)
    write_text(link, "new\n")
    assert link.is_symlink() and os.readlink(link) == str(real)
    assert real.read_text() == "new\n"


def test_a_dangling_link_gets_its_file_written(tmp_path):
    link = tmp_path / "latest.txt"
    link.symlink_to(tmp_path / "made.txt")
    write_text(link, "new\n")
    assert link.is_symlink() and (tmp_path / "made.txt").read_text() == "new\n"


@pytest.mark.skipif(not hasattr(os, "mkfifo"), reason="no named pipes here")
def test_a_named_pipe_is_written_through_and_stays_a_pipe(tmp_path):
    pipe = tmp_path / "pipe"
    os.mkfifo(pipe)
    received = []
    reader = threading.Thread(target=lambda: received.append(pipe.read_text()), daemon=True)
    reader.start()
    write_text(pipe, "through the pipe\n")
    reader.join(10)
    assert received == ["through the pipe\n"]
    assert stat.S_ISFIFO(os.stat(pipe).st_mode)


def test_a_full_disk_while_a_directory_is_written_names_the_directory(tmp_path):
    import errno

    from nmt_cli.atomic import staged_directory
    from nmt_cli.errors import NmtError

    final = tmp_path / "data"
    with pytest.raises(NmtError, match=rf"cannot write {final}: No space left on device"):
        with staged_directory(final) as stage:
            (stage / "train.src").write_text("a line\n")
            raise OSError(errno.ENOSPC, "No space left on device")
    assert not final.exists() and list(tmp_path.iterdir()) == []  # nothing half-written left


def test_a_directory_another_run_wrote_meanwhile_is_kept_and_this_output_dropped(tmp_path):
    """Two `nmt prepare -o same` at once, neither forced: both found no `same`; the one that
    finishes second is refused instead of replacing the first one's directory in silence."""
    final = tmp_path / "same"
    with pytest.raises(InputError, match="was written by another process while this one ran"):
        with staged_directory(final) as stage:
            (stage / "mine.txt").write_text("mine", encoding="utf-8")
            final.mkdir()  # the other run, done first
            (final / "theirs.txt").write_text("theirs", encoding="utf-8")
    assert [p.name for p in final.iterdir()] == ["theirs.txt"]
    assert [p.name for p in tmp_path.iterdir()] == ["same"]  # nothing staged left
    with staged_directory(final, force=True) as stage:  # forced: replaced, as asked
        (stage / "mine.txt").write_text("mine", encoding="utf-8")
    assert [p.name for p in final.iterdir()] == ["mine.txt"]
