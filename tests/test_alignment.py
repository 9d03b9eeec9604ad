"""Alignment core: piece→word merging, link extraction, symmetrisation, gold files and AER."""

from __future__ import annotations

from collections import Counter
from dataclasses import replace

import numpy as np
import pytest

from nmt_cli.aligner import AlignOptions, align_pair
from nmt_cli.alignment import (
    GoldAlignment,
    LinkRates,
    check_range,
    extract_links,
    format_pharaoh,
    grow_links,
    mean_weights,
    merge_to_words,
    parse_pharaoh,
    read_gold,
    score_alignments,
    shift_rows,
    symmetrize,
    transpose_links,
    with_prior,
)
from nmt_cli.errors import ConfigError, InputError

# --- merging pieces ---------------------------------------------------------------------------


def test_words_sum_source_pieces_and_average_target_pieces():
    # Source words: Das | Häus+chen | .   Target words: the | hou+se
    src = ["▁Das", "▁Häus", "chen", "▁."]
    tgt = ["▁the", "▁hou", "se"]
    attention = np.array(
        [
            [0.7, 0.1, 0.1, 0.1],
            [0.1, 0.4, 0.4, 0.1],
            [0.0, 0.2, 0.6, 0.2],
        ]
    )
    merged = merge_to_words(attention, src, tgt)
    # Row "the": [0.7, 0.1+0.1, 0.1]. Row "house": mean of [0.1, 0.8, 0.1] and [0.0, 0.8, 0.2].
    assert merged.src_words == ["Das", "Häuschen", "."]
    assert merged.tgt_words == ["the", "house"]
    np.testing.assert_allclose(merged.weights, [[0.7, 0.2, 0.1], [0.05, 0.8, 0.15]])
    np.testing.assert_allclose(merged.weights.sum(axis=1), 1.0)


def test_a_lone_marker_belongs_to_the_following_word():
    src = ["▁", "你好", "▁world", "▁", "▁x", "▁"]
    attention = np.full((1, 6), 1 / 6)
    merged = merge_to_words(attention, src, ["▁hi"])
    # "▁"+"你好" form one word, "▁"+"▁x" another; the trailing "▁" joins the word before it.
    assert merged.src_words == ["你好", "world", "x"]
    np.testing.assert_allclose(merged.weights, [[2 / 6, 1 / 6, 3 / 6]])
    several = merge_to_words(np.full((1, 3), 1 / 3), ["▁a", "▁", "▁"], ["▁hi"])
    assert several.src_words == ["a"]  # lone "▁"s that end the sentence make no word
    np.testing.assert_allclose(several.weights, [[1.0]])


def test_char_unit_shares_source_weight_and_copies_target_rows():
    src = ["▁我", "喜欢", "▁", "苹果"]
    tgt = ["▁苹果", "。"]
    attention = np.array([[0.4, 0.2, 0.2, 0.2], [0.1, 0.1, 0.0, 0.8]])
    merged = merge_to_words(attention, src, tgt, unit="char")
    # 喜欢's 0.2 is halved; the lone "▁" gives its 0.2 to 苹果, whose 0.4 is halved.
    assert merged.src_words == ["我", "喜", "欢", "苹", "果"]
    assert merged.tgt_words == ["苹", "果", "。"]
    np.testing.assert_allclose(merged.weights[0], [0.4, 0.1, 0.1, 0.2, 0.2])
    np.testing.assert_allclose(merged.weights[1], merged.weights[0])
    np.testing.assert_allclose(merged.weights[2], [0.1, 0.05, 0.05, 0.4, 0.4])
    np.testing.assert_allclose(merged.weights.sum(axis=1), 1.0)


def test_piece_unit_keeps_pieces_without_markers():
    attention = np.eye(2)
    merged = merge_to_words(attention, ["▁ab", "c"], ["▁x", "▁"], unit="piece")
    assert merged.src_words == ["ab", "c"]
    assert merged.tgt_words == ["x", "▁"]
    np.testing.assert_allclose(merged.weights, attention)


def test_eos_column_and_row_are_dropped_and_rows_renormalised():
    attention = np.array([[0.3, 0.5, 0.2], [0.1, 0.1, 0.8]])  # one target piece + EOS step
    merged = merge_to_words(attention, ["▁a", "▁b"], ["▁x"])
    np.testing.assert_allclose(merged.weights, [[0.375, 0.625]])


def test_eos_can_be_kept_as_a_pseudo_word():
    attention = np.array([[0.3, 0.5, 0.2], [0.1, 0.1, 0.8]])
    merged = merge_to_words(attention, ["▁a", "▁b"], ["▁x"], drop_eos=False)
    assert merged.src_words == ["a", "b", "</s>"]
    assert merged.tgt_words == ["x", "</s>"]
    np.testing.assert_allclose(merged.weights, attention)


