"""Corpora that are broken or merely unusual, through every command that reads text.

Broken (mismatched line counts, invalid UTF-8, NUL bytes in a corpus, a TSV line with the
wrong number of columns, a truncated gzip) is refused naming the file and the line. Unusual
(CRLF, a BOM, 100,000-character lines, lines of only whitespace, NUL in a stream) is handled,
and never costs `translate` a line or shifts one.
"""

from __future__ import annotations

import gzip
import json
from pathlib import Path

import pytest
from cli_runner import WORDS, invoke, write_toy_corpus
from outcome import assert_no_leftovers, assert_no_traceback, assert_refused

SRC = ["apple river", "stone cloud green", "quick small house", "light water"]
TGT = ["RIVER APPLE", "GREEN CLOUD STONE", "HOUSE SMALL QUICK", "WATER LIGHT"]


def _write(path: Path, lines: list[str], eol: str = "\n", prefix: bytes = b"") -> Path:
    path.write_bytes(prefix + "".join(line + eol for line in lines).encode("utf-8"))
    return path


def _ok(result):
    assert_no_traceback(result)
    assert result.exit_code == 0, result.stderr
    return result


@pytest.fixture
def pair(tmp_path) -> tuple[Path, Path]:
    return _write(tmp_path / "src", SRC), _write(tmp_path / "tgt", TGT)


# -- mismatched line counts -----------------------------------------------------------------


def test_prepare_refuses_mismatched_corpus(tmp_path, pair):
    short = _write(tmp_path / "short", TGT[:3])
    result = invoke("prepare", "--src", pair[0], "--tgt", short, "-o", tmp_path / "out")
    assert_refused(result, 2, f"{pair[0]} has 4 lines", f"{short} has 3")
    assert not (tmp_path / "out").exists()
    assert_no_leftovers(tmp_path)


def test_eval_refuses_mismatched_files(tmp_path, pair):
    short = _write(tmp_path / "short", TGT[:3])
    result = invoke("eval", "--hyp", short, "--ref", pair[1])
    assert_refused(result, 2, f"{short} has 3 lines", f"{pair[1]} has 4")
    assert result.stdout == ""


def test_eval_refuses_a_reference_of_empty_lines(tmp_path, pair):
    """A file of empty lines (a reference lost in a copy) scored 0.00 without a word; an empty
    hypothesis line stays a translation to score."""
    blank = _write(tmp_path / "blank", ["", " ", "", ""])
    result = invoke("eval", "--hyp", pair[1], "--ref", pair[1], "--ref", blank)
    assert_refused(result, 2, f"{blank}: every line of this reference is empty")
    assert result.stdout == ""
    scored = invoke("eval", "--hyp", blank, "--ref", pair[1], "--metrics", "bleu")
    assert scored.exit_code == 0, scored.output


def test_align_refuses_mismatched_files_before_printing_anything(tmp_path, pair, toy_model_dir):
    short = _write(tmp_path / "short", TGT[:3])
    result = invoke("align", "-m", toy_model_dir, "--src", pair[0], "--tgt", short)
    assert_refused(result, 2, f"{pair[0]} has 4 lines", f"{short} has 3")
    assert result.stdout == ""


# -- invalid UTF-8 and NUL bytes ----------------------------------------------------------------

BAD_LINE_3 = b"apple river\nstone cloud\nwater \xff\xfe tree\nsun\n"


def test_prepare_names_the_invalid_utf8_line(tmp_path, pair):
    bad = tmp_path / "bad"
    bad.write_bytes(BAD_LINE_3)
    result = invoke("prepare", "--src", bad, "--tgt", pair[1], "-o", tmp_path / "out")
    assert_refused(result, 2, f"{bad} line 3", "UTF-8")
    assert not (tmp_path / "out").exists()


