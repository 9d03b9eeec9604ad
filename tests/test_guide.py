"""Guided alignment's data: word links → piece links, the teacher, and the stored links file."""

from __future__ import annotations

import random
import shutil
import sys

import numpy as np
import pytest

from nmt_cli import guide
from nmt_cli.alignment import format_pharaoh, surface_names, units
from nmt_cli.data.datadir import alignments_name, load_data_dir
from nmt_cli.errors import ConfigError, InputError, NmtError
from nmt_cli.guide import PieceLinks, piece_links, teacher_links, training_guides
from nmt_cli.lines import read_lines

# --- word links to piece links ----------------------------------------------------------------


def _arrays(result):
    tgt, src, weight = result
    assert tgt.dtype == np.int32 and src.dtype == np.int32 and weight.dtype == np.float32
    return tgt.tolist(), src.tolist(), weight.tolist()


def test_word_links_spread_over_the_pieces_of_linked_words():
    # il | ne | dor t | pas   →   he | does | not | sle e p
    src = ["▁il", "▁ne", "▁dor", "t", "▁pas"]
    tgt = ["▁he", "▁does", "▁not", "▁sle", "e", "p"]
    links = {(0, 0), (1, 2), (3, 2), (2, 3)}  # "does" unaligned, "not" from "ne" and "pas"
    assert _arrays(piece_links(links, src, tgt, "word")) == (
        [0, 2, 2, 3, 3, 4, 4, 5, 5],
        [0, 1, 4, 2, 3, 2, 3, 2, 3],
        [1.0, 0.5, 0.5, 0.5, 0.5, 0.5, 0.5, 0.5, 0.5],
    )


def test_char_links_reach_every_piece_holding_a_linked_character():
    # characters 甲 乙 | 丙  and  子 | 丑 寅 | (lone ▁, carried by 卯) 卯
    src = ["▁甲乙", "丙"]
    tgt = ["▁子", "丑寅", "▁", "卯"]
    links = {(0, 0), (2, 1), (1, 2), (2, 3)}  # 甲-子, 丙-丑, 乙-寅, 丙-卯
    assert _arrays(piece_links(links, src, tgt, "char")) == (
        [0, 1, 1, 2, 3],
        [0, 0, 1, 1, 1],
        [1.0, 0.5, 0.5, 1.0, 1.0],
    )


def test_piece_units_map_one_to_one_and_no_links_give_no_entries():
    src, tgt = ["▁a", "b", "▁c"], ["▁x", "y"]
    assert _arrays(piece_links({(2, 0), (1, 1)}, src, tgt, "piece")) == ([0, 1], [2, 1], [1, 1])
    assert _arrays(piece_links(set(), src, tgt, "word")) == ([], [], [])


def test_a_link_outside_the_pair_is_refused():
    with pytest.raises(ValueError, match="outside"):
        piece_links({(2, 0)}, ["▁a", "▁b"], ["▁x"], "word")


def test_piece_links_holds_each_pairs_entries():
    links = PieceLinks(
        offsets=np.array([0, 2, 2, 3]),
        tgt=np.array([0, 0, 1], np.int32),
        src=np.array([0, 1, 1], np.int32),
        weight=np.array([0.5, 0.5, 1.0], np.float32),
    )
    assert len(links) == 3
    assert [a.tolist() for a in links.pair(0)] == [[0, 0], [0, 1], [0.5, 0.5]]
    assert [a.tolist() for a in links.pair(1)] == [[], [], []]
    assert [a.tolist() for a in links.pair(2)] == [[1], [1], [1.0]]
    with pytest.raises(IndexError):
        links.pair(3)


# --- the teacher ------------------------------------------------------------------------------


def _lexicon_corpus(n: int = 300, seed: int = 0):
    """Pairs with known links: each source word w3..w23 has one translation, w0..w2 none, and
    the target puts the translations in reverse order."""
    rng = random.Random(seed)
    src, tgt, gold = [], [], []
    for _ in range(n):
        words = rng.sample(range(24), rng.randint(3, 8))
        kept = [(i, w) for i, w in enumerate(words) if w >= 3][::-1]
        src.append([f"w{w}" for w in words])
        tgt.append([f"T{w}" for _, w in kept])
        gold.append({(i, j) for j, (i, _) in enumerate(kept)})
    return src, tgt, gold


def test_the_teacher_recovers_a_known_alignment():
    pytest.importorskip("eflomal")
    src, tgt, gold = _lexicon_corpus()
    found = teacher_links(src, tgt)
    assert len(found) == len(gold)
    hits = sum(len(a & g) for a, g in zip(found, gold, strict=True))
    assert hits / sum(map(len, gold)) >= 0.95  # recall
    assert hits / sum(map(len, found)) >= 0.95  # precision


def test_without_eflomal_the_teacher_says_how_to_get_it(monkeypatch):
    monkeypatch.setitem(sys.modules, "eflomal", None)  # import fails as if not installed
    with pytest.raises(ConfigError) as caught:
        teacher_links([["a"]], [["x"]])
    message = str(caught.value)
    assert (
        "pip install eflomal==2.0.0" in message
        and "--alignments" in message
        and "\n" not in message
    )


