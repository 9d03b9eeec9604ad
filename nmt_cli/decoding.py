"""Decoding token ids: batches longest first, greedy or beam search, results in input order.

The one way a model turns source ids into hypotheses and text, used by the translator and by
validation during training alike.
"""

from __future__ import annotations

import math
import re
from collections.abc import Sequence
from dataclasses import dataclass, replace

import numpy as np
import torch

from nmt_cli.batching import collate
from nmt_cli.errors import ConfigError
from nmt_cli.model.seq2seq import OutputLayer, Seq2Seq
from nmt_cli.search import (
    BeamSearch,
    Hypothesis,
    beam_search,
    check_beam_options,
    greedy_search,
    mean_join,
    mean_step,
)
from nmt_cli.shortlist import Shortlist
from nmt_cli.specials import BOS_ID, EOS_ID

_SPACES = re.compile(" {2,}")
# Beam search settles a sentence once no live hypothesis could enter its n-best by ending within
# this many tokens after the next (unless --exact-stop). Measured at beam 5 on Multi30k de-en
# val (1,014 sentences, --max-len 100) with the three models of one `make bench` run, and on the
# demo's en-zh dev and test sets: 4 gave the exact search's translations for every sentence, at
# 1.5-2x its speed on Multi30k. 3 was as fast, but changed one demo test sentence (it dropped a
# clause the exact search kept) and one of 1,014 for a model of another run; 2 changed 2 of
# 1,014. The --exact-stop help and README.md name this number.
LOOKAHEAD = 4
SHORTLIST_COLUMN_BUCKET = 256  # a bfloat16 model's shortlist width is a multiple of this


@dataclass
class SearchOptions:
    """How to search: beam size, n-best, length normalisation, output length limit."""

    beam_size: int = 5  # 1 = greedy search
    nbest: int = 1  # hypotheses returned per sentence (≤ beam size)
    alpha: float = 1.0  # GNMT length penalty exponent ((5+len)/6)^alpha
    max_len_ratio: float = 2.0  # at most ratio × source pieces + max_len_extra target pieces
    max_len_extra: int = 10
    max_len: int = 0  # > 0: at most this many target pieces for every sentence (not the ratio)
    batch_size: int = 64  # sentences per batch
    early_stop: bool = False  # beam: stop a sentence once a step's best extension ends it
    exact_stop: bool = False  # beam: keep a sentence until no hypothesis of any length can win

    @property
    def lookahead(self) -> int | None:
        """The beam's stopping bound (see `nmt_cli.search`): None for the exact one, which
        --early-stop keeps beside its own rule (the peers' rule, no other bound)."""
        return None if self.exact_stop or self.early_stop else LOOKAHEAD

    def check(self) -> SearchOptions:
        check_beam_options(self.beam_size, self.nbest)
        if self.exact_stop and self.early_stop:
            raise ConfigError(
                "--exact-stop and --early-stop are two rules for when a sentence is done: "
                "give one of them"
            )
        if self.beam_size == 1 and (self.early_stop or self.exact_stop):
            flag = "--early-stop" if self.early_stop else "--exact-stop"
            raise ConfigError(
                f"{flag} is a rule of beam search; --beam 1 is greedy, which ends each sentence "
                f"at its first EOS: drop {flag}, or give --beam 2 or more"
            )
        if self.batch_size < 1:
            raise ConfigError(f"--batch-size must be ≥ 1, got {self.batch_size}")
        if self.max_len < 0:
            raise ConfigError(
                f"--max-len must be ≥ 0 (0: the --max-len-ratio rule), got {self.max_len}"
            )
        # NaN passes no comparison: a NaN penalty would keep beam search from ever ending.
        if not (0 < self.max_len_ratio < math.inf) or self.max_len_extra < 0:
            raise ConfigError(
                f"--max-len-ratio must be a finite number > 0, got {self.max_len_ratio}"
            )
        if not 0 <= self.alpha < math.inf:
            raise ConfigError(f"--length-penalty must be a finite number ≥ 0, got {self.alpha}")
        return self


