"""Word alignments from attention: merging pieces into words, extraction, symmetrisation, AER.

Everything here works on numpy attention matrices and word lists; nothing loads a model.

Shapes: T target length, S source length (in pieces, words or characters as stated).
Links are (source index, target index) pairs, 0-based, over the merged units, the orientation
of the Pharaoh format that fast_align, eflomal and Moses write.
"""

from __future__ import annotations

import itertools
import re
import unicodedata
from collections import Counter, defaultdict
from collections.abc import Iterable, Iterator
from dataclasses import dataclass, replace
from pathlib import Path

import numpy as np

from nmt_cli.errors import ConfigError, InputError
from nmt_cli.scripts import is_unsegmented, is_unspaced

MARKER = "\u2581"  # "▁": SentencePiece's sign that a piece starts a whitespace word
EOS_WORD = "</s>"
UNITS = ("word", "char", "piece")
AUTO_UNIT = "auto"  # char for a pair with Chinese or Japanese written without spaces, else word
EXTRACTION_METHODS = ("argmax", "mutual", "threshold")
SYMMETRIZATION_METHODS = (
    "intersection",
    "union",
    "grow-diag",
    "grow-diag-final",
    "grow-diag-final-and",
)
# What `nmt align --symmetrize` accepts: the link heuristics above, or "mean": the two
# directions' word-level weights averaged, then one extraction (any method) on that.
ALIGN_SYMMETRIZATIONS = (*SYMMETRIZATION_METHODS, "mean")

Link = tuple[int, int]

# Smoothing of `LinkRates`: a word pair met n times and always linked has rate n / (n + 5).
# Chosen on the demo corpus's dev split (2 and 10 did about as well).
PRIOR_SMOOTHING = 5.0
# Smoothing of the rates a model keeps from its training links (`nmt align --link-prior`): they
# count tens of thousands of pairs, so a rare pair needs less shrinking. Chosen on the Hansards
# set (0.5 and 1 did about as well, 5 worse).
LINK_PRIOR_SMOOTHING = 1.0
# What a never-linked word pair counts as in `with_product_prior` (docs/alignment.md).
LINK_PRIOR_FLOOR = 0.1


@dataclass(frozen=True)
class WordAttention:
    """Attention merged to display units: `weights` (T, S) rows are target units, columns source."""

    weights: np.ndarray
    src_words: list[str]
    tgt_words: list[str]
    eos_src: bool = False  # the last source unit is the pseudo-word </s>
    eos_tgt: bool = False  # the last target unit is the pseudo-word </s>

    def real_shape(self) -> tuple[int, int]:
        """The number of source and target units, the pseudo-word </s> not counted."""
        return len(self.src_words) - self.eos_src, len(self.tgt_words) - self.eos_tgt

    def named_by(self, source: str, target: str, unit: str) -> WordAttention:
        """The same weights with each side's units named as its text writes them (words by
        `surface_names`; char units cut from the text as from pieces), when as many."""
        n_src, n_tgt = self.real_shape()
        src = _written(self.src_words[:n_src], source, unit) + self.src_words[n_src:]
        tgt = _written(self.tgt_words[:n_tgt], target, unit) + self.tgt_words[n_tgt:]
        return replace(self, src_words=src, tgt_words=tgt)

    def without_eos(self, links: Iterable[Link]) -> set[Link]:
        """Links to or from the pseudo-word </s> removed: EOS acts as the NULL word, and a word
        whose strongest weight is on it stays unaligned."""
        n_src, n_tgt = self.real_shape()
        return {(i, j) for i, j in links if i < n_src and j < n_tgt}


@dataclass(frozen=True)
class GoldAlignment:
    """Reference links of one sentence pair; `possible` includes `sure` (Och & Ney 2003)."""

    sure: frozenset[Link]
    possible: frozenset[Link]


@dataclass(frozen=True)
class AlignmentScore:
    """Corpus-level alignment quality (Och & Ney 2003) with the counts it is computed from."""

    aer: float
    precision: float
    recall: float
    predicted: int  # |A|
    sure: int  # |S|
    sure_hits: int  # |A ∩ S|
    possible_hits: int  # |A ∩ P|


def _choice(value: str, valid: tuple[str, ...], what: str) -> str:
    if value not in valid:
        raise ConfigError(f"unknown {what} {value!r}; choose one of: {', '.join(valid)}")
    return value


# --- pieces to words ------------------------------------------------------------------------


def _written(names: list[str], text: str, unit: str) -> list[str]:
    """Unit names from the text itself (see `WordAttention.named_by`); the pieces' names when
    the counts differ (SentencePiece merged unknown characters into one "<unk>", say)."""
    if unit != "char":
        return surface_names(names, text, unit)
    written = _char_units([MARKER + word for word in text.split()])[0]
    return written if len(written) == len(names) else names


