"""`nmt prepare` as a library call: corpus files in, a complete data directory out.

Steps: stream the training corpus through normalisation, filters and de-duplication into the
cleaned train split (nmt_cli.data.splits) → take dev/test from their own files (only
normalised: they are references) or hold them out of the cleaned training pairs (seeded) →
train SentencePiece on a seeded sample of the training split → encode every split in chunks
straight into its token-id files → write prepare.json last. Everything happens in a staged
directory that appears only when complete, so an error or Ctrl-C leaves nothing behind.

Memory stays bounded whatever the corpus size: one chunk of pairs, 8 bytes per distinct pair
for de-duplication, the SentencePiece sample (at most _SAMPLE_SENTENCES sentences per model)
and one chunk of ids. On a corpus no larger than the sample, SentencePiece sees every training
sentence in corpus order (source side, then target side), as it always did.
"""

from __future__ import annotations

import contextlib
import ctypes
import functools
import gc
import itertools
import json
import math
import os
import sys
import threading
import time
from collections.abc import Iterable, Iterator
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np

from nmt_cli import __version__
from nmt_cli.atomic import staged_directory, write_text
from nmt_cli.config import MAX_SEED
from nmt_cli.data.clean import CleanOptions
from nmt_cli.data.corpus import ParallelSource, check_readable
from nmt_cli.data.datadir import (
    FORMAT_NAME,
    FORMAT_VERSION,
    MANIFEST,
    SIDES,
    SPLITS,
    spm_prefix_name,
    text_name,
)
from nmt_cli.data.ids import TokenIdsWriter
from nmt_cli.data.sample import smallest_keys
from nmt_cli.data.splits import WrittenSplit, write_given, write_train
from nmt_cli.data.tokenizer import (
    Tokenizer,
    TrainedTokenizer,
    auto_character_coverage,
    check_training_options,
    train_tokenizer,
)
from nmt_cli.errors import ConfigError
from nmt_cli.progress import OnEvent, count, ignore
from nmt_cli.threads import Stopped, run_in_threads

__all__ = ["PrepareOptions", "PrepareReport", "SplitReport", "prepare"]
_ENCODE_CHUNK = 20_000
# Sentences each SentencePiece model is trained on at most: a seeded sample beyond that.
# 300,000 sentences (about 4 million words) are plenty for vocabularies of a few thousand to
# 32,000 pieces; training on them takes about 8 s and 0.5 GB on 2 cores (bench/PREPARE.md).
_SAMPLE_SENTENCES = 300_000
_SAMPLE_FILE = "spm-sample.txt"  # the sample on a large corpus; in the stage while training


@dataclass(frozen=True)
class PrepareOptions:
    """Everything `nmt prepare` needs; defaults are the reference settings."""

    train: ParallelSource
    output: Path
    dev: ParallelSource | None = None  # given dev pairs (only normalised)
    test: ParallelSource | None = None  # given test pairs (only normalised)
    dev_size: int = 0  # pairs held out of the training data as dev when no dev files are given
    test_size: int = 0  # the same for test
    seed: int = 1  # for the held-out sample and SentencePiece's sampling
    clean: CleanOptions = field(default_factory=CleanOptions)
    vocab_size: int = 8000  # pieces per SentencePiece model, special ones included
    model_type: str = "unigram"  # or "bpe"
    joint: bool = True  # one model for both languages (the reference setting)
    character_coverage: float | None = None  # None: 0.9995 for mostly-CJK text, else 1.0
    src_lang: str | None = None
    tgt_lang: str | None = None
    force: bool = False  # replace an existing output directory (once the new one is complete)

    def check(self) -> None:
        """Raise ConfigError for a value that cannot work, before any file is read."""
        check_training_options(self.vocab_size, self.model_type, self.character_coverage)
        for split, given, size in (
            ("dev", self.dev, self.dev_size),
            ("test", self.test, self.test_size),
        ):
            if size < 0:
                raise ConfigError(f"--{split}-size {size} is negative: use 0 or more")
            if given is not None and size:
                raise ConfigError(f"give --{split}-src/--{split}-tgt or --{split}-size, not both")
        if not 0 <= self.seed <= MAX_SEED:
            raise ConfigError(f"--seed must be in 0..{MAX_SEED}, got {self.seed}")
        if self.clean.max_len < 0:
            raise ConfigError(
                f"--max-len {self.clean.max_len} is negative: use 0 (no limit) or more"
            )
        if math.isnan(self.clean.max_ratio):
            raise ConfigError("--max-ratio nan is not a number: use 0 (no limit) or ≥ 1")
        if self.clean.max_ratio and self.clean.max_ratio < 1:
            raise ConfigError(
                f"--max-ratio {self.clean.max_ratio} is below 1: use 0 (no limit) or ≥ 1"
            )

    def to_json(self) -> dict[str, object]:
        """The options that shaped the data, as given (None where chosen automatically)."""
        names = "dev_size test_size seed vocab_size model_type joint character_coverage".split()
        return {**self.clean.__dict__, **{name: getattr(self, name) for name in names}}


