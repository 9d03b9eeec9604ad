"""Translation quality with sacreBLEU: corpus scores, BLEU by source length, paired significance.

Everything here takes strings and returns small dataclasses; nothing prints. sacreBLEU is
imported inside the functions that use it, so importing this module stays cheap.

References follow sacreBLEU's layout: `refs` is a list of reference *streams*, one per
reference file, each holding one line per hypothesis. Metrics use sacreBLEU's default
settings (BLEU: 13a tokenisation, mixed case, exp smoothing), so every score equals what the
`sacrebleu` command prints for the same files, with one exception: references in Chinese or
Japanese written without spaces between words get BLEU's `zh` tokenisation (each ideograph a
token; what `sacrebleu -l xx-zh` picks), or `char` when kana are common (sacreBLEU's `zh` keeps
kana runs whole, and its `ja-mecab` needs MeCab), since 13a would make each sentence one token
and every score 0; TER then uses its Asian support (with its normalisation, which that needs;
it splits ideographs, not runs of kana). Pre-segmented references (spaces between the words)
keep 13a. The signatures say which (`tok:zh`, `tok:char`, `asian:yes`).
"""

from __future__ import annotations

import bisect
import contextlib
import logging
import os
import re
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path

from nmt_cli.errors import ConfigError, InputError
from nmt_cli.scripts import UNSPACED_LETTER_CLASS, is_unspaced

METRICS = ("bleu", "chrf", "chrf++", "ter")  # every metric `score` knows
DEFAULT_METRICS = ("bleu", "chrf", "ter")
DEFAULT_BUCKETS = (10, 20, 30, 40)  # upper bounds: 1–10, 11–20, 21–30, 31–40, 41+
SIGNIFICANCE_LEVEL = 0.05
_SCORE_CHUNK = 5_000  # sentences whose reference n-grams sacreBLEU holds at once
_LOWER_IS_BETTER = frozenset({"ter"})


@dataclass(frozen=True)
class MetricScore:
    """One corpus-level score with the sacreBLEU signature that makes it reproducible."""

    metric: str  # the key asked for: "bleu", "chrf", "chrf++" or "ter"
    name: str  # sacreBLEU's name for it: "BLEU", "chrF2", "chrF2++", "TER"
    score: float  # full precision; `text` shows it with two decimals
    signature: str  # e.g. "nrefs:1|case:mixed|eff:no|tok:13a|smooth:exp|version:2.6.0"
    text: str  # sacreBLEU's line, e.g. "BLEU = 30.96 63.9/38.8/27.0/19.4 (BP = ...)"


@dataclass(frozen=True)
class BucketScore:
    """Corpus BLEU over the sentences whose source length falls in [lo, hi]."""

    label: str  # "1–10", …, "41+"
    lo: int
    hi: int | None  # None for the open last bucket
    count: int  # sentences in the bucket
    bleu: float | None  # None when the bucket is empty


@dataclass(frozen=True)
class SystemScore:
    """One system's score in a paired test, with its bootstrap mean and 95% interval."""

    name: str  # "A" (the baseline) or "B"
    score: float
    mean: float
    ci: float  # half-width of the 95% confidence interval around `mean`


@dataclass(frozen=True)
class Comparison:
    """The outcome of a paired bootstrap test of system B against baseline A."""

    metric: str  # sacreBLEU's name, e.g. "BLEU"
    signature: str  # includes the number of resamples and the seed
    a: SystemScore
    b: SystemScore
    p_value: float
    better: str | None  # "A", "B", or None when the difference is not significant
    verdict: str  # e.g. "B is better than A (p = 0.001)"


@dataclass(frozen=True)
class EvalReport:
    """Everything `nmt eval` computes for one set of translations."""

    metrics: list[MetricScore]
    by_length: list[BucketScore] | None = None
    length_unit: str | None = None  # "words" or "characters" when by_length is set
    comparison: Comparison | None = None
    by_length_compare: list[BucketScore] | None = None  # the second system's, with by_length


