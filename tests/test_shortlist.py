"""Lexical shortlists: the IBM Model 1 table, the per-sentence candidate sets, and translation
over them."""

from __future__ import annotations

import json

import numpy as np
import pytest
import torch
from cli_runner import invoke

from nmt_cli.checkpoint import SHORTLIST_FILE
from nmt_cli.errors import ArtifactError
from nmt_cli.shortlist import Shortlist, build_shortlist, lexical_table
from nmt_cli.translator import SearchOptions, Translator

# Source ids 4, 5, 6 translate as 14, 15, 16; 20 is a target word with no source (an article).
SRC = [np.array(s) for s in ([4, 5], [4, 6], [5, 6], [4], [6, 5, 4])]
TGT = [np.array(t) for t in ([20, 14, 15], [20, 14, 16], [15, 16], [14], [16, 20, 15, 14])]


def table_of(src, tgt):
    probs, pair_src, pair_tgt = lexical_table(src, tgt, src_vocab=10, tgt_vocab=30)
    return {(int(s), int(t)): p for p, s, t in zip(probs, pair_src, pair_tgt, strict=True)}


def test_ibm1_puts_each_source_words_mass_on_its_translation():
    table = table_of(SRC, TGT)
    for s in (4, 5, 6):
        best = max((p, t) for (source, t), p in table.items() if source == s)[1]
        assert best == s + 10
    for s in (4, 5, 6, 10):  # 10 is the NULL word: probabilities sum to one per source
        assert sum(p for (source, _), p in table.items() if source == s) == pytest.approx(1.0)
    # the word without a counterpart ranks below each source word's own translation
    assert all(table[s, 20] < table[s, s + 10] for s in (4, 5, 6))


def test_a_corpus_over_the_pair_budget_is_read_at_an_even_stride():
    # token pairs per sentence, NULL included: 9, 9, 6, 2, 16 (42 in all)
    _, pair_src, pair_tgt = lexical_table(SRC, TGT, 10, 30, max_pairs=20)
    # stride ceil(42 / 20) = 3: sentences 0 and 3, not 0 and 1 as reading from the start would
    assert set(pair_tgt.tolist()) == {14, 15, 20} and 16 not in pair_tgt
    assert set(pair_src.tolist()) == {4, 5, 10}
    assert len(lexical_table([], [], 10, 30)[0]) == 0


def test_shortlist_keeps_the_best_translations_and_the_frequent_and_special_ids():
    shortlist = build_shortlist(SRC, TGT, 10, 30, specials=(0, 1, 2, 3), per_source=2, frequent=1)
    assert shortlist.candidates.shape == (10, 2)
    assert shortlist.candidates[4, 0] == 14 and shortlist.candidates[6, 0] == 16
    assert (shortlist.candidates[7] == -1).all()  # a source id never seen: no candidates
    # 14, 15, 16 and 20 all occur 4 times; the first of the most frequent is kept
    assert shortlist.always.tolist() == [0, 1, 2, 3, 14]
    ids = shortlist.ids_for([np.array([6]), np.array([9999])])  # an id outside the table: ignored
    assert ids.tolist() == sorted({0, 1, 2, 3, 14, *shortlist.candidates[6].tolist()})
    assert shortlist.ids_for([]).tolist() == [0, 1, 2, 3, 14]