@dataclass(frozen=True)
class SplitReport(WrittenSplit):
    """One split as written: where it came from, what cleaning did, how many pieces it has."""

    src_pieces: int
    tgt_pieces: int


@dataclass(frozen=True)
class PrepareReport:
    """What `prepare` did: the splits, the tokenizers and anything the user should know."""

    output: Path
    splits: tuple[SplitReport, ...]
    tokenizers: dict[str, TrainedTokenizer]  # by side; the same object twice when joint
    joint: bool
    warnings: tuple[str, ...]
    seconds: float
    lowercase: bool = False  # --lowercase: every split was lowercased


def prepare(options: PrepareOptions, progress: OnEvent = ignore) -> PrepareReport:
    """Build the data directory described by `options` and report what was done, with a
    `count` progress event per step of each task."""
    started = time.perf_counter()
    options.check()
    for source in (options.train, options.dev, options.test):
        for path in source.files if source else ():
            check_readable(path, pipes=False)  # a corpus is read more than once
    inputs = [path for source in (options.train, options.dev, options.test) if source
              for path in source.files]  # fmt: skip
    with staged_directory(options.output, options.force, inputs, MANIFEST) as stage:
        splits = _write_splits(options, stage, progress)
        tokenizers = _train_tokenizers(options, splits[0], stage, progress)
        _return_freed_memory()  # SentencePiece's tables, before encoding
        reports = tuple(_encode_split(stage, split, tokenizers, progress) for split in splits)
        report = PrepareReport(
            output=options.output,
            splits=reports,
            tokenizers=tokenizers,
            joint=options.joint,
            lowercase=options.clean.lowercase,
            warnings=(
                _same_file_warnings(options)
                + _overlap_warnings(options, stage)
                + _language_warnings(options, stage)
                + _warnings(tokenizers, reports, options.clean, options.train.describe())
            ),
            seconds=time.perf_counter() - started,
        )
        write_text(stage / MANIFEST, json.dumps(build_manifest(options, report), indent=2) + "\n")
    return report


def _return_freed_memory() -> None:
    """Give the memory freed by the step before back to the system before the next one.

    glibc keeps freed heap memory (the reading pass's chunks and fingerprint levels, the
    sample's keys, SentencePiece's tables) for reuse, and how much of it stays depends on the
    corpus size; handed back, the next step starts from the same footprint whatever the size.
    Elsewhere (no glibc) this only collects garbage.
    """
    gc.collect()
    if sys.platform != "linux":
        return
    try:
        trim = ctypes.CDLL(None).malloc_trim
    except (OSError, AttributeError):  # a C library without malloc_trim (musl)
        return
    trim(0)


def _write_splits(options: PrepareOptions, stage: Path, progress: OnEvent) -> list[WrittenSplit]:
    """The cleaned train split and the dev/test splits, given or held out, in split order."""
    held_out = {"dev": options.dev_size, "test": options.test_size}
    splits = write_train(options.train, options.clean, stage, held_out, options.seed, progress)
    for name, source in (("dev", options.dev), ("test", options.test)):
        if source is not None:
            splits.append(write_given(name, source, stage, progress, options.clean.lowercase))
    return sorted(splits, key=lambda split: SPLITS.index(split.name))


# SentencePiece ---------------------------------------------------------------------------------


# SentencePiece trains on the first this many characters of a longer line (it is encoded
# whole). Its trainer's time grows faster than a line's length when the line repeats itself:
# beside 200 short lines, one word of 4,000 letters took 0.23 s, of 16,000 0.95 s, of 64,000
# 5.9 s, and a prepare with one of 100,000 10 s. Leaving such lines out instead would leave a
# corpus of long lines (a document per line) nothing to train on.
_TRAINING_LINE_CHARS = 16_384


