"""Greedy and beam search over a "score the next token" function, never the model itself.

Shapes: B sentences in the batch, A sentences still active, W live beams per active sentence
(1 at the first step, then at most K, the beam size), R = A*W rows given to the step function,
V vocabulary, S source length (as padded by the step function), t tokens generated so far.

Conventions shared by both searches:

- The step function owns the vocabulary. Ids that must never be emitted (BOS, padding) get
  log-probability -inf from it; search treats no id specially except `eos`.
- Log-probabilities are <= 0, so a hypothesis's raw score can only fall as it grows; the beam's
  stopping bound relies on this.
- A hypothesis that has generated its sentence's `max_lengths` tokens is forced to end: at the
  next step only EOS is open to it. Every hypothesis is therefore scored with an EOS and has one
  attention row per generated token plus one for the EOS step.
- Length penalty (Wu et al. 2016, GNMT): score = log_prob / ((5 + L) / 6) ** alpha with
  L = len(tokens) + 1, the number of scored steps including EOS (as OpenNMT-py and Joey NMT count).
- Every index given to `step` and `reorder` lives on the device of `max_lengths`: pass it on the
  model's device. Attention in the results is on the CPU.
- Beam search stops a sentence when no live hypothesis can change its n-best (exact). With
  `early_stop`, it also stops one once the best extension of some step has ended the sentence
  and its n-best list is full, the rule of OpenNMT-py and Joey NMT: fewer steps, and the n-best
  may miss a longer hypothesis that would have scored higher after length normalisation (or,
  with nbest > 1, one that would have entered the list even without a length penalty).
"""

from __future__ import annotations

import functools
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

import torch

from nmt_cli.errors import ConfigError

State = Any  # opaque to search: whatever the step function returns, only ever passed to `reorder`
StepFn = Callable[[torch.Tensor, State], tuple[torch.Tensor, State, torch.Tensor | None]]
# step(prev_tokens (R,) long, state) -> (log_probs (R, V), new_state, attention (R, S) or None)
ReorderFn = Callable[[State, torch.Tensor], State]
# reorder(state, index (R',) long) -> the state of rows `index` (repeats allowed)

NEG_INF = float("-inf")


@dataclass
class Hypothesis:
    """One finished output sentence with its scores and the attention behind each step."""

    tokens: list[int]  # generated ids, without BOS and EOS
    score: float  # ranking score: log_prob / length_penalty(len(tokens) + 1, alpha)
    log_prob: float  # raw sum of log-probs, EOS included
    attention: torch.Tensor | None  # (len(tokens) + 1, S) on the CPU, or None


def length_penalty(length: torch.Tensor | int, alpha: float) -> torch.Tensor | float:
    """GNMT length penalty ((5 + length) / 6) ** alpha for a hypothesis of `length` scored steps."""
    return ((5 + length) / 6) ** alpha


@dataclass
class _Trail:
    """The tokens and attention rows chosen so far along each live row's path."""

    tokens: torch.Tensor  # (R, t) long
    attention: torch.Tensor | None  # (R, t, S), or None when the step function gives none

    @classmethod
    def empty(cls, rows: int, device: torch.device) -> _Trail:
        """Trails of `rows` paths that have generated nothing yet."""
        return cls(torch.empty(rows, 0, dtype=torch.long, device=device), None)

    def extend(
        self, rows: torch.Tensor | None, tokens: torch.Tensor, attention: torch.Tensor | None
    ) -> _Trail:
        """Trails of `rows` (R',) of this one (None: all, in order), each followed by its token.

        `tokens` (R',) are the new tokens; `attention` (R, S) is the step's attention for this
        trail's rows, before selection.
        """
        old_tokens = self.tokens if rows is None else self.tokens[rows]  # (R', t)
        new_tokens = torch.cat([old_tokens, tokens.unsqueeze(1)], dim=1)  # (R', t+1)
        if attention is None:
            return _Trail(new_tokens, None)
        step_rows = (attention if rows is None else attention[rows]).unsqueeze(1)  # (R', 1, S)
        if self.attention is None:
            assert self.tokens.size(1) == 0, "attention must be given at every step or never"
            return _Trail(new_tokens, step_rows)
        old_rows = self.attention if rows is None else self.attention[rows]  # (R', t, S)
        return _Trail(new_tokens, torch.cat([old_rows, step_rows], dim=1))

    def hypotheses(self, log_probs: torch.Tensor, alpha: float) -> list[Hypothesis]:
        """Hypotheses for every row, each ended by EOS as its last token, raw scores (R,)."""
        token_lists = self.tokens.tolist()
        attention = [None] * len(token_lists) if self.attention is None else self.attention.cpu()
        return [
            Hypothesis(
                tokens=tokens[:-1],
                score=log_prob / length_penalty(len(tokens), alpha),
                log_prob=log_prob,
                attention=rows,
            )
            for tokens, log_prob, rows in zip(
                token_lists, log_probs.tolist(), attention, strict=True
            )
        ]