def surface_names(names: list[str], text: str, unit: str = "word") -> list[str]:
    """Word units named by the text's own whitespace words when there are as many (SentencePiece
    splits no word and joins none, so there are unless its normalisation made spaces): a rare
    word then shows itself, not the "<unk>" piece that stands for a character of it. Training
    names the teacher's words (and so the link rates) this way, and nmt align's views and JSON
    name theirs so; the link prior still looks rates up by the pieces' names. Other units keep
    `names`."""
    if unit != "word":
        return names
    words = text.split()
    return words if len(words) == len(names) else names


def unit_for(unit: str, source: str, target: str) -> str:
    """The unit a pair is aligned in: `unit` itself, or for AUTO_UNIT "char" when either side is
    Chinese or Japanese written without spaces between words (one whitespace word would be a
    whole clause), else "word". Word-segmented Chinese, as in the demo corpus, stays in words."""
    if unit != AUTO_UNIT:
        return unit
    return "char" if is_unsegmented(source) or is_unsegmented(target) else "word"


def merge_to_words(
    attention: np.ndarray,
    src_pieces: list[str],
    tgt_pieces: list[str],
    unit: str = "word",
    drop_eos: bool = True,
) -> WordAttention:
    """Merge piece-level attention (T_pieces[+1], S_pieces[+1]) into words, characters or pieces.

    A piece starts a whitespace word when it begins with "▁" (the first piece always does; a
    lone "▁" piece joins the word that follows it). Columns of a word are *summed*: a row is a
    distribution over source positions, so sums keep every row summing to 1. Rows of a word are
    *averaged*: each is one decoder step's distribution, and their mean is one as well.
    `unit="char"` (scripts written without spaces) splits pieces into characters of those
    scripts, keeping other text as its whitespace words (see `_char_units`): a source piece's
    weight is shared evenly by its units, a target piece's row is copied to each (a lone "▁"
    goes with the characters of the piece after it).
    `unit="piece"` keeps pieces, marker removed.

    An extra row is the target EOS step, and an extra column (when the attention has one: a
    model's source has no EOS, so forced attention has none) the source EOS. With `drop_eos`
    both are removed and rows renormalised over the real source; without it they are kept as
    the pseudo-word "</s>".
    """
    _choice(unit, UNITS, "alignment unit")
    attention = np.asarray(attention, dtype=np.float64)
    eos_row, eos_col = _eos_layout(attention, len(tgt_pieces), len(src_pieces))
    src_names, src_members = _units(src_pieces, unit)  # (S_units, S_pieces)
    tgt_names, tgt_members = _units(tgt_pieces, unit)  # (T_units, T_pieces)
    if drop_eos:
        attention = attention[: len(tgt_pieces), : len(src_pieces)]
        attention = _renormalise(attention) if eos_col else attention
    else:
        if eos_col:
            src_names, src_members = src_names + [EOS_WORD], _add_identity(src_members)
        if eos_row:
            tgt_names, tgt_members = tgt_names + [EOS_WORD], _add_identity(tgt_members)
    src_share = _renormalise(src_members.T)  # (S_pieces, S_units): a piece's weight is shared
    tgt_mean = _renormalise(tgt_members)  # (T_units, T_pieces): a unit's row is a mean
    weights = tgt_mean @ attention @ src_share  # (T_units, S_units)
    return WordAttention(
        weights=weights,
        src_words=src_names,
        tgt_words=tgt_names,
        eos_src=eos_col and not drop_eos,
        eos_tgt=eos_row and not drop_eos,
    )


def _eos_layout(attention: np.ndarray, n_tgt: int, n_src: int) -> tuple[bool, bool]:
    """Whether the matrix carries an extra target-EOS row and an extra source-EOS column."""
    if attention.ndim != 2:
        raise ValueError(f"attention must be a matrix, got shape {attention.shape}")
    rows, cols = attention.shape
    if rows not in (n_tgt, n_tgt + 1) or cols not in (n_src, n_src + 1):
        raise ValueError(
            f"attention of shape {attention.shape} does not fit {n_tgt} target and "
            f"{n_src} source pieces (one extra row and column for EOS are allowed)"
        )
    return rows == n_tgt + 1, cols == n_src + 1


def _renormalise(attention: np.ndarray) -> np.ndarray:
    """Rows rescaled to sum to 1; a row with no weight left stays all zero."""
    totals = attention.sum(axis=1, keepdims=True)
    return np.divide(attention, totals, out=np.zeros_like(attention), where=totals > 0)


def _add_identity(members: np.ndarray) -> np.ndarray:
    """The membership matrix with one more unit made of one more piece (the EOS pseudo-word)."""
    grown = np.pad(members, ((0, 1), (0, 1)))
    grown[-1, -1] = 1.0
    return grown