# Reading files ---------------------------------------------------------------------------


def read_lines(path: str | os.PathLike) -> list[str]:
    """Read a text file by the one rule of `nmt_cli.lines`, without trailing whitespace;
    "-" reads standard input (as sacreBLEU reads a system's output)."""
    from nmt_cli.lines import iter_lines, open_input
    from nmt_cli.lines import read_lines as read_text_lines

    if str(path) == "-":
        stream, name = open_input(None)
        lines = [line.rstrip() for line in iter_lines(stream, name, nul="space")]
        path = name
    else:
        lines = [line.rstrip() for line in read_text_lines(Path(path), nul="space")]
    if not lines:
        raise InputError(f"{path} is empty: pass a file with one sentence per line")
    return lines


def _lines(count: int) -> str:
    return f"{count:,} line{'' if count == 1 else 's'}"


def check_line_counts(files: Sequence[tuple[str | os.PathLike, Sequence[str]]]) -> None:
    """Raise InputError unless every (name, lines) pair has as many lines as the first."""
    first_name, first_lines = files[0]
    for name, lines in files[1:]:
        if len(lines) != len(first_lines):
            fix = (
                "the files must be parallel, one sentence per line in the same order; check "
                "that they belong together"
            )
            longer, more = (name, lines) if len(lines) > len(first_lines) else files[0]
            blank = len(more) - min(len(lines), len(first_lines))
            if not any(more[-blank:]):  # the longer one only has empty lines past the other's end
                them = "it" if blank == 1 else "them"
                fix = f"{longer} ends with {_lines(blank)} left empty: remove {them}"
            raise InputError(
                f"{first_name} has {_lines(len(first_lines))} but {name} has {len(lines):,}: {fix}"
            )


# Corpus scores ----------------------------------------------------------------------------


def check_metrics(metrics: Sequence[str]) -> None:
    """Raise ConfigError for an empty list or a metric name that `score` does not know."""
    if not metrics:
        raise ConfigError(f"no metric given: choose from {', '.join(METRICS)}")
    for name in metrics:
        if name not in METRICS:
            raise ConfigError(f"unknown metric {name!r}: choose from {', '.join(METRICS)}")


# TER's edit distance takes memory growing with the square of a line's length: at this many
# words it stays within a gigabyte or two, at a few times more it exhausts a laptop.
TER_MAX_WORDS = 5_000


def check_ter_lengths(files: Sequence[tuple[Path, Sequence[str]]]) -> None:
    """Refuse, naming the file and line, a line too long for TER (`TER_MAX_WORDS` words,
    each Chinese or Japanese character counted as one, as TER's Asian support splits them)."""
    for path, lines in files:
        for number, line in enumerate(lines, start=1):
            if len(line) <= TER_MAX_WORDS:  # never more words than characters
                continue
            words = len(_ANY_LETTER.findall(line)) + sum(
                1 for word in line.split() if not _ANY_LETTER.search(word)
            )
            if words > TER_MAX_WORDS:
                raise InputError(
                    f"{path} line {number} has {words:,} words, more than TER scores "
                    f"({TER_MAX_WORDS:,}: its memory grows with the square of the length): "
                    "split the line, or leave TER out with --metrics bleu,chrf"
                )