def _close_all_but_eos(log_probs: torch.Tensor, at_limit: torch.Tensor, eos: int) -> torch.Tensor:
    """Leave only EOS open to the rows (R,) that reached their length limit; (R, V)."""
    if not bool(at_limit.any()):
        return log_probs
    others = torch.arange(log_probs.size(1), device=log_probs.device) != eos  # (V,)
    return log_probs.masked_fill(at_limit.unsqueeze(1) & others, NEG_INF)


@torch.no_grad()
def greedy_search(
    step: StepFn,
    reorder: ReorderFn,
    state: State,
    batch_size: int,
    bos: int,
    eos: int,
    max_lengths: torch.Tensor,
    alpha: float = 1.0,
) -> list[Hypothesis]:
    """Translate each sentence by always taking the most probable next token.

    Finished sentences leave the batch at once, so no step is spent on them. `alpha` only sets
    the reported score (greedy choices do not depend on it), matching beam search's.
    """
    assert max_lengths.shape == (batch_size,), "max_lengths must be (B,)"
    device = max_lengths.device
    results: list[Hypothesis] = [None] * batch_size  # type: ignore[list-item]  # all set by the end
    sentences = torch.arange(batch_size, device=device)  # (A,) batch index of each row
    limits = max_lengths  # (A,)
    prev = torch.full((batch_size,), bos, dtype=torch.long, device=device)  # (A,)
    log_prob = torch.zeros(batch_size, device=device)  # (A,) float32 whatever the model's dtype
    trail = _Trail.empty(batch_size, device)
    t = 0
    while sentences.numel():
        log_probs, state, attention = step(prev, state)  # (A, V), (A, S)
        log_probs = _close_all_but_eos(log_probs, limits <= t, eos)
        prev = log_probs.argmax(dim=1)  # (A,)
        log_prob = log_prob + log_probs.gather(1, prev.unsqueeze(1)).squeeze(1).float()
        t += 1
        ended = prev == eos  # (A,)
        if not bool(ended.any()):
            trail = trail.extend(None, prev, attention)
            continue
        done = ended.nonzero().squeeze(1)
        hypotheses = trail.extend(done, prev[done], attention).hypotheses(log_prob[done], alpha)
        for sentence, hypothesis in zip(sentences[done].tolist(), hypotheses, strict=True):
            results[sentence] = hypothesis
        keep = (~ended).nonzero().squeeze(1)  # (A',)
        if keep.numel():
            state = reorder(state, keep)
            trail = trail.extend(keep, prev[keep], attention)
        sentences, limits, prev, log_prob = (x[keep] for x in (sentences, limits, prev, log_prob))
    return results


@dataclass
class _Beam:
    """The live hypotheses of the active sentences, rows ordered sentence-major."""

    sentences: torch.Tensor  # (A,) batch index of each active sentence
    limits: torch.Tensor  # (A,) the most tokens each may generate
    scores: torch.Tensor  # (A, W) raw log-prob of each live hypothesis, -inf where none is live
    trail: _Trail  # (A*W, t) their tokens and attention
    bar: torch.Tensor  # (A,) score a new hypothesis must beat to enter the n-best; -inf until full
    top_ended: torch.Tensor  # (A,) bool: a step's best extension has ended the sentence

    def select(self, keep: torch.Tensor) -> _Beam:
        """The beam of the active sentences `keep` (A',) only.

        The trail is left whole: it is still indexed by the step's rows until the next `extend`.
        """
        return _Beam(
            self.sentences[keep],
            self.limits[keep],
            self.scores[keep],
            self.trail,
            self.bar[keep],
            self.top_ended[keep],
        )