def test_shortlist_round_trip_and_clear_errors(tmp_path):
    shortlist = build_shortlist(SRC, TGT, 10, 30, specials=(0, 1, 2, 3))
    path = tmp_path / SHORTLIST_FILE
    shortlist.save(path)
    loaded = Shortlist.load(path)
    np.testing.assert_array_equal(loaded.candidates, shortlist.candidates)
    np.testing.assert_array_equal(loaded.always, shortlist.always)
    with pytest.raises(ArtifactError, match="nmt shortlist"):
        Shortlist.load(tmp_path / "missing" / SHORTLIST_FILE)
    whole = path.read_bytes()
    damaged = {
        "not numpy": b"not a numpy file",
        "empty": b"",  # was "Aborted." (an EOFError reached click)
        "truncated": whole[: len(whole) // 2],  # was a BadZipFile traceback
        "random": bytes(range(256)) * 20,  # was numpy's advice about allow_pickle
    }
    for data in damaged.values():
        path.write_bytes(data)
        with pytest.raises(ArtifactError, match="damaged or not a shortlist: write it again"):
            Shortlist.load(path)


LINES = ["apple river", "green bird sun", "sun", "river apple green bird", "bird"]


def test_train_writes_a_shortlist_of_the_model_vocabulary(toy_model_dir):
    translator = Translator.load(toy_model_dir, shortlist=True)
    vocab = translator.model.config.tgt_vocab_size
    assert translator.shortlist.candidates.shape[0] == translator.model.config.src_vocab_size
    assert translator.shortlist.candidates.max() < vocab
    assert {0, 1, 2, 3} <= set(translator.shortlist.always.tolist())


@pytest.mark.parametrize("beam", [1, 3])
def test_a_shortlist_of_the_whole_vocabulary_changes_nothing(toy_model_dir, beam):
    plain = Translator.load(toy_model_dir)
    full = Translator.load(toy_model_dir)
    vocab = full.model.config.tgt_vocab_size
    full.shortlist = Shortlist(np.full((vocab, 1), -1, dtype=np.int32), np.arange(vocab))
    options = SearchOptions(beam_size=beam, nbest=beam)
    pairs = zip(
        plain.translate_lines(LINES, options), full.translate_lines(LINES, options), strict=True
    )
    for a, b in pairs:
        assert a.text == b.text
        assert [text for text, _ in a.alternatives] == [text for text, _ in b.alternatives]
        assert a.score == pytest.approx(b.score, abs=1e-5)


def test_greedy_over_a_shortlist_holding_its_choices_picks_the_same_tokens(toy_model_dir):
    # Columns are no longer ids once some ids are left out: a wrong mapping shows here.
    plain = Translator.load(toy_model_dir)
    options = SearchOptions(beam_size=1)
    expected = list(plain.translate_lines(LINES, options))
    used = {t for tr in expected for t in plain.tgt_tokenizer.encode(tr.text)}
    vocab = plain.model.config.tgt_vocab_size
    kept = np.array([i for i in range(vocab) if i in used or i < 4 or i % 3], dtype=np.int32)
    assert len(kept) < vocab - 5
    plain.shortlist = Shortlist(np.full((vocab, 1), -1, dtype=np.int32), kept)
    got = list(plain.translate_lines(LINES, options))
    assert [t.text for t in got] == [t.text for t in expected]
    assert all(
        b.score >= a.score - 1e-6 for a, b in zip(expected, got, strict=True)
    )  # renormalised


def test_a_sentence_is_translated_over_its_own_shortlist_whatever_its_batch(toy_model_dir):
    translator = Translator.load(toy_model_dir, shortlist=True)
    by_batch = {
        size: [t.text for t in translator.translate_lines(LINES, SearchOptions(batch_size=size))]
        for size in (1, 2, 64)
    }
    assert by_batch[1] == by_batch[2] == by_batch[64]
    shortlist = translator.shortlist
    translations = translator.translate_lines(LINES, SearchOptions())
    for line, translation in zip(LINES, translations, strict=True):
        own = set(shortlist.ids_for([np.asarray(translator.src_tokenizer.encode(line))]).tolist())
        produced = translator.tgt_tokenizer.encode(translation.text)
        assert set(produced) <= own | {1}  # the tokenizer may map an odd character to UNK


@pytest.mark.parametrize(("beam", "nbest"), [(1, 1), (3, 3)])
def test_each_sentence_keeps_to_its_own_small_shortlist_in_any_batch(toy_model_dir, beam, nbest):
    from nmt_cli.decoding import decode_ids

    translator = Translator.load(toy_model_dir)
    src_vocab = translator.model.config.src_vocab_size
    tgt_vocab = translator.model.config.tgt_vocab_size
    rng = np.random.default_rng(1)
    candidates = np.stack(
        [rng.choice(np.arange(4, tgt_vocab), 6, replace=False) for _ in range(src_vocab)]
    ).astype(np.int32)
    shortlist = Shortlist(candidates, np.arange(4, dtype=np.int32))  # specials only
    lines = [*LINES, "sun sun sun sun sun sun", "apple"]
    sources = [np.asarray(translator.src_tokenizer.encode(line)) for line in lines]
    own = [set(shortlist.ids_for([source]).tolist()) for source in sources]
    assert len(set(map(frozenset, own))) > 1  # the sentences' lists differ
    results = {}
    for size in (1, 2, 64):
        options = SearchOptions(beam_size=beam, nbest=nbest, batch_size=size)
        nbests = decode_ids(translator.model, sources, translator.device, options, shortlist)
        results[size] = [[(h.tokens, round(h.score, 4)) for h in nbest] for nbest in nbests]
        for allowed, nbest_list in zip(own, nbests, strict=True):
            assert all(set(h.tokens) <= allowed for h in nbest_list)
    assert results[1] == results[2] == results[64]


def test_a_shortlist_that_does_not_fit_the_model_is_refused(toy_model_dir, tmp_path):
    model = tmp_path / "model"
    model.mkdir()
    for name in ("model.pt", "config.json", "meta.json", "src.model", "tgt.model"):
        (model / name).write_bytes((toy_model_dir / name).read_bytes())
    vocab = Translator.load(toy_model_dir).model.config.tgt_vocab_size
    for wrong in (
        Shortlist(np.zeros((3, 2), dtype=np.int32), np.arange(4)),  # other source vocabulary
        Shortlist(np.full((vocab, 2), vocab + 5, dtype=np.int32), np.arange(4)),  # ids too big
    ):
        wrong.save(model / SHORTLIST_FILE)
        result = invoke("translate", "-m", model, "--shortlist", input="apple\n")
        assert result.exit_code == 3 and "does not fit the model" in result.stderr
        assert "Traceback" not in result.output


def _output_rows(generator, ids):
    from nmt_cli.model.seq2seq import OutputLayer

    return OutputLayer.of(generator).rows(ids)


@pytest.mark.filterwarnings("ignore::DeprecationWarning", "ignore::UserWarning")
def test_a_per_channel_int8_layer_keeps_its_int8_values():
    from torch.ao.quantization import per_channel_dynamic_qconfig, quantize_dynamic

    torch.manual_seed(0)
    layer = torch.nn.Sequential(torch.nn.Linear(16, 40))
    layer[0].weight.data[5] *= 0.01  # a row of small norm: one scale for all would blur it
    quantized = quantize_dynamic(layer, {torch.nn.Linear: per_channel_dynamic_qconfig})[0]
    ids = torch.tensor([1, 5, 9, 30])
    vectors = torch.randn(3, 16)
    torch.testing.assert_close(_output_rows(quantized, ids)(vectors), quantized(vectors)[:, ids])


def test_rows_of_the_output_layer_match_the_whole_layer_float_and_int8(toy_model_dir):
    float_model = Translator.load(toy_model_dir).model
    int8_model = Translator.load(toy_model_dir, quantize=True).model
    ids = torch.tensor([0, 3, 5, 7, 11])
    vectors = torch.randn(4, float_model.decoder.output_size)
    rows = _output_rows(int8_model.generator, ids)
    assert rows(vectors).shape == (4, 5)
    # the same int8 weights and the same input quantization as the whole layer's
    torch.testing.assert_close(rows(vectors), int8_model.generator(vectors)[:, ids])
    exact = float_model.generator(vectors)[:, ids]
    torch.testing.assert_close(_output_rows(float_model.generator, ids)(vectors), exact)


def test_translate_cli_with_shortlist(toy_model_dir, tmp_path):
    result = invoke("translate", "-m", toy_model_dir, "--shortlist", input="\n".join(LINES) + "\n")
    assert result.exit_code == 0, result.output
    assert len(result.stdout.splitlines()) == len(LINES)
    bare = tmp_path / "bare"
    bare.mkdir()
    for name in ("model.pt", "config.json", "meta.json", "src.model", "tgt.model"):
        (bare / name).write_bytes((toy_model_dir / name).read_bytes())
    result = invoke("translate", "-m", bare, "--shortlist", input="apple\n")
    assert result.exit_code == 3 and "nmt shortlist" in result.stderr
    assert "Traceback" not in result.output


def test_shortlist_command_writes_the_shortlist(toy_data_dir, toy_model_dir, tmp_path):
    target = tmp_path / "model"
    target.mkdir()
    for name in ("model.pt", "src.model", "tgt.model"):  # a model without its shortlist
        (target / name).write_bytes((toy_model_dir / name).read_bytes())
    result = invoke("shortlist", toy_data_dir, target)
    assert result.exit_code == 0, result.output
    assert "shortlist: it keeps 100% of the target pieces on 40 dev" in result.stderr  # checked
    record = json.loads((target / "meta.json").read_text())["shortlist"]
    assert record == json.loads((toy_model_dir / "meta.json").read_text())["shortlist"]
    written = Shortlist.load(target / SHORTLIST_FILE)
    original = Shortlist.load(toy_model_dir / SHORTLIST_FILE)
    np.testing.assert_array_equal(written.candidates, original.candidates)
    result = invoke("shortlist", toy_data_dir, tmp_path / "nope")
    assert result.exit_code == 3 and "does not exist" in result.stderr
    for other in (toy_data_dir, tmp_path):  # a data directory, a directory of anything
        before = sorted(p.name for p in other.iterdir())
        refused = invoke("shortlist", toy_data_dir, other)
        assert refused.exit_code == 3 and "nmt train" in refused.stderr, refused.stderr
        assert sorted(p.name for p in other.iterdir()) == before  # nothing written into it
    meta = toy_model_dir / "meta.json"
    (target / "meta.json").write_text(
        meta.read_text().replace('"data_fingerprint": "', '"data_fingerprint": "x')
    )
    result = invoke("shortlist", toy_data_dir, target)
    assert result.exit_code == 3 and "trained on other data" in result.stderr


def test_resume_keeps_the_shortlist_a_fresh_run_rewrites_it(toy_model_dir, toy_data_dir, tmp_path):
    import shutil

    model = tmp_path / "model"
    shutil.copytree(toy_model_dir, model)
    sentinel = Shortlist(np.full((3, 1), -1, dtype=np.int32), np.arange(4, dtype=np.int32))
    sentinel.save(model / SHORTLIST_FILE)
    step = json.loads((model / "meta.json").read_text())["step"]
    result = invoke("train", toy_data_dir, "-o", model, "--resume", "--max-steps", step + 1)
    assert result.exit_code == 0, result.output
    assert Shortlist.load(model / SHORTLIST_FILE).candidates.shape == (3, 1)  # untouched
    assert "the shortlist was not checked" in result.output  # and the model is saved
    assert "shortlist" not in json.loads((model / "meta.json").read_text())
    result = invoke("train", toy_data_dir, "-o", model, "--force", "--max-steps", 1)
    assert result.exit_code == 0, result.output
    assert "shortlist: checking it on 40 dev sentences" in result.output  # said before the check
    assert "too many to pay" in result.output  # the toy's 60 pieces: checked at the end
    rewritten = Shortlist.load(model / SHORTLIST_FILE)
    assert rewritten.candidates.shape[0] == Translator.load(model).model.config.src_vocab_size


def test_the_check_makes_the_shortlist_the_default_only_where_it_is_small_and_costs_no_bleu():
    from nmt_cli.validation import ShortlistCheck

    assert ShortlistCheck(26.47, 26.17, 0.04, 1000).default  # BLEU gained
    assert ShortlistCheck(26.17, 26.17, 0.04, 1000).default  # the same
    assert not ShortlistCheck(35.86, 35.92, 0.04, 1000).default  # lost 0.06: too close to tell
    assert not ShortlistCheck(90.61, 90.56, 0.29, 200).default  # keeps too much to pay
    assert not ShortlistCheck(None, None, 0.29, 200).default  # so much that nothing was translated


def test_a_shortlist_that_keeps_too_much_is_judged_without_translating(
    toy_model_dir, toy_data_dir, monkeypatch
):
    """The toy's shortlist keeps every piece of its small vocabulary: the verdict (no) needs no
    translation. Where a shortlist is small enough, the dev split is translated with and
    without it, and the BLEU decides."""
    from nmt_cli import validation
    from nmt_cli.data.datadir import load_data_dir

    loaded = Translator.load(toy_model_dir, shortlist=False)
    data = load_data_dir(toy_data_dir)
    shortlist = Shortlist.load(toy_model_dir / SHORTLIST_FILE)
    translated = []
    from nmt_cli import decoding  # (the check imports decode_ids from it when it runs)

    real = decoding.decode_ids

    def counting(*args, **kwargs):
        translated.append(1)
        return real(*args, **kwargs)

    monkeypatch.setattr(decoding, "decode_ids", counting)
    check = validation.check_shortlist(
        loaded.model, data, loaded.config.train, torch.device("cpu"), shortlist
    )
    assert check.kept > validation.SHORTLIST_MOST_KEPT and check.bleu is None
    assert not check.default and translated == []
    monkeypatch.setattr(validation, "SHORTLIST_MOST_KEPT", 1.0)
    check = validation.check_shortlist(
        loaded.model, data, loaded.config.train, torch.device("cpu"), shortlist
    )
    assert len(translated) == 2 and check.bleu is not None and check.without is not None
    assert check.default is (round(check.bleu, 4) >= round(check.without, 4))
    from nmt_cli.render.progress import shortlist_line

    assert "shortlist: beam-5 dev BLEU" in shortlist_line(check.record())


def _with_record(model, **fields) -> None:
    meta = json.loads((model / "meta.json").read_text())
    record = {**meta["shortlist"], **fields}
    (model / "meta.json").write_text(json.dumps({**meta, "shortlist": record}))


def test_align_translates_source_only_input_as_translate_align_does(toy_model_dir, tmp_path):
    """With the shortlist the model's training chose (or --no-shortlist), `nmt align` links
    the translation that `nmt translate --align` prints (it searched without the shortlist);
    sentence pairs are aligned as given, so --shortlist with them is refused."""
    import shutil

    meta = json.loads((toy_model_dir / "meta.json").read_text())
    model = tmp_path / "model"
    shutil.copytree(toy_model_dir, model)
    _with_record(model, default=True, step=meta["step"])
    text = "\n".join(LINES) + "\n"
    for flags in ((), ("--no-shortlist",), ("--shortlist",)):
        translated = invoke("translate", "-m", model, "--json", *flags, input=text)
        aligned = invoke("align", "-m", model, "--json", "--view", "none", *flags, input=text)
        assert translated.exit_code == aligned.exit_code == 0, aligned.output
        assert [json.loads(line)["translation"] for line in translated.stdout.splitlines()] == [
            json.loads(line)["target"] for line in aligned.stdout.splitlines()
        ], flags
    (model / "shortlist.npz").write_bytes(b"junk")  # the default's shortlist is read
    damaged = invoke("align", "-m", model, "--view", "none", input=text)
    assert damaged.exit_code == 3 and "damaged or not a shortlist" in damaged.stderr
    pairs = f"{LINES[0]} ||| {LINES[0]}\n"
    assert invoke("align", "-m", model, "--view", "none", input=pairs).exit_code == 0  # unread
    src = tmp_path / "a.src"
    src.write_text(LINES[0] + "\n", encoding="utf-8")
    refused = invoke("align", "-m", model, "--src", src, "--tgt", src, "--no-shortlist")
    assert refused.exit_code == 2 and "drop --no-shortlist" in refused.stderr


def test_translate_uses_the_shortlist_by_default_where_training_found_it_costs_nothing(
    toy_model_dir, tmp_path
):
    import shutil

    meta = json.loads((toy_model_dir / "meta.json").read_text())
    record = meta["shortlist"]  # the toy model's own check, written by `nmt train`
    assert record["step"] == meta["step"] and record["sentences"] > 0
    assert 0 < record["kept"] <= 1 and record["beam"] == 5
    model = tmp_path / "model"
    shutil.copytree(toy_model_dir, model)
    for default, step, used in ((True, meta["step"], True), (False, meta["step"], False)):
        _with_record(model, default=default, step=step)
        assert (Translator.load(model, shortlist=None).shortlist is not None) is used
    for step in (meta["step"] + 1, None):  # the check of other weights, or of unknown ones
        _with_record(model, default=True, step=step)
        assert Translator.load(model, shortlist=None).shortlist is None
    _with_record(model, default=True, step=meta["step"])
    assert Translator.load(model, shortlist=False).shortlist is None  # --no-shortlist
    assert Translator.load(model, shortlist=None, partners=[model]).shortlist is None  # ensemble
    text = "\n".join(LINES) + "\n"
    default = invoke("translate", "-m", model, input=text)
    told = invoke("translate", "-m", model, "--shortlist", input=text)
    exact = invoke("translate", "-m", model, "--no-shortlist", input=text)
    assert default.exit_code == told.exit_code == exact.exit_code == 0, default.output
    assert default.stdout == told.stdout
    assert (
        exact.stdout
        == invoke("translate", "-m", toy_model_dir, "--no-shortlist", input=text).stdout
    )
    (model / "shortlist.npz").write_bytes(b"junk")  # damaged: refused, naming the way out
    damaged = invoke("translate", "-m", model, input=text)
    assert damaged.exit_code == 3 and damaged.stdout == ""
    assert "damaged or not a shortlist" in damaged.stderr and "--no-shortlist" in damaged.stderr
    (model / "shortlist.npz").unlink()  # removed by hand: translate as without a record
    assert invoke("translate", "-m", model, input=text).stdout == exact.stdout
    shutil.copy(toy_model_dir / "shortlist.npz", model / "shortlist.npz")
    (model / "meta.json").write_text("garbage", encoding="utf-8")  # its record unreadable
    refused = invoke("translate", "-m", model, input=text)
    assert refused.exit_code == 3 and refused.stdout == ""
    assert "meta.json is damaged" in refused.stderr and "--no-shortlist" in refused.stderr
    assert invoke("translate", "-m", model, "--no-shortlist", input=text).stdout == exact.stdout
    (model / "shortlist.npz").unlink()  # no shortlist to choose: meta.json is not read
    assert invoke("translate", "-m", model, input=text).stdout == exact.stdout
    (model / "meta.json").unlink()  # no record at all: the exact search
    assert invoke("translate", "-m", model, input=text).stdout == exact.stdout


def test_a_check_stopped_by_ctrl_c_leaves_the_trained_model_and_says_so(
    toy_data_dir, tmp_path, monkeypatch
):
    import nmt_cli.training_run as training_run

    def interrupted(*args, **kwargs):
        raise KeyboardInterrupt

    monkeypatch.setattr(training_run, "record_shortlist_check", interrupted)
    model = tmp_path / "model"
    result = invoke("train", toy_data_dir, "-o", model, "--max-steps", 2, "--threads", 1)
    assert result.exit_code == 0, result.output
    assert "the shortlist was not checked (interrupted)" in result.output
    assert (model / "model.pt").is_file() and "Traceback" not in result.output