def _word_groups(pieces: list[str]) -> list[list[int]]:
    """Piece indices of each whitespace word, following the "▁" marker."""
    groups: list[list[int]] = []
    after_lone_marker = False
    last_text = max((k for k, piece in enumerate(pieces) if piece != MARKER), default=-1)
    for k, piece in enumerate(pieces):
        trailing_marker = piece == MARKER and k > last_text and k > 0  # lone ▁s that end it
        starts = not groups or (
            piece.startswith(MARKER) and not after_lone_marker and not trailing_marker
        )
        if starts:
            groups.append([])
        groups[-1].append(k)
        after_lone_marker = piece == MARKER
    return groups


def _strip(piece: str) -> str:
    return piece.replace(MARKER, "")


def _char_carriers(pieces: list[str]) -> list[int]:
    """For each piece, the piece whose characters receive its weight (a lone "▁" has none):
    itself or the next one with characters, else the last one with characters."""
    with_chars = [k for k, piece in enumerate(pieces) if _strip(piece)]
    if not with_chars:  # no piece has a character: nothing to carry
        return list(range(len(pieces)))
    return [next((m for m in with_chars if m >= k), with_chars[-1]) for k in range(len(pieces))]


def _char_units(pieces: list[str]) -> tuple[list[str], list[set[int]]]:
    """The units of `unit="char"`: each character of a script written without spaces (Chinese,
    Japanese) on its own, and every other run of characters within a whitespace word as one
    unit, so the English side of an English–Chinese pair keeps its words. Typographic
    punctuation (“ ” … ·), common beside Chinese, stands alone unless it sits between two
    characters of a word (don’t, 1990–2000). Their names, and the pieces whose characters
    make up each."""
    word_of = {k: w for w, group in enumerate(_word_groups(pieces)) for k in group}
    chars = [(char, k, word_of[k]) for k, piece in enumerate(pieces) for char in _strip(piece)]
    joins = [_joins_word(char) for char, _, _ in chars]
    for n in range(1, len(chars) - 1):  # punctuation inside a word joins it
        inside = chars[n - 1][2] == chars[n][2] == chars[n + 1][2]
        if not joins[n] and inside and joins[n - 1] and _joins_word(chars[n + 1][0]):
            joins[n] = not is_unspaced(chars[n][0])
    names: list[str] = []
    owners: list[set[int]] = []
    for n, (char, k, word) in enumerate(chars):
        if n and joins[n] and joins[n - 1] and chars[n - 1][2] == word:
            names[-1] += char
            owners[-1].add(k)
        else:
            names.append(char)
            owners.append({k})
    return names, owners


def _joins_word(char: str) -> bool:
    """Whether a character belongs to a run of a spaced script's word: letters, marks and
    digits (full-width ones too) and ASCII punctuation; not Chinese or Japanese characters."""
    if is_unspaced(char):
        folded = unicodedata.normalize("NFKC", char)  # full-width Latin letters and digits
        return folded.isascii() and folded.isalnum()
    return char.isascii() or unicodedata.category(char)[0] in "LNM"


def _units(pieces: list[str], unit: str) -> tuple[list[str], np.ndarray]:
    """Unit names and the (units, pieces) 0/1 matrix saying which pieces make up which unit."""
    if unit == "piece":
        return [_strip(p) or p for p in pieces], np.eye(len(pieces))
    if unit == "word":
        groups = _word_groups(pieces)
        names = [_strip("".join(pieces[k] for k in group)) for group in groups]
        members = [(w, k) for w, group in enumerate(groups) for k in group]
    else:
        names, owners = _char_units(pieces)
        carriers = _char_carriers(pieces)
        members = [
            (c, k)
            for c, unit_owners in enumerate(owners)
            for k in range(len(pieces))
            if carriers[k] in unit_owners
        ]
    matrix = np.zeros((len(names), len(pieces)))
    for u, k in members:
        matrix[u, k] = 1.0
    return names, matrix


def units(pieces: list[str], unit: str = "word") -> tuple[list[str], np.ndarray]:
    """The units (words, characters or pieces) that `merge_to_words` reads `pieces` as: their
    names and the (units, pieces) 0/1 matrix saying which pieces make up which unit."""
    _choice(unit, UNITS, "alignment unit")
    return _units(pieces, unit)


def shift_rows(attention: np.ndarray, shift: int = 1) -> np.ndarray:
    """Rows moved by `shift` steps (row j takes row j+shift, clamped at the ends), shape kept.

    A Bahdanau-style decoder attends at step t before it emits y_t, and some find that the
    attention of step t+1 aligns y_t better. Pass the matrix with its target-EOS row: the last
    real piece then takes the EOS step's row; without it the last row keeps its own.
    """
    attention = np.asarray(attention)
    rows = attention.shape[0]
    return attention[np.clip(np.arange(rows) + shift, 0, rows - 1)]  # a copy, even of no rows