@pytest.mark.parametrize("unit", ["word", "char", "piece"])
@pytest.mark.parametrize("extra", [0, 1])
def test_merged_rows_still_sum_to_one(unit, extra):
    rng = np.random.default_rng(7)
    choices = ["▁", "▁the", "ing", "▁猫", "咪", "s", "▁a"]
    src = ["▁x"] + [choices[k] for k in rng.integers(0, len(choices), 12)]
    tgt = ["▁y"] + [choices[k] for k in rng.integers(0, len(choices), 9)]
    attention = rng.random((len(tgt) + extra, len(src) + extra))
    attention /= attention.sum(axis=1, keepdims=True)
    merged = merge_to_words(attention, src, tgt, unit=unit)
    assert merged.weights.shape == (len(merged.tgt_words), len(merged.src_words))
    np.testing.assert_allclose(merged.weights.sum(axis=1), 1.0)


def test_merging_rejects_a_matrix_that_does_not_fit_and_an_unknown_unit():
    with pytest.raises(ValueError, match="does not fit"):
        merge_to_words(np.ones((1, 5)), ["▁a", "▁b"], ["▁x"])
    with pytest.raises(ConfigError, match="word, char, piece"):
        merge_to_words(np.ones((1, 2)), ["▁a", "▁b"], ["▁x"], unit="syllable")


def test_shift_rows_takes_the_next_step_and_the_eos_row_last():
    attention = np.array([[1.0, 0.0], [0.0, 1.0], [0.5, 0.5]])  # 2 pieces + EOS step
    shifted = shift_rows(attention, 1)
    np.testing.assert_allclose(shifted, [[0.0, 1.0], [0.5, 0.5], [0.5, 0.5]])
    merged = merge_to_words(shifted, ["▁a", "▁b"], ["▁x", "▁y"])
    np.testing.assert_allclose(merged.weights, [[0.0, 1.0], [0.5, 0.5]])
    np.testing.assert_allclose(shift_rows(attention, 0), attention)


# --- links ------------------------------------------------------------------------------------

WEIGHTS = np.array([[0.7, 0.2, 0.1], [0.05, 0.8, 0.15], [0.0, 0.0, 0.0]])


def test_argmax_links_each_target_word_to_its_strongest_source_word():
    assert extract_links(WEIGHTS) == {(0, 0), (1, 1)}  # the all-zero row stays unaligned
    assert extract_links(np.array([[0.5, 0.5]])) == {(0, 0)}  # ties: the first


def test_threshold_links_every_cell_at_or_above_it():
    assert extract_links(WEIGHTS, "threshold", 0.5) == {(0, 0), (1, 1)}
    assert extract_links(WEIGHTS, "threshold", 0.15) == {(0, 0), (1, 0), (1, 1), (2, 1)}


def test_mutual_keeps_only_cells_strongest_in_their_row_and_their_column():
    weights = np.array(
        [
            [0.6, 0.3, 0.1],  # row maximum on source 0, but column 0's maximum is row 1
            [0.7, 0.2, 0.1],  # row maximum on source 0, and the maximum of column 0
            [0.1, 0.3, 0.6],  # row maximum on source 2, and the maximum of column 2
            [0.0, 0.0, 0.0],  # no weight: no link
        ]
    )
    assert extract_links(weights, "argmax") == {(0, 0), (0, 1), (2, 2)}
    # column 0's maximum is target word 1, so target word 0 is nobody's strongest partner
    assert extract_links(weights, "mutual") == {(0, 1), (2, 2)}
    assert extract_links(np.zeros((2, 0)), "mutual") == set()
    # --unit char copies a piece's row to each of its characters: tied maxima all count
    tied = np.array([[0.6, 0.4], [0.6, 0.4], [0.1, 0.9]])  # target rows 0 and 1 are one piece
    assert extract_links(tied, "mutual") == {(0, 0), (0, 1), (1, 2)}


def test_extraction_rejects_unknown_methods_and_thresholds():
    with pytest.raises(ConfigError, match="argmax, mutual, threshold"):
        extract_links(WEIGHTS, "max")
    with pytest.raises(ConfigError, match="threshold"):
        extract_links(WEIGHTS, "threshold", 0.0)


def test_grow_links_adds_weaker_neighbours_of_a_link_while_a_word_is_unaligned():
    # rows: target words 0..2; columns: source words 0..3
    weights = np.array(
        [
            [0.6, 0.25, 0.0, 0.2],  # (3, 0) reaches 0.2 but touches no link
            [0.2, 0.0, 0.0, 0.0],
            [0.0, 0.0, 0.1, 0.7],  # (2, 2) touches (3, 2) but stays below 0.2
        ]
    )
    links = extract_links(weights, "threshold", 0.5)
    assert links == {(0, 0), (3, 2)}
    grown = grow_links(links, weights, 0.2)
    # (1, 0) and (0, 1) touch (0, 0), and source word 1 and target word 1 are unaligned
    assert grown == {(0, 0), (0, 1), (1, 0), (3, 2)}
    assert grow_links(links, weights, 0.3) == links  # nothing reaches 0.3 beside the links
    assert grow_links(set(), weights, 0.2) == set()  # growing needs a link to start from
    with pytest.raises(ConfigError, match="grow threshold"):
        grow_links(links, weights, 0.0)


