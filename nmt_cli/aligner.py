"""Word alignments from a model's attention (or gradient saliency): the one place that aligns.

Three uses, one module: the links of a translation from the attention its own search kept
(`translate --align`, `--json`, `nmt serve`: `TranslationAligner`, with `nmt align`'s
defaults for the model; the interactive prompt's view: `shown_words`); forced
alignment of given pairs (`nmt align`); and forced alignment of the model's own output
(`nmt align` on source-only input: forced decoding again, so that saliency, a reverse model
and every extraction option apply). This composes the translator (attention over pieces)
with the pure alignment core (pieces → words → links, symmetrisation). Rendering is left to
the caller.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator
from dataclasses import dataclass, field, replace

import numpy as np

from nmt_cli.alignment import (
    AUTO_UNIT,
    LINK_PRIOR_FLOOR,
    Link,
    LinkRates,
    WordAttention,
    extract_links,
    grow_links,
    mean_weights,
    merge_to_words,
    shift_rows,
    symmetrize,
    transpose_links,
    unit_for,
    with_prior,
    with_product_prior,
)
from nmt_cli.errors import InputError


@dataclass(frozen=True)
class AlignOptions:
    """How attention becomes links."""

    unit: str = "word"  # word, char (scripts without spaces) or piece
    method: str = "argmax"  # argmax per target unit, mutual (row and column), or threshold
    threshold: float = 0.5  # for method=threshold
    shift: int | None = None  # read the attention of step t+shift for target unit t (None: at
    # the step each model was trained to align at, its `align_shift`)
    include_eos: bool = False  # keep the EOS row/column as a pseudo-word </s>
    symmetrize: str = "grow-diag-final-and"  # with a reverse model; "mean" averages weights
    weights: str = "attention"  # attention, saliency (gradient × input) or both (their mean)
    grow_threshold: float = 0.0  # > 0: grow links into neighbours of at least this weight
    corpus_prior: float = 0.0  # > 0: share of the input's link rates, in a second pass
    link_prior: float = 0.0  # > 0: share of the link rates of the model's training pairs
    link_floor: float = LINK_PRIOR_FLOOR  # what a never-linked pair counts as in that product

    def mixed(self, weights: np.ndarray, prior: np.ndarray) -> np.ndarray:
        """Word weights (T, S) with link rates mixed in: the model's training rates as a
        product of experts, the input's own rates (`corpus_prior`) linearly."""
        if self.link_prior:
            return with_product_prior(weights, prior, self.link_prior, self.link_floor)
        return with_prior(weights, prior, self.corpus_prior)

    def grown(self, links: set[Link], weights: np.ndarray) -> set[Link]:
        """`links` grown over word weights (T, S) of real words only, when asked."""
        return grow_links(links, weights, self.grow_threshold) if self.grow_threshold else links


WEIGHTS = ("attention", "saliency", "both")

# `nmt align`'s extraction for a model trained with guided alignment, unless told otherwise: its
# attention spreads a word's weight over the words it is linked to, so a threshold keeps
# multi-word links and leaves a word with no strong link unaligned, and growing joins the
# neighbours of a link. Against argmax it lowered AER on both dev sets (docs/alignment.md).
GUIDED_EXTRACTION = {"method": "threshold", "grow_threshold": 0.2}
# With the link rates of the model's training pairs (`--link-prior`, the default for a guided
# model): their share in the product with the attention, and the threshold on the product. The
# attention of a short training run knows where each word of this pair looks; the rates, how
# often the teacher linked two words over the whole corpus. Chosen on both dev sets
# (docs/alignment.md).
LINK_PRIOR_SHARE = 0.8
LINK_PRIOR_EXTRACTION = {"method": "threshold", "threshold": 0.3, "grow_threshold": 0.25}


def extraction_defaults(guided: bool, link_prior: bool) -> dict:
    """The extraction `nmt align` uses when none is given: argmax for a model trained to
    translate only, GUIDED_EXTRACTION after guided alignment, LINK_PRIOR_EXTRACTION with the
    model's link rates."""
    return dict(LINK_PRIOR_EXTRACTION if link_prior else GUIDED_EXTRACTION if guided else {})


