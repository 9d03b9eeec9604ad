"""Guided alignment's data: word links of the training pairs, and the same links over pieces.

The links come from a statistical teacher, eflomal (Östling & Tiedemann 2016), run in both
directions and symmetrised with grow-diag-final-and, over the units `nmt align` reads (words
from the "▁" marker, characters, or pieces), or from a Pharaoh file that any external aligner
wrote. The teacher's links are computed once and kept in the data directory
(`train.{unit}.align`), so a second training run or `--resume` reads them back.

The loss sees them over pieces (`PieceLinks`): every target piece of a target word spreads
weight 1 evenly over the source pieces of the source words linked to that word.
"""

from __future__ import annotations

import os
import re
import signal
import subprocess
import sys
import tempfile
from dataclasses import dataclass, replace
from pathlib import Path

import numpy as np

from nmt_cli.alignment import (
    LINK_PRIOR_SMOOTHING,
    UNITS,
    Link,
    LinkRates,
    format_pharaoh,
    parse_pharaoh,
    surface_names,
    symmetrize,
    units,
)
from nmt_cli.atomic import atomic_open
from nmt_cli.data.datadir import DataDir, alignments_name
from nmt_cli.data.tokenizer import Tokenizer
from nmt_cli.errors import ArtifactError, ConfigError, InputError, NmtError
from nmt_cli.lines import read_lines
from nmt_cli.progress import Event, OnEvent, count, ignore

TEACHER = "eflomal"
INSTALL = f"{sys.executable} -m pip install eflomal==2.0.0"
ALIGNING = f"aligning training pairs with {TEACHER}"
READING = "reading training pieces"
_WHITESPACE = re.compile(r"\s")  # what str.split, and so eflomal, splits at
_REPORT_EVERY = 10_000  # pairs between progress events while reading pieces


@dataclass(frozen=True)
class PieceLinks:
    """Guidance for each training pair, over pieces: target position t (0..len(tgt)-1, the
    pieces of the target sentence, EOS excluded), source position s (0..len(src)-1), weight w;
    for each guided t the weights sum to 1. Unaligned target words get no entries."""

    offsets: np.ndarray  # (N+1,) int64, pair i's entries are [offsets[i], offsets[i+1])
    tgt: np.ndarray  # int32
    src: np.ndarray  # int32
    weight: np.ndarray  # float32
    rates: LinkRates | None = None  # the word links' rates over the pairs, for `nmt align`

    def pair(self, i: int) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """(tgt, src, weight) of training pair `i`."""
        if not 0 <= i < len(self):
            raise IndexError(f"pair {i} out of range for {len(self)} pairs")
        span = slice(int(self.offsets[i]), int(self.offsets[i + 1]))
        return self.tgt[span], self.src[span], self.weight[span]

    def __len__(self) -> int:
        return len(self.offsets) - 1