def test_grow_links_on_a_wide_matrix_starts_from_every_link():
    # 2 target words, 4 source words: the seed (3, 1) has a source index beyond the rows
    weights = np.array([[0.0, 0.0, 0.0, 0.2], [0.0, 0.0, 0.25, 0.7]])
    assert grow_links({(3, 1)}, weights, 0.2) == {(3, 1), (2, 1), (3, 0)}


def test_grow_threshold_grows_directional_links_over_real_words_only():
    from nmt_cli.aligner import AlignOptions, directional_links

    src_pieces, tgt_pieces = ["▁a", "▁b", "▁c"], ["▁x", "▁y"]
    # rows: x, y, the end-of-sentence step; columns: a, b, c, source end-of-sentence
    attention = np.array([[0.8, 0.1, 0.0, 0.1], [0.0, 0.0, 0.3, 0.7], [0.0, 0.0, 0.1, 0.9]])
    raw = (src_pieces, tgt_pieces, attention)
    for include_eos in (False, True):
        plain = AlignOptions(include_eos=include_eos)
        grown = AlignOptions(include_eos=include_eos, grow_threshold=0.2)
        _, links = directional_links(raw, plain)
        _, grown_links = directional_links(raw, grown)
        if include_eos:  # y's strongest weight is on </s>: unaligned, and no seed to grow from
            assert links == grown_links == {(0, 0)}
        else:  # without </s>, y's row is renormalised onto c and links there
            assert links == grown_links == {(0, 0), (2, 1)}
    wide = (src_pieces, tgt_pieces, np.array([[0.6, 0.3, 0.0], [0.0, 0.25, 0.75]]))
    assert directional_links(wide, AlignOptions(grow_threshold=0.2))[1] == {(0, 0), (1, 0), (2, 1)}


def test_link_rates_count_links_against_meetings_with_smoothing():
    rates = LinkRates(smoothing=1.0)
    rates.add(["The", "dog"], ["狗"], {(1, 0)})
    rates.add(["the", "the", "cat"], ["猫"], {(0, 0), (2, 0)})
    rates.add(["a", "dog"], ["狗", "狗"], set())
    assert rates.meetings("dog", "狗") == 1 + 2  # once, then twice (two 狗 tokens)
    assert rates.meetings("THE", "猫") == 2  # case-folded; two "the" tokens meet one 猫
    assert rates.rate("dog", "狗") == pytest.approx(1 / (3 + 1))
    assert rates.rate("the", "猫") == pytest.approx(1 / (2 + 1))
    assert rates.rate("the", "狗") == 0.0  # met, never linked
    assert rates.rate("fish", "鱼") == 0.0  # never met
    matrix = rates.matrix(["the", "cat", "dog"], ["猫", "狗"])
    np.testing.assert_allclose(matrix, [[1 / 3, 1 / 2, 0.0], [0.0, 0.0, 1 / 4]])
    assert rates.matrix([], ["猫"]).shape == (1, 0)
    rates.add(["dog"], ["狗"], {(0, 0)})  # counts stay right after more pairs come in
    assert rates.rate("dog", "狗") == pytest.approx(2 / (4 + 1))


def test_link_rates_meetings_match_a_count_of_every_token_pairing():
    rng = np.random.default_rng(7)
    vocab_src, vocab_tgt = ["a", "B", "b", "c", "d", "e"], ["x", "y", "z", "w"]
    pairs = []
    for _ in range(300):  # repeated words, empty sides, case-folded duplicates
        src = list(rng.choice(vocab_src, rng.integers(0, 7)))
        tgt = list(rng.choice(vocab_tgt, rng.integers(0, 6)))
        links = {(i, j) for i in range(len(src)) for j in range(len(tgt)) if rng.random() < 0.2}
        pairs.append((src, tgt, links))
    expected = Counter()
    for src, tgt, _ in pairs:
        for e in src:
            for f in tgt:
                expected[e.casefold(), f] += 1
    rates = LinkRates()
    for pair in pairs:
        rates.add(*pair)
    rates._count_meetings(chunk=7)  # many small chunks, a sentence pair never split
    counted = {(e, f): met for e, f, _, met in rates.counts()}
    assert counted == {key: expected[key] for key in rates.links}
    assert len(counted) > 10


def test_with_prior_mixes_by_share_and_checks_it():
    weights, prior = np.array([[0.8, 0.2]]), np.array([[0.0, 1.0]])
    np.testing.assert_allclose(with_prior(weights, prior, 0.5), [[0.4, 0.6]])
    np.testing.assert_allclose(with_prior(weights, prior, 0.0), weights)
    with pytest.raises(ConfigError, match="share"):
        with_prior(weights, prior, 1.5)
    with pytest.raises(ValueError):
        with_prior(weights, prior.T, 0.5)


def test_transpose_links_swaps_sides():
    assert transpose_links({(0, 1), (2, 3)}) == {(1, 0), (3, 2)}