def mean_step(steps: Sequence[StepFn], reorders: Sequence[ReorderFn]) -> tuple[StepFn, ReorderFn]:
    """An ensemble as one step function: the mean of the models' log-probs at every step, the
    first model's attention; its state is the tuple of theirs (each model's own source)."""

    def step(prev: torch.Tensor, states: tuple) -> tuple[torch.Tensor, tuple, torch.Tensor | None]:
        outputs = [own(prev, state) for own, state in zip(steps, states, strict=True)]
        total = sum((out[0] for out in outputs[1:]), outputs[0][0])  # a + a = 2a exactly
        return total / len(outputs), tuple(out[1] for out in outputs), outputs[0][2]

    def reorder(states: tuple, index: torch.Tensor) -> tuple:
        return tuple(own(state, index) for own, state in zip(reorders, states, strict=True))

    return step, reorder


def check_beam_options(beam_size: int, nbest: int) -> None:
    """Reject a beam size or n-best count that cannot work, naming the fix."""
    if beam_size < 1:
        raise ConfigError(f"--beam (the beam size) must be at least 1, got {beam_size}")
    if not 1 <= nbest <= beam_size:
        raise ConfigError(
            f"--nbest must be between 1 and the beam size (--beam {beam_size}), got {nbest}; "
            "raise --beam or lower --nbest"
        )


@functools.lru_cache
def _block_size(vocab: int) -> int:
    """The largest divisor of `vocab` in [16, 128] (0 if none): the block of the two-stage top-k."""
    return next((size for size in range(128, 15, -1) if vocab % size == 0), 0)