def unicode_form_problems(files: Sequence[tuple[str | os.PathLike, Sequence[str]]]) -> list[str]:
    """For each file whose lines are not all in Unicode NFC, or hold invisible characters
    (`clean.INVISIBLE`: zero-width space, soft hyphen...), what to say: sacreBLEU compares code
    points, so such a line scores as different text from the same words as `nmt translate`
    writes them (NFC, without those characters)."""
    import unicodedata

    from nmt_cli.data.clean import INVISIBLE

    problems = []
    for name, lines in files:
        composed = invisible = 0
        first = None
        for number, line in enumerate(lines, start=1):
            if line.isascii():
                continue
            odd = not unicodedata.is_normalized("NFC", line)
            hidden = any(char in line for char in INVISIBLE)
            composed, invisible = composed + odd, invisible + hidden
            if (odd or hidden) and first is None:
                first = number
        if first is None:
            continue
        kinds = []
        if composed:
            kinds.append(f"{composed:,} of its lines {_are(composed)} not in Unicode NFC")
        if invisible:
            whose = "" if composed else " of its lines"
            kinds.append(
                f"{invisible:,}{whose} {_are(invisible, 'hold', 'holds')} zero-width "
                "or soft-hyphen characters"
            )
        problems.append(
            f"{name}: {' and '.join(kinds)} (the first: line {first}); sacreBLEU "
            "compares code points, so they score as different from the same text in NFC "
            "without those characters, as nmt translate writes it: normalise the file to match"
        )
    return problems


def empty_reference_problems(
    hyps: Sequence[str], refs: Sequence[tuple[str | os.PathLike, Sequence[str]]]
) -> list[str]:
    """What to say of lines whose every reference is empty while the hypothesis is not: that
    hypothesis is scored against nothing (a line empty on both sides costs nothing)."""
    empty = [
        number
        for number, hyp in enumerate(hyps, start=1)
        if hyp.strip() and not any(lines[number - 1].strip() for _, lines in refs)
    ]
    if not empty:
        return []
    names = " and ".join(str(name) for name, _ in refs)
    return [
        f"{names}: {len(empty):,} line{'s' * (len(empty) != 1)} with a translation but no "
        f"reference (the first: line {empty[0]:,}); those translations are scored against "
        "nothing, which worsens every score: give their references or leave those lines out "
        "of both files"
    ]


def empty_hypothesis_problems(
    name: str | os.PathLike, hyps: Sequence[str], refs: Sequence[Sequence[str]]
) -> list[str]:
    """What to say of a system's empty lines whose references are not empty: scored as
    translations that say nothing (a file cut, or blanked, by mistake more often than not)."""
    empty = [
        number
        for number, hyp in enumerate(hyps, start=1)
        if not hyp.strip() and any(lines[number - 1].strip() for lines in refs)
    ]
    if not empty:
        return []
    share = f"all {len(hyps):,}" if len(empty) == len(hyps) else f"{len(empty):,} of {len(hyps):,}"
    return [
        f"{name}: {share} lines {_are(len(empty))} empty where the reference is not (the "
        f"first: line {empty[0]:,}); each is scored as a translation that says nothing"
    ]


def _are(count: int, many: str = "are", one: str = "is") -> str:
    return one if count == 1 else many


# Ideographs and kana (no punctuation or full-width forms): the letters of unspaced scripts.
_LETTER = UNSPACED_LETTER_CLASS
_SPACED_LETTERS = re.compile(f"[{_LETTER}][ \\t]+(?=[{_LETTER}])")  # not U+3000: layout
_ANY_LETTER = re.compile(f"[{_LETTER}]")
_ADJACENT_LETTERS = re.compile(f"[{_LETTER}](?=[{_LETTER}])")
_KANA = re.compile("[\u3040-\u30ff\u31f0-\u31ff]")
_TOKENIZE_SAMPLE = 2_000  # lines of each reference stream that decide the tokenisation


# sacreBLEU's BLEU tokenisations that need nothing more installed (ja-mecab and ko-mecab need
# MeCab; spm and flores models are downloaded).
TOKENIZERS = ("13a", "intl", "zh", "char", "none")