def test_eval_names_the_invalid_utf8_line(tmp_path, pair):
    bad = tmp_path / "bad"
    bad.write_bytes(BAD_LINE_3)
    assert_refused(invoke("eval", "--hyp", bad, "--ref", pair[1]), 2, f"{bad} line 3", "UTF-8")
    from_stdin = invoke("eval", "--hyp", "-", "--ref", pair[1], input=BAD_LINE_3)
    assert_refused(from_stdin, 2, "<stdin> line 3", "iconv")
    assert "--on-invalid" not in from_stdin.stderr  # an option only translate has


def test_translate_offers_replacing_for_a_file_too(tmp_path, toy_model_dir):
    bad = tmp_path / "bad"
    bad.write_bytes(BAD_LINE_3)
    result = invoke("translate", "-m", toy_model_dir, "-i", bad)
    assert_refused(result, 2, f"{bad} line 3", "iconv", "--on-invalid replace")
    assert result.stdout == ""  # a file is read through before anything is translated


def test_align_names_the_invalid_utf8_line_before_printing(tmp_path, pair, toy_model_dir):
    bad = tmp_path / "bad"
    bad.write_bytes(BAD_LINE_3)
    result = invoke("align", "-m", toy_model_dir, "--src", bad, "--tgt", pair[1])
    assert_refused(result, 2, f"{bad} line 3", "UTF-8")
    assert result.stdout == ""


@pytest.mark.parametrize("mode", [[], ["--json"], ["--align"]])
def test_translate_writes_every_line_before_the_invalid_one(toy_model_dir, mode):
    result = invoke("translate", "-m", toy_model_dir, "--beam", "1", *mode, input=BAD_LINE_3)
    assert_refused(result, 2, "<stdin> line 3", "--on-invalid replace")
    assert result.stdout.count("\n") == 2  # lines 1 and 2, exactly: nothing lost, nothing extra


def test_align_stream_writes_every_pair_before_the_invalid_line(toy_model_dir):
    text = b"apple river ||| RIVER APPLE\nsun ||| SUN\nbird \xff ||| BIRD\nsun ||| SUN\n"
    result = invoke("align", "-m", toy_model_dir, input=text)
    assert_refused(result, 2, "<stdin> line 3")
    assert result.stdout.count("\n") == 2
    source_only = invoke("align", "-m", toy_model_dir, "--beam", "1", input=BAD_LINE_3)
    assert_refused(source_only, 2, "<stdin> line 3")
    assert source_only.stdout.count("\n") == 2


def test_translate_replaces_invalid_utf8_on_request(toy_model_dir):
    result = _ok(
        invoke("translate", "-m", toy_model_dir, "--on-invalid", "replace", input=BAD_LINE_3)
    )
    assert result.stdout.count("\n") == 4


NUL_LINE_2 = b"apple river\nstone\x00cloud\nsun\n"


@pytest.mark.parametrize("flag", ["--src", "--tgt"])
def test_prepare_refuses_nul_bytes(tmp_path, pair, flag):
    bad = tmp_path / "nul"
    bad.write_bytes(NUL_LINE_2 + b"tree\n")
    files = {"--src": pair[0], "--tgt": pair[1], flag: bad}
    result = invoke("prepare", *[x for f, p in files.items() for x in (f, p)], "-o", tmp_path / "o")
    assert_refused(result, 2, f"{bad} line 2", "NUL")
    assert not (tmp_path / "o").exists()


def test_align_refuses_nul_bytes_in_a_corpus(tmp_path, pair, toy_model_dir):
    bad = tmp_path / "nul"
    bad.write_bytes(NUL_LINE_2 + b"tree\n")
    result = invoke("align", "-m", toy_model_dir, "--src", bad, "--tgt", pair[1])
    assert_refused(result, 2, f"{bad} line 2", "NUL")
    assert result.stdout == ""


