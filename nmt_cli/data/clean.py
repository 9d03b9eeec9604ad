"""Cleaning filters for sentence pairs, each one counted.

Order: normalise (NFC, whitespace) → drop pairs with an empty side → drop pairs longer than
`max_len` tokens → drop pairs whose length ratio exceeds `max_ratio` → drop repeated pairs.

Counting length without a word segmenter:
- `count_tokens` (for `max_len`): whitespace-separated words, except that in scripts written
  without spaces (Chinese, Japanese: Han, kana, CJK punctuation, full-width forms) every
  character counts as one token. "我喜欢吃桔子。" is 7 tokens, "I like oranges." is 3.
- `ratio_length` (for `max_ratio`): words that hold a letter or digit, and a CJK character
  counts 1/1.5 of a word, because a Chinese word averages about 1.5 characters; punctuation
  counts nothing, whether "。" or a lone "." (in untokenised English it adds nothing).
  Counting characters as words would make a correct Chinese translation look ~1.5× too long
  and drop short, good pairs such as "Run." / "你用跑的。"; this unit keeps Chinese↔English
  pairs about 1:1 (on Tatoeba cmn-eng the default 3.0 drops 11 of 29,155 pairs, all loose
  idiomatic renderings such as "Give him an inch and he'll take a yard." / "得寸进尺。").
Korean is written with spaces and counts by words; Thai, Lao, Khmer and Burmese (no spaces)
count by whitespace words, which under-counts them: raise `--max-ratio` or set it to 0.
"""

from __future__ import annotations

import itertools
import re
import unicodedata
from collections.abc import Iterable, Sequence
from dataclasses import asdict, dataclass

import numpy as np

from nmt_cli.data.dedup import SeenFingerprints, SeenPairs, fingerprints
from nmt_cli.scripts import UNSPACED_CLASS as _UNSPACED  # counted per character

_UNSPACED_CHAR = re.compile(f"[{_UNSPACED}]")
# Punctuation ("。", "，", "!" or a lone "."): a token for --max-len but no word for the ratio,
# so that tokenised and untokenised text, Chinese and English, measure alike.
_RATIO_WORD = re.compile(r"\S*\w\S*")
_WORD_CHAR = re.compile(r"\w")
_CJK_PUNCTUATION = re.compile("[\u3000-\u303f\uff01-\uff0f\uff1a-\uff20\uff3b-\uff40\uff5b-\uff65]")
# Rich character sets for SentencePiece's coverage choice: CJK plus Hangul.
_RICH_CHARSET_CHAR = re.compile(f"[{_UNSPACED}\u1100-\u11ff\u3130-\u318f\uac00-\ud7af]")
CJK_CHARS_PER_WORD = 1.5
_COUNTED = ("read", "normalized", "empty", "one_sided", "too_long", "ratio", "duplicate", "kept")
_FIRST = "first_one_sided"  # not a count: a line number, the first of its chunks that is not 0


@dataclass(frozen=True)
class CleanOptions:
    """What the cleaner drops; 0 turns a limit off."""

    max_len: int = 100  # longest allowed side, in count_tokens units
    max_ratio: float = 3.0  # longest allowed longer/shorter side, in ratio_length units
    dedup: bool = True  # drop exact repeats of a (source, target) pair, keeping the first
    lowercase: bool = False  # lowercase both sides (every split, given ones too)


@dataclass(frozen=True)
class CleanCounts:
    """How many pairs one split read, changed, dropped (by reason) and kept."""

    read: int = 0
    normalized: int = 0  # pairs that normalisation changed (kept, not dropped)
    empty: int = 0
    one_sided: int = 0  # of the empty ones, those with text on the other side
    first_one_sided: int = 0  # the corpus line (from 1) of the first of those; 0: none
    too_long: int = 0
    ratio: int = 0
    duplicate: int = 0
    kept: int = 0

    @property
    def dropped(self) -> int:
        """All pairs dropped, whatever the reason."""
        return self.empty + self.too_long + self.ratio + self.duplicate

    def to_json(self) -> dict[str, int]:
        """The counts as recorded in prepare.json."""
        return asdict(self)