# --- links from weights ---------------------------------------------------------------------


def extract_links(weights: np.ndarray, method: str = "argmax", threshold: float = 0.5) -> set[Link]:
    """Links (source i, target j) from word attention (T, S).

    "argmax": the most attended source word of every target word (ties: the first; a row with
    no weight gives no link). "mutual": only the cells that are a maximum of both their row
    and their column (SimAlign's "ArgMax", Jalili Sabet et al. 2020; ties: all), so a word that
    is nobody's strongest partner stays unaligned. "threshold": every cell with weight >= `threshold`,
    nothing else, so a target word whose attention is spread thinly stays unaligned.
    """
    _choice(method, EXTRACTION_METHODS, "link extraction method")
    weights = np.asarray(weights)
    if 0 in weights.shape and method != "threshold":
        return set()
    if method == "argmax":
        best = weights.argmax(axis=1)
        return {(int(best[j]), j) for j in range(weights.shape[0]) if weights[j, best[j]] > 0}
    if method == "mutual":  # ties kept: with --unit char a piece's row is copied to each character
        strongest = (weights == weights.max(axis=1, keepdims=True)) & (
            weights == weights.max(axis=0, keepdims=True)
        )
        cells = strongest & (weights > 0)
    elif not 0.0 < threshold <= 1.0:
        raise ConfigError(f"alignment threshold must be in (0, 1], got {threshold}")
    else:
        cells = weights >= threshold
    targets, sources = np.nonzero(cells)
    return {(int(i), int(j)) for j, i in zip(targets, sources, strict=True)}


def grow_links(links: set[Link], weights: np.ndarray, grow_threshold: float) -> set[Link]:
    """`links` grown, as grow-diag does, by neighbouring cells (diagonals included) of weight
    (T, S) >= `grow_threshold` while one of their two words is still unaligned.

    Hysteresis: a link needs the higher extraction threshold to start a group but only the
    lower one to join it, so a multi-word unit whose weight is spread over several cells is
    kept whole, while an isolated weak cell stays out.
    """
    if not 0.0 < grow_threshold <= 1.0:
        raise ConfigError(f"grow threshold must be in (0, 1], got {grow_threshold}")
    weights = np.asarray(weights)
    grown = set(links)
    candidates = extract_links(weights, "threshold", grow_threshold) | grown
    _grow_diag(grown, candidates, weights.shape[1], weights.shape[0])
    return grown