def test_translate_reads_nul_as_a_space_and_keeps_the_line(toy_model_dir):
    with_nul = _ok(invoke("translate", "-m", toy_model_dir, "--beam", "1", input=NUL_LINE_2))
    spaced = _ok(
        invoke(
            "translate", "-m", toy_model_dir, "--beam", "1", input=NUL_LINE_2.replace(b"\0", b" ")
        )
    )
    assert with_nul.stdout == spaced.stdout and with_nul.stdout.count("\n") == 3
    # and says so, naming the line (it was silent)
    assert "line 2 holds NUL bytes: translated with a space for each" in with_nul.stderr
    assert "NUL" not in spaced.stderr


def test_eval_scores_text_with_nul_bytes_line_for_line(tmp_path, pair):
    hyp = tmp_path / "hyp"
    hyp.write_bytes("".join(t + "\n" for t in TGT).replace("GREEN", "GR\0EN").encode())
    result = _ok(invoke("eval", "--hyp", hyp, "--ref", pair[1], "--json", "--metrics", "chrf"))
    assert 50 < json.loads(result.stdout)["metrics"][0]["score"] < 100


# -- CRLF and BOM: handled, never an error ----------------------------------------------------------


def _variant(tmp_path: Path, name: str, lines: list[str], kind: str) -> Path:
    if kind == "crlf":
        return _write(tmp_path / name, lines, eol="\r\n")
    return _write(tmp_path / name, lines, prefix=b"\xef\xbb\xbf")


@pytest.mark.parametrize("kind", ["crlf", "bom"])
def test_prepare_cleans_crlf_and_bom(tmp_path, kind):
    src, tgt = write_toy_corpus(tmp_path / "toy", n=200)
    odd_src = _variant(tmp_path, "src", src.read_text().splitlines(), kind)
    odd_tgt = _variant(tmp_path, "tgt", tgt.read_text().splitlines(), kind)
    plain = tmp_path / "plain"
    odd = tmp_path / "odd"
    for out, (s, t) in ((plain, (src, tgt)), (odd, (odd_src, odd_tgt))):
        _ok(invoke("prepare", "--src", s, "--tgt", t, "--vocab-size", "60", "-o", out))
    for name in ("train.src", "train.tgt"):
        text = (odd / name).read_bytes()
        assert b"\r" not in text and b"\xef\xbb\xbf" not in text
        assert text == (plain / name).read_bytes()


def test_prepare_removes_zero_width_spaces_and_soft_hyphens(tmp_path):
    src, tgt = write_toy_corpus(tmp_path / "toy", n=200)
    src_lines, tgt_lines = src.read_text().splitlines(), tgt.read_text().splitlines()
    hidden = [line.replace(" ", "\u200b ", 1) + "\u00ad" for line in src_lines]
    # the first 50 pairs twice: the copies differ from the originals only by those characters
    odd = _write(tmp_path / "odd.src", hidden + src_lines[:50])
    odd_tgt = _write(tmp_path / "odd.tgt", tgt_lines + tgt_lines[:50])
    plain, cleaned = tmp_path / "plain", tmp_path / "cleaned"
    _ok(invoke("prepare", "--src", src, "--tgt", tgt, "--vocab-size", "60", "-o", plain))
    _ok(invoke("prepare", "--src", odd, "--tgt", odd_tgt, "--vocab-size", "60", "-o", cleaned))
    assert (cleaned / "train.src").read_bytes() == (plain / "train.src").read_bytes()
    before, after = (json.loads((d / "prepare.json").read_text())["counts"]["train"]
                     for d in (plain, cleaned))  # fmt: skip
    assert after["duplicate"] == before["duplicate"] + 50


