"""Corpus reading: plain, gzip and TSV files, and every way a corpus file can be unusable."""

from __future__ import annotations

import gzip
import subprocess

import pytest

from nmt_cli.data.corpus import ParallelSource, count_lines, read_lines, read_pairs
from nmt_cli.errors import ConfigError, InputError


def _write(path, data: bytes):
    path.write_bytes(data)
    return path


def test_plain_file_lines_keep_content_and_drop_only_the_line_ending(tmp_path):
    path = _write(tmp_path / "a.txt", b"eins\nzwei  drei\r\n\nvier")
    assert list(read_lines(path)) == ["eins", "zwei  drei", "", "vier"]
    assert count_lines(path) == 4


def test_gzip_is_detected_by_content(tmp_path):
    text = "Grüße\n你好\n"
    zipped = _write(tmp_path / "a.gz", gzip.compress(text.encode()))
    disguised = _write(tmp_path / "a.txt", gzip.compress(text.encode()))
    plain_named_gz = _write(tmp_path / "b.gz", text.encode())
    for path in (zipped, disguised, plain_named_gz):
        assert list(read_lines(path)) == ["Grüße", "你好"]
        assert count_lines(path) == 2


def test_count_lines_of_an_empty_file_and_a_final_line_without_newline(tmp_path):
    assert count_lines(_write(tmp_path / "empty", b"")) == 0
    assert count_lines(_write(tmp_path / "one", b"x")) == 1
    assert count_lines(_write(tmp_path / "two", b"x\n\n")) == 2


def test_a_side_shorter_for_lines_ended_by_cr_alone_says_so(tmp_path):
    """A file whose lines end in CRLF, LF and, in places, CR alone (pasted together on several
    systems) has fewer lines than its partner; the mismatch names the first CR inside a line
    and a conversion that keeps CRLF ends whole."""
    src = _write(tmp_path / "train.de", b"a\r\nb\rc\r\nd\n")  # 3 lines; 4 with the lone CR
    tgt = _write(tmp_path / "train.en", gzip.compress(b"A\nB\nC\nD\n"))
    with pytest.raises(InputError) as error:
        list(read_pairs(ParallelSource(src=src, tgt=tgt)))
    message = str(error.value)
    assert f"{src} line 2 holds a carriage return (\\r) inside it" in message
    assert f"`sed 's/\\r$//; s/\\r/\\n/g' {src} > fixed.txt`" in message
    converted = subprocess.run(
        ["sed", r"s/\r$//; s/\r/\n/g", str(src)], capture_output=True, check=True
    ).stdout
    assert converted == b"a\nb\nc\nd\n"


def test_aligned_files_give_pairs(tmp_path):
    src = _write(tmp_path / "s.de", b"a\nb\n")
    tgt = _write(tmp_path / "t.en", gzip.compress(b"A\nB\n"))
    assert list(read_pairs(ParallelSource(src=src, tgt=tgt))) == [("a", "A"), ("b", "B")]


@pytest.mark.parametrize("src_lines, tgt_lines", [(3, 2), (2, 3)])
def test_mismatched_line_counts_name_both_files_and_counts(tmp_path, src_lines, tgt_lines):
    src = _write(tmp_path / "train.de", b"x\n" * src_lines)
    tgt = _write(tmp_path / "train.en", b"y\n" * tgt_lines)
    with pytest.raises(InputError) as error:
        list(read_pairs(ParallelSource(src=src, tgt=tgt)))
    message = str(error.value)
    assert f"{src} has {src_lines:,} lines but {tgt} has {tgt_lines:,}" in message


def test_tsv_gives_pairs_and_blank_lines_as_empty_pairs(tmp_path):
    path = _write(tmp_path / "c.tsv", b"a\tA\n\nb\tB\n")
    assert list(read_pairs(ParallelSource(tsv=path))) == [("a", "A"), ("", ""), ("b", "B")]


@pytest.mark.parametrize(
    "line, columns, fix",
    [
        (
            b"only one",
            "1 tab-separated column,",
            "`awk -F'\\t' 'NF == 2 || NF == 0' ",
        ),  # drops the line
        (b"a\tb\tc", "3 tab-separated columns,", "`cut -f1,2`"),  # keeps two columns
    ],
)
def test_tsv_with_wrong_column_count_names_the_line(tmp_path, line, columns, fix):
    path = _write(tmp_path / "c.tsv", b"a\tA\n" + line + b"\n")
    with pytest.raises(InputError, match=f"line 2 has {columns} expected 2") as error:
        list(read_pairs(ParallelSource(tsv=path)))
    assert fix in str(error.value)


def test_invalid_utf8_names_file_and_line(tmp_path):
    path = _write(tmp_path / "latin1.txt", "ok\nnoch ok\nGrüße\n".encode("latin-1"))
    with pytest.raises(InputError, match=r"latin1.txt line 3 is not valid UTF-8"):
        list(read_lines(path))


def test_invalid_utf8_in_gzip_names_the_line(tmp_path):
    path = _write(tmp_path / "x.gz", gzip.compress(b"ok\n\xff\n"))
    with pytest.raises(InputError, match="line 2 is not valid UTF-8"):
        list(read_lines(path))


def test_nul_bytes_name_file_and_line(tmp_path):
    path = _write(tmp_path / "nul.txt", b"ok\nbad\x00line\n")
    with pytest.raises(InputError, match="nul.txt line 2 contains NUL bytes"):
        list(read_lines(path))


def test_utf16_file_gets_a_conversion_hint(tmp_path):
    path = _write(tmp_path / "u16.txt", "hallo\n".encode("utf-16"))
    with pytest.raises(InputError, match="UTF-16"):
        list(read_lines(path))


def test_missing_file_and_directory(tmp_path):
    with pytest.raises(InputError, match="does not exist"):
        list(read_lines(tmp_path / "nope.txt"))
    with pytest.raises(InputError, match="is a directory, not a file"):
        list(read_lines(tmp_path))


def test_truncated_gzip_is_an_input_error(tmp_path):
    data = gzip.compress(b"line\n" * 10_000)
    path = _write(tmp_path / "cut.gz", data[: len(data) // 2])
    with pytest.raises(InputError, match="corrupt or truncated gzip"):
        list(read_lines(path))
    with pytest.raises(InputError, match="corrupt or truncated gzip"):
        count_lines(path)


def test_a_source_needs_both_sides_or_a_tsv(tmp_path):
    with pytest.raises(ConfigError):
        ParallelSource(src=tmp_path / "a")
    with pytest.raises(ConfigError):
        ParallelSource(src=tmp_path / "a", tgt=tmp_path / "b", tsv=tmp_path / "c")
    with pytest.raises(ConfigError):
        ParallelSource()


def test_a_gzip_broken_before_its_first_line_says_so(tmp_path):
    path = _write(tmp_path / "bad.gz", b"\x1f\x8b\x08\x00garbage-garbage")
    with pytest.raises(
        InputError, match=r"corrupt or truncated gzip file \(before its first line\)"
    ):
        list(read_lines(path))
