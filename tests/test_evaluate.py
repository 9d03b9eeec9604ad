"""The evaluation library: sacreBLEU parity, length buckets, paired bootstrap, file reading."""

from __future__ import annotations

import gzip
import json
import os
import random
import re
import subprocess
import sys
from pathlib import Path

import pytest

from nmt_cli.errors import ConfigError, InputError
from nmt_cli.evaluate import (
    bleu_by_length,
    bucket_bounds,
    check_line_counts,
    compare,
    evaluate_corpus,
    format_p,
    length_unit,
    read_lines,
    score,
    source_length,
)

FIXTURES = Path(__file__).parent / "fixtures" / "eval"


def _fixture(name: str) -> list[str]:
    return read_lines(FIXTURES / name)


def _degrade(lines: list[str], seed: int = 7) -> list[str]:
    """A weaker system: drop about every fourth word and swap a neighbouring pair."""
    rng = random.Random(seed)
    worse = []
    for line in lines:
        words = [w for i, w in enumerate(line.split()) if i % 4 != 3] or ["the"]
        if len(words) > 2:
            i = rng.randrange(len(words) - 1)
            words[i], words[i + 1] = words[i + 1], words[i]
        worse.append(" ".join(words))
    return worse


def _garble(lines: list[str], seed: int = 3) -> list[str]:
    """A useless system: every sentence's words shuffled and half of them replaced."""
    rng = random.Random(seed)
    garbled = []
    for line in lines:
        words = [w if rng.random() < 0.5 else "blah" for w in line.split()]
        rng.shuffle(words)
        garbled.append(" ".join(words))
    return garbled


def _sacrebleu(refs: list[Path], hyp: Path, *args: str) -> str:
    command = [sys.executable, "-m", "sacrebleu", *map(str, refs), "-i", str(hyp), *args]
    done = subprocess.run(command, capture_output=True, text=True, check=True)
    return done.stdout


def _write(path: Path, lines: list[str]) -> Path:
    path.write_text("".join(line + "\n" for line in lines), encoding="utf-8")
    return path


# Parity with the sacrebleu command -----------------------------------------------------------


@pytest.fixture(scope="module")
def corpus(tmp_path_factory) -> dict[str, Path]:
    """The fixture translation, a weaker second system used as a second reference, on disk."""
    folder = tmp_path_factory.mktemp("eval")
    ref2 = _write(folder / "ref2.en", _degrade(_fixture("hyp.en")))
    return {"hyp": FIXTURES / "hyp.en", "ref": FIXTURES / "ref.en", "ref2": ref2}


@pytest.mark.parametrize("ref_keys", [("ref",), ("ref", "ref2")], ids=["one-ref", "two-refs"])
def test_scores_equal_the_sacrebleu_command_to_the_last_digit(corpus, ref_keys):
    refs = [corpus[key] for key in ref_keys]
    ours = score(read_lines(corpus["hyp"]), [read_lines(p) for p in refs], ("bleu", "chrf", "ter"))
    text = _sacrebleu(refs, corpus["hyp"], "-m", "bleu", "chrf", "ter", "-f", "text", "-w", "2")
    theirs_text = [line.strip() for line in text.splitlines()]
    theirs_json = json.loads(
        _sacrebleu(refs, corpus["hyp"], "-m", "bleu", "chrf", "ter", "-w", "10")
    )
    assert [m.name for m in ours] == ["BLEU", "chrF2", "TER"]
    for mine, line, record in zip(ours, theirs_text, theirs_json, strict=True):
        assert line == mine.text.replace(f"{mine.name} =", f"{mine.name}|{mine.signature} =", 1)
        assert record["signature"] == mine.signature
        assert record["score"] == float(f"{mine.score:.10f}")


def test_chrf_plus_plus_equals_the_sacrebleu_command(corpus):
    ours = score(read_lines(corpus["hyp"]), [read_lines(corpus["ref"])], ["chrf++"])[0]
    args = ["-m", "chrf", "--chrf-word-order", "2", "-w", "10"]
    theirs = json.loads(_sacrebleu([corpus["ref"]], corpus["hyp"], *args))  # one metric: no list
    assert (ours.name, ours.signature) == (theirs["name"], theirs["signature"])
    assert "nw:2" in ours.signature
    assert theirs["score"] == float(f"{ours.score:.10f}")


def test_ter_is_an_error_rate():
    refs = [["the cat sat on the mat", "a dog barks"]]
    (perfect,) = score(["the cat sat on the mat", "a dog barks"], refs, ["ter"])
    (one_edit,) = score(["the cat sat on a mat", "a dog barks"], refs, ["ter"])
    assert perfect.score == 0.0
    assert one_edit.score == pytest.approx(100 * 1 / 9)
    assert one_edit.text == "TER = 11.11"