def test_eval_warns_when_a_file_is_not_in_nfc_and_scores_as_sacrebleu_does(tmp_path):
    import unicodedata

    import sacrebleu

    hyp = ["Grüße aus Köln", "ein Hund läuft", "a cat"]
    ref = [unicodedata.normalize("NFD", line) for line in hyp]
    h, r = _write(tmp_path / "h", hyp), _write(tmp_path / "r", ref)
    result = _ok(invoke("eval", "--hyp", h, "--ref", r, "--metrics", "bleu", "--json"))
    message = " ".join(result.stderr.split())
    assert f"{r}: 2 of its lines are not in Unicode NFC (the first: line 1)" in message
    assert str(h) not in message  # the hypothesis is in NFC
    score = json.loads(result.stdout)["metrics"][0]["score"]
    assert score == pytest.approx(sacrebleu.corpus_bleu(hyp, [ref]).score) and score < 100
    quiet = _ok(invoke("eval", "--hyp", h, "--ref", h, "--metrics", "bleu"))
    assert "NFC" not in quiet.stderr
    hidden = _write(tmp_path / "z", [hyp[0], "ein\u200bHund läuft", hyp[2]])
    zero_width = _ok(invoke("eval", "--hyp", hidden, "--ref", h, "--metrics", "bleu"))
    message = " ".join(zero_width.stderr.split())
    assert (
        f"{hidden}: 1 of its lines holds zero-width or soft-hyphen characters "
        "(the first: line 2)" in message
    )


@pytest.mark.parametrize("ending", [b"\r", b"\r\n"], ids=["cr", "then-a-newline"])
@pytest.mark.parametrize("command", ["prepare", "translate", "eval"])
def test_a_file_with_classic_mac_line_ends_is_named_with_the_fix(tmp_path, pair, toy_model_dir,
                                                                command, ending):  # fmt: skip
    mac = tmp_path / "mac.txt"
    # CR alone ends each line; `echo >> mac.txt` may have added one newline at the end
    mac.write_bytes("\r".join(SRC).encode() + ending)
    argv = {
        "prepare": ["prepare", "--src", mac, "--tgt", pair[1], "-o", tmp_path / "out"],
        "translate": ["translate", "-m", toy_model_dir, "--beam", "1", "--input", mac],
        "eval": ["eval", "--hyp", mac, "--ref", pair[1]],
    }[command]
    result = invoke(*argv)
    assert_refused(result, 2, str(mac), "carriage return alone", "tr ")
    assert result.stdout == "" and not (tmp_path / "out").exists()


@pytest.mark.parametrize("command", ["translate", "eval"])
def test_classic_mac_line_ends_on_stdin_are_refused_too(tmp_path, pair, toy_model_dir, command):
    argv = {
        "translate": ["translate", "-m", toy_model_dir, "--beam", "1"],
        "eval": ["eval", "--hyp", "-", "--ref", pair[1]],
    }[command]
    for ending in (b"\r", b"\r\n"):
        result = invoke(*argv, input="\r".join(SRC).encode() + ending)  # else one line
        assert_refused(result, 2, "<stdin>", "carriage return alone", "pipe it through")
        assert result.stdout == ""
    two = invoke("translate", "-m", toy_model_dir, "--beam", "1", input=b"two\rwords\nsun\n")
    assert two.exit_code == 0 and two.stdout.count("\n") == 2  # a stray CR inside a line


@pytest.mark.parametrize("kind", ["crlf", "bom"])
def test_translate_output_is_the_same_with_crlf_or_bom(tmp_path, toy_model_dir, kind):
    plain = _write(tmp_path / "plain", SRC)
    odd = _variant(tmp_path, "odd", SRC, kind)
    outs = [
        _ok(invoke("translate", "-m", toy_model_dir, "--beam", "1", "--input", p))
        for p in (plain, odd)
    ]
    assert outs[0].stdout == outs[1].stdout and outs[1].stdout.count("\n") == len(SRC)
    as_json = _ok(invoke("translate", "-m", toy_model_dir, "--beam", "1", "--json", "--input", odd))
    assert [json.loads(line)["source"] for line in as_json.stdout.splitlines()] == SRC