# Hand-worked 5×5 example (links are (src, tgt)):
#   forward  = {0-0, 1-1, 2-2, 4-0}     backward = {0-0, 1-1, 3-4, 0-1}
#   intersection = {0-0, 1-1};  union adds 2-2, 4-0, 3-4, 0-1.
#   grow-diag: around 0-0 the union neighbour 0-1 joins two aligned words → no;
#     around 1-1 the diagonal 2-2 has both words free → add; nothing is next to 2-2 → stop.
#     4-0 and 3-4 touch no alignment link.
#   final (forward, then backward): 4-0 has source 4 free → add; 0-1 both aligned → no;
#     3-4 both free → add.
#   final-and: 4-0's target 0 is aligned → no; 3-4 both free → add.
FORWARD = {(0, 0), (1, 1), (2, 2), (4, 0)}
BACKWARD = {(0, 0), (1, 1), (3, 4), (0, 1)}


@pytest.mark.parametrize(
    ("method", "expected"),
    [
        ("intersection", {(0, 0), (1, 1)}),
        ("union", {(0, 0), (1, 1), (2, 2), (4, 0), (3, 4), (0, 1)}),
        ("grow-diag", {(0, 0), (1, 1), (2, 2)}),
        ("grow-diag-final", {(0, 0), (1, 1), (2, 2), (4, 0), (3, 4)}),
        ("grow-diag-final-and", {(0, 0), (1, 1), (2, 2), (3, 4)}),
    ],
)
def test_symmetrization_methods_on_a_hand_worked_example(method, expected):
    assert symmetrize(FORWARD, BACKWARD, method, src_len=5, tgt_len=5) == expected


def test_grow_needs_only_one_of_the_two_words_unaligned():
    # 0-1 neighbours 0-0; source 0 is aligned but target 1 is not → added.
    assert symmetrize({(0, 0), (0, 1)}, {(0, 0)}, "grow-diag") == {(0, 0), (0, 1)}


def test_symmetrization_rejects_unknown_methods_and_links_outside_the_sentence():
    with pytest.raises(ConfigError, match="grow-diag-final-and"):
        symmetrize(FORWARD, BACKWARD, "grow-final")
    with pytest.raises(ValueError, match="source index 4"):
        symmetrize(FORWARD, BACKWARD, src_len=4, tgt_len=5)


# --- Pharaoh and gold files -------------------------------------------------------------------


def test_pharaoh_round_trip_sorted_by_source_then_target():
    line = format_pharaoh({(2, 0), (0, 1), (0, 0)})
    assert line == "0-0 0-1 2-0"
    assert parse_pharaoh(line) == {(2, 0), (0, 1), (0, 0)}
    assert parse_pharaoh("") == set()
    with pytest.raises(InputError, match="'x'"):
        parse_pharaoh("0-1 x")


def test_gold_in_pharaoh_form_with_possible_links():
    gold = read_gold(["0-0 1?2 2p1", "", "1-0"])
    assert gold[0] == GoldAlignment(frozenset({(0, 0)}), frozenset({(0, 0), (1, 2), (2, 1)}))
    assert gold[1] == GoldAlignment(frozenset(), frozenset())
    assert gold[2].sure == {(1, 0)} and gold[2].possible == {(1, 0)}


def test_gold_in_pharaoh_form_can_be_one_based():
    (gold,) = read_gold(["1-1 2?3"], one_based=True)
    assert gold.sure == {(0, 0)} and gold.possible == {(0, 0), (1, 2)}


def test_gold_in_naacl_form_is_one_based_and_grouped_by_sentence(tmp_path):
    path = tmp_path / "gold.naacl"
    path.write_text("1 1 1 S\n1 2 3 P\n1 0 2 S\n\n3 1 1\n", encoding="utf-8")
    gold = read_gold(path)
    # Sentence 2 has no lines, the link to position 0 (NULL) is skipped, S is the default.
    assert len(gold) == 3
    assert gold[0] == GoldAlignment(frozenset({(0, 0)}), frozenset({(0, 0), (1, 2)}))
    assert gold[1] == GoldAlignment(frozenset(), frozenset())
    assert gold[2].sure == {(0, 0)}


@pytest.mark.parametrize("lines", [["0-0", "0-x"], ["1 1 1 S", "1 1"]])
def test_a_bad_gold_line_names_the_file_and_line(lines):
    with pytest.raises(InputError, match=r"gold\.txt line 2"):
        read_gold(lines, name="gold.txt")


def test_a_missing_gold_file_is_an_input_error(tmp_path):
    with pytest.raises(InputError, match="missing.txt"):
        read_gold(tmp_path / "missing.txt")


def test_out_of_range_gold_links_are_reported_not_raised():
    gold = [GoldAlignment(frozenset({(0, 0)}), frozenset({(0, 0), (3, 1)}))]
    problems = check_range(gold, src_lens=[3], tgt_lens=[2])
    assert len(problems) == 1
    assert "sentence 1" in problems[0] and "3-1" in problems[0]
    assert check_range(gold, src_lens=[4], tgt_lens=[2]) == []
    assert "2 source" in check_range(gold, src_lens=[4, 4], tgt_lens=[2, 2])[0]