def bleu_tokenize(refs: Sequence[Sequence[str]], *hyps: Sequence[str]) -> str:
    """sacreBLEU's BLEU tokenisation for these references: '13a' (sacreBLEU's default) unless
    at least a tenth of their non-space characters are Chinese or Japanese and that text is
    unsegmented (fewer than a quarter of the neighbouring ideographs and kana have a space
    between them); then 'zh' (each ideograph a token; the rest as 13a splits it), or 'char'
    when kana make up more than a tenth of the letters (sacreBLEU's `zh` keeps kana runs
    whole). Decided on the first lines of each stream, pooled; when the references call for
    '13a', each system's hypotheses are asked the same (unsegmented output against segmented
    references would otherwise match no word), and if one of them is unsegmented, every
    system is scored with its tokenisation: a paired test scores both alike, and 'zh' and
    'char' split ideographs and kana whatever the spaces between them. Several references
    are asked one by one, alike: one unsegmented reference beside segmented ones is scored
    with its tokenisation too (pooled, the segmented ones outvoted it)."""
    asked = {_tokenize_of([stream]) for stream in refs if len(stream)}
    if asked == {"13a"} or not asked:
        asked = {_tokenize_of([h]) for h in hyps if len(h)}
    return "char" if "char" in asked else "zh" if "zh" in asked else "13a"


def _tokenize_of(streams: Sequence[Sequence[str]]) -> str:
    lines = [line for stream in streams for line in stream[:_TOKENIZE_SAMPLE]]
    letters = sum(len(_ANY_LETTER.findall(line)) for line in lines)
    visible = sum(len(line) - sum(ch.isspace() for ch in line) for line in lines)
    if not letters or 10 * letters < visible:
        return "13a"
    spaced = sum(len(_SPACED_LETTERS.findall(line)) for line in lines)
    adjacent = sum(len(_ADJACENT_LETTERS.findall(line)) for line in lines)
    if 4 * spaced > spaced + adjacent:
        return "13a"  # segmented: words of one or more characters between spaces
    kana = sum(len(_KANA.findall(line)) for line in lines)
    return "char" if 10 * kana > spaced + adjacent + len(lines) else "zh"


# sacreBLEU's three lines of advice on tokenised hypotheses, said as one line of ours
_TOKENIZED_ADVICE = (
    "That's 100 lines that end in a tokenized period ('.')",
    "It looks like you forgot to detokenize your test data",
    "If you insist your data is detokenized",
)
TOKENIZED_WARNING = (
    "warning: 100 or more hypotheses end in ' .', as tokenised text does: BLEU is meant for "
    "detokenised text; detokenise hypotheses and references for scores comparable with others'"
)


class _OncePerProcess(logging.Filter):
    """Lets each distinct message through once: sacreBLEU's advice on tokenised text came again
    at every validation and chunk. That advice (three lines, the last about a parameter nmt does
    not offer) becomes one line, `TOKENIZED_WARNING`."""

    def __init__(self) -> None:
        super().__init__()
        self.seen: set[str] = set()

    def filter(self, record: logging.LogRecord) -> bool:
        message = record.getMessage()
        if message.startswith(_TOKENIZED_ADVICE[1:]):
            return False
        if message.startswith(_TOKENIZED_ADVICE[0]):
            record.msg, record.args, message = TOKENIZED_WARNING, None, TOKENIZED_WARNING
        if message in self.seen:
            return False
        self.seen.add(message)
        return True


_SACREBLEU_ONCE = _OncePerProcess()


def _make_metric(name: str, tokenize: str = "13a", lowercase: bool = False):
    """A sacreBLEU metric object with the sacrebleu command's default settings (BLEU with the
    given tokenisation, see `bleu_tokenize`, and TER with its Asian support beside zh/char);
    `lowercase`: BLEU and chrF ignore case, as sacrebleu -lc makes them (TER always does)."""
    from sacrebleu.metrics import BLEU, CHRF, TER

    sacrebleu_log = logging.getLogger("sacrebleu")
    if _SACREBLEU_ONCE not in sacrebleu_log.filters:
        sacrebleu_log.addFilter(_SACREBLEU_ONCE)

    if name in ("chrf", "chrf++"):
        return CHRF(word_order=2 if name == "chrf++" else 0, lowercase=lowercase)
    if name == "bleu":
        return BLEU(tokenize=tokenize, lowercase=lowercase)
    if tokenize in ("zh", "char"):  # TER's splitting of Chinese and Japanese, which it applies
        return TER(normalized=True, asian_support=True)  # only when normalising
    return TER()