@pytest.mark.parametrize("kind", ["crlf", "bom"])
def test_eval_scores_are_the_same_with_crlf_or_bom(tmp_path, kind):
    hyp = ["the cat sat on the mat", "a dog ran", "birds fly high", "it is late"]
    ref = ["the cat sat on a mat", "a dog ran off", "birds fly high", "it is very late"]
    scores = []
    for variant in ("plain", kind):
        h = (
            _write(tmp_path / f"h.{variant}", hyp)
            if variant == "plain"
            else _variant(tmp_path, f"h.{variant}", hyp, kind)
        )
        r = (
            _write(tmp_path / f"r.{variant}", ref)
            if variant == "plain"
            else _variant(tmp_path, f"r.{variant}", ref, kind)
        )
        result = _ok(invoke("eval", "--hyp", h, "--ref", r, "--json"))
        scores.append([m["score"] for m in json.loads(result.stdout)["metrics"]])
    assert scores[0] == scores[1]


@pytest.mark.parametrize("kind", ["crlf", "bom"])
def test_align_output_is_the_same_with_crlf_or_bom(tmp_path, toy_model_dir, kind):
    outs = []
    for variant in ("plain", kind):
        if variant == "plain":
            src, tgt = _write(tmp_path / "s", SRC), _write(tmp_path / "t", TGT)
        else:
            src, tgt = _variant(tmp_path, "s2", SRC, kind), _variant(tmp_path, "t2", TGT, kind)
        result = _ok(invoke("align", "-m", toy_model_dir, "--src", src, "--tgt", tgt, "--json"))
        outs.append([json.loads(line) for line in result.stdout.splitlines()])
    assert outs[0] == outs[1]
    assert [record["src_words"] for record in outs[1]] == [s.split() for s in SRC]


# -- very long lines ---------------------------------------------------------------------------

LONG_WORDS = " ".join(WORDS[i % len(WORDS)] for i in range(20_000))[:100_000]  # 100,000 chars
LONG_TOKEN = "a" * 100_000  # one word of 100,000 pieces


def test_prepare_drops_a_100k_character_line_as_too_long(tmp_path):
    src, tgt = write_toy_corpus(tmp_path / "toy", n=200)
    src_lines = src.read_text().splitlines() + [LONG_WORDS, LONG_TOKEN]
    tgt_lines = tgt.read_text().splitlines() + [LONG_WORDS.upper(), "X"]
    s, t = _write(tmp_path / "s", src_lines), _write(tmp_path / "t", tgt_lines)
    out = tmp_path / "out"
    _ok(invoke("prepare", "--src", s, "--tgt", t, "--vocab-size", "60", "-o", out))
    counts = json.loads((out / "prepare.json").read_text())["counts"]["train"]
    # --max-len counts words: the 20,000-word pair goes, the one-word pair stays (the trainer's
    # --max-len, in pieces, skips it later).
    assert counts["read"] == 202 and counts["too_long"] == 1 and counts["ratio"] == 0
    dropped = counts["too_long"] + counts["duplicate"] + counts["empty"]
    assert counts["kept"] == 202 - dropped
    kept = (out / "train.src").read_text().splitlines()
    assert len(kept) == counts["kept"] and LONG_WORDS not in kept and LONG_TOKEN in kept
    assert max(len(line.split()) for line in kept) <= 8  # the toy corpus's longest line


@pytest.mark.parametrize("long_line", [LONG_WORDS, LONG_TOKEN], ids=["words", "one-token"])
def test_translate_cuts_a_100k_character_line_and_keeps_the_others(toy_model_dir, long_line):
    text = f"apple river\n{long_line}\nsun\n"
    args = ("--beam", "1", "--json")
    result = _ok(invoke("translate", "-m", toy_model_dir, *args, input=text))
    records = [json.loads(line) for line in result.stdout.splitlines()]
    assert [r["source"] for r in records] == ["apple river", long_line, "sun"]
    assert [r["truncated"] for r in records] == [False, True, False]
    assert "line 2" in result.stderr


