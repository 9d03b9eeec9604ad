"""Tests for the synthetic English→Chinese demo corpus and its generator."""

from __future__ import annotations

import importlib.util
import re
import sys
from collections import Counter
from pathlib import Path
from types import ModuleType

import pytest

DATA = Path(__file__).resolve().parent.parent / "data"
CORPUS = DATA / "demo"
SPLITS = ("train", "dev", "test")
LINK = re.compile(r"^(\d+)-(\d+)$")

Corpus = dict[str, dict[str, list[str]]]  # split -> "en" / "zh" / "align" -> lines
Pairs = list[tuple[list[str], list[str], list[tuple[int, int]]]]  # English, Chinese, links


def load_generator() -> ModuleType:
    """Imports data/generate_demo.py, which is a script rather than a package module."""
    spec = importlib.util.spec_from_file_location("generate_demo", DATA / "generate_demo.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module  # dataclasses look their module up while the class is built
    spec.loader.exec_module(module)
    return module


gen = load_generator()


def read_lines(path: Path) -> list[str]:
    """The lines of a UTF-8 text file, without their newlines."""
    return path.read_text(encoding="utf-8").splitlines()


def parse_links(line: str) -> list[tuple[int, int]]:
    """The (English, Chinese) index pairs of one Pharaoh alignment line."""
    links = []
    for item in line.split():
        match = LINK.match(item)
        assert match, f"not a sure link in Pharaoh format: {item!r}"
        links.append((int(match[1]), int(match[2])))
    return links


def has_crossing(links: list[tuple[int, int]]) -> bool:
    """Whether two links cross, i.e. the Chinese reorders the English."""
    return any(i1 < i2 and j1 > j2 for i1, j1 in links for i2, j2 in links)


@pytest.fixture(scope="module")
def corpus() -> Corpus:
    """The committed corpus: split -> {"en", "zh", "align"} -> lines."""
    return {
        split: {side: read_lines(CORPUS / f"{split}.{side}") for side in ("en", "zh", "align")}
        for split in SPLITS
    }


@pytest.fixture(scope="module")
def pairs(corpus: Corpus) -> Pairs:
    """Every pair of every split as (English words, Chinese words, links)."""
    return [
        (en.split(), zh.split(), parse_links(align))
        for split in corpus.values()
        for en, zh, align in zip(split["en"], split["zh"], split["align"], strict=True)
    ]


# --- The generator ---------------------------------------------------------------------------

SMALL = {"dev": 20, "test": 20, "train": 60}


def test_same_seed_gives_the_same_pairs() -> None:
    assert gen.generate_splits(7, SMALL) == gen.generate_splits(7, SMALL)


def test_different_seeds_give_different_pairs() -> None:
    assert gen.generate_splits(7, SMALL) != gen.generate_splits(8, SMALL)


def test_a_larger_train_split_extends_the_same_stream() -> None:
    small = gen.generate_splits(7, SMALL)
    larger = gen.generate_splits(7, {**SMALL, "train": 80})
    assert larger["dev"] == small["dev"] and larger["test"] == small["test"]
    assert larger["train"][:60] == small["train"]


def test_the_classic_example_reorders_time_and_place_before_the_verb() -> None:
    the_park = gen.Phrase(gen.words("the")) + gen.lex("park", "公园")
    subject, verb, obj = gen.lex("I", "我"), gen.lex("eat", "吃"), gen.lex("apples", "苹果")
    place = gen.frame("in", "在 {}", the_park)
    time = gen.aligned("on:1 Sunday:1", "星期天:1")
    end = gen.lex(".", "。")
    phrase = gen.reorder(
        [subject, verb, obj, place, time, end], [subject, time, place, verb, obj, end]
    )
    pair = gen.to_pair(phrase)
    assert pair.en == "I eat apples in the park on Sunday ."
    assert pair.zh == "我 星期天 在 公园 吃 苹果 。"
    assert pair.alignment == "0-0 1-4 2-5 3-2 5-3 6-1 7-1 8-6"


def test_aligned_notation_links_equal_tags_only() -> None:
    pair = gen.to_pair(gen.aligned("will:1 not:2 eat:3 the", "不:2 会:1 吃:3"))
    assert pair.alignment == "0-1 1-0 2-2"


def test_the_command_line_writes_the_committed_corpus(tmp_path: Path) -> None:
    gen.main(["--out", str(tmp_path), "--seed", str(gen.DEFAULT_SEED)])
    for split in SPLITS:
        for side in ("en", "zh", "align"):
            name = f"{split}.{side}"
            assert (tmp_path / name).read_bytes() == (CORPUS / name).read_bytes(), name


# --- The committed corpus --------------------------------------------------------------------


def test_split_sizes_and_line_counts(corpus: Corpus) -> None:
    for split, sides in corpus.items():
        counts = {side: len(lines) for side, lines in sides.items()}
        assert len(set(counts.values())) == 1, f"{split}: {counts}"
    assert len(corpus["train"]["en"]) >= 10_000
    assert len(corpus["dev"]["en"]) == len(corpus["test"]["en"]) == 500


def test_no_sentence_appears_twice(corpus: Corpus) -> None:
    for side in ("en", "zh"):
        lines = [line for split in corpus.values() for line in split[side]]
        assert len(set(lines)) == len(lines), f"a {side} sentence repeats"


def test_alignment_indices_lie_inside_their_sentences(pairs: Pairs) -> None:
    for en, zh, links in pairs:
        assert links == sorted(set(links))
        assert all(0 <= i < len(en) and 0 <= j < len(zh) for i, j in links), " ".join(en)


def test_every_word_is_aligned_except_the_designed_function_words(pairs: Pairs) -> None:
    unaligned_en: Counter[str] = Counter()
    for en, zh, links in pairs:
        linked_en, linked_zh = {i for i, _ in links}, {j for _, j in links}
        unaligned_en.update(w.lower() for i, w in enumerate(en) if i not in linked_en)
        strays = [w for j, w in enumerate(zh) if j not in linked_zh and w not in gen.UNALIGNED_ZH]
        assert not strays, f"unaligned Chinese {strays} in {' '.join(zh)}"
    assert set(unaligned_en) <= set(gen.UNALIGNED_EN)
    assert unaligned_en["the"] > 0


def test_the_article_the_is_never_aligned(pairs: Pairs) -> None:
    for en, _, links in pairs:
        linked = {i for i, _ in links}
        assert not any(i in linked for i, w in enumerate(en) if w.lower() == "the")


def test_tokens_and_punctuation(corpus: Corpus) -> None:
    for split in corpus.values():
        for en, zh in zip(split["en"], split["zh"], strict=True):
            assert en.endswith((" .", " ?")) and zh.endswith((" 。", " ？"))
            assert not re.search(r"[A-Za-z]", zh), zh
            assert not re.search(r"[\u4e00-\u9fff]", en), en


def test_lengths_spread_from_short_to_past_thirty_words(pairs: Pairs) -> None:
    lengths = [len(en) for en, _, _ in pairs]
    assert min(lengths) <= 4
    assert max(lengths) >= 40
    assert sum(n > 20 for n in lengths) / len(lengths) > 0.2
    assert sum(n > 30 for n in lengths) / len(lengths) > 0.03


def test_most_pairs_reorder(pairs: Pairs) -> None:
    reordered = sum(has_crossing(links) for _, _, links in pairs)
    assert reordered / len(pairs) > 0.5


@pytest.mark.parametrize(
    ("english", "chinese"),
    [
        (r" \?$", r" 吗 ？$"),  # yes/no questions
        (r"^(What|Where|When|Who|Why) ", r"(什么|哪里|谁|为什么)"),  # question words in place
        (r" (two|three) ", r" (两|三) (个|本|只|杯|辆) "),  # measure words
        (r" (do|does) not ", r" 不 "),
        (r" did not ", r" 没 "),
        (r" because ", r"^因为 .* 所以 "),  # the subordinate clause moves to the front
        (r" after ", r" 以后 ， "),
        (r" than ", r" 比 "),
        (r" who ", r" 的 "),  # relative clauses before the noun
        (r"^There (is|are) ", r" 有 "),
    ],
)
def test_the_corpus_covers(english: str, chinese: str, corpus: Corpus) -> None:
    train = corpus["train"]
    hits = sum(
        bool(re.search(english, en) and re.search(chinese, zh))
        for en, zh in zip(train["en"], train["zh"], strict=True)
    )
    assert hits >= 20


def test_vocabulary_sizes(pairs: Pairs) -> None:
    english = {w for en, _, _ in pairs for w in en}
    chinese = {w for _, zh, _ in pairs for w in zh}
    assert 300 <= len(english) <= 700
    assert 200 <= len(chinese) <= 600