def _check_parallel(hyps: Sequence[str], refs: Sequence[Sequence[str]]) -> None:
    if not hyps:
        raise InputError("there are no hypotheses to score")
    if not refs:
        raise InputError("no reference given: pass at least one reference file")
    for number, stream in enumerate(refs, 1):
        if len(stream) != len(hyps):
            raise InputError(
                f"there are {len(hyps):,} hypotheses but reference {number} has "
                f"{len(stream):,} lines: give one reference line per hypothesis"
            )


def score(
    hyps: Sequence[str],
    refs: Sequence[Sequence[str]],
    metrics: Sequence[str] = DEFAULT_METRICS,
    by_references: bool = False,
    tokenize: str | None = None,
    lowercase: bool = False,
) -> list[MetricScore]:
    """Corpus scores of `hyps` against one or more reference streams, one per metric. With
    `by_references`, BLEU's tokenisation is the references' alone (see `bleu_tokenize`), so
    that the scores of one run's validations, whatever its output, compare; `tokenize` gives
    it (a system compared with another is scored as the test scores it)."""
    check_metrics(metrics)
    _check_parallel(hyps, refs)
    if tokenize is None:
        tokenize = bleu_tokenize(refs) if by_references else bleu_tokenize(refs, hyps)
    results = []
    for key in metrics:
        metric = _make_metric(key, tokenize, lowercase)
        result = _corpus_score(metric, hyps, refs)
        signature = metric.get_signature().format()
        results.append(MetricScore(key, result.name, result.score, signature, result.format()))
    return results


def _corpus_score(metric, hyps: Sequence[str], refs: Sequence[Sequence[str]]):
    """sacreBLEU's corpus score, from sentence statistics summed one chunk at a time.

    `corpus_score` caches the n-grams of every reference at once (for chrF about 10 kB per
    sentence, over a gigabyte for 100,000 lines). Every sacreBLEU metric's corpus score is a
    function of the sum of its sentence statistics, so summing them chunk by chunk gives the
    same score while memory holds one chunk.
    """
    if len(hyps) <= _SCORE_CHUNK:
        return metric.corpus_score(list(hyps), [list(stream) for stream in refs])
    from sacrebleu.utils import sum_of_lists

    total = None
    for start in range(0, len(hyps), _SCORE_CHUNK):
        end = start + _SCORE_CHUNK
        stats = metric._extract_corpus_statistics(
            list(hyps[start:end]), [list(stream[start:end]) for stream in refs]
        )
        chunk = sum_of_lists(stats)
        total = chunk if total is None else [a + b for a, b in zip(total, chunk, strict=True)]
    return metric._compute_score_from_stats(total)


# BLEU by source length --------------------------------------------------------------------


def length_unit(sources: Sequence[str]) -> str:
    """'characters' when most non-space characters are CJK (unsegmented text), else 'words'."""
    total = cjk = 0
    for line in sources:
        for ch in line:
            if not ch.isspace():
                total += 1
                cjk += is_unspaced(ch)
    return "characters" if total and 2 * cjk > total else "words"


def source_length(line: str, unit: str) -> int:
    """Length of one source sentence in whitespace words or in non-space characters."""
    if unit == "characters":
        return sum(1 for ch in line if not ch.isspace())
    return len(line.split())