def _best_extensions(
    scores: torch.Tensor, log_probs: torch.Tensor, beam_size: int
) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """Each sentence's best one-token extensions: their scores, source rows and tokens (A, W').

    Same result as a top-k over all W·V candidate scores, found in two stages because a plain
    top-k over them is several times slower on CPU than a max-reduction: split every row's
    vocabulary into blocks of 16 to 128 ids, take the k best blocks of the sentence by their
    maximum, then the k best candidates within those blocks. Each of the k best candidates lies
    in one of the k best blocks (fewer than k blocks can hold a larger maximum), so nothing is
    missed; tied scores may resolve to other (equal-scored) candidates than a plain top-k's.
    """
    active, width = scores.shape
    vocab = log_probs.size(1)
    k = min(beam_size, width * vocab)
    block = _block_size(vocab)
    if not block or width * (vocab // block) < k:  # too few blocks to pick k from
        candidates = scores.unsqueeze(2) + log_probs.view(active, width, vocab).float()
        top, index = candidates.view(active, width * vocab).topk(k, dim=1)
        first_row = torch.arange(active, device=scores.device).unsqueeze(1) * width  # (A, 1)
        return top, first_row + index // vocab, index % vocab
    blocks = vocab // block
    log_probs = log_probs.float()
    block_max = log_probs.view(active, width, blocks, block).amax(3) + scores.unsqueeze(2)
    _, best_blocks = block_max.view(active, width * blocks).topk(k, dim=1)  # (A, k)
    beam = best_blocks // blocks  # (A, k) the live hypothesis each block extends
    rows = torch.arange(active, device=scores.device).unsqueeze(1) * width + beam  # (A, k)
    offsets = torch.arange(block, device=scores.device)
    columns = (best_blocks % blocks).unsqueeze(2) * block + offsets  # (A, k, block) vocab ids
    candidates = log_probs[rows.unsqueeze(2), columns] + scores.gather(1, beam).unsqueeze(2)
    top, index = candidates.view(active, k * block).topk(k, dim=1)  # (A, k)
    return top, rows.gather(1, index // block), columns.view(active, k * block).gather(1, index)


def _collect_finished(
    beam: _Beam,
    finished: list[list[Hypothesis]],
    scores: torch.Tensor,
    rows: torch.Tensor,
    tokens: torch.Tensor,
    attention: torch.Tensor | None,
    eos: int,
    nbest: int,
    alpha: float,
) -> torch.Tensor:
    """Move extensions ending in EOS (A, W') to their sentence's n-best; return the live scores."""
    ended = (tokens == eos) & scores.isfinite()  # (A, W')
    if not bool(ended.any()):
        return scores
    where, _ = ended.nonzero(as_tuple=True)
    trail = beam.trail.extend(rows[ended], tokens[ended], attention)
    hypotheses = trail.hypotheses(scores[ended], alpha)
    touched: dict[int, int] = {}  # batch index -> active index
    for active, sentence, hypothesis in zip(
        where.tolist(), beam.sentences[where].tolist(), hypotheses, strict=True
    ):
        finished[sentence].append(hypothesis)
        touched[sentence] = active
    for sentence, active in touched.items():
        kept = finished[sentence]
        kept.sort(key=lambda h: -h.score)  # stable: an earlier hypothesis wins a tie
        del kept[nbest:]
        if len(kept) == nbest:
            beam.bar[active] = kept[-1].score
    return scores.masked_fill(ended, NEG_INF)


def _settled(beam: _Beam, scores: torch.Tensor, t: int, alpha: float) -> torch.Tensor:
    """Which active sentences (A,) no live hypothesis can still change the n-best of.

    A live hypothesis has t tokens and will end after L in [t + 1, limit + 1] scored steps with
    a raw score no higher than now (log-probs are <= 0). Its best final score is thus at most
    raw / max(lp(t + 1), lp(limit + 1)), the penalty being monotone in L for any alpha. If the
    best live bound cannot beat the n-th kept score, nothing later can enter the n-best (exact
    up to float32 rounding, the precision the scores are summed in).
    """
    best_live = scores.max(dim=1).values  # (A,) -inf when nothing is live
    penalty = torch.maximum(
        length_penalty(beam.limits + 1, alpha),
        torch.full_like(best_live, length_penalty(t + 1, alpha)),
    )
    return best_live / penalty <= beam.bar


@torch.no_grad()
def beam_search(
    step: StepFn,
    reorder: ReorderFn,
    state: State,
    batch_size: int,
    bos: int,
    eos: int,
    max_lengths: torch.Tensor,
    beam_size: int = 5,
    nbest: int = 1,
    alpha: float = 1.0,
    early_stop: bool = False,
) -> list[list[Hypothesis]]:
    """Translate each sentence with beam search; return up to `nbest` hypotheses each, best first.

    The first step runs on one row per sentence; its back-pointers expand the state to the beam.
    A sentence leaves the batch as soon as its n-best is settled (see `_settled`); the result is
    the same as running every beam until no live hypothesis remains. With `early_stop` it also
    leaves once a step's best extension has ended it and its n-best is full (see the module
    notes).
    """
    check_beam_options(beam_size, nbest)
    assert max_lengths.shape == (batch_size,), "max_lengths must be (B,)"
    device = max_lengths.device
    finished: list[list[Hypothesis]] = [[] for _ in range(batch_size)]
    beam = _Beam(
        sentences=torch.arange(batch_size, device=device),
        limits=max_lengths,
        scores=torch.zeros(batch_size, 1, device=device),  # (A, 1): one live row at the start
        trail=_Trail.empty(batch_size, device),
        bar=torch.full((batch_size,), NEG_INF, device=device),
        top_ended=torch.zeros(batch_size, dtype=torch.bool, device=device),
    )
    prev = torch.full((batch_size,), bos, dtype=torch.long, device=device)  # (A*W,)
    t = 0
    while beam.sentences.numel():
        log_probs, state, attention = step(prev, state)  # (A*W, V), (A*W, S)
        at_limit = (beam.limits <= t).repeat_interleave(beam.scores.size(1))  # (A*W,)
        log_probs = _close_all_but_eos(log_probs, at_limit, eos)
        scores, rows, tokens = _best_extensions(beam.scores, log_probs, beam_size)  # (A, W')
        t += 1
        scores = _collect_finished(
            beam, finished, scores, rows, tokens, attention, eos, nbest, alpha
        )
        settled = _settled(beam, scores, t, alpha)  # (A,)
        if early_stop:
            beam.top_ended |= tokens[:, 0] == eos  # topk is sorted: column 0 is the best
            settled |= beam.top_ended & (beam.bar > NEG_INF)  # the bar is set once n-best is full
        if bool(settled.any()):
            keep = (~settled).nonzero().squeeze(1)  # (A',)
            beam, scores, rows, tokens = beam.select(keep), scores[keep], rows[keep], tokens[keep]
            if keep.numel() == 0:
                break
        rows, prev = rows.flatten(), tokens.flatten()  # (A*W',)
        state = reorder(state, rows)
        beam.trail = beam.trail.extend(rows, prev, attention)
        beam.scores = scores
    return finished