class LinkRates:
    """How often two words were linked when they met in a sentence pair, over a whole corpus.

    A lexical prior learnt from a first pass of alignments (an M-step of sorts): the rate of
    (source word e, target word f) is links(e, f) / (meetings(e, f) + smoothing), where
    meetings counts every pairing of an e token with an f token in the same sentence pair
    (n_e × n_f per pair), and smoothing keeps rare pairs near 0. Words are compared
    case-folded. A function word that one model links here and there but that has no
    counterpart (English "the" in Chinese) gets a low rate; a pair linked whenever it meets
    ("." and "。") a high one. A word repeated within a sentence meets more often than it can
    be linked one to one; counting min(n_e, n_f) meetings instead scored worse on the demo
    corpus's dev split (AER 9.78 against 9.58 % with attention, 8.99 against 8.36 % with
    saliency).
    """

    def __init__(self, smoothing: float = PRIOR_SMOOTHING) -> None:
        if smoothing < 0:
            raise ValueError(f"smoothing must be >= 0, got {smoothing}")
        self.smoothing = smoothing
        self.links: Counter[tuple[str, str]] = Counter()
        self._meetings: Counter[tuple[str, str]] = Counter()
        self._counted = True  # _meetings is up to date
        # each pair added, as word types: (source ids, their counts, target ids, their counts)
        self._sentences: list[tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]] | None = []
        self._ids: tuple[dict[str, int], dict[str, int]] = ({}, {})

    def add(self, src_words: list[str], tgt_words: list[str], links: Iterable[Link]) -> None:
        """Count one aligned pair: its links (source i, target j) and its word meetings."""
        if self._sentences is None:
            raise ValueError("link rates read from counts cannot count more sentence pairs")
        src = [w.casefold() for w in src_words]
        tgt = [w.casefold() for w in tgt_words]
        self.links.update((src[i], tgt[j]) for i, j in links)
        self._sentences.append((*self._types(src, 0), *self._types(tgt, 1)))
        self._counted = False  # meetings are counted when first needed, for linked pairs only

    def _types(self, words: list[str], side: int) -> tuple[np.ndarray, np.ndarray]:
        ids = self._ids[side]
        counts = Counter(ids.setdefault(w, len(ids)) for w in words)
        return np.fromiter(counts, np.int64, len(counts)), np.fromiter(
            counts.values(), np.int64, len(counts)
        )

    @classmethod
    def from_counts(
        cls, counts: Iterable[tuple[str, str, int, int]], smoothing: float = PRIOR_SMOOTHING
    ) -> LinkRates:
        """Rates from (source word, target word, links, meetings) counts, as `counts` gives."""
        rates = cls(smoothing)
        rates._sentences = None  # no sentence pairs behind these counts: `add` is refused
        for e, f, linked, met in counts:
            rates.links[e, f] = linked
            rates._meetings[e, f] = met
        return rates

    def counts(self) -> Iterator[tuple[str, str, int, int]]:
        """(source word, target word, links, meetings) of every linked pair, sorted."""
        self.meetings("", "")  # counts the meetings, once
        for (e, f), linked in sorted(self.links.items()):
            yield e, f, linked, self._meetings[e, f]

    def rate(self, src_word: str, tgt_word: str) -> float:
        key = (src_word.casefold(), tgt_word.casefold())
        linked = self.links.get(key, 0)
        if not linked:
            return 0.0
        return linked / (self.meetings(*key) + self.smoothing)

    def matrix(self, src_words: list[str], tgt_words: list[str]) -> np.ndarray:
        """Rates (T, S) for one pair: rows target words, columns source words."""
        return np.array([[self.rate(e, f) for e in src_words] for f in tgt_words]).reshape(
            len(tgt_words), len(src_words)
        )

    def meetings(self, src_word: str, tgt_word: str) -> int:
        """How many (source token, target token) pairs of these two words share a pair."""
        if not self._counted:
            self._count_meetings()
        return self._meetings.get((src_word.casefold(), tgt_word.casefold()), 0)

    def _count_meetings(self, chunk: int = 1 << 20) -> None:
        """The meetings of every linked pair, vectorised: each pairing of a source and a target
        word type within a sentence pair is one integer key (source id × target types + target
        id), kept when the pair is linked and summed by key, about `chunk` pairings at a time."""
        src_ids, tgt_ids = self._ids
        width = max(len(tgt_ids), 1)
        linked = list(self.links)
        keys = np.array([src_ids[e] * width + tgt_ids[f] for e, f in linked], dtype=np.int64)
        order = np.argsort(keys)
        keys = keys[order]
        totals = np.zeros(len(keys), dtype=np.int64)
        start = 0
        while start < len(self._sentences) and len(keys):
            sizes, stop = 0, start
            while stop < len(self._sentences) and (sizes < chunk or stop == start):
                sizes += len(self._sentences[stop][0]) * len(self._sentences[stop][2])
                stop += 1
            totals += _linked_meetings(self._sentences[start:stop], keys, width)
            start = stop
        self._meetings = Counter()
        for index, met in zip(order.tolist(), totals.tolist(), strict=True):
            self._meetings[linked[index]] = met
        self._counted = True


def _linked_meetings(sentences: list, keys: np.ndarray, width: int) -> np.ndarray:
    """How often each of the sorted `keys` (source id × width + target id) meets in these
    sentence pairs: the sum over pairs of count(source type) × count(target type)."""
    e_ids, e_counts, f_ids, f_counts = (np.concatenate([s[k] for s in sentences]) for k in range(4))
    a = np.array([len(s[0]) for s in sentences], dtype=np.int64)  # source types per pair
    b = np.array([len(s[2]) for s in sentences], dtype=np.int64)  # target types per pair
    n = a * b  # pairings per sentence pair, enumerated row by row
    pair = np.repeat(np.arange(len(sentences)), n)
    local = np.arange(n.sum()) - np.repeat(np.cumsum(n) - n, n)
    e = np.repeat(np.cumsum(a) - a, n) + local // b[pair]
    f = np.repeat(np.cumsum(b) - b, n) + local % b[pair]
    met_keys = e_ids[e] * width + f_ids[f]
    found = np.minimum(np.searchsorted(keys, met_keys), len(keys) - 1)
    hit = keys[found] == met_keys
    met = np.bincount(found[hit], weights=e_counts[e[hit]] * f_counts[f[hit]], minlength=len(keys))
    return np.rint(met).astype(np.int64)


def with_prior(weights: np.ndarray, prior: np.ndarray, share: float) -> np.ndarray:
    """Word weights (T, S) mixed with a prior: (1 − share)·W + share·prior.

    The prior may cover only the top-left block of real words; a row or column beyond it (the
    pseudo-word </s>) is scaled like the rest and gets no prior. Thresholds applied afterwards
    apply to the mix.
    """
    if not 0.0 <= share <= 1.0:
        raise ConfigError(f"prior share must be in [0, 1], got {share}")
    rows, cols = prior.shape
    if rows > weights.shape[0] or cols > weights.shape[1]:
        raise ValueError(f"prior {prior.shape} does not fit weights {weights.shape}")
    mixed = (1.0 - share) * np.asarray(weights, dtype=float)
    mixed[:rows, :cols] += share * prior
    return mixed


