"""Greedy and beam search driven by scripted scores, no neural model."""

from __future__ import annotations

import math

import pytest
import torch

from nmt_cli import search
from nmt_cli.errors import ConfigError
from nmt_cli.search import Hypothesis, beam_search, greedy_search, length_penalty

BOS, EOS = 0, 1
NEG_INF = float("-inf")


class MarkovModel:
    """Seeded log-probs and attention indexed by sentence, position and previous token."""

    def __init__(
        self,
        sentences: int = 5,
        positions: int = 12,
        vocab: int = 7,
        source: int = 4,
        seed: int = 0,
        eos_bias: float = 0.0,
        attention: bool = True,
    ) -> None:
        generator = torch.Generator().manual_seed(seed)
        shape = (sentences, positions + 1, vocab)
        logits = 2 * torch.randn(*shape, vocab, generator=generator)  # (B, T, prev, V)
        logits[..., BOS] = NEG_INF  # the model, not search, forbids BOS
        logits[..., EOS] += eos_bias + torch.arange(positions + 1).view(1, -1, 1) * 0.3
        # Normalised once here so a step only indexes: rows are bit-identical in any batch.
        self.log_probs = logits.log_softmax(dim=-1)
        self.attention = torch.randn(*shape, source, generator=generator).softmax(dim=-1)
        self.with_attention = attention
        self.rows: list[int] = []  # rows passed to each step call

    def start(self, sentences: list[int]) -> tuple[torch.Tensor, torch.Tensor]:
        """State of the given sentences before the first step: (sentence ids, positions)."""
        return torch.tensor(sentences), torch.zeros(len(sentences), dtype=torch.long)

    def step(
        self, prev: torch.Tensor, state: tuple[torch.Tensor, torch.Tensor]
    ) -> tuple[torch.Tensor, tuple[torch.Tensor, torch.Tensor], torch.Tensor | None]:
        sentence, position = state
        assert prev.shape == sentence.shape
        self.rows.append(prev.numel())
        attention = self.attention[sentence, position, prev] if self.with_attention else None
        return self.log_probs[sentence, position, prev], (sentence, position + 1), attention

    @staticmethod
    def reorder(
        state: tuple[torch.Tensor, torch.Tensor], index: torch.Tensor
    ) -> tuple[torch.Tensor, torch.Tensor]:
        return state[0][index], state[1][index]

    def next_log_probs(self, sentence: int, prefix: tuple[int, ...]) -> torch.Tensor:
        """The (V,) log-probs after `prefix` for one sentence, for the reference searches."""
        prev = prefix[-1] if prefix else BOS
        return self.log_probs[sentence, len(prefix), prev]

    def attention_for(self, sentence: int, tokens: list[int]) -> torch.Tensor:
        """The (len+1, S) attention rows a hypothesis ending in EOS must carry."""
        prevs = [BOS, *tokens]
        return torch.stack([self.attention[sentence, i, p] for i, p in enumerate(prevs)])


class PrefixModel:
    """Next-token probabilities looked up by the whole prefix; unlisted prefixes end at once."""

    def __init__(self, table: dict[tuple[int, ...], dict[int, float]], vocab: int = 6) -> None:
        self.table = table
        self.vocab = vocab

    def step(
        self, prev: torch.Tensor, state: list[tuple[int, ...]]
    ) -> tuple[torch.Tensor, list[tuple[int, ...]], None]:
        prefixes = [p if t == BOS else (*p, t) for p, t in zip(state, prev.tolist(), strict=True)]
        log_probs = torch.full((len(prefixes), self.vocab), NEG_INF)
        for row, prefix in enumerate(prefixes):
            for token, prob in self.table.get(prefix, {EOS: 1.0}).items():
                log_probs[row, token] = math.log(prob)
        return log_probs, prefixes, None

    @staticmethod
    def reorder(state: list[tuple[int, ...]], index: torch.Tensor) -> list[tuple[int, ...]]:
        return [state[i] for i in index.tolist()]


def run_greedy(model: MarkovModel, sentences: list[int], limits: list[int]) -> list[Hypothesis]:
    return greedy_search(
        model.step, model.reorder, model.start(sentences), len(sentences), BOS, EOS,
        torch.tensor(limits),
    )  # fmt: skip