# --- AER ----------------------------------------------------------------------------------------


def _gold(sure, possible=()):
    return GoldAlignment(frozenset(sure), frozenset(sure) | frozenset(possible))


def test_perfect_prediction_has_aer_zero():
    gold = [_gold({(0, 0), (1, 1)}, {(2, 1)})]
    score = score_alignments([{(0, 0), (1, 1)}], gold)
    assert (score.aer, score.precision, score.recall) == (0.0, 1.0, 1.0)


def test_empty_prediction_has_aer_one_and_no_credit():
    score = score_alignments([set()], [_gold({(0, 0)})])
    assert (score.aer, score.precision, score.recall) == (1.0, 0.0, 0.0)
    assert score_alignments([set()], [_gold(set())]).aer == 1.0


def test_mixed_prediction_scored_at_corpus_level():
    # Sentence 1: S = {0-0, 1-1}, P = S + {2-1}, A = {0-0, 2-1, 2-2}
    #   |A| = 3, |S| = 2, |A∩S| = 1, |A∩P| = 2 → AER = 1 - 3/5 = 0.4, P = 2/3, R = 1/2.
    # Sentence 2: S = P = {0-0}, A = {0-0}.
    #   Corpus: |A| = 4, |S| = 3, |A∩S| = 2, |A∩P| = 3 → AER = 1 - 5/7, P = 3/4, R = 2/3.
    first = score_alignments([{(0, 0), (2, 1), (2, 2)}], [_gold({(0, 0), (1, 1)}, {(2, 1)})])
    assert first.aer == pytest.approx(0.4)
    assert first.precision == pytest.approx(2 / 3)
    assert first.recall == pytest.approx(1 / 2)
    both = score_alignments(
        [{(0, 0), (2, 1), (2, 2)}, {(0, 0)}],
        [_gold({(0, 0), (1, 1)}, {(2, 1)}), _gold({(0, 0)})],
    )
    assert both.aer == pytest.approx(2 / 7)  # not the mean of 0.4 and 0
    assert (both.predicted, both.sure, both.sure_hits, both.possible_hits) == (4, 3, 2, 3)
    assert both.precision == pytest.approx(3 / 4) and both.recall == pytest.approx(2 / 3)


def test_scoring_needs_one_gold_alignment_per_prediction():
    with pytest.raises(InputError, match="2 predicted alignments but 1 gold"):
        score_alignments([set(), set()], [_gold(set())])


def test_naacl_sentence_numbers_count_from_one():
    with pytest.raises(InputError, match="line 1.*counted from 1"):
        read_gold(["0 1 1 S"])


def test_words_drawn_to_eos_stay_unaligned_when_eos_is_kept():
    src, tgt = ["▁a", "▁b"], ["▁x", "▁y"]
    attention = np.array(
        [
            [0.7, 0.2, 0.1],  # x: mostly a
            [0.1, 0.2, 0.7],  # y: mostly the source EOS
            [0.1, 0.8, 0.1],  # the target EOS step
        ]
    )
    words = merge_to_words(attention, src, tgt, drop_eos=False)
    assert words.src_words == ["a", "b", "</s>"] and words.tgt_words == ["x", "y", "</s>"]
    links = extract_links(words.weights, "argmax")
    assert links == {(0, 0), (2, 1), (1, 2)}
    assert words.without_eos(links) == {(0, 0)}
    dropped = merge_to_words(attention, src, tgt, drop_eos=True)
    assert dropped.without_eos(extract_links(dropped.weights, "argmax")) == {(0, 0), (1, 1)}


class _Scripted:
    """A stand-in translator whose forced attention is given: rows are target pieces + EOS."""

    align_shift = 0

    def __init__(self, src_pieces, tgt_pieces, rows):
        self.result = (src_pieces, tgt_pieces, np.array(rows))

    def forced_attention(self, source, target, extra=0):
        src_pieces, tgt_pieces, rows = self.result
        return src_pieces, tgt_pieces, np.concatenate([rows, rows[-1:].repeat(extra, 0)])


FORWARD_MODEL = _Scripted(["▁a", "▁b"], ["▁x", "▁y"], [[0.6, 0.4], [0.55, 0.45], [0.5, 0.5]])
BACKWARD_MODEL = _Scripted(["▁x", "▁y"], ["▁a", "▁b"], [[0.9, 0.1], [0.1, 0.9], [0.5, 0.5]])


@pytest.mark.parametrize("include_eos", [False, True])
def test_mean_symmetrisation_averages_the_two_directions(include_eos):
    alone = align_pair(FORWARD_MODEL, "a b", "x y", AlignOptions())
    assert alone.links == {(0, 0), (0, 1)}  # the forward model alone puts y on a
    options = AlignOptions(symmetrize="mean", include_eos=include_eos)
    pair = align_pair(FORWARD_MODEL, "a b", "x y", options, reverse=BACKWARD_MODEL)
    np.testing.assert_allclose(pair.weights, [[0.75, 0.25], [0.325, 0.675]])
    assert (pair.src_words, pair.tgt_words) == (["a", "b"], ["x", "y"])
    assert pair.links == {(0, 0), (1, 1)}  # the backward model's certainty moves y to b