@dataclass(frozen=True)
class CleanedSplit:
    """The pairs that survived cleaning and the counts that say what happened."""

    pairs: list[tuple[str, str]]
    counts: CleanCounts


# Characters that render as nothing and only make the same text look different to a model or a
# deduplicator: BOM / zero-width no-break space, zero-width space, word joiner, soft hyphen.
# ZWJ and ZWNJ (U+200D, U+200C) stay: Persian, Indic scripts and emoji sequences need them.
INVISIBLE = ("\ufeff", "\u200b", "\u2060", "\u00ad")  # all format characters: not printable
# Control characters that are not whitespace (ESC, BEL, backspace, DEL, C1 controls): text
# holds them by accident (scraped pages, terminal logs), and printed back they would drive the
# terminal (an ESC sequence recolours it, and the view's columns no longer line up). Those
# str.split() takes for whitespace (\t \n \v \f \r, \x1c-\x1f, \x85) become a space below.
CONTROLS = tuple(chr(c) for c in (*range(0x20), *range(0x7F, 0xA0)) if not chr(c).isspace())
_DROPPED = dict.fromkeys(map(ord, INVISIBLE + CONTROLS))


def normalize(text: str) -> str:
    """NFC, no invisible characters (INVISIBLE) or controls (CONTROLS), every run of whitespace
    (\\r, tabs, NBSP, U+3000...) one space, stripped."""
    printable = text.isprintable()  # one fast scan; most lines hold none of them
    if not printable:
        text = text.translate(_DROPPED)
    if not text.isascii() and not unicodedata.is_normalized("NFC", text):
        text = unicodedata.normalize("NFC", text)  # (makes no printable text unprintable)
    # Most lines need no whitespace change: every whitespace character but the ASCII space is
    # a control character or a separator, so isprintable() is False for a line holding one.
    if printable and "  " not in text and text[:1] != " " and text[-1:] != " ":
        return text
    return " ".join(text.split())


def _latin1_tables() -> tuple[bytes, bytes]:
    """For text in Latin-1 (one byte a character): the table that turns its whitespace into
    b" " (bytes.split() knows only the ASCII kinds) and the characters that are neither a
    word character (\\w) nor whitespace, to delete."""
    chars = [chr(code) for code in range(256)]
    spaces = "".join(c for c in chars if c.isspace())
    wordless = "".join(c for c in chars if not _WORD_CHAR.match(c) and not c.isspace())
    return bytes.maketrans(spaces.encode("latin-1"), b" " * len(spaces)), wordless.encode("latin-1")


_LATIN1_SPACES, _LATIN1_WORDLESS = _latin1_tables()


def _lengths(text: str) -> tuple[int, float]:
    """(count_tokens, ratio_length) of `text`, measured together: the cleaner needs both."""
    try:  # most European text: the loops in C, over bytes (this runs for every side of every pair)
        data = text.encode("latin-1")
    except UnicodeEncodeError:
        pass
    else:
        words = len(data.translate(_LATIN1_SPACES).split())
        # A word counts for the ratio when it holds a letter, digit or "_" (\w), as in _RATIO_WORD:
        # deleting every other non-space character leaves exactly those words.
        return words, len(data.translate(_LATIN1_SPACES, _LATIN1_WORDLESS).split())
    if _UNSPACED_CHAR.search(text) is None:
        words = text.split()
        wordless = itertools.filterfalse(
            _WORD_CHAR.search, itertools.filterfalse(str.isalnum, words)
        )
        return len(words), len(words) - len(list(wordless))
    unspaced = len(_UNSPACED_CHAR.findall(text))
    spaced = _UNSPACED_CHAR.sub(" ", text)
    cjk_words = (unspaced - len(_CJK_PUNCTUATION.findall(text))) / CJK_CHARS_PER_WORD
    return len(spaced.split()) + unspaced, len(_RATIO_WORD.findall(spaced)) + cjk_words