def run_beam(
    model: MarkovModel, sentences: list[int], limits: list[int], **options: float
) -> list[list[Hypothesis]]:
    return beam_search(
        model.step, model.reorder, model.start(sentences), len(sentences), BOS, EOS,
        torch.tensor(limits), **options,
    )  # fmt: skip


def reference_greedy(model: MarkovModel, sentence: int, limit: int) -> tuple[list[int], float]:
    """Argmax decoding of one sentence, one token at a time."""
    tokens: list[int] = []
    total = torch.zeros(())
    while True:
        log_probs = model.next_log_probs(sentence, tuple(tokens))
        token = EOS if len(tokens) == limit else int(log_probs.argmax())
        total = total + log_probs[token]
        if token == EOS:
            return tokens, float(total)
        tokens.append(token)


def reference_beam(
    model: MarkovModel, sentence: int, limit: int, beam_size: int, alpha: float
) -> list[tuple[list[int], float]]:
    """Every hypothesis an exhaustive beam finishes (no early stop), best first."""
    live = [((), torch.zeros(()))]
    finished: list[tuple[list[int], float]] = []
    while live:
        candidates = []
        for prefix, score in live:
            log_probs = model.next_log_probs(sentence, prefix)
            for token in [EOS] if len(prefix) == limit else range(log_probs.numel()):
                total = score + log_probs[token]
                if math.isfinite(total):
                    candidates.append((float(total), (*prefix, token), total))
        candidates.sort(key=lambda c: -c[0])
        live = []
        for raw, path, total in candidates[:beam_size]:
            if path[-1] == EOS:
                finished.append((list(path[:-1]), raw / length_penalty(len(path), alpha)))
            else:
                live.append((path, total))
    return sorted(finished, key=lambda f: -f[1])


LIMITS = [3, 7, 0, 10, 5]


def test_greedy_takes_the_argmax_sequence() -> None:
    model = MarkovModel(seed=1)
    results = run_greedy(model, list(range(5)), LIMITS)
    for sentence, (hypothesis, limit) in enumerate(zip(results, LIMITS, strict=True)):
        tokens, log_prob = reference_greedy(model, sentence, limit)
        assert hypothesis.tokens == tokens
        assert hypothesis.log_prob == pytest.approx(log_prob, abs=1e-5)
        assert hypothesis.score == pytest.approx(log_prob / ((5 + len(tokens) + 1) / 6))


def test_greedy_finished_sentences_leave_the_batch() -> None:
    model = MarkovModel(seed=2)
    results = run_greedy(model, list(range(5)), LIMITS)
    steps = [len(h.tokens) + 1 for h in results]  # calls each sentence needed, EOS included
    assert len(model.rows) == max(steps)
    assert model.rows == [sum(s > t for s in steps) for t in range(max(steps))]


def test_beam_of_one_equals_greedy_exactly() -> None:
    for seed in range(4):
        greedy = run_greedy(MarkovModel(seed=seed), list(range(5)), LIMITS)
        beam = run_beam(MarkovModel(seed=seed), list(range(5)), LIMITS, beam_size=1)
        for g, (b,) in zip(greedy, beam, strict=True):
            assert (b.tokens, b.score, b.log_prob) == (g.tokens, g.score, g.log_prob)
            assert torch.equal(b.attention, g.attention)


GARDEN_PATH = {  # tokens 2 and 3: greedy takes 2, whose continuations are all weak
    (): {2: 0.55, 3: 0.45},
    (2,): {EOS: 0.3, 2: 0.25, 3: 0.25, 4: 0.2},
    (3,): {EOS: 0.9, 4: 0.1},
}


def test_beam_finds_a_better_sequence_than_greedy() -> None:
    model = PrefixModel(GARDEN_PATH)
    limits = torch.tensor([5])
    (greedy,) = greedy_search(model.step, model.reorder, [()], 1, BOS, EOS, limits)
    ((beam,),) = beam_search(model.step, model.reorder, [()], 1, BOS, EOS, limits, beam_size=2)
    assert greedy.tokens == [2]
    assert beam.tokens == [3]
    assert beam.log_prob == pytest.approx(math.log(0.45 * 0.9))
    assert beam.log_prob > greedy.log_prob
    assert beam.attention is None