def piece_links(
    word_links: set[Link], src_pieces: list[str], tgt_pieces: list[str], unit: str
) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Word links (source unit i, target unit j) of one pair as (tgt, src, weight) over pieces,
    sorted by target then source piece: every target piece of target unit j spreads weight 1
    evenly over all source pieces of the source units linked to j (a piece that is part of
    several units, as with `unit="char"`, over those of all its units)."""
    _, src_members = units(src_pieces, unit)  # (S_units, S_pieces)
    _, tgt_members = units(tgt_pieces, unit)  # (T_units, T_pieces)
    return _spread(word_links, src_members, tgt_members)


def _spread(
    word_links: set[Link], src_members: np.ndarray, tgt_members: np.ndarray
) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    linked = np.zeros((tgt_members.shape[0], src_members.shape[0]))  # (T_units, S_units)
    for i, j in word_links:
        if not (0 <= i < linked.shape[1] and 0 <= j < linked.shape[0]):
            raise ValueError(f"link {i}-{j} outside {linked.shape[1]}x{linked.shape[0]} units")
        linked[j, i] = 1.0
    covered = tgt_members.T @ linked @ src_members > 0  # (T_pieces, S_pieces)
    tgt, src = np.nonzero(covered)
    weight = 1.0 / covered.sum(axis=1)[tgt]
    return tgt.astype(np.int32), src.astype(np.int32), weight.astype(np.float32)


def teacher_links(
    src_units: list[list[str]],
    tgt_units: list[list[str]],
    n_samplers: int = 3,
    rel_iterations: float = 1.0,
) -> list[set[Link]]:
    """eflomal's links (source unit i, target unit j) of every pair, both directions
    symmetrised with grow-diag-final-and. eflomal lowercases the units itself; its defaults
    (`n_samplers`, `rel_iterations`) are kept unless given. ConfigError when not installed."""
    try:
        import eflomal
    except ImportError:
        raise ConfigError(
            f"guided alignment needs word links of the training pairs, and their teacher, "
            f"{TEACHER}, is not installed: `{INSTALL}` installs it, or give links from any "
            "external aligner with --alignments FILE"
        ) from None
    if len(src_units) != len(tgt_units):
        raise ValueError(f"{len(src_units)} source but {len(tgt_units)} target sentences")
    aligner = eflomal.Aligner(n_samplers=n_samplers, rel_iterations=rel_iterations)
    with tempfile.TemporaryDirectory(prefix="nmt-teacher-") as tmp:
        forward, reverse = os.path.join(tmp, "forward"), os.path.join(tmp, "reverse")
        try:
            aligner.align(
                [_line(words) for words in src_units],
                [_line(words) for words in tgt_units],
                links_filename_fwd=forward,
                links_filename_rev=reverse,
            )
            forward_links = [parse_pharaoh(line) for line in read_lines(Path(forward))]
            reverse_links = [parse_pharaoh(line) for line in read_lines(Path(reverse))]
        except subprocess.CalledProcessError as exc:  # eflomal runs its sampler as a program
            if exc.returncode in (-signal.SIGINT, -signal.SIGTERM):  # Ctrl-C reached it too
                raise KeyboardInterrupt from None
            raise NmtError(f"the teacher {TEACHER} failed (exit {exc.returncode})") from None
        except (OSError, RuntimeError, ValueError, NmtError) as exc:
            raise NmtError(f"the teacher {TEACHER} failed: {exc}") from None
    if not len(forward_links) == len(reverse_links) == len(src_units):
        raise NmtError(
            f"the teacher {TEACHER} returned {len(forward_links)} and {len(reverse_links)} "
            f"lines of links for {len(src_units)} sentence pairs"
        )
    return [
        symmetrize(f, r, "grow-diag-final-and", len(s), len(t))
        for f, r, s, t in zip(forward_links, reverse_links, src_units, tgt_units, strict=True)
    ]


def _line(words: list[str]) -> str:
    """One sentence for eflomal, which splits at whitespace: one token per unit, always."""
    if "" in words or _WHITESPACE.search("".join(words)):
        return " ".join("\u2581".join(word.split()) or "\u2581" for word in words)
    return " ".join(words)


# --- the training pairs -----------------------------------------------------------------------


@dataclass(frozen=True)
class TrainingPair:
    """One training pair as the teacher and the piece mapping see it."""

    src_pieces: list[str]
    tgt_pieces: list[str]
    src_units: list[str]
    tgt_units: list[str]


def training_guides(
    data: DataDir,
    unit: str = "word",
    alignments: Path | None = None,
    on_event: OnEvent = ignore,
    fallback_dir: Path | None = None,
    with_rates: bool = True,
) -> PieceLinks:
    """The guidance of `data`'s training pairs, over pieces.

    Word links come from `alignments` when given (a Pharaoh file from any aligner, one line per
    training pair in order, indexing the pair's units as `nmt align --unit UNIT` reads them:
    for words, the whitespace words of DATA/train.src and train.tgt); else from
    DATA/train.{unit}.align; else the teacher computes them and they are stored there, or, when
    DATA is not writable, in `fallback_dir` (e.g. the model directory; looked up there too),
    or kept in memory with a warning event when no fallback is given. `with_rates` also counts
    the links' rates over the pairs (`PieceLinks.rates`, for `nmt align --link-prior`).
    """
    if unit not in UNITS:
        raise ConfigError(f"unknown alignment unit {unit!r}; choose one of: {', '.join(UNITS)}")
    pairs = training_pairs(data, unit, on_event)
    if unit == "word" and _mostly_unsegmented(pairs):
        on_event(Event("warning", {"message": (
            "most training pairs hold Chinese or Japanese written without spaces: word units "
            "make a clause one word, and its links say little; train with --align-unit char "
            "(nmt align, translate --align and serve use the units the model was trained with)"
        )}))  # fmt: skip
    if alignments is not None:
        links = read_word_links(Path(alignments), pairs, data, stored=False)
    else:
        links = _stored_or_taught(data, unit, pairs, on_event, fallback_dir)
    pieces = _to_pieces(links, pairs, unit)
    return replace(pieces, rates=link_rates(links, pairs)) if with_rates else pieces


def _mostly_unsegmented(pairs: list[TrainingPair], sample: int = 1000) -> bool:
    """Whether either side of the first `sample` pairs is mostly written without spaces."""
    from nmt_cli.scripts import mostly_unsegmented

    return mostly_unsegmented(
        " ".join(pair.src_units) for pair in pairs[:sample]
    ) or mostly_unsegmented(" ".join(pair.tgt_units) for pair in pairs[:sample])


def link_rates(links: list[set[Link]], pairs: list[TrainingPair]) -> LinkRates:
    """How often two units were linked when they met in a training pair: the lexical prior
    that `nmt align --link-prior` mixes into the attention."""
    rates = LinkRates(LINK_PRIOR_SMOOTHING)
    for pair_links, pair in zip(links, pairs, strict=True):
        rates.add(pair.src_units, pair.tgt_units, pair_links)
    return LinkRates.from_counts(rates.counts(), LINK_PRIOR_SMOOTHING)  # the sentences let go


def _stored_or_taught(
    data: DataDir,
    unit: str,
    pairs: list[TrainingPair],
    on_event: OnEvent,
    fallback_dir: Path | None,
) -> list[set[Link]]:
    name = alignments_name(unit)
    places = [data.path] + ([Path(fallback_dir)] if fallback_dir is not None else [])
    for place in places:
        if (place / name).is_file():
            return read_word_links(place / name, pairs, data, stored=True)
    on_event(count(ALIGNING, 0, len(pairs)))
    links = teacher_links([p.src_units for p in pairs], [p.tgt_units for p in pairs])
    on_event(count(ALIGNING, len(pairs), len(pairs)))
    writable = [place for place in places if _writable(place)]
    if writable:
        write_word_links(writable[0] / name, links)
    else:
        on_event(
            Event(
                "warning",
                {
                    "message": f"{data.path} is not writable: the {TEACHER} links of the "
                    "training pairs are kept in memory only and will be computed again next "
                    "time; make it writable to keep them"
                },
            )
        )
    return links


def _writable(directory: Path) -> bool:
    return os.access(directory, os.W_OK)


def training_pairs(
    data: DataDir, unit: str = "word", on_event: OnEvent = ignore
) -> list[TrainingPair]:
    """Every training pair's pieces (from its token ids) and units. Word units are named by
    the whitespace words of the cleaned text when there are as many (SentencePiece splits no
    word and joins none, so there always are), so that the teacher sees a rare word itself,
    not the "<unk>" piece that stands for a character of it."""
    src_ids, tgt_ids = data.ids("train", "src"), data.ids("train", "tgt")
    src_vocab = _pieces_of(Tokenizer(data.src_spm))
    tgt_vocab = src_vocab if data.joint else _pieces_of(Tokenizer(data.tgt_spm))
    texts = zip(
        range(len(src_ids)),
        read_lines(data.text("train", "src")),
        read_lines(data.text("train", "tgt")),
        strict=True,
    )
    pairs = []
    try:
        for k, src_text, tgt_text in texts:
            if k % _REPORT_EVERY == 0:
                on_event(count(READING, k, len(src_ids)))
            src_pieces = src_vocab[src_ids[k]].tolist()
            tgt_pieces = tgt_vocab[tgt_ids[k]].tolist()
            src_units = surface_names(units(src_pieces, unit)[0], src_text, unit)
            tgt_units = surface_names(units(tgt_pieces, unit)[0], tgt_text, unit)
            pairs.append(TrainingPair(src_pieces, tgt_pieces, src_units, tgt_units))
    except (ValueError, IndexError):  # zip's strict check, or fewer target than source ids
        raise ArtifactError(
            f"{data.path}: the training text and token ids differ in length; re-create it "
            "with `nmt prepare`"
        ) from None
    on_event(count(READING, len(src_ids), len(src_ids)))
    return pairs


def _pieces_of(tokenizer: Tokenizer) -> np.ndarray:
    """Every piece string of the vocabulary, indexable by an array of ids."""
    return np.array([tokenizer.id_to_piece(i) for i in range(tokenizer.vocab_size)], dtype=object)


def _to_pieces(links: list[set[Link]], pairs: list[TrainingPair], unit: str) -> PieceLinks:
    per_pair = [
        piece_links(a, p.src_pieces, p.tgt_pieces, unit) for a, p in zip(links, pairs, strict=True)
    ]
    sizes = np.fromiter((len(t) for t, _, _ in per_pair), dtype=np.int64, count=len(per_pair))
    offsets = np.concatenate([np.zeros(1, np.int64), np.cumsum(sizes)])

    def joined(k: int, dtype: type) -> np.ndarray:
        parts = [entries[k] for entries in per_pair]
        return np.concatenate(parts).astype(dtype) if parts else np.zeros(0, dtype)

    return PieceLinks(offsets, joined(0, np.int32), joined(1, np.int32), joined(2, np.float32))


# --- the file of word links -------------------------------------------------------------------


def write_word_links(path: Path, links: list[set[Link]]) -> None:
    """Store links as Pharaoh lines, atomically: a crash leaves the old file or none."""
    with atomic_open(path, "w", encoding="utf-8") as handle:
        handle.writelines(format_pharaoh(a) + "\n" for a in links)


def read_word_links(
    path: Path, pairs: list[TrainingPair], data: DataDir, stored: bool
) -> list[set[Link]]:
    """The links of a Pharaoh file, checked against the training pairs: one line each, in
    order, every index inside its pair's units; one-line InputError naming file and line."""
    fix = (
        "delete it and it is computed again"
        if stored
        else f"align {data.text('train', 'src')} with {data.text('train', 'tgt')}, one line "
        "per pair, source word i - target word j, 0-based"
    )
    lines = list(read_lines(path))
    if len(lines) != len(pairs):
        raise InputError(
            f"{path} has {len(lines):,} line{'s' * (len(lines) != 1)} but {data.path} has {len(pairs):,} training pairs: "
            f"the alignments file must have one line per pair of its training split, in its "
            f"order; {fix}"
        )
    numbered = enumerate(zip(lines, pairs, strict=True), start=1)
    return [_checked_line(path, number, line, pair, fix) for number, (line, pair) in numbered]


def _checked_line(path: Path, number: int, line: str, pair: TrainingPair, fix: str) -> set[Link]:
    try:
        links = parse_pharaoh(line)
    except InputError as exc:
        raise InputError(f"{path} line {number}: {exc}") from None
    n_src, n_tgt = len(pair.src_units), len(pair.tgt_units)
    for i, j in sorted(links):
        if i >= n_src or j >= n_tgt:
            side, index, size = ("source", i, n_src) if i >= n_src else ("target", j, n_tgt)
            raise InputError(
                f"{path} line {number}: link {i}-{j} names {side} word {index}, but that pair "
                f"has {size} {side} words, numbered from 0; {fix}"
            )
    return links