@pytest.mark.parametrize("mode", ["--json", "--align"])
def test_translate_json_and_align_on_lines_of_different_lengths(toy_model_dir, mode):
    text = "apple river\nstone cloud green quick small house light\nsun\n"
    result = invoke("translate", "-m", toy_model_dir, "--beam", "1", mode, input=text)
    assert_no_traceback(result)
    assert result.exit_code == 0 and result.stdout.count("\n") == 3
    if mode == "--json":  # each line's attention covers its own source pieces, not the batch's
        for record in map(json.loads, result.stdout.splitlines()):
            assert {len(row) for row in record["attention"]} == {len(record["src_pieces"])}


def test_eval_scores_100k_character_lines(tmp_path):
    hyp = _write(tmp_path / "h", [LONG_WORDS, "a b c"])
    ref = _write(tmp_path / "r", [LONG_WORDS, "a b d"])
    result = _ok(invoke("eval", "--hyp", hyp, "--ref", ref, "--json", "--metrics", "bleu"))
    assert json.loads(result.stdout)["metrics"][0]["score"] > 90


def test_align_handles_a_100k_character_source(tmp_path, toy_model_dir):
    src = _write(tmp_path / "s", ["apple river", LONG_WORDS])
    tgt = _write(tmp_path / "t", ["RIVER APPLE", "SUN BIRD"])
    result = _ok(invoke("align", "-m", toy_model_dir, "--src", src, "--tgt", tgt, "--view", "none"))
    lines = result.stdout.split("\n")
    assert len(lines) == 3 and lines[-1] == ""


# -- whitespace-only lines --------------------------------------------------------------------


def test_prepare_counts_whitespace_only_lines_as_empty(tmp_path):
    src, tgt = write_toy_corpus(tmp_path / "toy", n=200)
    s = _write(tmp_path / "s", src.read_text().splitlines() + ["   ", "\t \u3000"])
    t = _write(tmp_path / "t", tgt.read_text().splitlines() + ["SUN", "  "])
    out = tmp_path / "out"
    _ok(invoke("prepare", "--src", s, "--tgt", t, "--vocab-size", "60", "-o", out))
    assert json.loads((out / "prepare.json").read_text())["counts"]["train"]["empty"] == 2


def test_translate_gives_an_empty_line_for_a_blank_one(toy_model_dir):
    text = "apple\n   \n\t\nsun\n"
    result = _ok(invoke("translate", "-m", toy_model_dir, "--beam", "1", input=text))
    out = result.stdout.split("\n")
    assert len(out) == 5 and out[1] == "" and out[2] == "" and out[0] and out[3]


def test_align_refuses_a_pair_with_a_blank_side(tmp_path, toy_model_dir):
    src = _write(tmp_path / "s", ["apple river", "   "])
    tgt = _write(tmp_path / "t", ["RIVER APPLE", "SUN"])
    result = invoke("align", "-m", toy_model_dir, "--src", src, "--tgt", tgt)
    assert_refused(result, 2, "line 2", "empty source")
    assert result.stdout == ""


def test_align_files_may_end_in_lines_empty_on_both_sides(tmp_path, toy_model_dir):
    """An editor's last newline (or two) in both files is no pair; a whole pair after an empty
    one is still refused, naming the empty line."""
    gold = tmp_path / "gold"
    gold.write_text("0-1 1-0\n", encoding="utf-8")
    src = _write(tmp_path / "s", ["apple river", "", " "])
    tgt = _write(tmp_path / "t", ["RIVER APPLE", "", ""])
    ended = _ok(invoke("align", "-m", toy_model_dir, "--src", src, "--tgt", tgt, "--gold", gold))
    assert len(ended.stdout.splitlines()) == 1 and "AER" in ended.stderr
    src = _write(tmp_path / "s", ["apple river", "", "sun"])
    tgt = _write(tmp_path / "t", ["RIVER APPLE", "", "SUN"])
    result = invoke("align", "-m", toy_model_dir, "--src", src, "--tgt", tgt)
    assert_refused(result, 2, "line 2", "empty source")
    assert result.stdout == ""