def check_buckets(buckets: Sequence[int]) -> None:
    """Raise ConfigError unless the bucket upper bounds are positive and increasing."""
    shown = ",".join(str(bound) for bound in buckets)
    increasing = all(a < b for a, b in zip(buckets, buckets[1:], strict=False))
    if not buckets or buckets[0] < 1 or not increasing:
        raise ConfigError(
            f"length buckets must be increasing positive upper bounds such as 10,20,30,40 "
            f"(got {shown or 'none'})"
        )


def bucket_bounds(buckets: Sequence[int]) -> list[tuple[int, int | None]]:
    """(lo, hi) of every bucket for the given upper bounds, ending with an open (lo, None)."""
    check_buckets(buckets)
    lows = [1, *(bound + 1 for bound in buckets)]
    return list(zip(lows, [*buckets, None], strict=True))


def _label(lo: int, hi: int | None) -> str:
    if hi is None:
        return f"{lo}+"
    return str(lo) if lo == hi else f"{lo}–{hi}"


def bleu_by_length(
    sources: Sequence[str],
    hyps: Sequence[str],
    refs: Sequence[Sequence[str]],
    buckets: Sequence[int] = DEFAULT_BUCKETS,
    tokenize: str | None = None,
    lowercase: bool = False,
) -> list[BucketScore]:
    """Corpus BLEU per bucket of source length (see `length_unit`); an empty source goes in the
    first, which then starts at 0 (its label says so). (`tokenize`: BLEU's tokenisation, by default `bleu_tokenize`'s for these hypotheses.)"""
    bounds = bucket_bounds(buckets)
    _check_parallel(hyps, refs)
    if len(sources) != len(hyps):
        raise InputError(
            f"there are {len(sources):,} source lines but {len(hyps):,} hypotheses: "
            "give the source the translations were made from"
        )
    unit = length_unit(sources)
    members: list[list[int]] = [[] for _ in bounds]
    for index, line in enumerate(sources):
        members[bisect.bisect_left(buckets, source_length(line, unit))].append(index)
    if any(source_length(sources[index], unit) == 0 for index in members[0]):
        bounds[0] = (0, bounds[0][1])
    metric = _make_metric("bleu", tokenize or bleu_tokenize(refs, hyps), lowercase)  # all buckets
    return [
        _bucket_score(lo, hi, indices, hyps, refs, metric)
        for (lo, hi), indices in zip(bounds, members, strict=True)
    ]


def _bucket_score(
    lo: int,
    hi: int | None,
    indices: list[int],
    hyps: Sequence[str],
    refs: Sequence[Sequence[str]],
    metric,
) -> BucketScore:
    if not indices:
        return BucketScore(_label(lo, hi), lo, hi, 0, None)
    sub_hyps = [hyps[i] for i in indices]
    sub_refs = [[stream[i] for i in indices] for stream in refs]
    bleu = _corpus_score(metric, sub_hyps, sub_refs).score
    return BucketScore(_label(lo, hi), lo, hi, len(indices), bleu)


# Paired significance ----------------------------------------------------------------------


@contextlib.contextmanager
def _sacrebleu_seed(seed: int | None) -> Iterator[None]:
    """Set the seed sacreBLEU's significance module reads from SACREBLEU_SEED, then restore."""
    previous = os.environ.get("SACREBLEU_SEED")
    os.environ["SACREBLEU_SEED"] = "none" if seed is None else str(seed)
    try:
        yield
    finally:
        if previous is None:
            del os.environ["SACREBLEU_SEED"]
        else:
            os.environ["SACREBLEU_SEED"] = previous


