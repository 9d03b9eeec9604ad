"""Validation during training: per-token loss on the dev split, and BLEU of greedy translations
of its first sentences (scored by `evaluate`, decoded by `decoding`)."""

from __future__ import annotations

import math
import time
from contextlib import AbstractContextManager
from dataclasses import dataclass

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

    @torch.inference_mode()
    def dev_loss(self, model: Seq2Seq) -> float | None:
        """Per-token NLL on the whole dev split."""
        if not self.data.has_split("dev"):
            return None
        model.eval()
        src, tgt = self.data.ids("dev", "src"), self.data.ids("dev", "tgt")
        batches = make_batches(
            src.lengths, tgt.lengths, self.config.batch_tokens, 0, 0, shuffle=False
        )
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
        src = self.data.ids("dev", "src")
        picked = spread_sample(len(src), self.config.valid_sentences)
        refs = [self.data.dev_references[i] for i in picked]
        sources = [src[i][: self.config.max_len] for i in picked]
        model.eval()
        with self.autocast:
            texts = best_texts(model, sources, self.device, self._tokenizer)
        return score(texts, [refs], ["bleu"], by_references=True)[0].score


def spread_sample(total: int, wanted: int) -> list[int]:
    """`wanted` line numbers spread evenly over `total` lines, first line included (all of
    them when `wanted` is 0 or not less): the whole dev set's range, even when its lines are
    in some order (a corpus sorted by length keeps that order in its held-out splits)."""
    if not wanted or wanted >= total:
        return list(range(total))
    return [i * total // wanted for i in range(wanted)]