@dataclass(frozen=True)
class _TrainingSample:
    """The training sentences SentencePiece sees: every line of `files` (cut to
    _TRAINING_LINE_CHARS), read from disk each time it is iterated (SentencePiece may be
    retried with a smaller vocabulary)."""

    files: tuple[Path, ...]

    def __iter__(self) -> Iterator[str]:
        cut = _TRAINING_LINE_CHARS
        for path in self.files:
            for line in _text_lines(path):
                yield line if len(line) <= cut else line[:cut]


def _text_lines(path: Path) -> Iterator[str]:
    """The lines of one of the text files written here (UTF-8, every line ends in "\\n")."""
    for lines in _text_chunks(path, _ENCODE_CHUNK):
        yield from lines


def _text_chunks(path: Path, size: int) -> Iterator[list[str]]:
    """The lines of one of the text files written here, `size` at a time (the last chunk
    shorter), read with the loops in C."""
    with open(path, encoding="utf-8", newline="\n") as handle:
        while lines := list(itertools.islice(handle, size)):
            yield [line[:-1] for line in lines]


def _sample(stage: Path, train: WrittenSplit, sides: tuple[str, ...], seed: int) -> _TrainingSample:
    """At most _SAMPLE_SENTENCES sentences of `sides`: the same seeded pairs on every side.

    Beyond that size the chosen lines are first copied into _SAMPLE_FILE (side after side, in
    corpus order), so SentencePiece reads only the sample while it trains. Feeding it the
    chosen lines straight from the whole training files instead cost memory that grew with
    the corpus (about 100 MB more at 5 million pairs than at 1 million, bench/PREPARE.md).
    """
    files = tuple(stage / text_name("train", side) for side in sides)
    per_side = _SAMPLE_SENTENCES // len(sides)
    if train.pairs <= per_side:
        return _TrainingSample(files)
    chosen = np.sort(smallest_keys(train.pairs, per_side, seed, "spm"))
    sample = stage / _SAMPLE_FILE
    with open(sample, "wb") as out:
        for path in files:
            with open(path, "rb") as lines:
                out.writelines(_select(lines, chosen))
    return _TrainingSample((sample,))


def _select(lines: Iterable[bytes], chosen: np.ndarray) -> Iterator[bytes]:
    """The lines whose 0-based numbers are in the sorted array `chosen`."""
    wanted = iter(chosen.tolist())
    next_line = next(wanted, None)
    for number, line in enumerate(lines):
        if number == next_line:
            yield line
            next_line = next(wanted, None)


def _coverage(stage: Path, sides: tuple[str, ...]) -> float:
    """The automatic character coverage, judged on the first lines of each training side (as
    many as `rich_charset_share` reads)."""
    return auto_character_coverage(
        *(_text_lines(stage / text_name("train", side)) for side in sides)
    )


def _train_tokenizers(
    options: PrepareOptions, train: WrittenSplit, stage: Path, progress: OnEvent
) -> dict[str, TrainedTokenizer]:
    """Train the joint model on both training sides, or one model per side; map side → model."""
    groups = [(None, SIDES)] if options.joint else [(side, (side,)) for side in SIDES]
    trained: dict[str, TrainedTokenizer] = {}
    for prefix_side, sides in groups:
        step = f"training SentencePiece ({'+'.join(sides)})"
        progress(count(step, 0, None))
        coverage = options.character_coverage
        if coverage is None:
            coverage = _coverage(stage, sides)
        sample = _sample(stage, train, sides, options.seed)
        _return_freed_memory()  # what reading and sampling left, before SentencePiece's peak
        try:
            model = train_tokenizer(
                sample,
                stage / spm_prefix_name(prefix_side),
                options.vocab_size,
                options.model_type,
                coverage,
                options.seed,
            )
        finally:
            (stage / _SAMPLE_FILE).unlink(missing_ok=True)
        progress(count(step, 1, 1))
        trained.update(dict.fromkeys(sides, model))
    return trained


# Encoding --------------------------------------------------------------------------------------