@pytest.mark.parametrize(("code", "raised"), [(-2, KeyboardInterrupt), (1, NmtError)])
def test_a_teacher_stopped_by_ctrl_c_is_an_interrupt_and_a_failed_one_an_error(
    monkeypatch, code, raised
):
    import subprocess
    import types

    class Stopped:  # eflomal runs its sampler as a child process, which Ctrl-C reaches too
        def __init__(self, **_options):
            pass

        def align(self, *_args, **_files):
            raise subprocess.CalledProcessError(code, ["eflomal-align"])

    monkeypatch.setitem(sys.modules, "eflomal", types.SimpleNamespace(Aligner=Stopped))
    with pytest.raises(raised):  # Ctrl-C: exit 130 "interrupted", not a traceback
        teacher_links([["a"]], [["x"]])


def test_units_eflomal_would_split_are_kept_whole():
    assert guide._line(["a", "", "b c"]) == "a ▁ b▁c"
    assert guide._line(["a", " ", "b\u3000c"]) == "a ▁ b▁c"
    assert guide._line(["a", "b"]) == "a b"


# --- the training pairs' guidance -------------------------------------------------------------


@pytest.fixture
def data(toy_data_dir, tmp_path):
    """A private copy of the toy data directory (reversal task), which the tests may write to."""
    return load_data_dir(shutil.copytree(toy_data_dir, tmp_path / "data"))


def _reversal(src_units, tgt_units):
    """The true links of the toy corpus: the target is the source reversed."""
    return [{(i, len(s) - 1 - i) for i in range(len(s))} for s in src_units]


@pytest.fixture
def taught(monkeypatch):
    """The teacher replaced by the known answer; `calls` counts how often it is asked."""
    calls = []

    def teacher(src_units, tgt_units):
        calls.append(len(src_units))
        return _reversal(src_units, tgt_units)

    monkeypatch.setattr(guide, "teacher_links", teacher)
    return calls


def _train_words(data, side):
    return [line.split() for line in read_lines(data.text("train", side))]


def test_word_units_from_pieces_are_the_words_of_the_cleaned_text(data):
    pairs = guide.training_pairs(data, "word")
    for side in ("src", "tgt"):
        pieces = [p.src_pieces if side == "src" else p.tgt_pieces for p in pairs]
        assert [units(p, "word")[0] for p in pieces] == _train_words(data, side)


def test_the_teacher_sees_rare_words_not_unknown_pieces():
    assert surface_names(["<unk>琴", "。"], "钢琴 。", "word") == ["钢琴", "。"]
    assert surface_names(["a", "b"], "a b c", "word") == ["a", "b"]  # not as many: kept
    assert surface_names(["<", "u"], "钢", "char") == ["<", "u"]


def test_guides_are_computed_once_stored_and_reused(data, taught):
    events = []
    first = training_guides(data, on_event=events.append)
    stored = data.path / alignments_name("word")
    expected = _reversal(_train_words(data, "src"), _train_words(data, "tgt"))
    assert list(read_lines(stored)) == [format_pharaoh(a) for a in expected]
    assert taught == [len(expected)]
    assert any(e.kind == "count" and e.data["task"] == guide.ALIGNING for e in events)
    assert not any(e.kind == "warning" for e in events)  # spaced text: words are right

    second = training_guides(data)
    assert taught == [len(expected)]  # read back, not recomputed
    for name in ("offsets", "tgt", "src", "weight"):
        assert np.array_equal(getattr(first, name), getattr(second, name))
    assert load_data_dir(data.path).fingerprint == data.fingerprint  # the extra file is harmless


def test_guides_cover_every_target_piece_of_the_reversal_task(data, taught):
    guides = training_guides(data)
    tgt_ids = data.ids("train", "tgt")
    assert len(guides) == len(tgt_ids)
    for i in range(len(guides)):
        tgt, src, weight = guides.pair(i)
        sums = np.bincount(tgt, weights=weight, minlength=len(tgt_ids[i]))
        assert np.allclose(sums, 1.0)  # every target word is linked in this task
        assert src.max() < len(data.ids("train", "src")[i])


def test_a_user_file_is_read_and_the_data_dir_left_alone(data, taught, tmp_path):
    user = tmp_path / "user.align"
    user.write_text("0-0\n" * len(data.ids("train", "src")), encoding="utf-8")
    guides = training_guides(data, alignments=user)
    assert taught == [] and not (data.path / alignments_name("word")).exists()
    for i, pair in enumerate(guide.training_pairs(data, "word", guide.ignore)):
        first_src = units(pair.src_pieces, "word")[1][0].nonzero()[0]
        first_tgt = units(pair.tgt_pieces, "word")[1][0].nonzero()[0]
        tgt, src, weight = guides.pair(i)
        assert sorted(set(tgt.tolist())) == first_tgt.tolist()
        assert sorted(set(src.tolist())) == first_src.tolist()
        assert np.allclose(weight, 1 / len(first_src))