def test_align_stream_keeps_a_blank_source_line_as_an_empty_line(toy_model_dir):
    result = _ok(
        invoke("align", "-m", toy_model_dir, "--beam", "1", input="apple river\n  \nsun\n")
    )
    out = result.stdout.split("\n")
    assert len(out) == 4 and out[1] == ""


def test_eval_scores_a_whitespace_only_line_as_an_empty_translation(tmp_path):
    import sacrebleu

    hyp = _write(tmp_path / "h", ["a b c d", "   "])
    ref = _write(tmp_path / "r", ["a b c d", "e f g h"])
    result = _ok(invoke("eval", "--hyp", hyp, "--ref", ref, "--metrics", "bleu", "--json"))
    score = json.loads(result.stdout)["metrics"][0]["score"]
    # Two sentences, the second empty: not the 100 of scoring "a b c d" alone, nor a shifted pair.
    expected = sacrebleu.corpus_bleu(["a b c d", ""], [["a b c d", "e f g h"]]).score
    assert score == pytest.approx(expected) and 0 < score < 100


# -- TSV with the wrong number of columns, truncated gzip ----------------------------------------


@pytest.mark.parametrize("line", ["one column only", "a\tb\tc"], ids=["1-column", "3-columns"])
def test_prepare_names_the_tsv_line_with_wrong_columns(tmp_path, line):
    tsv = _write(tmp_path / "c.tsv", ["apple\tAPPLE", line, "sun\tSUN"])
    result = invoke("prepare", "--tsv", tsv, "-o", tmp_path / "out")
    assert_refused(result, 2, f"{tsv} line 2", "columns")
    assert not (tmp_path / "out").exists()


def test_align_names_the_tsv_line_with_wrong_columns_before_printing(tmp_path, toy_model_dir):
    tsv = _write(tmp_path / "c.tsv", ["apple\tAPPLE", "a\tb\tc"])
    result = invoke("align", "-m", toy_model_dir, "--tsv", tsv)
    assert_refused(result, 2, f"{tsv} line 2", "columns")
    assert result.stdout == ""