@dataclass(frozen=True)
class TranslationAligner:
    """How the word links of a model's own translations are drawn (`translate --align` and
    `--json`, `nmt serve`): `nmt align`'s defaults for that model, over
    the attention the search kept. The default instance is argmax over the attention alone."""

    options: AlignOptions = AlignOptions(unit=AUTO_UNIT)
    rates: LinkRates | None = None
    problem: str | None = None  # why the model's link rates were left out: a damaged file

    @classmethod
    def for_model(cls, translator) -> TranslationAligner:
        """The defaults of `nmt align -m MODEL` at --unit word: for a model trained with guided
        alignment, its link rates (when it kept them) and the extraction chosen for them. A
        damaged rates file leaves them out (and says so in `problem`): translating goes on."""
        from nmt_cli.checkpoint import load_link_rates
        from nmt_cli.errors import ArtifactError

        trained = translator.config.train
        if not trained.guided_alignment:
            return cls(AlignOptions(unit=model_unit(translator)))
        rates, problem = None, None
        if trained.align_unit == "word":
            try:
                rates = load_link_rates(translator.model_dir)
            except ArtifactError as exc:
                problem = f"{exc}; word links come from the attention alone"
        options = AlignOptions(
            unit=trained.align_unit,  # the units it was taught to align, and its rates count
            link_prior=LINK_PRIOR_SHARE if rates is not None else 0.0,
            **extraction_defaults(True, rates is not None),
        )
        return cls(options, rates, problem)

    def links(self, translation) -> set[Link]:
        """The word links (source index, target index) of one translation."""
        words = translation_words(translation, self.options.unit)
        if words is None:
            return set()
        n_src, n_tgt = words.real_shape()
        prior = None
        if self.rates is not None and self.options.link_prior:
            prior = self.rates.matrix(words.src_words[:n_src], words.tgt_words[:n_tgt])
        return word_links(words, self.options, prior)


def model_unit(translator) -> str:
    """What --unit auto means for a model without guided alignment: characters when either
    side of its training text was Chinese or Japanese written without spaces (there a
    whitespace word is a whole clause), else words; for a model trained before nmt recorded
    that, AUTO_UNIT (decided line by line, `alignment.unit_for`)."""
    src, tgt = translator.unsegmented
    if src is None or tgt is None:
        return AUTO_UNIT
    return "char" if src or tgt else "word"


def translation_words(translation, unit: str = AUTO_UNIT) -> WordAttention | None:
    """Word-level weights of a `Translation` from the attention its search kept, in `unit`
    (`alignment.unit_for`; None when it kept none, for an empty line, or for a translation
    without a word: its pieces may still be a bare "▁", which no target word stands for)."""
    if translation.attention is None or not translation.pieces or not translation.src_pieces:
        return None
    if not translation.text.strip():
        return None
    unit = unit_for(unit, translation.source, translation.text)
    return merge_to_words(translation.attention, translation.src_pieces, translation.pieces, unit)


def shown_words(translation, unit: str = AUTO_UNIT) -> WordAttention | None:
    """`translation_words` with its words as the texts write them, for views and records."""
    words = translation_words(translation, unit)
    if words is None:
        return None
    return words.named_by(
        translation.source, translation.text, unit_for(unit, translation.source, translation.text)
    )


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
    one_way: bool = False  # a reverse model was given but saw other units: forward links alone


def forced_weights(translator, source: str, target: str, kind: str = "attention", shift: int = 0):
    """Teacher-forced piece-level weights (src_pieces, tgt_pieces, (T+1, S)) of one pair: the
    model's attention, its gradient saliency, or the mean of the two ("both"). The attention's
    row t is that of step t + `shift` (the step a guided model aligns piece t at), in "both"
    too: saliency row t is already about piece t."""
    if kind == "saliency":
        return translator.forced_saliency(source, target)
    extra = max(0, shift - 1)  # the last piece's step comes after the EOS step
    src_pieces, tgt_pieces, attention = translator.forced_attention(source, target, extra)
    if shift:
        attention = shift_rows(attention, shift)[: len(tgt_pieces) + 1]
    if kind == "attention":
        return src_pieces, tgt_pieces, attention
    return average_weights(
        (src_pieces, tgt_pieces, attention), translator.forced_saliency(source, target)
    )


def average_weights(first, second):
    """The mean of two piece-level weight matrices of the same pair, as `--weights both` reads."""
    src_pieces, tgt_pieces, weights = first
    return src_pieces, tgt_pieces, (weights + second[2]) / 2


def word_weights(raw: tuple[list[str], list[str], np.ndarray], options: AlignOptions):
    """Word-level weights of one direction from piece-level weights
    (src_pieces, tgt_pieces, (T+1, S)) as `forced_weights` gives them."""
    src_pieces, tgt_pieces, attention = raw
    if options.shift:
        attention = shift_rows(attention, options.shift)
    return merge_to_words(
        attention, src_pieces, tgt_pieces, options.unit, drop_eos=not options.include_eos
    )


