"""`nmt prepare` as a library call: corpus files in, a complete data directory out.

Steps: read and clean the training pairs → take dev/test from their own files (only
normalised: they are references) or hold them out of the cleaned training pairs (seeded) →
write the text splits → train SentencePiece on the training split only → encode every
split → write prepare.json last. Everything happens in a staged directory that appears
only when complete, so an error or Ctrl-C leaves nothing behind.

Held-out dev/test pairs are drawn after cleaning and de-duplication, so no training pair
repeats in them and they are as clean as the training data.
"""

from __future__ import annotations

import json
import math
import os
import time
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass, field
from pathlib import Path

from nmt_cli.atomic import staged_directory, write_text
from nmt_cli.data.clean import CleanCounts, CleanOptions, clean_pairs, normalize_pairs
from nmt_cli.data.corpus import ParallelSource, check_readable, read_pairs
from nmt_cli.data.datadir import (
    MANIFEST,
    SIDES,
    SPLITS,
    build_manifest,
    spm_prefix_name,
    text_name,
)
from nmt_cli.data.ids import read_token_ids, write_token_ids
from nmt_cli.data.tokenizer import (
    Tokenizer,
    TrainedTokenizer,
    auto_character_coverage,
    check_training_options,
    train_tokenizer,
)
from nmt_cli.errors import ConfigError, InputError

# step name, work done, total work (None when unknown); called often, must be cheap.
ProgressCallback = Callable[[str, int, "int | None"], None]
Pairs = list[tuple[str, str]]
_ENCODE_CHUNK = 20_000
_READ_TICK = 10_000


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
        return {
            **self.clean.__dict__,
            "dev_size": self.dev_size,
            "test_size": self.test_size,
            "seed": self.seed,
            "vocab_size": self.vocab_size,
            "model_type": self.model_type,
            "joint": self.joint,
            "character_coverage": self.character_coverage,
        }


@dataclass(frozen=True)
class SplitReport:
    """One split as written: where it came from, what cleaning did, how many pieces it has."""

    name: str
    origin: str  # "corpus" (cleaned), "given" (only normalised) or "held out" (from train)
    counts: CleanCounts
    pairs: int
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


@dataclass(frozen=True)
class _Split:
    """One split in memory, before it is written."""

    name: str
    origin: str
    pairs: Pairs
    counts: CleanCounts

    def side(self, side: str) -> list[str]:
        """The sentences of one side, in order."""
        index = SIDES.index(side)
        return [pair[index] for pair in self.pairs]


def prepare(options: PrepareOptions, progress: ProgressCallback | None = None) -> PrepareReport:
    """Build the data directory described by `options` and report what was done."""
    started = time.perf_counter()
    progress = progress or _no_progress
    options.check()
    for source in (options.train, options.dev, options.test):
        for path in source.files if source else ():
            check_readable(path)
    with staged_directory(options.output, force=options.force) as stage:
        splits = _read_splits(options, progress)
        for split in splits:
            for side in SIDES:
                _write_lines(stage / text_name(split.name, side), split.side(side))
        tokenizers = _train_tokenizers(options, splits[0], stage, progress)
        reports = tuple(_encode_split(stage, split, tokenizers, progress) for split in splits)
        report = PrepareReport(
            output=options.output,
            splits=reports,
            tokenizers=tokenizers,
            joint=options.joint,
            warnings=_warnings(tokenizers),
            seconds=time.perf_counter() - started,
        )
        write_text(stage / MANIFEST, json.dumps(build_manifest(options, report), indent=2) + "\n")
        _apply_umask(stage)
    return report


def _no_progress(step: str, done: int, total: int | None) -> None:
    """The default progress callback: nobody is watching."""


# Reading and splitting ------------------------------------------------------------------------


def _counted(pairs: Iterable[tuple[str, str]], step: str, progress: ProgressCallback) -> Iterator:
    """Pass pairs through, reporting every few thousand so a progress bar can move."""
    n = 0
    for n, pair in enumerate(pairs, start=1):
        if n % _READ_TICK == 0:
            progress(step, n, None)
        yield pair
    progress(step, n, n)


def _read_splits(options: PrepareOptions, progress: ProgressCallback) -> list[_Split]:
    """The cleaned train split and the dev/test splits, given or held out, in split order."""
    step = f"reading {options.train.describe()}"
    train = clean_pairs(_counted(read_pairs(options.train), step, progress), options.clean)
    if not train.pairs:
        raise InputError(_nothing_left(options.train, train.counts))
    splits = _hold_out(_Split("train", "corpus", train.pairs, train.counts), options)
    for name, source in (("dev", options.dev), ("test", options.test)):
        if source is not None:
            splits.append(_read_given(name, source, progress))
    return sorted(splits, key=lambda split: SPLITS.index(split.name))


def _read_given(name: str, source: ParallelSource, progress: ProgressCallback) -> _Split:
    """A given dev/test split: normalised only, never filtered (it is a reference)."""
    given = normalize_pairs(_counted(read_pairs(source), f"reading {source.describe()}", progress))
    if not given.pairs:
        raise InputError(f"{source.describe()} holds no sentences: give non-empty {name} files")
    return _Split(name, "given", given.pairs, given.counts)


