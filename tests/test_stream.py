"""`Translator.stream`: lines joining a running search get `translate_chunk`'s translations."""

from __future__ import annotations

import numpy as np
import pytest

from nmt_cli import decoding, search
from nmt_cli.decoding import LOOKAHEAD
from nmt_cli.translator import SearchOptions, Translator

WORDS = "apple river stone cloud green quick small house light water bird tree night sun".split()
LINES = [" ".join(WORDS[(i * 5 + k) % len(WORDS)] for k in range(1 + i % 7)) for i in range(30)]
LINES[7] = ""  # an empty line comes back empty without a search


def _streamed(translator, beam: int, align: bool, schedule: list[int], **options) -> list:
    """Translate LINES through one stream, adding schedule[k] more lines before step k."""
    stream = translator.stream(SearchOptions(beam_size=beam, **options), with_attention=align)
    results, todo, k = [None] * len(LINES), list(enumerate(LINES)), 0
    while todo or stream.active:
        count = schedule[k % len(schedule)]
        stream.add(todo[:count])
        todo = todo[count:]
        for index, translation in stream.step():
            results[index] = translation
        k += 1
    return results


@pytest.mark.parametrize(("beam", "align"), [(5, True), (1, False), (3, False)])
def test_lines_joining_a_running_search_get_the_translations_of_a_batch(
    toy_model_dir, beam: int, align: bool
):
    translator = Translator.load(toy_model_dir, device="cpu")
    want = translator.translate_chunk(LINES, SearchOptions(beam_size=beam), with_attention=align)
    got = _streamed(translator, beam, align, schedule=[3, 0, 1, 0, 0, 5])
    assert [t.text for t in got] == [t.text for t in want]
    assert [t.score for t in got] == pytest.approx([t.score for t in want], abs=1e-4)
    for mine, theirs in zip(got, want, strict=True):
        assert mine.source == theirs.source and mine.pieces == theirs.pieces
        if align and theirs.attention is not None:
            assert mine.attention.shape == theirs.attention.shape
            np.testing.assert_allclose(mine.attention, theirs.attention, atol=1e-4)
        else:
            assert mine.attention is None


def test_a_stream_of_an_ensemble_of_two_copies_equals_the_single_model(toy_model_dir):
    single = Translator.load(toy_model_dir, device="cpu")
    pair = Translator.load(toy_model_dir, device="cpu", partners=[toy_model_dir])
    want = single.translate_chunk(LINES, SearchOptions(beam_size=4))
    got = _streamed(pair, 4, False, schedule=[2, 1, 0])
    assert [t.text for t in got] == [t.text for t in want]


def test_greedy_scores_use_the_length_penalty_asked_for(toy_model_dir):
    translator = Translator.load(toy_model_dir, device="cpu")
    options = SearchOptions(beam_size=1, alpha=0.6)
    want = translator.translate_chunk(LINES, options)
    stream = translator.stream(options)
    stream.add(list(enumerate(LINES)))
    got = {}
    while stream.active:
        got.update(stream.step())
    assert [got[i].score for i in range(len(LINES))] == pytest.approx([t.score for t in want])
    default = translator.translate_chunk(LINES[:3], SearchOptions(beam_size=1))
    assert [t.score for t in default] != pytest.approx([t.score for t in want[:3]])


@pytest.mark.parametrize(
    ("options", "lookahead"),
    [({}, LOOKAHEAD), ({"exact_stop": True}, None), ({"early_stop": True}, None)],
)
def test_every_beam_search_gets_the_stopping_bound_the_options_ask_for(
    toy_model_dir, monkeypatch: pytest.MonkeyPatch, options: dict, lookahead: int | None
):
    """Batched translation and the stream alike: the lookahead by default, the exact bound
    with --exact-stop, and with --early-stop (the peers' rule beside the exact bound)."""
    seen = []

    class Spy(search.BeamSearch):
        def __init__(self, *args, **kwargs):
            super().__init__(*args, **kwargs)
            seen.append(self.lookahead)

    monkeypatch.setattr(search, "BeamSearch", Spy)
    monkeypatch.setattr(decoding, "BeamSearch", Spy)
    translator = Translator.load(toy_model_dir, device="cpu")
    wanted = SearchOptions(beam_size=3, **options).check()
    batched = translator.translate_chunk(LINES[:4], wanted)
    assert seen == [lookahead]
    streamed = _streamed(translator, 3, False, schedule=[4], **options)[:4]
    assert seen == [lookahead, lookahead]
    assert [t.text for t in streamed] == [t.text for t in batched]