def word_links(words, options: AlignOptions, prior: np.ndarray | None = None) -> set[Link]:
    """Links of one direction from its word weights, mixed first with a (T, S) prior over the
    real words when one is given (`--corpus-prior`)."""
    n_src, n_tgt = words.real_shape()  # links to </s> mean "unaligned": no seed, no cell to grow
    weights = words.weights
    if prior is not None:  # </s>, when kept, stays a fair NULL (scaled, or never linked)
        weights = options.mixed(weights, prior)
    links = words.without_eos(extract_links(weights, options.method, options.threshold))
    return options.grown(links, weights[:n_tgt, :n_src])


def directional_links(raw: tuple[list[str], list[str], np.ndarray], options: AlignOptions):
    """Word weights and links of one direction from piece-level weights."""
    words = word_weights(raw, options)
    return words, word_links(words, options)


def combine_directions(
    words,
    links: set[Link],
    back_words,
    back_links: set[Link],
    options: AlignOptions,
    prior: np.ndarray | None = None,
) -> tuple[list[str], list[str], np.ndarray, set[Link]]:
    """Source words, target words, weights (T, S) and links of a pair aligned both ways.

    `back_*` come from the target→source model. "mean" averages the two directions' weights
    and extracts links from that (mixed with `prior` when given); the other methods combine
    the two link sets. When the two directions do not see the same units, the source→target
    alignment is kept as it is. The weights returned are the models' own, prior left out.
    """
    n_src, n_tgt = words.real_shape()
    if back_words.real_shape() != (n_tgt, n_src):
        return words.src_words, words.tgt_words, words.weights, links
    if options.symmetrize == "mean":  # </s> is dropped: the directions place it on other sides
        weights = mean_weights(words.weights[:n_tgt, :n_src], back_words.weights[:n_src, :n_tgt])
        mixed = weights if prior is None else options.mixed(weights, prior)
        links = options.grown(extract_links(mixed, options.method, options.threshold), mixed)
        return words.src_words[:n_src], words.tgt_words[:n_tgt], weights, links
    links = symmetrize(links, transpose_links(back_links), options.symmetrize, n_src, n_tgt)
    return words.src_words, words.tgt_words, words.weights, links


@dataclass
class PairWeights:
    """Word weights of one pair before any link is drawn: source→target, and target→source
    when a reverse model is given; `words` is None for an empty translation."""

    source: str
    target: str
    words: WordAttention | None
    back: WordAttention | None = None
    translated: bool = False

    def real_words(self) -> tuple[list[str], list[str]]:
        """Source and target words, the pseudo-word </s> left out."""
        n_src, n_tgt = self.words.real_shape()
        return self.words.src_words[:n_src], self.words.tgt_words[:n_tgt]


def pair_weights(
    translator, source: str, target: str, options: AlignOptions, reverse=None
) -> PairWeights:
    """Teacher-forced word weights of one pair, in both directions with a reverse model."""
    words = _forced_words(translator, source, target, options)
    back = None if reverse is None else _forced_words(reverse, target, source, options)
    return PairWeights(source, target, words, back)


def _forced_words(translator, source: str, target: str, options: AlignOptions):
    """One model's word weights of a pair, its attention read `options.shift` steps later or,
    when that is None, at the step that model was trained to align at (each model its own:
    a reverse model may have been trained otherwise)."""
    shift = translator.align_shift if options.shift is None else options.shift
    raw = forced_weights(translator, source, target, options.weights, shift)
    return word_weights(raw, replace(options, shift=0, unit=unit_for(options.unit, source, target)))


def pair_links(
    pair: PairWeights, options: AlignOptions, rates: LinkRates | None = None
) -> PairAlignment:
    """The links of one pair; with `rates`, its weights mixed with the corpus's link rates."""
    if pair.words is None:
        src_words = pair.source.split()
        empty = np.zeros((0, len(src_words)))
        return PairAlignment(pair.source, pair.target, src_words, [], empty, translated=True)
    prior = None if rates is None else rates.matrix(*pair.real_words())
    words, back = pair.words, pair.back
    links = word_links(words, options, prior)
    same_units = back is None or back.real_shape() == words.real_shape()[::-1]
    if back is None:
        combined = words.src_words, words.tgt_words, words.weights, links
    else:
        back_prior = prior.T if prior is not None and same_units else None
        back_links = word_links(back, options, back_prior)
        combined = combine_directions(words, links, back, back_links, options, prior)
    src_words, tgt_words, weights, links = combined
    # the words as written (not "<unk>" pieces): the combined words are the forward model's,
    # </s> dropped by some symmetrisations
    shown = words.named_by(
        pair.source, pair.target, unit_for(options.unit, pair.source, pair.target)
    )
    src_words, tgt_words = shown.src_words[: len(src_words)], shown.tgt_words[: len(tgt_words)]
    return PairAlignment(
        pair.source, pair.target, src_words, tgt_words, weights, links, pair.translated,
        one_way=not same_units,
    )  # fmt: skip