def test_link_symmetrisation_also_works_with_eos_kept():
    options = AlignOptions(symmetrize="intersection", include_eos=True)
    pair = align_pair(FORWARD_MODEL, "a b", "x y", options, reverse=BACKWARD_MODEL)
    assert pair.links == {(0, 0)}
    assert pair.tgt_words[-1] == "</s>"  # still shown


def test_mean_weights_refuses_matrices_of_two_different_pairs():
    with pytest.raises(ValueError):
        mean_weights(np.ones((2, 3)), np.ones((2, 3)))


class _Corpus:
    """A stand-in translator whose forced attention depends on the pair: (source, target) →
    rows over source words, one row per target word plus the end-of-sentence step."""

    align_shift = 0

    def __init__(self, rows_of):
        self.rows_of = rows_of

    def forced_attention(self, source, target, extra=0):
        assert extra == 0
        src = ["▁" + w for w in source.split()]
        tgt = ["▁" + w for w in target.split()]
        return src, tgt, np.array(self.rows_of[source, target])


def test_corpus_prior_moves_an_uncertain_link_to_the_pair_linked_elsewhere():
    from nmt_cli.aligner import align_pairs

    model = _Corpus(
        {
            ("a c", "x z"): [[0.9, 0.1], [0.1, 0.9], [0.5, 0.5]],  # a-x and c-z, clearly
            ("a b", "x y"): [[0.4, 0.6], [0.3, 0.7], [0.5, 0.5]],  # x leans to b: wrong
        }
    )
    pairs = [("a c", "x z")] * 10 + [("a b", "x y")]
    plain = list(align_pairs(model, pairs, AlignOptions()))
    assert plain[-1].links == {(1, 0), (1, 1)}
    # First pass: a-x linked 10 times in 11 meetings → rate 10 / (11 + 5) = 0.625; b-x and b-y
    # once in one meeting → 1 / 6. Mixed half and half, x's row becomes a: 0.2 + 0.3125 = 0.51,
    # b: 0.3 + 0.083 = 0.38, so x moves to a; y's stays on b (0.43 against a's 0.15).
    mixed = list(align_pairs(model, pairs, AlignOptions(corpus_prior=0.5)))
    assert len(mixed) == len(pairs)
    assert mixed[-1].links == {(0, 0), (1, 1)}
    assert all(pair.links == {(0, 0), (1, 1)} for pair in mixed[:-1])
    np.testing.assert_allclose(mixed[-1].weights, plain[-1].weights)  # the models' own, shown


def test_corpus_prior_applies_to_both_directions_of_a_pair_of_unequal_lengths():
    from nmt_cli.aligner import align_pairs

    clear = [[0.9, 0.1], [0.1, 0.9], [0.5, 0.5]]
    forward = _Corpus(
        {
            ("a c", "x z"): clear,
            # x leans to b, y is on c: forward alone gives b-x, c-y
            ("a b c", "x y"): [[0.4, 0.45, 0.15], [0.1, 0.2, 0.7], [0.3, 0.3, 0.4]],
        }
    )
    backward = _Corpus(
        {
            ("x z", "a c"): clear,
            # a leans to y, b to x, c to y: backward alone gives y-a, x-b, y-c
            ("x y", "a b c"): [[0.45, 0.55], [0.6, 0.4], [0.2, 0.8], [0.5, 0.5]],
        }
    )
    pairs = [("a c", "x z")] * 10 + [("a b c", "x y")]
    options = AlignOptions(symmetrize="intersection")
    plain = list(align_pairs(forward, pairs, options, reverse=backward))
    assert plain[-1].links == {(1, 0), (2, 1)}  # a-x is in neither direction
    mixed = list(align_pairs(forward, pairs, replace(options, corpus_prior=0.5), backward))
    # a-x (rate 10 / (11 + 5)) now wins x's row forward and a's row backward: the intersection
    # holds it only if the prior reached both directions, each the right way round
    assert mixed[-1].links == {(0, 0), (2, 1)}


@pytest.mark.parametrize("include_eos", [False, True])
def test_corpus_prior_scales_the_eos_pseudo_word_with_the_rest(include_eos):
    from nmt_cli.aligner import align_pairs

    # rows x, y and the end-of-sentence step; columns a, b and the source end-of-sentence
    model = _Corpus({("a b", "x y"): [[0.45, 0.15, 0.40], [0.1, 0.8, 0.1], [0.3, 0.3, 0.4]]})
    options = AlignOptions(include_eos=include_eos, corpus_prior=0.5)
    (pair,) = align_pairs(model, [("a b", "x y")], options)
    assert pair.links == {(0, 0), (1, 1)}  # x is not pushed onto </s> by the mixing


