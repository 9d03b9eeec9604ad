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
- Sentences may join a running beam search between its steps (`BeamSearch.add`, given a `join`
  function for the states); each counts its own steps, so its n-best is the one it would get
  in a batch of its own.
- Beam search stops a sentence when no live hypothesis can change its n-best: at any length up
  to its limit (`lookahead=None`, exact), or by ending within `lookahead` more tokens after
  the next (a bound that ignores the longer endings the length penalty could still favour:
  what `nmt translate` does unless told --exact-stop, with the same translations in nearly
  every sentence in far fewer steps when the limit is long). With `early_stop`, it also stops
  one once the best extension of some step has ended the sentence and its n-best list is
  full, the rule of OpenNMT-py and Joey NMT: fewer steps still, and the n-best may miss a
  longer hypothesis that would have scored higher after length normalisation (or, with
  nbest > 1, one that would have entered the list even without a length penalty).
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
JoinFn = Callable[[State, State], State]
# join(state, other) -> one state holding the rows of `state`, then those of `other`

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
        width = step_rows.size(2)
        if old_rows.size(2) > width:  # a joined state dropped padding columns (all zero here)
            old_rows = old_rows[:, :, :width]
        elif old_rows.size(2) < width:  # a longer source joined: pad the older rows
            old_rows = torch.nn.functional.pad(old_rows, (0, width - old_rows.size(2)))
        return _Trail(new_tokens, torch.cat([old_rows, step_rows], dim=1))

    def join(self, rows: int) -> _Trail:
        """This trail followed by `rows` new paths, blank so far (for sentences that join)."""
        tokens = self.tokens.new_zeros(rows, self.tokens.size(1))
        attention = None
        if self.attention is not None:
            attention = torch.cat(
                [self.attention, self.attention.new_zeros(rows, *self.attention.shape[1:])]
            )
        return _Trail(torch.cat([self.tokens, tokens]), attention)

    def drop(self, columns: int) -> _Trail:
        """The trail without its first `columns` steps (no live path still needs them)."""
        attention = None if self.attention is None else self.attention[:, columns:]
        return _Trail(self.tokens[:, columns:], attention)

    def hypotheses(
        self, log_probs: torch.Tensor, alpha: float, starts: list[int] | None = None
    ) -> list[Hypothesis]:
        """Hypotheses for every row, each ended by EOS as its last token, raw scores (R,);
        row r's own path begins at column `starts[r]` (0 for all rows without `starts`)."""
        token_lists = self.tokens.tolist()
        attention = [None] * len(token_lists) if self.attention is None else self.attention.cpu()
        starts = starts or [0] * len(token_lists)
        return [
            Hypothesis(
                tokens=tokens[start:-1],
                score=log_prob / length_penalty(len(tokens) - start, alpha),
                log_prob=log_prob,
                attention=None if rows is None else rows[start:],
            )
            for tokens, log_prob, rows, start in zip(
                token_lists, log_probs.tolist(), attention, starts, strict=True
            )
        ]


def _close_all_but_eos(log_probs: torch.Tensor, at_limit: torch.Tensor, eos: int) -> torch.Tensor:
    """Leave only EOS open to the rows (R,) that reached their length limit; (R, V)."""
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
    deadline = int(limits.min()) if batch_size else 0  # no sentence is at its limit before
    while sentences.numel():
        log_probs, state, attention = step(prev, state)  # (A, V), (A, S)
        if t >= deadline:
            at_limit = limits <= t  # (A,)
            if bool(at_limit.any()):
                log_probs = _close_all_but_eos(log_probs, at_limit, eos)
            else:  # those that were have gone
                deadline = int(limits.min())
        # max(dim) gives the first best index, as argmax does, and its value: one pass, where
        # argmax and a gather take three times as long on CPU.
        best, prev = log_probs.max(dim=1)  # (A,), (A,)
        log_prob = log_prob + best.float()
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

    sentences: torch.Tensor  # (A,) id of each active sentence
    limits: torch.Tensor  # (A,) the most tokens each may generate
    last_penalty: torch.Tensor  # (A,) length_penalty(limits + 1): of the longest possible ending
    born: torch.Tensor  # (A,) the search step at which each joined (0 for a batch started together)
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
            self.last_penalty[keep],
            self.born[keep],
            self.scores[keep],
            self.trail,
            self.bar[keep],
            self.top_ended[keep],
        )

    def join(self, other: _Beam) -> _Beam:
        """These sentences followed by `other`'s (their trail rows already joined to this one)."""
        return _Beam(
            *(torch.cat([mine, theirs]) for mine, theirs in (
                (self.sentences, other.sentences), (self.limits, other.limits),
                (self.last_penalty, other.last_penalty), (self.born, other.born),
                (self.scores, other.scores),
            )),
            self.trail,
            torch.cat([self.bar, other.bar]),
            torch.cat([self.top_ended, other.top_ended]),
        )  # fmt: skip


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


