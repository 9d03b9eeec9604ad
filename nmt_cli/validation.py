"""Validation during training: per-token loss on the dev split, and BLEU of greedy translations
of its first sentences (scored by `evaluate`, decoded by `decoding`)."""

from __future__ import annotations

import math
import time
from contextlib import AbstractContextManager
from dataclasses import dataclass

import numpy as np
import torch

from nmt_cli.batching import iterate_batches, make_batches
from nmt_cli.config import TrainConfig
from nmt_cli.data.datadir import DataDir
from nmt_cli.loss import batch_loss
from nmt_cli.model.seq2seq import Seq2Seq


@dataclass(frozen=True)
class DevScores:
    """One validation: dev loss and BLEU (None without a dev split), and how long it took."""

    loss: float | None
    bleu: float | None
    seconds: float

    def score(self, step: int) -> float:
        """What early stopping maximises: BLEU, else the negated loss, else the step."""
        if self.bleu is not None:
            return self.bleu
        return -self.loss if self.loss is not None else float(step)

    def scored_by(self) -> str:
        """What `score` returns: "bleu", "loss" (negated) or "step" (no dev split)."""
        return "bleu" if self.bleu is not None else "loss" if self.loss is not None else "step"

    def fields(self) -> dict:
        """The rounded figures of a `valid` progress event."""
        loss = self.loss
        return {
            "dev_loss": None if loss is None else round(loss, 4),
            "dev_ppl": None if loss is None else round(math.exp(min(loss, 50)), 2),
            "dev_bleu": None if self.bleu is None else round(self.bleu, 2),
        }


class Validator:
    """Scores a model on a data directory's dev split; the target tokenizer is loaded once."""

    def __init__(self, data: DataDir, config: TrainConfig, device: torch.device, autocast):
        self.data = data
        self.config = config
        self.device = device
        self.autocast: AbstractContextManager = autocast
        self._tokenizer = None

    def __call__(self, model: Seq2Seq) -> DevScores:
        started = time.monotonic()
        loss, bleu = self.dev_loss(model), self.dev_bleu(model)
        return DevScores(loss, bleu, round(time.monotonic() - started, 1))

    def long_dev_pairs(self) -> int:
        """Dev pairs longer than max_len pieces on a side: left out of the dev loss."""
        if not self.data.has_split("dev"):
            return 0
        return len(self.data.ids("dev", "src")) - len(self._loss_rows())

    def _loss_rows(self) -> np.ndarray:
        """The dev pairs of the dev loss: those training would take (at most max_len pieces a
        side). A longer one (a paragraph never split into sentences) costs memory as the
        square of its length in the attention: one of a million pieces asked for 4 TB."""
        src, tgt = self.data.ids("dev", "src"), self.data.ids("dev", "tgt")
        longest = self.config.max_len
        return np.flatnonzero((src.lengths <= longest) & (tgt.lengths <= longest))

    @torch.inference_mode()
    def dev_loss(self, model: Seq2Seq) -> float | None:
        """Per-token NLL on the dev split's pairs of at most max_len pieces a side (None if
        there are none)."""
        if not self.data.has_split("dev"):
            return None
        rows = self._loss_rows()
        if not len(rows):
            return None
        model.eval()
        src, tgt = self.data.ids("dev", "src"), self.data.ids("dev", "tgt")
        batches = make_batches(
            src.lengths[rows], tgt.lengths[rows], self.config.batch_tokens, 0, 0, shuffle=False
        )
        batches = [rows[batch] for batch in batches]
        total, tokens = 0.0, 0
        for _, batch in iterate_batches(src, tgt, batches):
            batch = batch.to(self.device)
            with self.autocast:
                _, nll = batch_loss(model, batch, 0.0)
            total += nll.item()
            tokens += batch.n_tokens
        return total / max(1, tokens)

    def dev_bleu(self, model: Seq2Seq) -> float | None:
        """BLEU of greedy translations of `valid_sentences` dev sentences (`spread_sample`)."""
        if not self.data.has_split("dev"):
            return None
        from nmt_cli.data.tokenizer import Tokenizer
        from nmt_cli.decoding import best_texts
        from nmt_cli.evaluate import score

        if self._tokenizer is None:
            self._tokenizer = Tokenizer(self.data.tgt_spm)
        sources, refs = dev_sample(self.data, self.config.valid_sentences, self.config.max_len)
        model.eval()
        with self.autocast:
            texts = best_texts(model, sources, self.device, self._tokenizer)
        return score(texts, refs, ["bleu"], by_references=True)[0].score