def link_pairs(
    pairs: Iterable[PairWeights], options: AlignOptions, rates: LinkRates | None = None
) -> Iterator[PairAlignment]:
    """Links of every pair. With `options.link_prior`, the weights are mixed with `rates` (the
    model's training link rates). With `options.corpus_prior`, two passes over the whole input:
    the links of the first give every word pair its link rate (`LinkRates`), and the second
    draws links from the weights mixed with those rates, so nothing is yielded before the
    input ends. Otherwise each pair is yielded as soon as it is read."""
    if not options.corpus_prior:
        fixed = rates if options.link_prior else None
        for pair in pairs:
            yield pair_links(pair, options, fixed)
        return
    pairs = list(pairs)
    rates = LinkRates()
    for pair in pairs:
        if pair.words is not None:
            rates.add(*pair.real_words(), pair_links(pair, options).links)
    for pair in pairs:
        yield pair_links(pair, options, rates)


def align_pair(
    translator, source: str, target: str, options: AlignOptions, reverse=None
) -> PairAlignment:
    """Forced alignment of one pair on its own (no corpus prior); with a reverse model, the two
    directions symmetrised."""
    return pair_links(pair_weights(translator, source, target, options, reverse), options)


def align_pairs(
    translator, pairs: Iterable[tuple[str, str]], options: AlignOptions, reverse=None, rates=None
) -> Iterator[PairAlignment]:
    weights = (pair_weights(translator, s, t, options, reverse) for s, t in pairs)
    return link_pairs(weights, options, rates)


def checked_pairs(pairs: Iterable[tuple[str, str]], name: str) -> Iterator[tuple[str, str]]:
    """Pairs with both sides non-empty; an empty side is an error naming the line, but for
    pairs empty on both sides that only such pairs follow (an editor's last newline, as in
    `source ||| target` input): they are no pairs."""
    blank = None  # the first pair empty on both sides since the last whole one
    for number, (source, target) in enumerate(pairs, start=1):
        if not source.strip() and not target.strip():
            blank = blank or number
            continue
        if blank is not None or not source.strip() or not target.strip():
            number = blank or number
            side = "source" if blank or not source.strip() else "target"
            raise InputError(
                f"{name} line {number} has an empty {side}: alignment needs both sides; "
                "remove that pair or fill in its text (empty lines may only end the input)"
            )
        yield source.strip(), target.strip()


def align_translations(
    translator, sources: Iterable[str], search, options: AlignOptions, reverse=None, rates=None
) -> Iterator[PairAlignment]:
    """Translate each source line, then align the source with the model's own output."""

    def weights() -> Iterator[PairWeights]:
        # The weights come from `pair_weights` (forced decoding), not the search's attention.
        for translation in translator.translate_lines(sources, search):
            if not translation.text:
                yield PairWeights(translation.source, "", None, translated=True)
                continue
            pair = pair_weights(translator, translation.source, translation.text, options, reverse)
            pair.translated = True
            yield pair

    return link_pairs(weights(), options, rates)


def parse_fast_align(lines: Iterable[str], name: str) -> Iterator[tuple[str, str]]:
    """`source ||| target` lines (the fast_align input form); a line without ||| or with more
    than one is an error, and so is an empty line, unless only empty lines follow it."""

    def split(numbered: Iterable[tuple[int, str]]) -> Iterator[tuple[str, str]]:
        blank = None  # the first empty line since the last pair
        for number, line in numbered:
            if not line.strip():
                blank = blank or number
                continue
            if blank is not None:
                raise InputError(
                    f"{name} line {blank} is empty: give `source ||| target` on every line "
                    "(empty lines may only end the input)"
                )
            if "|||" not in line:
                raise InputError(
                    f"{name} line {number} has no ' ||| ' separator: give `source ||| target` "
                    "on every line, or only source sentences to translate and align"
                )
            if line.count("|||") > 1:
                raise InputError(
                    f"{name} line {number} has {line.count('|||')} ' ||| ' separators: give "
                    "one, between the source and the target"
                )
            source, _, target = line.partition("|||")
            if not source.strip() and not target.strip():  # not an editor's last newline
                raise InputError(
                    f"{name} line {number} holds ' ||| ' alone: alignment needs both sides; "
                    "remove that line or fill in its text"
                )
            yield source, target

    yield from checked_pairs(split(enumerate(lines, start=1)), name)