def test_char_units_split_chinese_and_keep_english_words():
    from nmt_cli.alignment import units

    names, members = units(["▁Tom", "▁works", "▁on", "▁Mon", "day", "▁."], "char")
    assert names == ["Tom", "works", "on", "Monday", "."]
    assert members[3].tolist() == [0, 0, 0, 1, 1, 0]  # one word of two pieces
    assert units(["▁汤姆", "星期一", "。"], "char")[0] == ["汤", "姆", "星", "期", "一", "。"]
    names, members = units(["▁Tom说", "▁你好"], "char")  # a word mixing both scripts
    assert names == ["Tom", "说", "你", "好"] and members.tolist()[:2] == [[1, 0], [1, 0]]
    assert units(["▁他说", "：“", "OK", "”。"], "char")[0] == [
        "他",
        "说",
        "：",
        "“",
        "OK",
        "”",
        "。",
    ]
    assert units(["▁他", "……"], "char")[0] == ["他", "…", "…"]  # typographic punctuation alone
    assert units(["▁don", "'", "t", "▁stop"], "char")[0] == ["don't", "stop"]
    for word in ("don’t", "1990–2000", "नमस्ते", "Ｔｏｍ"):  # in-word punctuation, marks, full-width
        assert units(["▁" + word], "char")[0] == [word]


class _Shifted(_Scripted):
    """A scripted translator trained to align `align_shift` steps late, with saliency."""

    def __init__(self, src_pieces, tgt_pieces, rows, align_shift, saliency=None):
        super().__init__(src_pieces, tgt_pieces, rows)
        self.align_shift = align_shift
        self.saliency = (src_pieces, tgt_pieces, np.array(saliency if saliency else rows))

    def forced_saliency(self, source, target):
        return self.saliency


def test_each_model_is_read_at_the_step_it_was_trained_to_align_at():
    """A reverse model trained with guided alignment (shift 1) beside an unguided forward one
    (shift 0): each direction's rows are taken at its own model's step."""
    from nmt_cli.aligner import AlignOptions, pair_weights

    diagonal = [[1, 0, 0], [0, 1, 0], [0, 0, 1], [0, 0, 1]]  # pieces a b c, then EOS
    late = [[1, 0, 0], [1, 0, 0], [0, 1, 0], [0, 0, 1]]  # the same, one step late
    forward = _Shifted(["▁a", "▁b", "▁c"], ["▁x", "▁y", "▁z"], diagonal, align_shift=0)
    reverse = _Shifted(["▁x", "▁y", "▁z"], ["▁a", "▁b", "▁c"], late, align_shift=1)
    pair = pair_weights(forward, "a b c", "x y z", AlignOptions(), reverse)
    assert np.array_equal(pair.words.weights, np.eye(3))
    assert np.array_equal(pair.back.weights, np.eye(3))
    forced = pair_weights(forward, "a b c", "x y z", AlignOptions(shift=0), reverse)
    assert not np.array_equal(forced.back.weights, np.eye(3))  # --shift 0 overrides both


def test_weights_both_average_saliency_with_the_attention_of_the_aligning_step():
    from nmt_cli.aligner import forced_weights

    late = [[1.0, 0.0], [1.0, 0.0], [0.0, 1.0]]  # piece t aligned at step t+1
    saliency = [[1.0, 0.0], [0.0, 1.0], [0.5, 0.5]]
    model = _Shifted(["▁a", "▁b"], ["▁x", "▁y"], late, align_shift=1, saliency=saliency)
    _, _, both = forced_weights(model, "a b", "x y", "both", shift=1)
    assert np.array_equal(both[:2], np.eye(2))  # the two agree once the attention is shifted
    _, _, unshifted = forced_weights(model, "a b", "x y", "both", shift=0)
    assert unshifted[1].tolist() == [0.5, 0.5]


def test_auto_units_are_characters_only_for_chinese_written_without_spaces():
    from nmt_cli.alignment import unit_for

    assert unit_for("auto", "Where is the station ?", "火车站在哪里？") == "char"
    assert unit_for("auto", "火车站在哪里？", "Where is the station ?") == "char"
    assert unit_for("auto", "私は学生です。", "I am a student .") == "char"
    # word-segmented Chinese (the demo corpus) and text without such letters stay in words
    spaced = "我 的 朋友 星期天 起床 了 以后 ， 一 个 男孩 早上 在 树 旁边 购物 了 。"
    assert unit_for("auto", "My friends got up on Sunday .", spaced) == "word"
    assert unit_for("auto", "Grüße aus Köln", "Greetings from Cologne") == "word"
    assert unit_for("auto", "「」。，", "quotes") == "word"  # punctuation alone is no word
    assert unit_for("word", "Where is it ?", "火车站在哪里？") == "word"  # asked for: as asked