def test_unknown_metric_names_the_valid_ones():
    with pytest.raises(ConfigError, match="unknown metric 'meteor'.*bleu, chrf, chrf\\+\\+, ter"):
        score(["a"], [["a"]], ["bleu", "meteor"])


def test_reference_with_another_length_is_refused():
    with pytest.raises(InputError, match="2 hypotheses but reference 1 has 3 lines"):
        score(["a", "b"], [["a", "b", "c"]])


def test_line_counts_name_both_files_and_counts():
    with pytest.raises(InputError, match=r"hyp\.en has 3 lines but ref\.en has 2"):
        check_line_counts([("hyp.en", ["a", "b", "c"]), ("ref.en", ["a", "b"])])


# Length buckets ------------------------------------------------------------------------------


def _words(n: int) -> str:
    return " ".join(["w"] * n)


def test_bucket_edges_go_to_the_right_bucket():
    lengths = [0, 1, 10, 11, 20, 40, 41, 99]
    sources = [_words(n) for n in lengths]
    buckets = bleu_by_length(sources, sources, [sources])
    assert [b.label for b in buckets] == ["0–10", "11–20", "21–30", "31–40", "41+"]
    assert [b.count for b in buckets] == [3, 2, 0, 1, 2]  # 0,1,10 | 11,20 | – | 40 | 41,99
    assert [(b.lo, b.hi) for b in buckets] == [(0, 10), (11, 20), (21, 30), (31, 40), (41, None)]
    assert buckets[2].bleu is None
    assert all(b.bleu == pytest.approx(100) for b in buckets if b.count)
    without_empty = bleu_by_length(sources[1:], sources[1:], [sources[1:]])
    assert (without_empty[0].label, without_empty[0].count) == ("1–10", 2)  # no empty source


def test_custom_buckets():
    sources = [_words(n) for n in (3, 5, 6, 15)]
    buckets = bleu_by_length(sources, sources, [sources], buckets=[5, 6])
    assert [(b.label, b.count) for b in buckets] == [("1–5", 2), ("6", 1), ("7+", 1)]
    assert bucket_bounds([2]) == [(1, 2), (3, None)]


@pytest.mark.parametrize("bad", [[], [0, 10], [20, 10], [10, 10]])
def test_bad_buckets_are_refused(bad):
    with pytest.raises(ConfigError, match="increasing positive upper bounds"):
        bleu_by_length(["a"], ["a"], [["a"]], buckets=bad)


def test_buckets_on_the_fixture_separate_short_from_long_sentences():
    sources, hyps, refs = _fixture("src.de"), _fixture("hyp.en"), [_fixture("ref.en")]
    buckets = bleu_by_length(sources, hyps, refs)
    assert [b.count for b in buckets] == [11, 10, 7, 5, 3]
    assert sum(b.count for b in buckets) == len(sources)
    short, *_, longest = buckets
    assert short.bleu > longest.bleu  # the fixture's system, like an RNN, falters on long input


def test_unsegmented_chinese_is_measured_in_characters():
    chinese = ["我今天很累。", "他们明天去北京看朋友。", "这本书很有意思 ABC"]
    assert length_unit(chinese) == "characters"
    assert [source_length(line, "characters") for line in chinese] == [6, 11, 10]
    assert length_unit(["Das ist ein Haus.", "我"]) == "words"
    assert length_unit([""]) == "words"
    buckets = bleu_by_length(chinese, ["a", "b", "c"], [["a", "b", "c"]], buckets=[10])
    assert [b.count for b in buckets] == [2, 1]


# Paired bootstrap ----------------------------------------------------------------------------


def test_identical_systems_show_no_difference():
    hyps, refs = _fixture("hyp.en"), [_fixture("ref.en")]
    result = compare(hyps, list(hyps), refs, n_samples=200)
    assert result.p_value >= 0.5
    assert result.better is None
    assert result.verdict.startswith("no significant difference at p < 0.05")
    assert result.a.score == result.b.score


def test_a_clearly_better_system_is_significant():
    refs = [_fixture("ref.en")]
    result = compare(_garble(refs[0]), list(refs[0]), refs)
    assert result.p_value < 0.05
    assert result.better == "B"
    assert result.verdict == f"B is better than A ({format_p(result.p_value)})"
    assert result.b.score > result.a.score
    assert result.a.mean - result.a.ci < result.a.score < result.a.mean + result.a.ci