LENGTH_CASE = {  # [2] scores log-prob -1.0 and [3, 4] -1.1: better raw, worse per length
    (): {2: math.exp(-1.0), 3: math.exp(-1.1), 5: 1 - math.exp(-1.0) - math.exp(-1.1)},
    (3,): {4: 1.0},
}


@pytest.mark.parametrize(("alpha", "winner"), [(0.0, [2]), (1.0, [3, 4])])
def test_length_penalty_changes_the_winner(alpha: float, winner: list[int]) -> None:
    model = PrefixModel(LENGTH_CASE)
    ((best,),) = beam_search(
        model.step, model.reorder, [()], 1, BOS, EOS, torch.tensor([10]), beam_size=3, alpha=alpha
    )
    assert best.tokens == winner
    assert best.score == pytest.approx(best.log_prob / length_penalty(len(winner) + 1, alpha))


@pytest.mark.parametrize("alpha", [0.0, 0.6, 1.0, 2.0])
def test_beam_n_best_equals_an_exhaustive_beam(alpha: float) -> None:
    for seed in range(3):
        model = MarkovModel(seed=seed, eos_bias=-1.0)
        results = run_beam(model, list(range(5)), LIMITS, beam_size=4, nbest=3, alpha=alpha)
        for sentence, (nbest, limit) in enumerate(zip(results, LIMITS, strict=True)):
            expected = reference_beam(model, sentence, limit, beam_size=4, alpha=alpha)[:3]
            assert [h.tokens for h in nbest] == [tokens for tokens, _ in expected]
            assert [h.score for h in nbest] == pytest.approx([score for _, score in expected])


