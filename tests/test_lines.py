"""The one text reader (nmt_cli.lines): its rule for gzip, encodings, NUL and CR, everywhere."""

from __future__ import annotations

import gzip
import io

import pytest
from rich.console import Console

from nmt_cli.alignment import read_gold
from nmt_cli.errors import InputError
from nmt_cli.evaluate import read_lines as read_scored_lines
from nmt_cli.lines import count_lines, iter_lines, read_lines
from nmt_cli.progress import count
from nmt_cli.render import progress as render_progress


def _file(tmp_path, name: str, data: bytes):
    path = tmp_path / name
    path.write_bytes(data)
    return path


def test_gzip_is_told_by_its_magic_bytes_not_its_name(tmp_path):
    text = b"ein\nzwei\n"
    named_gz_but_plain = _file(tmp_path, "plain.gz", text)
    gzip_named_txt = _file(tmp_path, "packed.txt", gzip.compress(text))
    for path in (named_gz_but_plain, gzip_named_txt):
        assert list(read_lines(path)) == ["ein", "zwei"]
        assert read_scored_lines(path) == ["ein", "zwei"]
        assert count_lines(path) == 2


def test_line_ends_and_breaks_inside_a_line(tmp_path):
    data = b"\xef\xbb\xbfa\r\nb\rc\nd\xe2\x80\xa8e\nlast\r"
    path = _file(tmp_path, "x", data)
    assert list(read_lines(path)) == ["a", "b c", "d e", "last"]
    assert count_lines(path) == 4  # like wc -l, plus the last line without a newline


def test_nul_is_refused_in_a_corpus_and_a_space_elsewhere(tmp_path):
    path = _file(tmp_path, "nul", b"ok\nst\x00one\n")
    with pytest.raises(InputError, match=r"nul line 2 contains NUL bytes"):
        list(read_lines(path))
    assert list(read_lines(path, nul="space")) == ["ok", "st one"]
    assert read_scored_lines(path) == ["ok", "st one"]
    assert list(iter_lines(io.BytesIO(b"a\x00b\n"), "<stdin>")) == ["a b"]


def test_utf16_is_named_and_invalid_utf8_names_line_and_column(tmp_path):
    utf16 = _file(tmp_path, "u16", "hallo\n".encode("utf-16"))
    with pytest.raises(InputError, match="looks like UTF-16"):
        list(read_lines(utf16))
    with pytest.raises(InputError, match="not valid UTF-8.*looks like UTF-16: convert it with"):
        list(read_lines(utf16, nul="space"))  # as nmt translate reads: NUL is no error there
    latin = _file(tmp_path, "latin", "ok\nGr\xfc\xdfe\n".encode("latin-1"))
    with pytest.raises(
        InputError, match=r"latin line 2 is not valid UTF-8 \(byte 0xfc at column 3\)"
    ):
        list(read_lines(latin))
    with pytest.raises(InputError, match="iconv -f LATIN1 -t UTF-8"):
        list(read_lines(latin))
    windows = _file(tmp_path, "cp1252", "the caf\xe9 is \u201cgood\u201d\n".encode("cp1252"))
    with pytest.raises(InputError, match="iconv -f CP1252 -t UTF-8"):  # not LATIN1: its curly
        list(read_lines(windows))  # quotes would become invisible control characters
    replaced = iter_lines(io.BytesIO(b"Gr\xfc\n"), "<stdin>", on_invalid="replace")
    assert list(replaced) == ["Gr\ufffd"]


def test_gold_alignments_are_read_by_the_same_rule(tmp_path):
    path = _file(tmp_path, "gold.gz", gzip.compress(b"0-0 1-1\r\n0-0\r\n"))
    gold = read_gold(path)
    assert [sorted(g.sure) for g in gold] == [[(0, 0), (1, 1)], [(0, 0)]]


def test_plain_progress_prints_long_steps_only(monkeypatch):
    clock = iter([0.0, 1.0, 2.0, 100.0, 100.0, 131.0, 140.0])
    monkeypatch.setattr(render_progress.time, "monotonic", lambda: next(clock))
    out = io.StringIO()
    console = Console(file=out, force_terminal=False)
    with render_progress.count_display(console, "prepare") as show:
        show(count("training SentencePiece (src+tgt)", 0, None))  # t=0
        show(count("training SentencePiece (src+tgt)", 1, 1))  # t=1: short, no line
        show(count("reading a + b", 0, None))  # t=2
        show(count("reading a + b", 500_000, None))  # t=100: over 30 s since start
        show(count("reading a + b", 600_000, None))  # t=100: printed just now, quiet
        show(count("reading a + b", 900_000, None))  # t=131
        show(count("reading a + b", 1_000_000, 1_000_000))  # t=140: done
    lines = out.getvalue().splitlines()
    assert lines[0].startswith(
        "prepare: reading a + b: 500,000 pairs, 5,102 pairs/s, 98.0 s so far"
    )
    assert len(lines) == 3 and lines[-1].endswith("138.0 s")
    assert "SentencePiece" not in out.getvalue()


def _lines_or_error(lines):
    """Every line until the end or the first error, and that error's message (or None)."""
    got = []
    try:
        for line in lines:
            got.append(line)
    except InputError as exc:
        return got, str(exc)
    return got, None