@pytest.mark.parametrize("command", ["prepare", "translate", "eval"])
def test_truncated_gzip_is_named(tmp_path, pair, toy_model_dir, command):
    whole = gzip.compress(("apple river stone cloud green\n" * 5000).encode())
    bad = tmp_path / "corpus.gz"
    bad.write_bytes(whole[: len(whole) // 2])
    argv = {
        "prepare": ["prepare", "--src", bad, "--tgt", pair[1], "-o", tmp_path / "out"],
        "translate": ["translate", "-m", toy_model_dir, "--beam", "1", "--input", bad],
        "eval": ["eval", "--hyp", bad, "--ref", pair[1]],
    }[command]
    result = invoke(*argv)
    assert_refused(result, 2, str(bad), "gzip")
    assert not (tmp_path / "out").exists()
    assert result.stdout == ""  # translate too: a file is refused before anything is written


def test_translate_refuses_a_file_with_an_invalid_line_before_writing_anything(
    tmp_path, toy_model_dir
):
    bad = tmp_path / "in.txt"
    bad.write_bytes(b"apple river\nstone cloud\ngr\xfcn\n")  # Latin-1 on line 3
    result = invoke("translate", "-m", toy_model_dir, "--beam", "1", "--input", bad)
    assert_refused(result, 2, f"{bad} line 3", "UTF-8")
    assert result.stdout == ""
    replaced = invoke("translate", "-m", toy_model_dir, "--beam", "1", "--input", bad,
                      "--on-invalid", "replace")  # fmt: skip
    assert replaced.exit_code == 0 and len(replaced.stdout.splitlines()) == 3


def test_stdin_redirected_from_a_file_is_read_through_before_anything_is_written(
    tmp_path, toy_model_dir
):
    """`nmt translate < FILE` and `nmt align < FILE`: stdin is a regular file, which can be
    read twice, so a bad line fails before any output, as with --input (a pipe cannot be
    rewound: there the lines before the bad one are written). Run as real processes: the
    test runner's stdin is no file."""
    import os
    import subprocess
    import sys

    def run(args: list, path: Path, skip_first_line: bool = False):
        with open(path, "rb") as stdin:
            if skip_first_line:  # stdin starts past its first line: rewound to there
                os.lseek(stdin.fileno(), path.read_bytes().index(b"\n") + 1, os.SEEK_SET)
            return subprocess.run([sys.executable, "-m", "nmt_cli", *map(str, args)],
                                  stdin=stdin, capture_output=True, timeout=300)  # fmt: skip

    bad = tmp_path / "in.txt"
    bad.write_bytes(b"apple river\nstone cloud\ngr\xfcn\nsun\n")  # Latin-1 on line 3
    translate = ["translate", "-m", toy_model_dir, "--beam", "1"]
    result = run(translate, bad)
    assert result.returncode == 2 and result.stdout == b"", result.stderr
    assert b"<stdin> line 3 is not valid UTF-8" in result.stderr
    assert b"<stdin> line 2 is not" in run(translate, bad, skip_first_line=True).stderr
    pairs = tmp_path / "pairs.txt"
    pairs.write_text("apple river ||| RIVER APPLE\nno separator here\n", encoding="utf-8")
    result = run(["align", "-m", toy_model_dir, "--view", "none"], pairs)
    assert result.returncode == 2 and result.stdout == b"", result.stderr
    assert b"<stdin> line 2 has no ' ||| ' separator" in result.stderr
    good = tmp_path / "good.txt"
    good.write_text("apple river\nstone cloud\nsun\n", encoding="utf-8")
    result = run(translate, good, skip_first_line=True)
    assert result.returncode == 0 and len(result.stdout.splitlines()) == 2, result.stderr


def _compressed(kind: str, data: bytes) -> bytes:
    import bz2
    import lzma
    import zipfile
    from io import BytesIO

    if kind == "gzip":
        return gzip.compress(data)
    if kind == "xz":
        return lzma.compress(data)
    if kind == "bzip2":
        return bz2.compress(data)
    holder = BytesIO()
    with zipfile.ZipFile(holder, "w") as archive:
        archive.writestr("text.txt", data)
    return holder.getvalue()


@pytest.mark.parametrize("kind", ["gzip", "xz", "bzip2", "zip"])
def test_compressed_text_is_named_with_how_to_decompress_it(tmp_path, pair, toy_model_dir, kind):
    data = _compressed(kind, "\n".join(SRC).encode() + b"\n")
    packed = tmp_path / "packed"
    packed.write_bytes(data)
    stdin = invoke("translate", "-m", toy_model_dir, "--beam", "1", "--on-invalid", "replace",
                   input=data)  # fmt: skip
    if kind == "gzip":  # a gzip file is read as its text; only a stream is not decompressed
        assert _ok(invoke("translate", "-m", toy_model_dir, "--beam", "1", "-i", packed))
    else:
        result = invoke("prepare", "--src", packed, "--tgt", pair[1], "-o", tmp_path / "out")
        assert_refused(result, 2, f"{packed} is {kind}-compressed, not text")
        assert not (tmp_path / "out").exists()
    assert_refused(stdin, 2, f"<stdin> is {kind}-compressed, not text", "pipe it through")
    assert stdin.stdout == ""  # not garbage translated, whatever --on-invalid says


@pytest.mark.parametrize("encoding", ["utf-16-le", "utf-16-be"])
def test_utf16_without_a_byte_order_mark_is_named(tmp_path, pair, encoding):
    wide = tmp_path / "wide.txt"
    wide.write_bytes("\n".join(SRC).encode(encoding))
    result = invoke("eval", "--hyp", wide, "--ref", pair[1])
    order = encoding[-2:].upper()
    assert_refused(result, 2, f"{wide} looks like UTF-16 without a byte-order mark",
                   f"iconv -f UTF-16{order}")  # fmt: skip