def count_tokens(text: str) -> int:
    """Length for --max-len: whitespace words, one token per CJK character."""
    return _lengths(text)[0]


def ratio_length(text: str) -> float:
    """Length for --max-ratio: words with a letter or digit, 1.5 CJK characters per word."""
    return _lengths(text)[1]


def rich_charset_share(texts: Iterable[str], limit: int = 20_000) -> float:
    """The share of non-space characters that are CJK or Hangul, over the first `limit` texts."""
    rich = total = 0
    for i, text in enumerate(texts):
        if i >= limit:
            break
        if not text.isascii():
            rich += len(_RICH_CHARSET_CHAR.findall(text))
        total += len(text) - text.count(" ")
    return rich / total if total else 0.0


def drop_reason(src: str, tgt: str, options: CleanOptions) -> str | None:
    """The name of the first filter that drops a normalised pair, or None to keep it."""
    if not src or not tgt:
        return "empty"
    if not options.max_len and not options.max_ratio:
        return None
    (src_tokens, src_ratio), (tgt_tokens, tgt_ratio) = _lengths(src), _lengths(tgt)
    if options.max_len and max(src_tokens, tgt_tokens) > options.max_len:
        return "too_long"
    if options.max_ratio and max(src_ratio, tgt_ratio) > options.max_ratio * min(
        src_ratio, tgt_ratio
    ):
        return "ratio"
    return None


class PairCleaner:
    """Cleans pairs one chunk at a time, in corpus order, and counts what each filter did.

    With `options` it normalises, filters and (if `options.dedup`) drops repeats by asking
    `seen` (fingerprints by default: bounded memory); without, it only normalises (given
    dev/test sets are references: never filter or de-duplicate them).
    """

    def __init__(
        self,
        options: CleanOptions | None,
        seen: SeenPairs | SeenFingerprints | None = None,
        lowercase: bool = False,
    ) -> None:
        self.options = options
        # lowercased too: with `options`, as they say; without, as `lowercase` says
        self.lowercase = options.lowercase if options is not None else lowercase
        self._seen = None
        if options is not None and options.dedup:
            self._seen = seen if seen is not None else SeenFingerprints()
        self._counts = dict.fromkeys((*_COUNTED, _FIRST), 0)

    @property
    def counts(self) -> CleanCounts:
        """What happened so far."""
        return CleanCounts(**self._counts)

    def clean(self, pairs: Sequence[tuple[str, str]]) -> list[tuple[str, str]]:
        """The pairs of this chunk that are kept, normalised, in order."""
        return self.deduplicate(*filter_pairs(pairs, self.options, self.lowercase))

    @property
    def wants_keys(self) -> bool:
        """Whether `keep` needs the chunks' fingerprints (it drops repeats by them)."""
        return isinstance(self._seen, SeenFingerprints)

    def deduplicate(
        self, kept: list[tuple[str, str]], counts: dict[str, int]
    ) -> list[tuple[str, str]]:
        """Count a chunk that `filter_pairs` cleaned, drop repeats."""
        self._add_counts(counts)
        if self._seen is not None and kept:
            fresh = self._seen.first_time(kept)
            self._counts["duplicate"] += len(kept) - sum(fresh)
            kept = list(itertools.compress(kept, fresh))
        self._counts["kept"] += len(kept)
        return kept

    def keep(self, chunk: FilteredChunk) -> tuple[str, str]:
        """Count a chunk that `filter_chunk` cleaned (maybe in another process), drop repeats;
        the kept source and target lines, ready to write."""
        self._add_counts(chunk.counts)
        src, tgt = chunk.src, chunk.tgt
        kept = src.count("\n")
        if self._seen is not None and kept:
            assert isinstance(self._seen, SeenFingerprints) and chunk.keys is not None
            fresh = self._seen.fresh(chunk.keys)
            if not fresh.all():  # rare: split the lines only then
                src, tgt = (_kept_lines(text, fresh) for text in (src, tgt))
                self._counts["duplicate"] += kept - int(fresh.sum())
                kept = int(fresh.sum())
        self._counts["kept"] += kept
        return src, tgt

    def _add_counts(self, counts: dict[str, int]) -> None:
        first = counts.get(_FIRST, 0)  # the chunk's own line number: after those read so far
        if first and not self._counts[_FIRST]:
            self._counts[_FIRST] = self._counts["read"] + first
        for name, count in counts.items():
            if name != _FIRST:
                self._counts[name] += count