@pytest.mark.parametrize(("vocab", "width", "beam_size"), [(512, 5, 5), (1000, 1, 4), (640, 3, 8)])
def test_two_stage_top_k_equals_a_plain_top_k(
    vocab: int, width: int, beam_size: int, monkeypatch: pytest.MonkeyPatch
) -> None:
    assert search._block_size(vocab) > 0
    monkeypatch.setattr(search, "PLAIN_TOPK_ROW", 0)  # the two-stage path runs, however small
    generator = torch.Generator().manual_seed(vocab)
    active = 7
    log_probs = (3 * torch.randn(active * width, vocab, generator=generator)).log_softmax(1)
    log_probs[:, BOS] = NEG_INF
    log_probs[2 * width, :] = NEG_INF  # a row closed to everything ...
    log_probs[2 * width, EOS] = -0.5  # ... but EOS
    scores = -5 * torch.rand(active, width, generator=generator)
    scores[1, 0] = NEG_INF  # a sentence with a dead hypothesis
    top, rows, tokens = search._best_extensions(scores, log_probs, beam_size)
    candidates = (scores.unsqueeze(2) + log_probs.view(active, width, vocab)).view(active, -1)
    expected, index = candidates.topk(min(beam_size, width * vocab), dim=1)
    assert torch.equal(top, expected)  # random scores: no ties among the finite ones
    finite = expected.isfinite()
    first_row = torch.arange(active).unsqueeze(1) * width
    assert torch.equal(rows[finite], (first_row + index // vocab)[finite])
    assert torch.equal(tokens[finite], (index % vocab)[finite])
    assert torch.equal(log_probs[rows, tokens] + scores.view(-1)[rows], top)
    assert torch.equal(rows // width, torch.arange(active).unsqueeze(1).expand_as(rows))
    assert bool((tokens < vocab).all())


def test_beam_with_a_large_vocabulary_matches_the_plain_top_k(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    model = MarkovModel(sentences=3, positions=8, vocab=512, seed=4, eos_bias=1.0)
    limits = [8, 2, 6]
    monkeypatch.setattr(search, "PLAIN_TOPK_ROW", 0)  # the two-stage top-k at every step
    blocked = run_beam(model, [0, 1, 2], limits, beam_size=5, nbest=3, alpha=1.0)
    monkeypatch.setattr(search, "_block_size", lambda vocab: 0)
    plain = run_beam(model, [0, 1, 2], limits, beam_size=5, nbest=3, alpha=1.0)
    assert [[h.tokens for h in n] for n in blocked] == [[h.tokens for h in n] for n in plain]
    assert [[h.score for h in n] for n in blocked] == [[h.score for h in n] for n in plain]
    assert all(len(n) == 3 for n in blocked)


def test_early_stop_takes_the_first_ending_best_extension() -> None:
    # Step 2's best extension is [2] + EOS (raw -1.0): early stop returns it, while the exact
    # search goes on to [3, 4], whose raw -1.1 is better per length with alpha = 1.
    model = PrefixModel(LENGTH_CASE)
    run = lambda early: beam_search(  # noqa: E731
        model.step, model.reorder, [()], 1, BOS, EOS, torch.tensor([10]),
        beam_size=3, alpha=1.0, early_stop=early,
    )  # fmt: skip
    ((early,),), ((exact,),) = run(True), run(False)
    assert early.tokens == [2] and exact.tokens == [3, 4]
    assert early.score < exact.score


def test_early_stop_without_length_penalty_is_exact_and_no_slower() -> None:
    # With alpha = 0 a score can only fall, so once the best extension ends nothing can beat
    # it: early stop must give the exact 1-best with no more steps.
    for seed in range(4):
        exact_model, early_model = MarkovModel(seed=seed), MarkovModel(seed=seed)
        exact = run_beam(exact_model, list(range(5)), LIMITS, beam_size=4, alpha=0.0)
        early = run_beam(
            early_model, list(range(5)), LIMITS, beam_size=4, alpha=0.0, early_stop=True
        )
        assert [(h.tokens, h.score) for (h,) in early] == [(h.tokens, h.score) for (h,) in exact]
        assert sum(early_model.rows) <= sum(exact_model.rows)


@pytest.mark.parametrize("alpha", [0.6, 1.0])
def test_early_stop_fills_the_n_best_and_spends_fewer_rows(alpha: float) -> None:
    rows = {}
    for early in (False, True):
        model = MarkovModel(seed=6, eos_bias=1.0)
        results = run_beam(
            model, list(range(5)), LIMITS, beam_size=4, nbest=2, alpha=alpha, early_stop=early
        )
        for nbest, limit in zip(results, LIMITS, strict=True):
            assert len(nbest) == (2 if limit else 1)
            assert all(len(h.tokens) <= limit for h in nbest)
            scores = [h.score for h in nbest]
            assert scores == sorted(scores, reverse=True)
        rows[early] = sum(model.rows)
    assert rows[True] <= rows[False]


# [2] ends after it with raw -0.55; [3] * 8 has the worse raw -1.0 but wins per length with
# alpha = 1: -1.0 / lp(9) = -0.429 against -0.55 / lp(2) = -0.471.
LONG_WINNER = {
    (): {2: math.exp(-0.55), 3: math.exp(-1.0), 5: 1 - math.exp(-0.55) - math.exp(-1.0)},
    **{(3,) * k: {3: 1.0} for k in range(1, 8)},
}


@pytest.mark.parametrize("lookahead", [0, 3, 4, 5, None])
def test_lookahead_stops_before_a_winner_further_away_than_it_looks(
    lookahead: int | None,
) -> None:
    model = PrefixModel(LONG_WINNER)
    ((best,),) = beam_search(
        model.step, model.reorder, [()], 1, BOS, EOS, torch.tensor([20]),
        beam_size=2, alpha=1.0, lookahead=lookahead,
    )  # fmt: skip
    short, long = -0.55 / length_penalty(2, 1.0), -1.0 / length_penalty(9, 1.0)
    assert long > short  # the long one is the exact search's winner
    # [2] ends at step 2, when [3, 3] is live: the bound lets it end after 3 + lookahead scored
    # steps, and its raw -1.0 beats [2] from 8 scored steps on (-1.0 / lp(7) = -0.5 does not).
    assert -1.0 / length_penalty(8, 1.0) > short > -1.0 / length_penalty(7, 1.0)
    found_long = lookahead is None or 3 + lookahead >= 8
    assert best.tokens == ([3] * 8 if found_long else [2])
    assert best.score == pytest.approx(long if found_long else short)


@pytest.mark.parametrize("alpha", [0.6, 1.0, 2.0])
def test_lookahead_past_every_limit_is_the_exhaustive_beam_and_a_short_one_costs_fewer_rows(
    alpha: float,
) -> None:
    rows = {}
    for lookahead in (None, max(LIMITS), 0):
        model = MarkovModel(seed=0, eos_bias=-1.0)
        results = run_beam(
            model, list(range(5)), LIMITS, beam_size=4, nbest=3, alpha=alpha, lookahead=lookahead
        )
        rows[lookahead] = sum(model.rows)
        if lookahead is None or lookahead == max(LIMITS):
            for sentence, (nbest, limit) in enumerate(zip(results, LIMITS, strict=True)):
                expected = reference_beam(model, sentence, limit, beam_size=4, alpha=alpha)[:3]
                assert [h.tokens for h in nbest] == [tokens for tokens, _ in expected]
    assert rows[max(LIMITS)] == rows[None]
    assert rows[0] < rows[None]


def test_lookahead_without_length_penalty_is_the_exact_search() -> None:
    for seed in range(3):
        runs = [
            run_beam(MarkovModel(seed=seed), list(range(5)), LIMITS, beam_size=4, nbest=2,
                     alpha=0.0, lookahead=lookahead)
            for lookahead in (None, 0)
        ]  # fmt: skip
        exact, near = ([[(h.tokens, h.score) for h in n] for n in run] for run in runs)
        assert near == exact


def test_n_best_is_sorted_distinct_and_led_by_the_one_best() -> None:
    model = MarkovModel(seed=3)
    five = run_beam(model, list(range(5)), LIMITS, beam_size=5, nbest=5)
    one = run_beam(model, list(range(5)), LIMITS, beam_size=5, nbest=1)
    for nbest, (best,), limit in zip(five, one, LIMITS, strict=True):
        scores = [h.score for h in nbest]
        assert scores == sorted(scores, reverse=True)
        assert len({tuple(h.tokens) for h in nbest}) == len(nbest) == (5 if limit else 1)
        assert (best.tokens, best.score) == (nbest[0].tokens, nbest[0].score)


def test_settled_sentences_leave_the_beam() -> None:
    model = MarkovModel(sentences=2, seed=4)
    model.log_probs[0] = -30.0  # sentence 0 is sure to end at once
    model.log_probs[0, ..., EOS] = 0.0
    results = run_beam(model, [0, 1], [8, 8], beam_size=3)
    assert results[0][0].tokens == []
    assert model.rows[0] == 2  # one row per sentence before the beam opens
    assert all(rows <= 3 for rows in model.rows[1:])  # sentence 0 is gone after one step


@pytest.mark.parametrize("search", ["greedy", "beam"])
def test_max_lengths_are_respected(search: str) -> None:
    model = MarkovModel(seed=5, eos_bias=-20.0)  # EOS only when forced
    if search == "greedy":
        results = [[h] for h in run_greedy(model, list(range(5)), LIMITS)]
    else:
        results = run_beam(model, list(range(5)), LIMITS, beam_size=3, nbest=2)
    for nbest, limit in zip(results, LIMITS, strict=True):
        for hypothesis in nbest:
            assert len(hypothesis.tokens) == limit
            assert hypothesis.attention.shape == (limit + 1, 4)
            assert math.isfinite(hypothesis.log_prob)


def test_results_do_not_depend_on_batch_composition() -> None:
    model = MarkovModel(seed=6)
    batched = run_beam(model, list(range(5)), LIMITS, beam_size=4, nbest=2, alpha=0.6)
    greedy = run_greedy(model, list(range(5)), LIMITS)
    for sentence, limit in enumerate(LIMITS):
        (alone,) = run_beam(model, [sentence], [limit], beam_size=4, nbest=2, alpha=0.6)
        (greedy_alone,) = run_greedy(model, [sentence], [limit])
        for a, b in zip(
            [*alone, greedy_alone], [*batched[sentence], greedy[sentence]], strict=True
        ):
            assert (a.tokens, a.score, a.log_prob) == (b.tokens, b.score, b.log_prob)
            assert torch.equal(a.attention, b.attention)


def test_attention_rows_follow_the_tokens() -> None:
    model = MarkovModel(seed=7)
    beams = run_beam(model, list(range(5)), LIMITS, beam_size=3, nbest=3)
    greedy = run_greedy(model, list(range(5)), LIMITS)
    for sentence in range(5):
        for hypothesis in [*beams[sentence], greedy[sentence]]:
            expected = model.attention_for(sentence, hypothesis.tokens)
            assert hypothesis.attention.device.type == "cpu"
            assert torch.equal(hypothesis.attention, expected)


def test_without_attention_hypotheses_carry_none() -> None:
    model = MarkovModel(seed=8, attention=False)
    assert all(h.attention is None for h in run_greedy(model, list(range(5)), LIMITS))
    assert all(h.attention is None for n in run_beam(model, [0, 1], [4, 6]) for h in n)


def test_first_step_sees_bos_and_an_empty_batch_needs_no_step() -> None:
    seen: list[torch.Tensor] = []
    model = MarkovModel(seed=9)

    def step(prev, state):  # noqa: ANN001, ANN202
        seen.append(prev)
        return model.step(prev, state)

    beam_search(step, model.reorder, model.start([0, 1]), 2, BOS, EOS, torch.tensor([3, 3]))
    assert seen[0].tolist() == [BOS, BOS]
    calls, nothing = len(seen), torch.zeros(0, dtype=torch.long)
    assert beam_search(step, model.reorder, None, 0, BOS, EOS, nothing) == []
    assert greedy_search(step, model.reorder, None, 0, BOS, EOS, nothing) == []
    assert len(seen) == calls


@pytest.mark.parametrize(("beam_size", "nbest"), [(0, 1), (2, 3), (3, 0)])
def test_impossible_beam_options_are_config_errors(beam_size: int, nbest: int) -> None:
    model = MarkovModel()
    with pytest.raises(ConfigError, match="--beam must be|--nbest must be"):
        run_beam(model, [0], [3], beam_size=beam_size, nbest=nbest)


def _join_markov(state, other):
    return torch.cat([state[0], other[0]]), torch.cat([state[1], other[1]])


@pytest.mark.parametrize(
    ("early_stop", "lookahead"), [(False, None), (True, None), (False, 0), (False, 2)]
)
@pytest.mark.parametrize(("beam_size", "nbest", "alpha"), [(1, 1, 1.0), (3, 2, 0.6), (5, 5, 1.0)])
def test_sentences_joining_a_running_search_get_their_own_n_best(
    beam_size: int, nbest: int, alpha: float, early_stop: bool, lookahead: int | None
) -> None:
    model = MarkovModel(sentences=8, seed=3)
    limits = [3, 7, 0, 10, 5, 9, 2, 11]
    options = {"beam_size": beam_size, "nbest": nbest, "alpha": alpha, "early_stop": early_stop}
    options["lookahead"] = lookahead
    alone = [run_beam(model, [s], [limits[s]], **options)[0] for s in range(8)]
    running = search.BeamSearch(model.step, model.reorder, BOS, EOS, **options, join=_join_markov)
    joining = {0: [0, 1], 1: [2], 3: [3, 4, 5], 4: [6], 9: [7]}  # step -> sentences added then
    ids: dict[int, int] = {}
    results: dict[int, list[Hypothesis]] = {}
    steps = 0
    while running.active or steps <= max(joining):
        if added := joining.get(steps):
            given = running.add(model.start(added), torch.tensor([limits[s] for s in added]))
            ids.update(zip(given, added, strict=True))
        results.update((ids[i], nbest_list) for i, nbest_list in running.step())
        steps += 1
    assert sorted(results) == list(range(8))
    for sentence in range(8):
        got, want = results[sentence], alone[sentence]
        assert [(h.tokens, h.score, h.log_prob) for h in got] == [
            (h.tokens, h.score, h.log_prob) for h in want
        ]
        assert all(torch.equal(g.attention, w.attention) for g, w in zip(got, want, strict=True))


def test_a_search_with_active_sentences_keeps_its_rows_per_sentence_when_more_join() -> None:
    model = MarkovModel(seed=4, eos_bias=-30.0)  # nothing ends before its limit
    running = search.BeamSearch(model.step, model.reorder, BOS, EOS, beam_size=4, join=_join_markov)
    running.add(model.start([0]), torch.tensor([10]))
    running.step()
    rows_before = model.rows[-1]
    running.add(model.start([1, 2]), torch.tensor([10, 10]))
    running.step()
    assert rows_before == 1 and model.rows[-1] == 3 * 4  # the newcomers start with 4 rows each


def test_sentences_that_go_on_keep_their_places_and_fill_those_of_the_ended():
    settled = torch.tensor([False, True, False, True, False, False])
    assert search._holes_filled(settled).tolist() == [0, 4, 2, 5]
    assert search._holes_filled(torch.tensor([False, False, True])).tolist() == [0, 1]
    assert search._holes_filled(torch.tensor([True, True])).tolist() == []