def _encode_split(
    stage: Path,
    split: WrittenSplit,
    tokenizers: dict[str, TrainedTokenizer],
    progress: OnEvent,
) -> SplitReport:
    """Encode both sides of a split, a chunk at a time, straight into its token-id files.

    The two sides are encoded side by side, each in a thread of its own with one SentencePiece
    thread: SentencePiece releases the GIL while it encodes, so one side's Python work (reading
    lines, packing ids) overlaps the other's encoding (about a sixth faster than one side after
    the other with two SentencePiece threads each, on 2 cores).
    """
    done = dict.fromkeys(SIDES, 0)  # sentences encoded, per side (each thread writes its own)
    pieces = dict.fromkeys(SIDES, 0)
    step = f"encoding {split.name}"

    def encode(side: str, stop: threading.Event) -> None:
        model = tokenizers[side]
        tokenizer = Tokenizer(model.model)
        prefix = stage / text_name(split.name, side)
        with TokenIdsWriter(prefix, model.vocab_size) as writer:
            for chunk in _text_chunks(prefix, _ENCODE_CHUNK):
                if stop.is_set():
                    raise Stopped
                writer.add(tokenizer.encode_batch(chunk, num_threads=1))
                done[side] = writer.sentences
        pieces[side] = writer.total

    reported = [-1]

    def tick() -> None:
        sentences = sum(done.values())
        if sentences != reported[0]:
            progress(count(step, sentences, len(SIDES) * split.pairs))
            reported[0] = sentences

    run_in_threads([functools.partial(encode, side) for side in SIDES], tick)
    tick()  # the last count, if the threads ended between two ticks
    totals = [pieces[side] for side in SIDES]
    return SplitReport(split.name, split.origin, split.counts, split.pairs, *totals)


# prepare.json ----------------------------------------------------------------------------------


def build_manifest(options: PrepareOptions, report: PrepareReport) -> dict[str, object]:
    """The content of prepare.json: format, inputs, options, every count, every file name."""
    held_out = sum(split.pairs for split in report.splits if split.origin == "held out")
    counts = {
        split.name: {"origin": split.origin, **split.counts.to_json()} for split in report.splits
    }
    counts["train"]["held_out"] = held_out
    return {
        "format": FORMAT_NAME,
        "format_version": FORMAT_VERSION,
        "created_by": f"nmt {__version__}",
        "src_lang": options.src_lang,
        "tgt_lang": options.tgt_lang,
        "inputs": _inputs_json(options),
        "options": options.to_json(),
        "counts": counts,
        "splits": {split.name: _split_json(split) for split in report.splits},
        "tokenizer": {
            "joint": report.joint,
            "model_type": options.model_type,
            **{side: model.to_json() for side, model in report.tokenizers.items()},
        },
    }


def _inputs_json(options: PrepareOptions) -> dict[str, object]:
    """Where each split came from: its files as given, or the held-out sample."""
    inputs: dict[str, object] = {"train": options.train.to_json()}
    for name, given, size in (
        ("dev", options.dev, options.dev_size),
        ("test", options.test, options.test_size),
    ):
        if given is not None:
            inputs[name] = given.to_json()
        elif size:
            inputs[name] = {"held_out_from": "train", "size": size, "seed": options.seed}
    return inputs


def _split_json(split: SplitReport) -> dict[str, object]:
    """One split's size and its file names (text files and token-id prefixes)."""
    names = {side: text_name(split.name, side) for side in SIDES}
    return {
        "pairs": split.pairs,
        "src_pieces": split.src_pieces,
        "tgt_pieces": split.tgt_pieces,
        "text": names,
        "ids": names,
    }


# A filter that drops at least this share of the pairs read is more likely set for other text
# (or a sign of misread files) than doing its job: real corpora lose well under 1 % to them.
FILTERED_SHARE_WARNING = 0.2


# Languages written in CJK characters or Hangul; a side given one of these codes whose text has
# next to none of them, or another code for text made mostly of them, is named.
_RICH_CHARSET_LANGS = {"zh", "ja", "ko", "zho", "chi", "jpn", "kor", "yue", "cmn", "wuu", "lzh"}


def _language_warnings(options: PrepareOptions, stage: Path) -> tuple[str, ...]:
    """--src-lang/--tgt-lang codes the training text contradicts (swapped sides, say)."""
    from nmt_cli.data.clean import rich_charset_share

    found = []
    for side, code in (("src", options.src_lang), ("tgt", options.tgt_lang)):
        if not code:
            continue
        base = code.lower().replace("_", "-").split("-")[0]
        share = rich_charset_share(_text_lines(stage / text_name("train", side)))
        if base in _RICH_CHARSET_LANGS and share < 0.05:
            found.append(
                f"--{side}-lang {code}, but only {share:.0%} of the {side} text's characters "
                "are CJK or Hangul: are the two sides or the codes swapped?"
            )
        elif base not in _RICH_CHARSET_LANGS and share >= 0.5:
            found.append(
                f"--{side}-lang {code}, but {share:.0%} of the {side} text's characters are "
                "CJK or Hangul: are the two sides or the codes swapped?"
            )
    return tuple(found)