@dataclass(frozen=True)
class FilteredChunk:
    """A chunk as `filter_chunk` leaves it: the kept pairs' lines joined, as they will be
    written (two strings travel between processes far faster than thousands of pairs), their
    fingerprints when repeats are to be dropped, and the counts of the filters."""

    src: str  # the kept source sentences, each followed by "\n"
    tgt: str
    keys: np.ndarray | None  # (kept,) fingerprints of the kept pairs, None without de-duplication
    counts: dict[str, int]


def filter_chunk(
    pairs: Sequence[tuple[str, str]],
    options: CleanOptions | None,
    with_keys: bool,
    lowercase: bool = False,
) -> FilteredChunk:
    """`filter_pairs` of one chunk, packed for writing; `with_keys`: fingerprint the kept
    pairs too. No state, so any process can do it: `PairCleaner.keep` then drops repeats."""
    kept, counts = filter_pairs(pairs, options, lowercase)
    src = "".join([pair[0] + "\n" for pair in kept])
    tgt = "".join([pair[1] + "\n" for pair in kept])
    return FilteredChunk(src, tgt, fingerprints(kept) if with_keys else None, counts)


def _kept_lines(text: str, fresh: np.ndarray) -> str:
    """The lines of `text` (each ending in "\n") where `fresh` is True."""
    lines = text.split("\n")[:-1]
    return "".join([line + "\n" for line in itertools.compress(lines, fresh.tolist())])


def filter_pairs(
    pairs: Sequence[tuple[str, str]], options: CleanOptions | None, lowercase: bool = False
) -> tuple[list[tuple[str, str]], dict[str, int]]:
    """Normalise (and with `lowercase`, lowercase) one chunk and drop what the filters drop
    (None: only normalise), with counts.

    No state: chunks can be filtered in parallel and de-duplicated afterwards, in order.
    """
    counts = dict.fromkeys(("read", "normalized", "empty", "one_sided", "too_long", "ratio"), 0)
    counts[_FIRST] = 0
    kept = []
    for number, (raw_src, raw_tgt) in enumerate(pairs, start=1):
        src, tgt = normalize(raw_src), normalize(raw_tgt)
        # (lowercasing, asked for, is not counted; nor are spaces and tabs at the ends, which
        # many corpora leave on every line, so that the count would hide the real changes)
        if (src != raw_src and src != raw_src.strip(" \t")) or (
            tgt != raw_tgt and tgt != raw_tgt.strip(" \t")
        ):
            counts["normalized"] += 1
        if lowercase:
            src, tgt = src.lower(), tgt.lower()
        reason = None if options is None else drop_reason(src, tgt, options)
        if reason is None:
            kept.append((src, tgt))
        else:
            counts[reason] += 1
            if reason == "empty" and (src or tgt):
                counts["one_sided"] += 1
                counts[_FIRST] = counts[_FIRST] or number
    counts["read"] = len(pairs)
    return kept, counts


def clean_pairs(pairs: Iterable[tuple[str, str]], options: CleanOptions | None) -> CleanedSplit:
    """Normalise, filter and de-duplicate pairs in memory, exactly (None: only normalise): the
    definition that `PairCleaner` with fingerprints follows in bounded memory."""
    cleaner = PairCleaner(options, SeenPairs())
    kept = cleaner.clean(list(pairs))
    return CleanedSplit(kept, cleaner.counts)


def normalize_pairs(pairs: Iterable[tuple[str, str]]) -> CleanedSplit:
    """Only normalise (given dev/test sets are references: never filter or de-duplicate them)."""
    return clean_pairs(pairs, None)
