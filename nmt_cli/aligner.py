"""Word alignments from a model's attention (or gradient saliency): forced alignment of given
pairs, or of the model's own output.

This composes the translator (attention over pieces) with the pure alignment core (pieces →
words → links, symmetrisation). Rendering is left to the caller.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator
from dataclasses import dataclass, field

import numpy as np

from nmt_cli.alignment import (
    extract_links,
    grow_links,
    mean_weights,
    merge_to_words,
    shift_rows,
    symmetrize,
    transpose_links,
)
from nmt_cli.errors import InputError

Link = tuple[int, int]


@dataclass(frozen=True)
class AlignOptions:
    """How attention becomes links."""

    unit: str = "word"  # word, char (scripts without spaces) or piece
    method: str = "argmax"  # argmax per target unit, or threshold
    threshold: float = 0.5  # for method=threshold
    shift: int = 0  # use the attention of step t+shift for target unit t
    include_eos: bool = False  # keep the EOS row/column as a pseudo-word </s>
    symmetrize: str = "grow-diag-final-and"  # with a reverse model; "mean" averages weights
    weights: str = "attention"  # attention, saliency (gradient × input) or both (their mean)
    grow_threshold: float = 0.0  # > 0: grow links into neighbours of at least this weight

    def grown(self, links: set[Link], weights: np.ndarray) -> set[Link]:
        """`links` grown over word weights (T, S) of real words only, when asked."""
        return grow_links(links, weights, self.grow_threshold) if self.grow_threshold else links


WEIGHTS = ("attention", "saliency", "both")


@dataclass
class PairAlignment:
    """One aligned sentence pair: words on both sides, word-level weights (T, S), links (i, j)."""

    source: str
    target: str
    src_words: list[str]
    tgt_words: list[str]
    weights: np.ndarray
    links: set[Link] = field(default_factory=set)
    translated: bool = False  # the target was produced by the model


def forced_weights(translator, source: str, target: str, kind: str = "attention"):
    """Teacher-forced piece-level weights (src_pieces, tgt_pieces, (T+1, S)) of one pair: the
    model's attention, its gradient saliency, or the mean of the two ("both")."""
    if kind == "attention":
        return translator.forced_attention(source, target)
    if kind == "saliency":
        return translator.forced_saliency(source, target)
    return average_weights(
        translator.forced_attention(source, target), translator.forced_saliency(source, target)
    )


def average_weights(first, second):
    """The mean of two piece-level weight matrices of the same pair, as `--weights both` reads."""
    src_pieces, tgt_pieces, weights = first
    return src_pieces, tgt_pieces, (weights + second[2]) / 2


def directional_links(raw: tuple[list[str], list[str], np.ndarray], options: AlignOptions):
    """Word attention and links of one direction from piece-level attention
    (src_pieces, tgt_pieces, attention) as `forced_weights` gives it."""
    src_pieces, tgt_pieces, attention = raw
    if options.shift:
        attention = shift_rows(attention, options.shift)
    words = merge_to_words(
        attention, src_pieces, tgt_pieces, options.unit, drop_eos=not options.include_eos
    )
    links = words.without_eos(extract_links(words.weights, options.method, options.threshold))
    n_src, n_tgt = words.real_shape()  # links to </s> mean "unaligned": no seed, no cell to grow
    return words, options.grown(links, words.weights[:n_tgt, :n_src])


def combine_directions(
    words, links: set[Link], back_words, back_links: set[Link], options: AlignOptions
) -> tuple[list[str], list[str], np.ndarray, set[Link]]:
    """Source words, target words, weights (T, S) and links of a pair aligned both ways.

    `back_*` come from the target→source model. "mean" averages the two directions' weights
    and extracts links from that; the other methods combine the two link sets. When the two
    directions do not see the same units, the source→target alignment is kept as it is.
    """
    n_src, n_tgt = words.real_shape()
    if back_words.real_shape() != (n_tgt, n_src):
        return words.src_words, words.tgt_words, words.weights, links
    if options.symmetrize == "mean":  # </s> is dropped: the directions place it on other sides
        weights = mean_weights(words.weights[:n_tgt, :n_src], back_words.weights[:n_src, :n_tgt])
        links = options.grown(extract_links(weights, options.method, options.threshold), weights)
        return words.src_words[:n_src], words.tgt_words[:n_tgt], weights, links
    links = symmetrize(links, transpose_links(back_links), options.symmetrize, n_src, n_tgt)
    return words.src_words, words.tgt_words, words.weights, links


def align_pair(
    translator, source: str, target: str, options: AlignOptions, reverse=None
) -> PairAlignment:
    """Forced alignment of one pair; with a reverse model, the two directions symmetrised."""
    words, links = directional_links(
        forced_weights(translator, source, target, options.weights), options
    )
    if reverse is None:
        return PairAlignment(source, target, words.src_words, words.tgt_words, words.weights, links)
    back = directional_links(forced_weights(reverse, target, source, options.weights), options)
    return PairAlignment(source, target, *combine_directions(words, links, *back, options))


def align_pairs(
    translator, pairs: Iterable[tuple[str, str]], options: AlignOptions, reverse=None
) -> Iterator[PairAlignment]:
    for source, target in pairs:
        yield align_pair(translator, source, target, options, reverse)


def checked_pairs(pairs: Iterable[tuple[str, str]], name: str) -> Iterator[tuple[str, str]]:
    """Pairs with both sides non-empty; an empty side is an error naming the line."""
    for number, (source, target) in enumerate(pairs, start=1):
        if not source.strip() or not target.strip():
            side = "source" if not source.strip() else "target"
            raise InputError(
                f"{name} line {number} has an empty {side}: alignment needs both sides; "
                "remove that pair or fill in its text"
            )
        yield source.strip(), target.strip()


def align_translations(
    translator, sources: Iterable[str], search, options: AlignOptions, reverse=None
) -> Iterator[PairAlignment]:
    """Translate each source line, then align the source with the model's own output."""
    for translation in translator.translate_lines(sources, search, with_attention=True):
        if not translation.text:
            yield PairAlignment(
                translation.source,
                "",
                translation.source.split(),
                [],
                np.zeros((0, len(translation.source.split()))),
                translated=True,
            )
            continue
        pair = align_pair(translator, translation.source, translation.text, options, reverse)
        pair.translated = True
        yield pair


def parse_fast_align(lines: Iterable[str], name: str) -> Iterator[tuple[str, str]]:
    """`source ||| target` lines (the fast_align input form); a line without ||| is an error."""

    def split(number_line):
        number, line = number_line
        if "|||" not in line:
            raise InputError(
                f"{name} line {number} has no ' ||| ' separator: give `source ||| target` on "
                "every line, or only source sentences to translate and align"
            )
        source, _, target = line.partition("|||")
        return source, target

    yield from checked_pairs(map(split, enumerate(lines, start=1)), name)