@pytest.mark.parametrize("chunk", [1, 2, 7, 64, 1 << 20])
def test_files_read_by_blocks_give_what_reading_line_by_line_gives(tmp_path, monkeypatch, chunk):
    import random

    from nmt_cli import lines as lines_module

    monkeypatch.setattr(lines_module, "_CHUNK", chunk)
    pieces = [b"ein", b" Haus", b"\n", b"\n", b"\r\n", b"\r", b"\0", b"\xef\xbb\xbf",
              "ü".encode(), "中文".encode(), "\u2028".encode(), b"\xff", b"\xe4\xb8"]  # fmt: skip
    rng = random.Random(chunk)
    for case in range(300):
        weights = [30, 10, 25, 5, 8, 2, 1, 1, 5, 5, 1, 1, 1] if case % 3 else None
        data = b"".join(rng.choices(pieces, weights=weights, k=rng.randint(0, 40)))
        path = _file(tmp_path, "case", data)
        for nul in ("error", "space"):
            for on_invalid in ("error", "replace"):
                by_blocks = _lines_or_error(read_lines(path, nul=nul, on_invalid=on_invalid))
                by_lines = _lines_or_error(
                    iter_lines(io.BytesIO(data), str(path), on_invalid=on_invalid, nul=nul)
                )
                assert by_blocks == by_lines, (data, nul, on_invalid)


@pytest.mark.parametrize("chunk", [3, 1 << 20])
def test_a_damaged_gzip_gives_the_lines_before_the_damage_as_line_by_line(
    tmp_path, monkeypatch, chunk
):
    import random

    from nmt_cli import lines as lines_module

    monkeypatch.setattr(lines_module, "_CHUNK", chunk)
    rng = random.Random(5)
    text = "".join(f"Zeile {i} {'ü' * rng.randint(0, 30)}\n" for i in range(60_000)).encode()
    cases = [b"a\n", b"a\n\xff\n", text]
    for data in cases:
        packed = gzip.compress(data, mtime=0)
        flipped = bytearray(packed)
        flipped[len(packed) // 2] ^= 0xFF
        for damaged in (packed[:-4], packed[: len(packed) // 2], bytes(flipped)):
            path = _file(tmp_path, "damaged.gz", damaged)
            by_blocks = _lines_or_error(read_lines(path))
            with gzip.open(io.BytesIO(damaged)) as stream:
                by_lines = _lines_or_error(iter_lines(stream, str(path), nul="error"))
            assert by_blocks == by_lines
            assert by_blocks[1] is not None  # the damage is reported


def test_arrivals_read_a_pipe_line_by_line_and_tell_whether_the_next_has_come():
    """`Arrivals` (stdin or a named pipe): the same raw lines as a file gives, and `waiting`
    is True exactly when the next line (or the end) can be read without waiting."""
    import os

    from nmt_cli.lines import Arrivals

    read, write = os.pipe()
    try:
        lines = Arrivals(read)
        iterator = iter(lines)
        assert not lines.waiting()  # nothing written yet: reading would wait
        os.write(write, b"one\r\ntwo\n\nthr")
        assert lines.waiting()
        assert next(iterator) == b"one\r\n"
        assert lines.waiting()  # "two" is in the buffer already
        assert next(iterator) == b"two\n"
        assert next(iterator) == b"\n"
        assert not lines.waiting()  # only part of a line has come: its end would be waited for
        os.write(write, b"ee\nfour")
        assert next(iterator) == b"three\n"
        os.close(write)
        write = -1
        assert lines.waiting()  # the end can be read at once
        assert list(iterator) == [b"four"]  # a last line without a newline
        assert lines.waiting()
    finally:
        os.close(read)
        if write >= 0:
            os.close(write)


def test_arrivals_join_a_long_line_from_many_reads():
    """A line far longer than one read of a pipe (64 KiB) comes out whole, and so does the
    line after it (the buffer is compacted between reads)."""
    import os
    import threading

    from nmt_cli.lines import Arrivals

    long = b"x" * 3_000_000 + b"\n"
    text = b"short\n" + long + b"after\n" + long[:-1]

    read, write = os.pipe()

    def writer():
        with os.fdopen(write, "wb") as out:
            for start in range(0, len(text), 4096):
                out.write(text[start : start + 4096])
                out.flush()

    thread = threading.Thread(target=writer)
    thread.start()
    try:
        assert list(Arrivals(read)) == [b"short\n", long, b"after\n", long[:-1]]
    finally:
        thread.join()
        os.close(read)


def test_batches_end_where_no_next_line_has_come():
    from nmt_cli.lines import batches

    lines = [f"line {n}" for n in range(7)]
    assert list(batches(lines, 3)) == [lines[0:3], lines[3:6], lines[6:]]
    come = iter([True, False, True, True, True, True, True])  # after line 1, nothing has come
    assert list(batches(lines, 3, lambda: next(come))) == [lines[0:2], lines[2:5], lines[5:]]
    assert list(batches([], 3, lambda: False)) == []


def test_a_file_that_opens_but_cannot_be_read_is_an_input_error_naming_it():
    """/proc/self/mem opens and fails on its first read (EIO), as a failing disk does."""
    from pathlib import Path

    from nmt_cli.lines import open_input

    mem = Path("/proc/self/mem")
    if not mem.exists():
        pytest.skip("no /proc/self/mem here")
    with pytest.raises(InputError, match=r"cannot read /proc/self/mem \(before its first line\)"):
        open_input(mem)