def compare(
    hyps_a: Sequence[str],
    hyps_b: Sequence[str],
    refs: Sequence[Sequence[str]],
    metric: str = "bleu",
    n_samples: int = 1000,
    seed: int | None = 12345,
    tokenize: str | None = None,
    lowercase: bool = False,
) -> Comparison:
    """Paired bootstrap resampling (Koehn 2004) of B against baseline A, by sacreBLEU itself.

    When A and B score exactly the same the p-value is 1: there is no difference to explain.
    (sacreBLEU counts only resampled differences strictly above the observed one, which
    gives identical systems the smallest p-value instead.)
    """
    from sacrebleu.significance import PairedTest

    check_metrics([metric])
    _check_parallel(hyps_a, refs)
    _check_parallel(hyps_b, refs)
    if n_samples < 1 or (seed is not None and seed < 1):
        raise ConfigError("the bootstrap needs at least 1 sample and a seed of at least 1")
    systems = [("A", list(hyps_a)), ("B", list(hyps_b))]
    streams = [list(stream) for stream in refs]
    with _sacrebleu_seed(seed):
        scorer = _make_metric(metric, tokenize or bleu_tokenize(refs, hyps_a, hyps_b), lowercase)
        test = PairedTest(systems, {metric: scorer}, streams, "bs", n_samples)
        signatures, results = test()
    name = next(key for key in results if key != "System")
    result_a, result_b = results[name]
    a = SystemScore("A", result_a.score, float(result_a.mean), float(result_a.ci))
    b = SystemScore("B", result_b.score, float(result_b.mean), float(result_b.ci))
    p_value = 1.0 if a.score == b.score else float(result_b.p_value)
    better = _better(a, b, p_value, lower_is_better=metric in _LOWER_IS_BETTER)
    return Comparison(
        name, signatures[name].format(), a, b, p_value, better, _verdict(better, p_value)
    )


def _better(a: SystemScore, b: SystemScore, p_value: float, lower_is_better: bool) -> str | None:
    if p_value >= SIGNIFICANCE_LEVEL or a.score == b.score:
        return None
    return "B" if (b.score > a.score) != lower_is_better else "A"


def format_p(p_value: float) -> str:
    """A p-value as people read it: three decimals, or '< 0.001'."""
    return "p < 0.001" if p_value < 0.0005 else f"p = {p_value:.3f}"


def _verdict(better: str | None, p_value: float) -> str:
    if better is None:
        return f"no significant difference at p < {SIGNIFICANCE_LEVEL} ({format_p(p_value)})"
    worse = "A" if better == "B" else "B"
    return f"{better} is better than {worse} ({format_p(p_value)})"


# Everything at once -----------------------------------------------------------------------


def evaluate_corpus(
    hyps: Sequence[str],
    refs: Sequence[Sequence[str]],
    metrics: Sequence[str] = DEFAULT_METRICS,
    sources: Sequence[str] | None = None,
    buckets: Sequence[int] = DEFAULT_BUCKETS,
    hyps_b: Sequence[str] | None = None,
    tokenize: str | None = None,
    lowercase: bool = False,
) -> EvalReport:
    """Scores, plus BLEU by length when `sources` is given (of both systems with `hyps_b`) and
    a test of `hyps_b` if given.

    The comparison uses the first of `metrics`; BLEU tokenises `hyps` as the comparison does
    (see `bleu_tokenize`), so its score there is the score above. `tokenize` (one of
    TOKENIZERS) replaces that choice; `lowercase` makes BLEU and chrF ignore case.
    """
    if tokenize is None and hyps_b is not None:
        tokenize = bleu_tokenize(refs, hyps, hyps_b)
    scores = score(hyps, refs, metrics, tokenize=tokenize, lowercase=lowercase)
    by_length = unit = comparison = by_length_b = None
    if sources is not None:
        by_length = bleu_by_length(sources, hyps, refs, buckets, tokenize, lowercase)
        unit = length_unit(sources)
    if hyps_b is not None:
        comparison = compare(hyps, hyps_b, refs, metrics[0], tokenize=tokenize, lowercase=lowercase)
        if sources is not None:  # both systems' buckets, tokenised alike
            by_length_b = bleu_by_length(sources, hyps_b, refs, buckets, tokenize, lowercase)
    return EvalReport(scores, by_length, unit, comparison, by_length_b)