def test_lower_ter_is_better():
    refs = [_fixture("ref.en")[:20]]  # TER's shift search is slow on long garbled sentences
    result = compare(list(refs[0]), _garble(refs[0]), refs, metric="ter", n_samples=200)
    assert result.metric == "TER"
    assert result.better == "A"
    assert result.verdict.startswith("A is better than B")


def test_bootstrap_equals_the_sacrebleu_command(corpus, tmp_path):
    weaker = _write(tmp_path / "weaker.en", _degrade(_fixture("hyp.en")))
    hyps, refs = _fixture("hyp.en"), [_fixture("ref.en")]
    result = compare(hyps, read_lines(weaker), refs)
    command = [sys.executable, "-m", "sacrebleu", str(corpus["ref"]), "-i", str(corpus["hyp"])]
    args = [str(weaker), "--paired-bs", "-m", "bleu", "-f", "text", "-w", "4"]
    table = subprocess.run([*command, *args], capture_output=True, text=True, check=True).stdout
    rows = re.findall(r"(\d+\.\d{4}) \((\d+\.\d{4}) ± (\d+\.\d{4})\)", table)
    expected = [(f"{s.score:.4f}", f"{s.mean:.4f}", f"{s.ci:.4f}") for s in (result.a, result.b)]
    assert rows == expected
    assert re.search(r"\(p = (\d\.\d{4})\)", table).group(1) == f"{result.p_value:.4f}"
    assert result.signature in table


def test_the_seed_makes_the_bootstrap_repeatable_and_is_not_left_behind(monkeypatch):
    monkeypatch.delenv("SACREBLEU_SEED", raising=False)
    hyps, refs = _fixture("hyp.en"), [_fixture("ref.en")]
    weaker = _degrade(hyps)
    first = compare(hyps, weaker, refs, n_samples=100, seed=7)
    again = compare(hyps, weaker, refs, n_samples=100, seed=7)
    assert first == again
    assert "seed:7" in first.signature
    assert "SACREBLEU_SEED" not in os.environ


def test_evaluate_corpus_collects_everything():
    sources, hyps, refs = _fixture("src.de"), _fixture("hyp.en"), [_fixture("ref.en")]
    report = evaluate_corpus(hyps, refs, ["chrf", "bleu"], sources, hyps_b=_degrade(hyps))
    assert [m.metric for m in report.metrics] == ["chrf", "bleu"]
    assert report.length_unit == "words" and len(report.by_length) == 5
    assert report.comparison.metric == "chrF2"  # the first metric asked for
    assert evaluate_corpus(hyps, refs).by_length is None


# Reading files -------------------------------------------------------------------------------


def test_read_lines_plain_and_gzip(tmp_path):
    plain = tmp_path / "a.txt"
    plain.write_bytes("erste Zeile  \nzweite\r\n\nGrüße\n".encode())
    packed = tmp_path / "a.txt.gz"
    packed.write_bytes(gzip.compress(plain.read_bytes()))
    expected = ["erste Zeile", "zweite", "", "Grüße"]
    assert read_lines(plain) == expected
    assert read_lines(packed) == expected


def test_read_lines_without_final_newline(tmp_path):
    path = tmp_path / "a.txt"
    path.write_text("one\ntwo", encoding="utf-8")
    assert read_lines(path) == ["one", "two"]


def test_bad_utf8_names_file_and_line(tmp_path):
    path = tmp_path / "latin1.txt"
    path.write_bytes("fine\nstill fine\nGr\xfc\xdfe\n".encode("latin-1"))
    with pytest.raises(InputError, match=r"latin1\.txt line 3 is not valid UTF-8"):
        read_lines(path)


def _make_bad(kind: str, path: Path) -> Path:
    if kind == "directory":
        path.mkdir()
    elif kind == "empty":
        path.write_text("")
    elif kind == "bad-gzip":  # gzip is told by its magic bytes: a truncated one is refused
        path = path.with_suffix(".gz")
        path.write_bytes(gzip.compress(b"line\n" * 10_000)[:60])
    return path


@pytest.mark.parametrize(
    ("kind", "message"),
    [
        ("missing", "does not exist"),
        ("directory", "is a directory"),
        ("empty", "is empty"),
        ("bad-gzip", "corrupt or truncated gzip file"),
    ],
)
def test_unreadable_files_name_the_file(tmp_path, kind, message):
    path = _make_bad(kind, tmp_path / "hyp")
    with pytest.raises(InputError, match=message) as caught:
        read_lines(path)
    assert str(path) in str(caught.value)