def with_product_prior(
    weights: np.ndarray, prior: np.ndarray, share: float, floor: float = LINK_PRIOR_FLOOR
) -> np.ndarray:
    """Word weights (T, S) and a prior combined as a product of experts: each row becomes
    W^(1 − share) · (prior + floor)^share, rescaled to the row's own total.

    Unlike the linear mix, a word pair the prior favours gains only where the attention also
    looks, so a word repeated in a sentence is not linked to every occurrence of its usual
    partner. `floor` keeps a pair the prior never saw linkable. The prior may cover only the
    top-left block of real words; a cell beyond it (the pseudo-word </s>) counts as unseen.
    """
    if not 0.0 <= share <= 1.0:
        raise ConfigError(f"prior share must be in [0, 1], got {share}")
    rows, cols = prior.shape
    weights = np.asarray(weights, dtype=float)
    if rows > weights.shape[0] or cols > weights.shape[1]:
        raise ValueError(f"prior {prior.shape} does not fit weights {weights.shape}")
    full = np.zeros_like(weights)
    full[:rows, :cols] = prior
    mixed = weights ** (1.0 - share) * (full + floor) ** share
    totals = mixed.sum(axis=1, keepdims=True)
    scale = np.divide(
        weights.sum(axis=1, keepdims=True), totals, where=totals > 0, out=np.zeros_like(totals)
    )
    return mixed * scale


def transpose_links(links: Iterable[Link]) -> set[Link]:
    """Swap both sides of every link, e.g. to read a target→source model's links as (src, tgt)."""
    return {(b, a) for a, b in links}


# The eight cells around a link: sides first, then diagonals.
_NEIGHBOURS = ((-1, 0), (0, -1), (1, 0), (0, 1), (-1, -1), (-1, 1), (1, -1), (1, 1))


def mean_weights(forward: np.ndarray, backward: np.ndarray) -> np.ndarray:
    """The average of a source→target weight matrix (T, S) and a target→source one (S, T).

    Each direction's rows are distributions over the other side; their mean weighs a link by
    how much both models agree on it, which a threshold or argmax then turns into links.
    """
    if forward.shape != backward.T.shape:
        raise ValueError(
            f"weights of shapes {forward.shape} and {backward.shape} are not of one sentence pair"
        )
    return (forward + backward.T) / 2


def symmetrize(
    forward: set[Link],
    backward: set[Link],
    method: str = "grow-diag-final-and",
    src_len: int | None = None,
    tgt_len: int | None = None,
) -> set[Link]:
    """Combine two directional alignments, both as (src, tgt), by Koehn et al. (2003)'s heuristic.

    intersection / union as named; grow-diag starts from the intersection and, until nothing
    changes, adds union links next to (diagonals included) an alignment link when one of their
    two words is still unaligned; grow-diag-final then adds union links (forward's first) whose
    source or target word is unaligned; grow-diag-final-and only those with both unaligned.
    Positions are visited source-major (i, then j), so the result is deterministic.
    """
    _choice(method, SYMMETRIZATION_METHODS, "symmetrization method")
    union = set(forward) | set(backward)
    src_len = _extent(union, 0, src_len, "source")
    tgt_len = _extent(union, 1, tgt_len, "target")
    if method in ("intersection", "union"):
        return set(forward) & set(backward) if method == "intersection" else union
    aligned = set(forward) & set(backward)
    _grow_diag(aligned, union, src_len, tgt_len)
    if method != "grow-diag":
        both_unaligned = method == "grow-diag-final-and"
        for directional in (forward, backward):
            _final(aligned, directional, both_unaligned)
    return aligned


def _extent(links: set[Link], side: int, given: int | None, name: str) -> int:
    """Sentence length on one side: the given one (checked) or one past the largest index."""
    largest = max((link[side] for link in links), default=-1)
    if given is None:
        return largest + 1
    if largest >= given:
        raise ValueError(f"a link reaches {name} index {largest} but the {name} has {given} words")
    return given


def _grow_diag(aligned: set[Link], union: set[Link], src_len: int, tgt_len: int) -> None:
    """Add union neighbours of alignment links while one of their two words is unaligned."""
    src_done = {i for i, _ in aligned}
    tgt_done = {j for _, j in aligned}
    grew = True
    while grew:
        grew = False
        for point in itertools.product(range(src_len), range(tgt_len)):
            if point not in aligned:
                continue
            for di, dj in _NEIGHBOURS:
                new = (point[0] + di, point[1] + dj)
                free = new[0] not in src_done or new[1] not in tgt_done
                if free and new in union and new not in aligned:
                    aligned.add(new)
                    src_done.add(new[0])
                    tgt_done.add(new[1])
                    grew = True