@torch.inference_mode()
def decode_ids(
    model: Seq2Seq,
    sources: Sequence[np.ndarray],
    device: torch.device,
    options: SearchOptions | None = None,
    shortlist: Shortlist | None = None,
    with_attention: bool = True,
    output: OutputLayer | None = None,
    partners: Sequence[tuple[Seq2Seq, Sequence[np.ndarray]]] = (),
) -> list[list[Hypothesis]]:
    """n-best lists for source id sequences, batched longest first, returned in input order;
    with a `shortlist`, each sentence is scored over its own lexical shortlist only (through
    `output`, the model's output layer unpacked once); without `with_attention`, hypotheses
    carry no attention (less work per step). `partners` make an ensemble: more models (same
    target vocabulary) with the same sentences in their own source ids, searched over the mean
    of all models' log-probs; lengths, limits and attention are those of `model`."""
    options = options or SearchOptions(beam_size=1)
    model.eval()
    order = sorted(range(len(sources)), key=lambda i: -len(sources[i]))
    results: list[list[Hypothesis]] = [[] for _ in sources]
    for start in range(0, len(order), options.batch_size):
        rows = order[start : start + options.batch_size]
        batch = [sources[i] for i in rows]
        others = [(other, [own[i] for i in rows]) for other, own in partners]
        nbests = _search_batch(
            model, batch, device, options, shortlist, with_attention, output, others
        )
        for row, nbest in zip(rows, nbests, strict=True):
            results[row] = nbest
    return results


def best_texts(model: Seq2Seq, sources: Sequence[np.ndarray], device, tokenizer) -> list[str]:
    """Greedy translations of source id sequences as detokenised text (validation's BLEU)."""
    options = SearchOptions(beam_size=1, batch_size=128)
    hyps = decode_ids(model, sources, device, options, with_attention=False)
    return [tokenizer.decode(nbest[0].tokens) for nbest in hyps]


def pieces_text(pieces: list[str]) -> str:
    """The text of target pieces: SentencePiece's word marker ▁ becomes a space; the double
    space of a lone ▁ piece before a word becomes one."""
    return _SPACES.sub(" ", "".join(pieces).replace("▁", " ")).strip()


def _search_batch(
    model: Seq2Seq,
    sources: Sequence[np.ndarray],
    device: torch.device,
    options: SearchOptions,
    shortlist: Shortlist | None,
    with_attention: bool,
    output: OutputLayer | None,
    partners: Sequence[tuple[Seq2Seq, Sequence[np.ndarray]]],
) -> list[list[Hypothesis]]:
    models = [model, *(other for other, _ in partners)]
    state, max_lengths = _encoded(models, [sources, *(own for _, own in partners)], device, options)
    step, reorder, bos, eos, ids = model.step_log_probs, model.reorder, BOS_ID, EOS_ID, None
    if partners:  # an ensemble: the state holds each model's own
        assert shortlist is None, "an ensemble has no shortlist"
        step, reorder = mean_step([m.step_log_probs for m in models], [m.reorder for m in models])
    if shortlist is not None:  # the search runs over columns of `ids`
        # a bfloat16 model pads the batch's columns too, to few shapes (see `padded_rows`)
        columns = SHORTLIST_COLUMN_BUCKET if model.decoder.row_bucket else 0
        ids, allowed = _shortlist_columns(shortlist, sources, columns, model.config.tgt_vocab_size)
        output = output or OutputLayer.of(model.generator)
        step = model.shortlist_step(torch.from_numpy(ids).to(device), allowed.to(device), output)
        bos, eos = int(np.searchsorted(ids, BOS_ID)), int(np.searchsorted(ids, EOS_ID))
    if not with_attention:  # the search then keeps no attention trail (copied at every step)
        step = _without_attention(step)
    if options.beam_size == 1:
        best = greedy_search(
            step, reorder, state, len(sources), bos, eos, max_lengths, options.alpha
        )
        nbests = [[h] for h in best]
    else:
        nbests = beam_search(
            step,
            reorder,
            state,
            len(sources),
            bos,
            eos,
            max_lengths,
            beam_size=options.beam_size,
            nbest=options.nbest,
            alpha=options.alpha,
            early_stop=options.early_stop,
            lookahead=options.lookahead,
        )
    if ids is None:
        return nbests
    return [[replace(h, tokens=ids[h.tokens].tolist()) for h in nbest] for nbest in nbests]