def dev_sample(data: DataDir, wanted: int, max_len: int) -> tuple[list, list[list[str]]]:
    """The source ids (cut to `max_len`) of `wanted` dev sentences (`spread_sample`) and their
    references, as one reference stream for `evaluate.score`."""
    src = data.ids("dev", "src")
    picked = spread_sample(len(src), wanted)
    return [src[i][:max_len] for i in picked], [[data.dev_references[i] for i in picked]]


def spread_sample(total: int, wanted: int) -> list[int]:
    """`wanted` line numbers spread evenly over `total` lines, first line included (all of
    them when `wanted` is 0 or not less): the whole dev set's range, even when its lines are
    in some order (a corpus sorted by length keeps that order in its held-out splits)."""
    if not wanted or wanted >= total:
        return list(range(total))
    return [i * total // wanted for i in range(wanted)]


SHORTLIST_BEAM = 5  # the check searches as `nmt translate` does by default
# BLEU the shortlist may cost on the dev split and still be the default: none. With a
# tolerance of 0.1, a Multi30k model of the default configuration passed on dev and lost more
# than 0.1 on test: differences that small are within the noise of 1,000 dev sentences.
SHORTLIST_TOLERANCE = 0.0
SHORTLIST_MOST_KEPT = 0.1  # the largest share of the target vocabulary it may keep, on average
SHORTLIST_SENTENCES = 1000  # dev sentences translated (spread over the split), at most


@dataclass(frozen=True)
class ShortlistCheck:
    """Dev BLEU of beam search with and without the lexical shortlist, for one model.

    The shortlist becomes `nmt translate`'s default only where it costs no dev BLEU (see
    `SHORTLIST_TOLERANCE`) and keeps on average at most `SHORTLIST_MOST_KEPT` of the
    target vocabulary per sentence: a shortlist that keeps more saves too little of the output
    layer to pay (the demo's 800-piece model keeps over a quarter of its pieces and searches
    hardly faster with them), while one of an 8,000-piece Multi30k model keeps a few percent.
    The whole dev split (up to `SHORTLIST_SENTENCES`) is translated, not validation's sample:
    BLEU differences this small need every sentence there is; where the shortlist keeps too
    much, nothing is translated (the verdict is known: no)."""

    bleu: float | None  # with the shortlist (None: not translated, as it keeps too much)
    without: float | None  # over the whole vocabulary
    kept: float  # mean share of the target vocabulary in one sentence's shortlist
    sentences: int

    @property
    def default(self) -> bool:
        if self.kept > SHORTLIST_MOST_KEPT or self.bleu is None or self.without is None:
            return False
        bleu, without = round(self.bleu, 4), round(self.without, 4)  # as recorded and shown
        return bleu >= without - SHORTLIST_TOLERANCE

    def record(self) -> dict:
        return {
            # (4 places: the verdict may turn on less than 0.01; None: not translated)
            "dev_bleu": None if self.bleu is None else round(self.bleu, 4),
            "dev_bleu_without": None if self.without is None else round(self.without, 4),
            "kept": round(self.kept, 4),
            "sentences": self.sentences,
            "beam": SHORTLIST_BEAM,
            "tolerance": SHORTLIST_TOLERANCE,
            "most_kept": SHORTLIST_MOST_KEPT,
            "default": self.default,
        }


def check_shortlist(
    model: Seq2Seq, data: DataDir, config: TrainConfig, device: torch.device, shortlist
) -> ShortlistCheck | None:
    """Beam-5 BLEU of the dev split (`SHORTLIST_SENTENCES` spread over it at most), translated
    with and without `shortlist` (None without a dev split)."""
    if not data.has_split("dev"):
        return None
    from nmt_cli.data.tokenizer import Tokenizer
    from nmt_cli.decoding import SearchOptions, decode_ids
    from nmt_cli.evaluate import score
    from nmt_cli.model.seq2seq import OutputLayer

    tokenizer = Tokenizer(data.tgt_spm)
    sources, refs = dev_sample(data, SHORTLIST_SENTENCES, config.max_len)
    vocab = model.config.tgt_vocab_size
    kept = sum(len(shortlist.ids_for([ids])) for ids in sources) / max(1, len(sources)) / vocab
    if kept > SHORTLIST_MOST_KEPT:  # too much to pay, whatever the BLEU: nothing to translate
        return ShortlistCheck(None, None, kept, len(sources))
    options = SearchOptions(beam_size=SHORTLIST_BEAM)
    output = OutputLayer.of(model.generator)
    bleu = []
    for used in (shortlist, None):
        hyps = decode_ids(model, sources, device, options, used, False, output)
        texts = [tokenizer.decode(nbest[0].tokens) for nbest in hyps]
        bleu.append(score(texts, refs, ["bleu"], by_references=True)[0].score)
    return ShortlistCheck(bleu[0], bleu[1], kept, len(sources))