def test_translation_links_of_unspaced_chinese_are_per_character_by_default():
    from nmt_cli.aligner import TranslationAligner, shown_words
    from nmt_cli.translator import Translation

    attention = np.array(
        [[0.1, 0.8, 0.1], [0.1, 0.1, 0.8], [0.8, 0.1, 0.1], [0.3, 0.3, 0.4]]
    )  # rows 火车, 站, 在哪里？ and the end step; columns ▁Where ▁is ▁station
    translation = Translation(
        source="Where is station",
        text="火车站在哪里？",
        src_pieces=["▁Where", "▁is", "▁station"],
        pieces=["▁火车", "站", "在哪里？"],
        attention=attention,
    )
    aligner = TranslationAligner()
    links = aligner.links(translation)  # (source word, target unit)
    assert {j for _, j in links} == set(range(7))  # every character linked, not one "word"
    assert (1, 0) in links and (1, 1) in links and (2, 2) in links and (0, 3) in links
    words = shown_words(translation, aligner.options.unit)
    assert words.tgt_words == list("火车站在哪里？") and words.weights.shape == (7, 3)
    as_words = TranslationAligner(AlignOptions(unit="word")).links(translation)
    assert {j for _, j in as_words} == {0}  # the whole sentence one word: one target unit


def test_a_translation_without_a_word_has_no_links():
    """A search cut at one piece may end with a bare "▁": the text is empty, and no target
    word is there to link (it printed ' ||| 2-0')."""
    from nmt_cli.aligner import TranslationAligner
    from nmt_cli.translator import Translation

    translation = Translation(
        source="Where is station",
        text="",
        src_pieces=["▁Where", "▁is", "▁station"],
        pieces=["▁"],
        attention=np.array([[0.1, 0.1, 0.8], [0.3, 0.3, 0.4]]),
    )
    assert TranslationAligner().links(translation) == set()


def test_forced_alignment_reads_unspaced_chinese_in_characters_with_auto_units():
    rows = [[0.1, 0.8, 0.1], [0.1, 0.1, 0.8], [0.8, 0.1, 0.1], [0.3, 0.3, 0.4]]
    model = _Scripted(["▁Where", "▁is", "▁station"], ["▁火车", "站", "在哪里？"], rows)
    pair = align_pair(model, "Where is station", "火车站在哪里？", AlignOptions(unit="auto"))
    assert pair.tgt_words == list("火车站在哪里？") and pair.weights.shape == (7, 3)
    assert {j for _, j in pair.links} == set(range(7))
    spaced = _Scripted(["▁Where", "▁is", "▁station"], ["▁火车", "▁站", "▁在", "▁哪里"], [
        [0.1, 0.8, 0.1], [0.1, 0.1, 0.8], [0.8, 0.1, 0.1], [0.8, 0.1, 0.1], [0.3, 0.3, 0.4],
    ])  # fmt: skip
    pair = align_pair(spaced, "Where is station", "火车 站 在 哪里", AlignOptions(unit="auto"))
    assert pair.tgt_words == ["火车", "站", "在", "哪里"]  # segmented: its whitespace words


def test_gold_files_take_ascii_digits_and_name_the_format_of_a_bad_naacl_line(tmp_path):
    from nmt_cli.alignment import read_gold

    with pytest.raises(InputError, match="line 1: cannot read"):
        read_gold(["0-0 \u0663-1"], "gold.txt")  # an Arabic-Indic three is no index
    with pytest.raises(InputError, match="NAACL 'sentence source target"):
        read_gold(["1 1 1 X", "1 2 2 S"], "gold.naacl")  # a bad label: still read as NAACL
    assert read_gold(["1 1 2 S", "1 2 1 P"], "gold.naacl")[0].sure == {(0, 1)}


def test_a_naacl_gold_may_open_with_comment_lines_and_a_pharaoh_gold_may_not():
    from nmt_cli.alignment import read_gold

    gold = read_gold(["# English-French, WPT-03 test", "", "1 1 2 S", "# sentence 2", "2 1 1 P"])
    assert gold[0].sure == {(0, 1)} and gold[1].possible == {(0, 0)} and not gold[1].sure
    with pytest.raises(InputError, match="line 1: cannot read '# aligned by hand'; expected Pha"):
        read_gold(["# aligned by hand", "0-0 1-1"], "gold.wa")  # a Pharaoh line is a sentence


def test_auto_units_of_a_model_follow_its_training_text():
    from types import SimpleNamespace

    from nmt_cli.aligner import model_unit

    def model(src, tgt):
        return SimpleNamespace(unsegmented=(src, tgt))

    assert model_unit(model(False, True)) == "char"  # English to unsegmented Chinese
    assert model_unit(model(False, False)) == "word"  # e.g. the demo's segmented Chinese
    assert model_unit(model(None, None)) == "auto"  # trained before it was recorded: per line


def test_a_naacl_gold_knows_the_first_sentence_it_lists():
    from nmt_cli.alignment import read_gold

    assert read_gold(["1 0 1 S", "2 1 1 S"]).first == 1  # a NULL link still lists sentence 1
    assert read_gold(["101 1 1 S", "102 2 1 P"]).first == 101
