"""Cleaning filters: normalisation, each drop reason and its count, and fair CJK lengths."""

from __future__ import annotations

import random
import unicodedata

import pytest

from nmt_cli.data.clean import (
    CleanOptions,
    clean_pairs,
    count_tokens,
    normalize,
    normalize_pairs,
    ratio_length,
    rich_charset_share,
)


@pytest.mark.parametrize(
    "raw, clean",
    [
        ("\ufeffHallo Welt", "Hallo Welt"),  # BOM at the start of a file
        ("Hallo\u200b Welt\u00ad\u2060\ufeff", "Hallo Welt"),  # invisible characters
        (
            "\u0645\u06cc\u200c\u0634\u0648\u062f",
            "\u0645\u06cc\u200c\u0634\u0648\u062f",
        ),  # ZWNJ stays
        ("line from windows\r", "line from windows"),  # CRLF
        ("  many   spaces\there  ", "many spaces here"),
        ("non\u00a0breaking\u3000ideographic", "non breaking ideographic"),
        ("", ""),
        ("   ", ""),
    ],
)
def test_normalize_whitespace_and_bom(raw, clean):
    assert normalize(raw) == clean


def test_normalize_treats_every_unicode_whitespace_as_a_space():
    spaces = [chr(c) for c in range(0x110000) if chr(c).isspace()]
    assert len(spaces) > 20 and "\u2028" in spaces and "\x1c" in spaces
    rng = random.Random(7)
    alphabet = [*spaces, " ", " ", "a", "é", "中", ".", "\ufeff", "\u200b"]
    for _ in range(5_000):
        raw = "".join(rng.choice(alphabet) for _ in range(rng.randint(0, 8)))
        expected = " ".join(raw.replace("\ufeff", "").replace("\u200b", "").split())
        assert normalize(raw) == expected, repr(raw)


def test_normalize_drops_control_characters_that_are_not_whitespace():
    """ESC, BEL, backspace, DEL and C1 controls in a corpus would become pieces a model prints
    back to a terminal; tab, the file separators and NEL stay whitespace."""
    raw = "A \x1b[31mred\x1b[0m car\x07\x08 .\x7f\x9b x\ty\x1cz\x85w"
    assert normalize(raw) == "A [31mred[0m car . x y z w"
    controls = [chr(c) for c in range(0x110000) if unicodedata.category(chr(c)) == "Cc"]
    assert all(normalize(f"a{c}b") in ("ab", "a b") for c in controls)
    assert [c for c in controls if normalize(f"a{c}b") == "a b"] == [
        c for c in controls if c.isspace()
    ]


def test_normalize_composes_to_nfc():
    decomposed = unicodedata.normalize("NFD", "Grüße café")
    assert decomposed != "Grüße café"
    assert normalize(decomposed) == "Grüße café"


def test_count_tokens_words_and_cjk_characters():
    assert count_tokens("I like oranges .") == 4
    assert count_tokens("我喜欢吃桔子。") == 7
    assert count_tokens("Tom是我的朋友。") == 1 + 6  # a Latin name inside Chinese is one token
    assert count_tokens("こんにちは 世界") == 7
    assert count_tokens("") == 0


def test_ratio_length_counts_cjk_characters_as_two_thirds_of_a_word():
    assert ratio_length("I like eating oranges") == 4
    assert ratio_length("我喜欢吃桔子") == pytest.approx(4)


def _clean(pairs, **options):
    return clean_pairs(pairs, CleanOptions(**options))


def test_empty_side_is_dropped_and_counted():
    result = _clean([("a", "A"), ("", "B"), ("c", "   ")])
    assert result.pairs == [("a", "A")]
    assert result.counts.empty == 2
    assert result.counts.read == 3


def test_too_long_is_dropped_and_limit_zero_keeps_everything():
    long_pair = ("w " * 6, "x")
    assert _clean([long_pair, ("a", "b")], max_len=5, max_ratio=0).counts.too_long == 1
    assert _clean([long_pair], max_len=0, max_ratio=0).counts.kept == 1


def test_too_long_counts_cjk_by_character():
    result = _clean([("我喜欢吃桔子。", "I like oranges .")], max_len=5, max_ratio=0)
    assert result.counts.too_long == 1


def test_length_ratio_drops_unbalanced_pairs():
    result = _clean([("@@", "Young girls weave corn stalks into elaborate designs .")])
    assert result.counts.ratio == 1
    assert result.pairs == []


def test_length_ratio_keeps_short_chinese_english_pairs():
    pairs = [
        ("Run.", "你用跑的。"),
        ("I'm bored.", "我觉得很无聊。"),
        ("Leave me.", "让我一个人呆会儿。"),
    ]
    result = _clean(pairs)
    assert result.counts.ratio == 0
    assert len(result.pairs) == 3


def test_duplicates_are_dropped_after_normalisation_unless_disabled():
    pairs = [("a  b", "A"), ("a b", "A"), ("a b", "B")]
    result = _clean(pairs)
    assert result.pairs == [("a b", "A"), ("a b", "B")]
    assert result.counts.duplicate == 1
    assert result.counts.normalized == 1
    assert _clean(pairs, dedup=False).counts.kept == 3


def test_counts_add_up():
    pairs = [("a", "A"), ("", "B"), ("a", "A"), ("w " * 200, "w " * 200), ("x", "y " * 10)]
    counts = _clean(pairs).counts
    assert counts.read == counts.kept + counts.dropped == 5
    assert (counts.empty, counts.too_long, counts.ratio, counts.duplicate) == (1, 1, 1, 1)


def test_given_splits_are_only_normalised():
    pairs = [(" a ", "A"), ("", "B"), ("a", "A"), ("x", "y " * 10)]
    result = normalize_pairs(pairs)
    assert result.pairs == [("a", "A"), ("", "B"), ("a", "A"), ("x", ("y " * 10).strip())]
    assert result.counts.kept == result.counts.read == 4
    assert result.counts.dropped == 0


def test_rich_charset_share():
    assert rich_charset_share(["我喜欢吃桔子。"]) == 1.0
    assert rich_charset_share(["hello world"]) == 0.0
    assert rich_charset_share([]) == 0.0