def _final(aligned: set[Link], directional: set[Link], both_unaligned: bool) -> None:
    """Add directional links whose source or (with `both_unaligned`) and target word is free."""
    src_done = {i for i, _ in aligned}
    tgt_done = {j for _, j in aligned}
    for i, j in sorted(directional):
        src_free, tgt_free = i not in src_done, j not in tgt_done
        if (src_free and tgt_free) if both_unaligned else (src_free or tgt_free):
            aligned.add((i, j))
            src_done.add(i)
            tgt_done.add(j)


# --- Pharaoh text ---------------------------------------------------------------------------


def format_pharaoh(links: Iterable[Link]) -> str:
    """Links as one Pharaoh line "i-j i-j ...", sorted by source index, then target index."""
    return " ".join(f"{i}-{j}" for i, j in sorted(links))


def parse_pharaoh(line: str) -> set[Link]:
    """The links of one Pharaoh line of sure links ("0-0 1-2"); an empty line has none."""
    links = set()
    for token in line.split():
        match = re.fullmatch(r"([0-9]+)-([0-9]+)", token)  # ASCII digits: \d takes "٣" too
        if match is None:
            raise InputError(f"{token!r} is not an alignment link; expected i-j, e.g. 0-1")
        links.add((int(match[1]), int(match[2])))
    return links


# --- gold alignments ------------------------------------------------------------------------

# ASCII digits only (\d would read "٣-1" as 3-1)
_PHARAOH_TOKEN = re.compile(r"([0-9]+)([-?p])([0-9]+)")
_NAACL_LINE = re.compile(r"([0-9]+)\s+([0-9]+)\s+([0-9]+)(?:\s+([SP]))?(?:\s+[0-9.]+)?")
# A NAACL line begins with three numbers; no Pharaoh line does (its links hold - ? or p)
_NAACL_START = re.compile(r"[0-9]+\s+[0-9]+\s+[0-9]+(?:\s|$)")


def read_gold(
    source: str | Path | Iterable[str], name: str | None = None, one_based: bool | None = None
) -> list[GoldAlignment]:
    """Reference alignments from a file path or lines, in Pharaoh or NAACL 2003 form (detected).

    Pharaoh: one line per sentence, "i-j" a sure link, "i?j" or "ipj" a possible one, 0-based.
    NAACL 2003 (Mihalcea & Pedersen): one link per line, "sentence source target [S|P]", all
    1-based, sentence numbers counting corpus lines from 1; S is the default; position 0 is the
    NULL word and is skipped; a line that starts with "#" is a comment (NAACL only: a Pharaoh
    line is a sentence). Position L1 is taken as the source side. `one_based` overrides the
    format's usual index base. A line that fits neither raises InputError with its number.
    """
    name, lines = _gold_lines(source, name)
    first = next((k for k, line in enumerate(lines) if _naacl_content(line)), None)
    if first is None and not any(line.strip() for line in lines):
        return [GoldAlignment(frozenset(), frozenset()) for _ in lines]
    if first is not None and _NAACL_START.match(lines[first].strip()):
        return _read_naacl(lines, name, 1 if one_based in (None, True) else 0)
    return _read_pharaoh(lines, name, 1 if one_based else 0)


def _naacl_content(line: str) -> bool:
    """Whether a line of a NAACL file holds a link: neither blank nor a "#" comment."""
    stripped = line.strip()
    return bool(stripped) and not stripped.startswith("#")


def _gold_lines(source: str | Path | Iterable[str], name: str | None) -> tuple[str, list[str]]:
    """A display name and the lines of a gold file or of lines given directly."""
    if isinstance(source, (str, Path)):
        from nmt_cli.lines import read_lines

        return name or str(source), list(read_lines(Path(source)))
    return name or "<gold alignments>", [line.rstrip("\n") for line in source]


def _read_pharaoh(lines: list[str], name: str, base: int) -> list[GoldAlignment]:
    gold = []
    for number, line in enumerate(lines, start=1):
        sure, possible = set(), set()
        for token in line.split():
            match = _PHARAOH_TOKEN.fullmatch(token)
            if match is None:
                raise _bad_gold_line(
                    name, number, line, "Pharaoh links i-j (sure), i?j or ipj (possible)"
                )
            link = (int(match[1]) - base, int(match[3]) - base)
            (sure if match[2] == "-" else possible).add(link)
        gold.append(GoldAlignment(frozenset(sure), frozenset(sure | possible)))
    return gold