def mean_join(joins: Sequence[JoinFn]) -> JoinFn:
    """The join of an ensemble's states (tuples of the models' own, as `mean_step` keeps them)."""

    def join(states: tuple, others: tuple) -> tuple:
        return tuple(own(a, b) for own, a, b in zip(joins, states, others, strict=True))

    return join


def check_beam_options(beam_size: int, nbest: int) -> None:
    """Reject a beam size or n-best count that cannot work, naming the fix."""
    if beam_size < 1:
        raise ConfigError(f"--beam must be ≥ 1, got {beam_size}")
    if not 1 <= nbest <= beam_size:
        raise ConfigError(
            f"--nbest must be between 1 and the beam size (--beam {beam_size}), got {nbest}; "
            "raise --beam or lower --nbest"
        )


# The plain top-k is faster than the two-stage one up to these many candidates per sentence and
# in all (measured on 1 and 2 threads): e.g. for 16 sentences of an 800-piece vocabulary at beam
# 5, or the first step (one row per sentence) of 64 such sentences or of 4 with 8,000 pieces.
PLAIN_TOPK_ROW, PLAIN_TOPK_MOST = 16384, 65536


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
    For few candidates (see `PLAIN_TOPK_ROW`) the plain top-k's fewer operators are faster.
    """
    active, width = scores.shape
    vocab = log_probs.size(1)
    k = min(beam_size, width * vocab)
    block = _block_size(vocab)
    plain = width * vocab <= PLAIN_TOPK_ROW and active * width * vocab <= PLAIN_TOPK_MOST
    if plain or not block or width * (vocab // block) < k:
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
    finished: dict[int, list[Hypothesis]],
    scores: torch.Tensor,
    rows: torch.Tensor,
    tokens: torch.Tensor,
    attention: torch.Tensor | None,
    eos: int,
    nbest: int,
    alpha: float,
    first_column: int,
) -> torch.Tensor:
    """Move extensions ending in EOS (A, W') to their sentence's n-best; return the live scores.
    `first_column` is the search step of the trail's first column."""
    ended = tokens == eos  # (A, W')
    if not bool(ended.any()):
        return scores
    ended &= scores.isfinite()  # a dead row's extensions (-inf) end nothing
    where, _ = ended.nonzero(as_tuple=True)
    trail = beam.trail.extend(rows[ended], tokens[ended], attention)
    starts = (beam.born[where] - first_column).tolist() if first_column or beam.born.any() else None
    hypotheses = trail.hypotheses(scores[ended], alpha, starts)
    touched: dict[int, int] = {}  # sentence id -> active index
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


def _settled(
    beam: _Beam, scores: torch.Tensor, own_penalty: torch.Tensor, last_penalty: torch.Tensor
) -> torch.Tensor:
    """Which active sentences (A,) no live hypothesis can still change the n-best of.

    A live hypothesis has t tokens and will end after L in [t + 1, last] scored steps with a
    raw score no higher than now (log-probs are <= 0). Its best final score is thus at most
    raw / max(lp(t + 1), lp(last)), the penalty being monotone in L for any alpha; each
    sentence's lp(t + 1) is given as `own_penalty` (A,) and its lp(last) as `last_penalty`
    (A,). With last = limit + 1, if the best live bound cannot beat the n-th kept score,
    nothing later can enter the n-best (exact up to float32 rounding, the precision the scores
    are summed in); a nearer `last` is the lookahead's bound.
    """
    best_live = scores.max(dim=1).values  # (A,) -inf when nothing is live
    return best_live / torch.maximum(last_penalty, own_penalty) <= beam.bar


class BeamSearch:
    """A running beam search: sentences join it between steps and leave it once settled.

    `add` puts sentences in (their encoded state and length limits) and `step` runs one step for
    every active sentence, returning the n-best lists of those it settled. Each sentence counts
    its own steps, so its n-best is the one it gets in a batch of its own. A sentence leaves as
    soon as its n-best is settled (see `_settled`): without `lookahead`, with the same result as
    running its beam until no live hypothesis remains; with it, once no live hypothesis could
    enter the n-best by ending within `lookahead` tokens after the next; with `early_stop` also
    once a step's best extension has ended it and its n-best is full (see the module notes).

    Sentences added to a search with active ones start with W rows (the width of the others),
    all but the first dead, so every sentence keeps W consecutive rows and a model's per-sentence
    memory stays shared by its rows; that needs `join`. Sentences added to an empty search start
    with one row each.
    """

    def __init__(
        self,
        step: StepFn,
        reorder: ReorderFn,
        bos: int,
        eos: int,
        beam_size: int = 5,
        nbest: int = 1,
        alpha: float = 1.0,
        early_stop: bool = False,
        join: JoinFn | None = None,
        lookahead: int | None = None,
    ) -> None:
        check_beam_options(beam_size, nbest)
        assert lookahead is None or lookahead >= 0, "lookahead is a number of tokens, or None"
        self.lookahead = lookahead
        self._step, self._reorder, self._join = step, reorder, join
        self.bos, self.eos = bos, eos
        self.beam_size, self.nbest, self.alpha, self.early_stop = (
            beam_size,
            nbest,
            alpha,
            early_stop,
        )
        self._beam: _Beam | None = None
        self._state: State = None
        self._prev: torch.Tensor | None = None  # (A*W,) the token each row reads next
        self._t = 0  # steps run since the search was last empty
        self._deadline = 0  # no active sentence reaches its length limit before this step
        self._first_column = 0  # the step of the trail's first column
        self._finished: dict[int, list[Hypothesis]] = {}
        self._next_id = 0
        self._penalties: list[float] = []  # length_penalty(L, alpha) for L = 0, 1, ...

    @property
    def active(self) -> int:
        """How many sentences are still being searched."""
        return 0 if self._beam is None else self._beam.sentences.numel()

    @torch.no_grad()
    def add(self, state: State, max_lengths: torch.Tensor) -> list[int]:
        """Put the sentences of `state` (B rows) into the search; return their ids, in order.

        `max_lengths` (B,) are the most tokens each may generate, on the model's device. If it
        raises, the search is as it was before the call.
        """
        count = max_lengths.numel()
        ids = list(range(self._next_id, self._next_id + count))
        if not count:
            return ids
        device = max_lengths.device
        width = 1 if self._beam is None else self._beam.scores.size(1)
        scores = torch.full((count, width), NEG_INF, device=device)
        scores[:, 0] = 0.0  # one live row per new sentence, the others dead
        newcomers = _Beam(
            sentences=torch.tensor(ids, device=device),
            limits=max_lengths,
            last_penalty=length_penalty(max_lengths + 1, self.alpha),
            born=torch.full((count,), self._t, dtype=torch.long, device=device),
            scores=scores,
            trail=_Trail.empty(count * width, device),
            bar=torch.full((count,), NEG_INF, device=device),
            top_ended=torch.zeros(count, dtype=torch.bool, device=device),
        )
        prev = torch.full((count * width,), self.bos, dtype=torch.long, device=device)
        deadline = self._t + int(max_lengths.min())
        if self._beam is not None:  # everything new is built before any of it is kept
            assert self._join is not None, "a search with active sentences needs `join` to add more"
            if width > 1:
                index = torch.arange(count, device=device).repeat_interleave(width)
                state = self._reorder(state, index)
            state = self._join(self._state, state)
            prev = torch.cat([self._prev, prev])
            trail = self._beam.trail.join(count * width)
            newcomers = self._beam.join(newcomers)
            newcomers.trail = trail
            deadline = min(deadline, self._deadline)
        self._beam, self._state, self._prev = newcomers, state, prev
        self._deadline = deadline
        self._next_id += count
        self._finished.update((sentence, []) for sentence in ids)
        return ids

    @torch.no_grad()
    def step(self) -> list[tuple[int, list[Hypothesis]]]:
        """One step for every active sentence; the (id, n-best, best first) of those it settled."""
        beam = self._beam
        if beam is None:
            return []
        log_probs, state, attention = self._step(self._prev, self._state)  # (A*W, V), (A*W, S)
        own_steps = self._t - beam.born  # (A,)
        if self._t >= self._deadline:
            at_limit = beam.limits <= own_steps  # (A,)
            if bool(at_limit.any()):
                rows_at_limit = at_limit.repeat_interleave(beam.scores.size(1))  # (A*W,)
                log_probs = _close_all_but_eos(log_probs, rows_at_limit, self.eos)
            else:  # those that were have gone
                self._deadline = int((beam.born + beam.limits).min())
        scores, rows, tokens = _best_extensions(beam.scores, log_probs, self.beam_size)  # (A, W')
        self._t += 1
        scores = _collect_finished(
            beam, self._finished, scores, rows, tokens, attention, self.eos, self.nbest,
            self.alpha, self._first_column,
        )  # fmt: skip
        last_penalty = beam.last_penalty  # lp(limit + 1)
        if self.lookahead is not None:  # lp(L) with L the nearer of own steps + 2 + lookahead
            nearer = own_steps + 2 + self.lookahead  # and limit + 1 (the very same value then)
            near = self._own_penalty(torch.minimum(nearer, beam.limits))
            last_penalty = torch.where(nearer > beam.limits, last_penalty, near)
        settled = _settled(beam, scores, self._own_penalty(own_steps + 2), last_penalty)  # (A,)
        if self.early_stop:
            beam.top_ended |= tokens[:, 0] == self.eos  # topk is sorted: column 0 is the best
            settled |= beam.top_ended & (beam.bar > NEG_INF)  # the bar is set once n-best is full
        done: list[tuple[int, list[Hypothesis]]] = []
        if bool(settled.any()):
            done = [(s, self._finished.pop(s)) for s in beam.sentences[settled].tolist()]
            keep = _holes_filled(settled)  # (A',)
            if keep.numel() == 0:
                self._beam, self._state, self._prev, self._t, self._first_column = (
                    None, None, None, 0, 0,
                )  # fmt: skip
                return done
            beam, scores, rows, tokens = beam.select(keep), scores[keep], rows[keep], tokens[keep]
        rows, self._prev = rows.flatten(), tokens.flatten()  # (A*W',)
        self._state = self._reorder(state, rows)
        beam.trail = beam.trail.extend(rows, self._prev, attention)
        beam.scores = scores
        oldest = int(beam.born.min()) if done else self._first_column
        if oldest > self._first_column:  # no live path needs the trail's first steps any more
            beam.trail = beam.trail.drop(oldest - self._first_column)
            self._first_column = oldest
        self._beam = beam
        return done

    def _own_penalty(self, lengths: torch.Tensor) -> torch.Tensor:
        """length_penalty(L) for each of `lengths` (A,), at most this step + 2 + the lookahead,
        from a table of Python floats: the same float32 values a scalar penalty gives."""
        need = self._t + 3 + (self.lookahead or 0)
        if need > len(self._penalties):
            more = range(len(self._penalties), max(need, 2 * len(self._penalties)))
            self._penalties += [length_penalty(L, self.alpha) for L in more]
            self._table = torch.tensor(self._penalties, device=lengths.device)
        return self._table[lengths]


def _holes_filled(settled: torch.Tensor) -> torch.Tensor:
    """The sentences that go on (A',), in the order that moves fewest: those before A' stay in
    place, and each place left by a settled one takes one from beyond A'. A memory then changes
    in those places only (`Memory.select`), instead of being copied whole at every step where a
    sentence ends, which is most steps of a long-running search (`nmt serve`)."""
    live = ~settled
    count = int(live.sum())
    keep = torch.arange(count, device=settled.device)
    holes = settled[:count].nonzero().squeeze(1)
    if holes.numel():
        keep[holes] = live[count:].nonzero().squeeze(1) + count
    return keep


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
    lookahead: int | None = None,
) -> list[list[Hypothesis]]:
    """Translate each sentence of a batch with beam search; up to `nbest` hypotheses each, best
    first (see `BeamSearch`). The first step runs on one row per sentence; its back-pointers
    expand the state to the beam."""
    assert max_lengths.shape == (batch_size,), "max_lengths must be (B,)"
    search = BeamSearch(
        step, reorder, bos, eos, beam_size, nbest, alpha, early_stop, lookahead=lookahead
    )
    search.add(state, max_lengths)
    finished: list[list[Hypothesis]] = [[] for _ in range(batch_size)]
    while search.active:
        for sentence, nbest_list in search.step():
            finished[sentence] = nbest_list
    return finished