def _same_file_warnings(options: PrepareOptions) -> tuple[str, ...]:
    """A split whose --src and --tgt are one file: every pair a copy of its source."""
    found = []
    for name, source in (("train", options.train), ("dev", options.dev), ("test", options.test)):
        if source is None or source.tsv is not None:
            continue
        with contextlib.suppress(OSError):
            if os.path.samefile(source.src, source.tgt):
                found.append(
                    f"the {name} source and target are the same file ({source.src}): every pair "
                    "is a copy of its source; give the target-language file as the target"
                )
    return tuple(found)


def _overlap_warnings(options: PrepareOptions, stage: Path) -> tuple[str, ...]:
    """Given dev/test pairs that the training split (or, for test, the dev split) also holds,
    as cleaned: their scores would measure what the model saw, not how it translates."""
    from nmt_cli.data.dedup import fingerprints

    def keys(split: str) -> Iterator[np.ndarray]:
        sides = (stage / text_name(split, side) for side in SIDES)
        for src, tgt in zip(*(_text_chunks(path, _ENCODE_CHUNK) for path in sides), strict=True):
            yield fingerprints(list(zip(src, tgt, strict=True)))

    given = {
        name: np.concatenate([np.empty(0, np.uint64), *keys(name)])
        for name, source in (("dev", options.dev), ("test", options.test))
        if source is not None
    }
    if not given:
        return ()
    seen = {name: np.zeros(len(split), dtype=bool) for name, split in given.items()}
    for chunk in keys("train"):
        for name, split in given.items():
            seen[name] |= np.isin(split, chunk)
    found = []
    for name, split in given.items():
        if count := int(seen[name].sum()):
            found.append(
                f"{count:,} of the {len(split):,} {name} pairs are also training pairs: scores "
                "on them measure what the model saw, not how it translates; remove them from "
                "the training corpus, or give no such file and let prepare hold the set out of the "
                "corpus (--dev-size, --test-size)"
            )
    if "dev" in given and "test" in given:
        if count := int(np.isin(given["test"], given["dev"]).sum()):
            found.append(
                f"{count:,} of the {len(given['test']):,} test pairs are also dev pairs: "
                "the test score is then not of unseen text; give a test set of other pairs"
            )
    return tuple(found)


def _warnings(
    tokenizers: dict[str, TrainedTokenizer],
    splits: tuple[SplitReport, ...],
    clean: CleanOptions | None,
    corpus: str,
) -> tuple[str, ...]:
    """Messages for things that went differently from what was asked, or look like a mistake."""
    found = [
        f"the training text is too small for --vocab-size {model.requested_vocab_size}: "
        f"{model.model.name} has {model.vocab_size:,} pieces instead"
        for model in dict.fromkeys(tokenizers.values())
        if model.fell_back
    ]
    for split in splits:
        if count := split.counts.one_sided:
            line = split.counts.first_one_sided
            first = "it is" if count == 1 else "the first is"
            found.append(
                f"dropped {count:,} {split.name} pair{'s' if count > 1 else ''} with text on one "
                f"side only ({first} line {line:,} of {corpus}): if a file has a stray or a "
                "missing line, the sides are out of step from there on; compare the files from "
                f"there, e.g. `sed -n '{line},{line + 2}p'` on each"
            )
        counts = split.counts
        limits = (
            ("too_long", "as too long", f"--max-len {clean.max_len}: words, a Chinese or "
             "Japanese character one"),
            ("ratio", "for their length ratio", f"--max-ratio {clean.max_ratio:g}"),
        ) if clean else ()  # fmt: skip
        for name, why, option in limits:
            dropped = getattr(counts, name)
            if counts.read and dropped >= FILTERED_SHARE_WARNING * counts.read:
                found.append(
                    f"dropped {dropped / counts.read:.0%} of the {split.name} pairs ({dropped:,} "
                    f"of {counts.read:,}) {why} ({option}): check that the files hold one "
                    f"sentence per line, or raise {option.split()[0]} (0: no limit)"
                )
    return tuple(found)