def _read_naacl(lines: list[str], name: str, base: int) -> list[GoldAlignment]:
    sure: dict[int, set[Link]] = defaultdict(set)
    possible: dict[int, set[Link]] = defaultdict(set)
    last, first = 0, None
    nulls: set[tuple[int, int, int]] = set()  # (sentence, source, target) with a position 0
    for number, line in enumerate(lines, start=1):
        if not _naacl_content(line):
            continue
        match = _NAACL_LINE.fullmatch(line.strip())
        if match is None:
            raise _bad_gold_line(name, number, line, "NAACL 'sentence source target [S|P]'")
        if int(match[1]) < 1:
            raise _bad_gold_line(name, number, line, "sentence numbers counted from 1")
        sentence, src, tgt = int(match[1]), int(match[2]), int(match[3])
        last, first = max(last, sentence), min(first or sentence, sentence)
        if base == 1 and (src == 0 or tgt == 0):
            nulls.add((sentence, src, tgt))
            continue  # a link to the NULL word
        link = (src - base, tgt - base)
        possible[sentence].add(link)
        if match[4] != "P":
            sure[sentence].add(link)
    gold = LinkListedGold(
        GoldAlignment(frozenset(sure[s]), frozenset(possible[s] | sure[s]))
        for s in range(1, last + 1)
    )
    gold.first, gold.nulls = first or 1, len(nulls)
    gold.null_to_null = sum(1 for _, src, tgt in nulls if src == tgt == 0)
    return gold


class LinkListedGold(list):
    """Gold read from a file that lists links (NAACL): it ends at the last sentence with a
    link, so sentences after it may exist without one. `padded(count)` is the list for a
    corpus of `count` pairs, the missing sentences with no gold links. `first` is the lowest
    sentence number the file lists (a NULL link included); `nulls` counts its links to the
    NULL word (position 0), which are left out, `null_to_null` those of NULL to NULL, which
    mean nothing where words count from 1 (a file that counts from 0 links its first words)."""

    first: int = 1
    nulls: int = 0
    null_to_null: int = 0

    def padded(self, count: int) -> LinkListedGold:
        empty = GoldAlignment(frozenset(), frozenset())
        longer = LinkListedGold([*self, *[empty] * max(0, count - len(self))])
        longer.first, longer.nulls, longer.null_to_null = self.first, self.nulls, self.null_to_null
        return longer


def _bad_gold_line(name: str, number: int, line: str, expected: str) -> InputError:
    shown = line if len(line) <= 60 else line[:57] + "..."
    return InputError(f"{name} line {number}: cannot read {shown!r}; expected {expected}")


def check_range(
    gold: list[GoldAlignment], src_lens: list[int], tgt_lens: list[int], base: int = 0
) -> list[str]:
    """Problems that make gold links unusable for these sentence lengths, one message each,
    naming each link as its file does (words counted from `base`)."""
    problems = []
    if len(gold) != len(src_lens) or len(src_lens) != len(tgt_lens):
        problems.append(
            f"the gold alignments cover {len(gold)} sentences but the corpus has "
            f"{len(src_lens)} source and {len(tgt_lens)} target sentences"
        )
    for number, (ref, n_src, n_tgt) in enumerate(
        zip(gold, src_lens, tgt_lens, strict=False), start=1
    ):
        for i, j in sorted(ref.possible):
            if not (0 <= i < n_src and 0 <= j < n_tgt):
                counted = " (words counted from 1, as in the file)" if base == 1 else ""
                problems.append(
                    f"sentence {number}: link {i + base}-{j + base}{counted} lies outside the "
                    f"sentence ({n_src} source words, {n_tgt} target words)"
                )
    return problems


# --- scoring --------------------------------------------------------------------------------


def score_alignments(predicted: list[set[Link]], gold: list[GoldAlignment]) -> AlignmentScore:
    """Corpus AER, precision and recall of predicted links against sure/possible gold links.

    AER = 1 - (|A∩S| + |A∩P|) / (|A| + |S|), precision = |A∩P| / |A|, recall = |A∩S| / |S|,
    counts summed over the corpus (Och & Ney 2003). A ratio over an empty count earns no
    credit: precision 0 when nothing is predicted, recall 0 without sure links, and AER 1 when
    both are empty, so an empty prediction never looks good.
    """
    if len(predicted) != len(gold):
        raise InputError(
            f"{len(predicted)} predicted alignments but {len(gold)} gold alignments; "
            "give one per sentence pair in both"
        )
    n_pred = sum(len(a) for a in predicted)
    n_sure = sum(len(g.sure) for g in gold)
    sure_hits = sum(len(set(a) & g.sure) for a, g in zip(predicted, gold, strict=True))
    possible_hits = sum(len(set(a) & g.possible) for a, g in zip(predicted, gold, strict=True))
    return AlignmentScore(
        aer=1.0 - _ratio(sure_hits + possible_hits, n_pred + n_sure),
        precision=_ratio(possible_hits, n_pred),
        recall=_ratio(sure_hits, n_sure),
        predicted=n_pred,
        sure=n_sure,
        sure_hits=sure_hits,
        possible_hits=possible_hits,
    )


def _ratio(hits: int, total: int) -> float:
    return hits / total if total else 0.0