class SearchStream:
    """A beam search that sentences join while it runs and leave as soon as they are done: the
    continuous batching of `nmt serve`. Each sentence gets the n-best it gets from `decode_ids`
    (up to float rounding, which depends on the batch a row is computed in, as there). Beam size
    1 runs as a beam of one: greedy search's choices, but for exactly tied scores."""

    def __init__(
        self,
        model: Seq2Seq,
        device: torch.device,
        options: SearchOptions,
        with_attention: bool = True,
        partners: Sequence[Seq2Seq] = (),
    ) -> None:
        options.check()
        self.models, self.device, self.options = [model, *partners], device, options
        step, reorder, join = model.step_log_probs, model.reorder, Seq2Seq.join
        if partners:
            step, reorder = mean_step(
                [m.step_log_probs for m in self.models], [m.reorder for m in self.models]
            )
            join = mean_join([Seq2Seq.join] * len(self.models))
        if not with_attention:
            step = _without_attention(step)
        self.search = BeamSearch(
            step, reorder, BOS_ID, EOS_ID, options.beam_size, options.nbest, options.alpha,
            options.early_stop, join, options.lookahead,
        )  # fmt: skip
        for each in self.models:
            each.eval()

    @property
    def active(self) -> int:
        return self.search.active

    @torch.inference_mode()
    def add(self, sources: Sequence[Sequence[np.ndarray]]) -> list[int]:
        """Add sentences, given as each model's source ids (one list per model, same length);
        return their ids in the search. Every sentence must have at least one piece. If it
        raises, the search is as it was."""
        return self.search.add(*_encoded(self.models, sources, self.device, self.options))

    @torch.inference_mode()
    def step(self) -> list[tuple[int, list[Hypothesis]]]:
        """One search step; the (id, n-best) of the sentences it finished."""
        return self.search.step()


def _encoded(
    models: Sequence[Seq2Seq],
    sources: Sequence[Sequence[np.ndarray]],
    device: torch.device,
    options: SearchOptions,
):
    """The search state of sentences (each model encodes them in its own source ids, given
    per model: a tuple of the models' states for an ensemble) and the most target pieces each
    may get (B,), from the first model's source lengths."""
    src, lengths = _collated(sources[0], device)
    state = models[0].encode(src, lengths)
    if len(models) > 1:
        others = zip(models[1:], sources[1:], strict=True)
        state = (state, *(other.encode(*_collated(own, device)) for other, own in others))
    return state, output_limits(lengths, options)


def output_limits(lengths: torch.Tensor, options: SearchOptions) -> torch.Tensor:
    """The most target pieces each sentence may get (B,), from its source pieces (B,)."""
    if options.max_len:  # one fixed limit, as the peers' max_length (bench/ compares at it)
        return torch.full_like(lengths, options.max_len)
    return (lengths.float() * options.max_len_ratio + options.max_len_extra).long()


def _collated(sources: Sequence[np.ndarray], device: torch.device):
    """Padded source ids (B, S) and their lengths (B,) on `device`."""
    batch = collate(sources, [np.empty(0, dtype=np.int64)] * len(sources))
    return batch.src.to(device), batch.src_lengths.to(device)


def _without_attention(step):
    """`step` with its attention dropped: hypotheses then carry none."""

    def without(prev: torch.Tensor, state):
        log_probs, state, _ = step(prev, state)
        return log_probs, state, None

    return without


def _shortlist_columns(
    shortlist: Shortlist, sources: Sequence[np.ndarray], multiple: int = 0, vocab: int = 0
):
    """The batch's target ids (K,), sorted, and which of them each sentence may produce (B, K).
    With `multiple`, K is padded up to a multiple of it (at most `vocab`) with ids that no
    sentence may produce."""
    lists = [shortlist.ids_for([source]) for source in sources]
    ids = np.unique(np.concatenate([*lists, [BOS_ID, EOS_ID]])).astype(np.int64)
    if multiple and len(ids) % multiple:
        spare = np.setdiff1d(np.arange(vocab), ids)[: -len(ids) % multiple]
        ids = np.union1d(ids, spare)
    allowed = np.zeros((len(sources), len(ids)), dtype=bool)
    for row, own in enumerate(lists):
        allowed[row, np.searchsorted(ids, own)] = True
    allowed[:, np.searchsorted(ids, EOS_ID)] = True
    return ids, torch.from_numpy(allowed)