def test_a_paired_test_scores_both_systems_and_the_main_score_with_one_tokenisation():
    """Unsegmented output against segmented references is scored by character (tok:zh); the
    same text with spaces compared with it used to be scored 13a in the test, pooled with it,
    so one file got 89.95 above and 0.00 in the test."""
    from nmt_cli.evaluate import bleu_tokenize, evaluate_corpus

    rng = random.Random(0)
    words = ["我", "的", "朋友", "星期天", "起床", "了", "你", "今天", "去", "哪里"]
    refs = [[" ".join(rng.choices(words, k=8)) + " 。" for _ in range(40)]]
    spaced = [line if k % 3 else line.replace("朋友", "老师") for k, line in enumerate(refs[0])]
    unspaced = [line.replace(" ", "") for line in spaced]
    assert bleu_tokenize(refs, spaced) == "13a"  # alone, segmented output keeps 13a
    assert bleu_tokenize(refs, unspaced) == bleu_tokenize(refs, spaced, unspaced) == "zh"
    for a, b in ((unspaced, spaced), (spaced, unspaced)):
        report = evaluate_corpus(a, refs, ["bleu"], hyps_b=b)
        assert "tok:zh" in report.metrics[0].signature and "tok:zh" in report.comparison.signature
        assert report.comparison.a.score == report.metrics[0].score
        assert report.comparison.a.score == report.comparison.b.score > 50  # the same words
        assert report.comparison.p_value == 1.0


def test_unsegmented_chinese_references_are_scored_by_character():
    from nmt_cli.evaluate import bleu_tokenize, score

    refs = [["我的朋友星期天起床了。", "你今天去哪里了？"]]
    hyps = ["我的朋友起床了。", "你今天去哪里了？"]
    assert bleu_tokenize(refs) == "zh"
    bleu = score(hyps, refs, ["bleu"])[0]
    assert "tok:zh" in bleu.signature and bleu.score > 50  # 13a: each line one token, about 0
    ter = score(hyps, refs, ["ter"])[0]
    assert "asian:yes" in ter.signature and ter.score < 30  # one token per line: TER 50
    spaced = [["我 的 朋友 星期天 起床 了 。", "你 今天 去 哪里 了 ？"]]
    assert bleu_tokenize(spaced) == "13a"  # pre-segmented text keeps sacreBLEU's default
    assert bleu_tokenize([["A man rides a bike.", "Two dogs."]]) == "13a"
    assert bleu_tokenize([["你好！ 我是小明。"]]) == "zh"  # a space after punctuation: unsegmented
    # one reference of each kind: the unsegmented one is not outvoted (pooled, it was: 13a)
    assert bleu_tokenize([spaced[0] * 3, refs[0]]) == bleu_tokenize([refs[0], spaced[0]]) == "zh"
    assert bleu_tokenize([["使用 Python 3.11 安装 PyTorch 2.1 和 CUDA 12.1。"]]) == "zh"  # mixed
    assert bleu_tokenize([["Tom met 王小明 in Beijing yesterday and they talked."]]) == "13a"
    assert bleu_tokenize([["나는 학교에 간다."]]) == "13a"  # Korean is written with spaces
    assert bleu_tokenize([["ありがとうございます。", "コンピューターを使います"]]) == "char"  # kana
    # unsegmented output against segmented references: the output decides (else BLEU 0)
    assert bleu_tokenize(spaced, ["我 喜欢 茶。".replace(" ", "")] * 3) == "zh"
    assert bleu_tokenize(spaced, ["我 喜欢 茶。"] * 3) == "13a"
    assert bleu_tokenize(spaced) == "13a"
    unspaced = score(hyps, spaced, ["bleu"])[0]
    assert "tok:zh" in unspaced.signature and unspaced.score > 50
    # a training run's validations keep the references' choice, whatever the model writes
    validation = score(hyps, spaced, ["bleu"], by_references=True)[0]
    assert "tok:13a" in validation.signature
    assert "tok:13a" in score(["我 的 朋友 起床 了 。"], [spaced[0][:1]], ["bleu"])[0].signature


def test_sacrebleus_advice_on_tokenised_text_is_shown_once_per_process_in_one_line():
    import logging

    from nmt_cli.evaluate import _SACREBLEU_ONCE, TOKENIZED_WARNING, evaluate_corpus

    class Kept(logging.Handler):
        def __init__(self):
            super().__init__()
            self.messages = []

        def emit(self, record):
            self.messages.append(record.getMessage())

    kept, log = Kept(), logging.getLogger("sacrebleu")
    log.addHandler(kept)
    try:
        _SACREBLEU_ONCE.seen.clear()
        lines = ["a b c ."] * 300
        for _ in range(3):  # a training run validates again and again
            evaluate_corpus(lines, [lines], ["bleu"])
    finally:
        log.removeHandler(kept)
    assert kept.messages == [TOKENIZED_WARNING]  # sacreBLEU's three lines, said once as one