def _bad_file(tmp_path, data, edit):
    lines = [format_pharaoh(a) for a in _reversal(_train_words(data, "src"), [])]
    edit(lines)
    path = tmp_path / "bad.align"
    path.write_text("".join(line + "\n" for line in lines), encoding="utf-8")
    return path


@pytest.mark.parametrize(
    ("edit", "expected"),
    [
        (lambda lines: lines.pop(), r"has \d+ lines but .* has \d+ training pairs: .*one line per"),
        (lambda lines: lines.__setitem__(2, "0-0 1:2"), r"bad\.align line 3: '1:2' is not"),
        (
            lambda lines: lines.__setitem__(4, "0-0 0-99"),
            r"bad\.align line 5: link 0-99 names target word 99, but that pair has \d target",
        ),
        (
            lambda lines: lines.__setitem__(0, "42-0"),
            r"bad\.align line 1: link 42-0 names source word 42, but that pair has \d source",
        ),
    ],
    ids=["line-count", "malformed", "target-index", "source-index"],
)
def test_a_bad_alignments_file_gets_one_line_naming_file_and_line(
    data, taught, tmp_path, edit, expected
):
    path = _bad_file(tmp_path, data, edit)
    with pytest.raises(InputError, match=expected) as caught:
        training_guides(data, alignments=path)
    assert "\n" not in str(caught.value) and str(path) in str(caught.value)


def test_a_bad_stored_file_says_to_delete_it(data, taught):
    (data.path / alignments_name("word")).write_text("0-0\n", encoding="utf-8")
    with pytest.raises(InputError, match="delete it and it is computed again"):
        training_guides(data)


def test_an_interrupted_store_leaves_no_file(data, taught, monkeypatch):
    written = []

    def failing(links):
        if len(written) == 5:
            raise KeyboardInterrupt
        written.append(links)
        return format_pharaoh(links)

    monkeypatch.setattr(guide, "format_pharaoh", failing)
    with pytest.raises(KeyboardInterrupt):
        training_guides(data)
    assert list(data.path.glob("*align*")) == []  # neither the file nor its temporary sibling


def test_a_read_only_data_dir_keeps_the_links_in_memory_or_in_the_fallback(
    data, taught, monkeypatch, tmp_path
):
    monkeypatch.setattr(guide, "_writable", lambda directory: directory != data.path)
    events = []
    in_memory = training_guides(data, on_event=events.append)
    warnings = [e for e in events if e.kind == "warning"]
    assert len(warnings) == 1 and "not writable" in warnings[0].data["message"]
    assert not (data.path / alignments_name("word")).exists()

    model = tmp_path / "model"
    model.mkdir()
    kept = training_guides(data, fallback_dir=model)
    assert (model / alignments_name("word")).is_file()
    assert len(taught) == 2
    again = training_guides(data, fallback_dir=model)
    assert len(taught) == 2  # found in the fallback directory
    assert np.array_equal(in_memory.weight, kept.weight)
    assert np.array_equal(kept.src, again.src)


def test_an_unknown_unit_is_a_config_error(data):
    with pytest.raises(ConfigError, match="unknown alignment unit"):
        training_guides(data, unit="sentence")


def test_a_failing_teacher_is_one_clean_error(data, monkeypatch):
    eflomal = pytest.importorskip("eflomal")

    def broken(self, *args, **kwargs):
        raise RuntimeError("eflomal binary exited with status 1")

    monkeypatch.setattr(eflomal.Aligner, "align", broken)
    with pytest.raises(NmtError, match="the teacher eflomal failed"):
        training_guides(data)
    assert not (data.path / alignments_name("word")).exists()


def test_the_real_teacher_aligns_the_toy_data(data):
    pytest.importorskip("eflomal")
    guides = training_guides(data)
    stored = list(read_lines(data.path / alignments_name("word")))
    assert len(stored) == len(guides) == len(data.ids("train", "src"))
    src_words, tgt_words = _train_words(data, "src"), _train_words(data, "tgt")
    expected = _reversal(src_words, tgt_words)
    found = [guide.parse_pharaoh(line) for line in stored]
    hits = sum(len(a & g) for a, g in zip(found, expected, strict=True))
    assert hits / sum(map(len, expected)) >= 0.8


def test_a_missing_alignments_file_is_an_input_error(data, tmp_path):
    with pytest.raises(InputError, match=r"none\.align does not exist"):
        training_guides(data, alignments=tmp_path / "none.align")


def test_word_units_over_chinese_without_spaces_are_warned_about():
    def pair(src, tgt):
        return guide.TrainingPair([], [], src.split(), tgt.split())

    unspaced = [pair("Where is the station ?", "火车站在哪里？")] * 3
    segmented = [pair("My friends got up .", "我 的 朋友 起床 了 。")] * 3
    assert guide._mostly_unsegmented(unspaced + segmented[:2])
    assert not guide._mostly_unsegmented(segmented + unspaced[:2])