def _hold_out(train: _Split, options: PrepareOptions) -> list[_Split]:
    """Split a seeded random sample of the cleaned training pairs off as dev and test."""
    wanted = options.dev_size + options.test_size
    if not wanted:
        return [train]
    if wanted >= len(train.pairs):
        raise ConfigError(
            f"--dev-size {options.dev_size} + --test-size {options.test_size} would leave no "
            f"training pairs: only {len(train.pairs):,} remain after cleaning; lower them"
        )
    import numpy as np

    order = np.random.default_rng(options.seed).permutation(len(train.pairs)).tolist()
    chosen = set(order[:wanted])
    rest = [pair for i, pair in enumerate(train.pairs) if i not in chosen]
    splits = [_Split("train", "corpus", rest, train.counts)]
    for name, ids in (
        ("dev", order[: options.dev_size]),
        ("test", order[options.dev_size : wanted]),
    ):
        if ids:
            # Corpus order, so a held-out file reads like the corpus it came from.
            pairs = [train.pairs[i] for i in sorted(ids)]
            splits.append(
                _Split(name, "held out", pairs, CleanCounts(read=len(pairs), kept=len(pairs)))
            )
    return splits


def _nothing_left(source: ParallelSource, counts: CleanCounts) -> str:
    """The one-line message for a training corpus that cleaning emptied."""
    if counts.read == 0:
        return f"{source.describe()} holds no sentences: give a non-empty corpus"
    return (
        f"no training pairs left after cleaning {source.describe()}: {counts.read:,} read, "
        f"{counts.empty:,} with an empty side, {counts.too_long:,} too long, "
        f"{counts.ratio:,} over the length ratio: check the files or relax --max-len/--max-ratio"
    )


# Writing --------------------------------------------------------------------------------------


def _write_lines(path: Path, lines: list[str]) -> None:
    """Write one sentence per line (cleaned text holds no line breaks)."""
    write_text(path, "".join(line + "\n" for line in lines))


def _train_tokenizers(
    options: PrepareOptions, train: _Split, stage: Path, progress: ProgressCallback
) -> dict[str, TrainedTokenizer]:
    """Train the joint model on both training sides, or one model per side; map side → model."""
    groups = [(None, SIDES)] if options.joint else [(side, (side,)) for side in SIDES]
    trained: dict[str, TrainedTokenizer] = {}
    for prefix_side, sides in groups:
        step = f"training SentencePiece ({'+'.join(sides)})"
        progress(step, 0, None)
        texts = [train.side(side) for side in sides]
        coverage = options.character_coverage
        if coverage is None:
            coverage = auto_character_coverage(*texts)
        model = train_tokenizer(
            [sentence for side_texts in texts for sentence in side_texts],
            stage / spm_prefix_name(prefix_side),
            options.vocab_size,
            options.model_type,
            coverage,
            options.seed,
        )
        progress(step, 1, 1)
        trained.update(dict.fromkeys(sides, model))
    return trained


def _encode_split(
    stage: Path, split: _Split, tokenizers: dict[str, TrainedTokenizer], progress: ProgressCallback
) -> SplitReport:
    """Encode both sides of a split into token ids and report its sizes."""
    pieces = []
    for side in SIDES:
        model = tokenizers[side]
        prefix = stage / text_name(split.name, side)
        sentences = _encoded(Tokenizer(model.model), split.side(side), prefix.name, progress)
        write_token_ids(prefix, sentences, model.vocab_size)
        pieces.append(int(read_token_ids(prefix).ids.size))
    return SplitReport(split.name, split.origin, split.counts, len(split.pairs), *pieces)


def _encoded(
    tokenizer: Tokenizer, texts: list[str], name: str, progress: ProgressCallback
) -> Iterator[list[int]]:
    """Encode in chunks with SentencePiece's threads, so memory holds one chunk of lists."""
    for start in range(0, len(texts), _ENCODE_CHUNK):
        yield from tokenizer.encode_batch(texts[start : start + _ENCODE_CHUNK])
        progress(f"encoding {name}", min(start + _ENCODE_CHUNK, len(texts)), len(texts))


def _warnings(tokenizers: dict[str, TrainedTokenizer]) -> tuple[str, ...]:
    """Messages for things that went differently from what was asked."""
    return tuple(
        f"the training text is too small for --vocab-size {model.requested_vocab_size}: "
        f"{model.model.name} has {model.vocab_size:,} pieces instead"
        for model in dict.fromkeys(tokenizers.values())
        if model.fell_back
    )


def _apply_umask(directory: Path) -> None:
    """Give the directory the user's usual permissions (temporary files start private)."""
    mask = os.umask(0)
    os.umask(mask)
    directory.chmod(0o777 & ~mask)
    for file in directory.iterdir():
        file.chmod(0o666 & ~mask)
