"""The link prior: the rates of a guided model's training links, kept beside the model and mixed
into its attention by `nmt align`."""

from __future__ import annotations

import json

import numpy as np
import pytest
from cli_runner import invoke
from test_alignment import _Corpus  # a stand-in translator with fixed attention per pair

from nmt_cli import checkpoint
from nmt_cli.aligner import LINK_PRIOR_SHARE, AlignOptions, align_pairs
from nmt_cli.alignment import LinkRates
from nmt_cli.errors import ArtifactError


def _rates() -> LinkRates:
    rates = LinkRates(smoothing=1.0)
    for _ in range(3):
        rates.add(["a", "c"], ["x", "z"], {(0, 0), (1, 1)})
    rates.add(["a", "b"], ["x", "y"], {(1, 1)})
    return rates


def test_link_rates_keep_their_counts_through_the_model_directory(tmp_path):
    rates = _rates()
    checkpoint.save_link_rates(tmp_path, rates)
    loaded = checkpoint.load_link_rates(tmp_path)
    assert list(loaded.counts()) == list(rates.counts())
    # a-x: linked 3 times in 4 meetings; b-y once in one; b-x never linked
    assert loaded.rate("a", "x") == pytest.approx(3 / (4 + loaded.smoothing))
    assert loaded.rate("b", "y") == pytest.approx(1 / (1 + loaded.smoothing))
    assert loaded.rate("b", "x") == 0.0
    assert checkpoint.load_link_rates(tmp_path / "elsewhere") is None


def test_a_damaged_link_rates_file_names_its_line(tmp_path):
    checkpoint.save_link_rates(tmp_path, _rates())
    path = tmp_path / checkpoint.LINK_RATES_FILE
    lines = path.read_text(encoding="utf-8").splitlines()
    lines.insert(1, "a\tx\tmany\t3")
    path.write_text("\n".join(lines) + "\n", encoding="utf-8")
    with pytest.raises(ArtifactError, match=r"link_rates.tsv line 2: expected"):
        checkpoint.load_link_rates(tmp_path)


def test_an_empty_or_cut_short_link_rates_file_is_refused(tmp_path):
    checkpoint.save_link_rates(tmp_path, _rates())
    path = tmp_path / checkpoint.LINK_RATES_FILE
    whole = path.read_text(encoding="utf-8").splitlines(keepends=True)
    path.write_text("".join(whole[:-1]), encoding="utf-8")  # cut at a line's end
    with pytest.raises(ArtifactError, match=r"holds 2 word pairs of the 3 it names"):
        checkpoint.load_link_rates(tmp_path)
    path.write_text("", encoding="utf-8")
    with pytest.raises(ArtifactError, match=r"holds 0 word pairs: the file is damaged"):
        checkpoint.load_link_rates(tmp_path)
    path.write_text("".join(whole[1:]), encoding="utf-8")  # as nmt wrote it before the header
    assert list(checkpoint.load_link_rates(tmp_path).counts()) == list(_rates().counts())


def test_the_link_prior_moves_an_uncertain_link_in_one_pass():
    # x leans to b (0.6), but the training links joined a with x three times in four meetings
    model = _Corpus({("a b", "x y"): [[0.4, 0.6], [0.3, 0.7], [0.5, 0.5]]})
    pairs = [("a b", "x y")]
    (plain,) = align_pairs(model, pairs, AlignOptions())
    assert plain.links == {(1, 0), (1, 1)}
    options = AlignOptions(link_prior=0.5)
    (mixed,) = align_pairs(model, pairs, options, rates=_rates())
    # rates (smoothing 1): a-x 3 / (4 + 1) = 0.6, b-y 1 / (1 + 1) = 0.5, b-x and a-y never
    # linked (the floor, 0.1). x: a √(0.4·0.7) = 0.53 against b √(0.6·0.1) = 0.24;
    # y: b √(0.7·0.6) = 0.65 against a √(0.3·0.1) = 0.17
    assert mixed.links == {(0, 0), (1, 1)}
    np.testing.assert_allclose(mixed.weights, plain.weights)  # the model's own, shown
    (unmixed,) = align_pairs(model, pairs, AlignOptions(), rates=_rates())
    assert unmixed.links == plain.links  # rates without a share change nothing


def test_the_product_prior_keeps_the_attended_one_of_a_repeated_word():
    from nmt_cli.alignment import with_prior, with_product_prior

    # source "a b a": x attends to the second a; the rates link a with x wherever they meet
    weights = np.array([[0.04, 0.06, 0.9]])
    prior = np.array([[0.9, 0.0, 0.9]])
    product = with_product_prior(weights, prior, 0.8)
    assert product.sum() == pytest.approx(weights.sum())  # the row keeps its total
    assert (product[0] >= 0.35).tolist() == [False, False, True]
    linear = with_prior(weights, prior, 0.8)
    assert (linear[0] >= 0.35).tolist() == [True, False, True]  # both copies of a
    np.testing.assert_allclose(with_product_prior(weights, prior, 0.0), weights)
    with pytest.raises(ValueError, match="does not fit"):
        with_product_prior(weights, np.ones((2, 3)), 0.5)


def _reversal_links(path) -> list[str]:
    return [
        " ".join(f"{i}-{len(s.split()) - 1 - i}" for i in range(len(s.split())))
        for s in path.read_text(encoding="utf-8").splitlines()
    ]


@pytest.fixture(scope="module")
def guided_model(toy_data_dir, tmp_path_factory):
    tmp = tmp_path_factory.mktemp("guided")
    links = tmp / "train.links"
    links.write_text("".join(line + "\n" for line in _reversal_links(toy_data_dir / "train.src")))
    out = tmp / "model"
    result = invoke("train", toy_data_dir, "-o", out, "--max-steps", "4", "--valid-every", "4",
                    "--emb-size", "16", "--hidden-size", "16", "--threads", "1",
                    "--guided-alignment", "1", "--alignments", links)  # fmt: skip
    assert result.exit_code == 0, result.stderr
    return out


def test_guided_training_keeps_the_rates_of_its_links(guided_model, toy_data_dir):
    rates = checkpoint.load_link_rates(guided_model)
    sources = (toy_data_dir / "train.src").read_text(encoding="utf-8").splitlines()
    targets = (toy_data_dir / "train.tgt").read_text(encoding="utf-8").splitlines()
    expected = LinkRates()
    for s, t in zip(sources, targets, strict=True):
        n = len(s.split())
        expected.add(s.split(), t.split(), {(i, n - 1 - i) for i in range(n)})
    assert list(rates.counts()) == list(expected.counts())


def test_training_without_guidance_keeps_no_rates(guided_model, tmp_path, toy_data_dir):
    out = tmp_path / "model"
    for name in ("config.json", checkpoint.LINK_RATES_FILE):
        (out / name).parent.mkdir(exist_ok=True)
        (out / name).write_bytes((guided_model / name).read_bytes())
    result = invoke("train", toy_data_dir, "-o", out, "--max-steps", "2", "--valid-every", "2",
                    "--emb-size", "16", "--hidden-size", "16", "--threads", "1", "--force")  # fmt: skip
    assert result.exit_code == 0, result.stderr
    assert not (out / checkpoint.LINK_RATES_FILE).exists()  # --force removed the stale file


def _align(model, toy_data_dir, *flags):
    result = invoke("align", "-m", model, "--src", toy_data_dir / "dev.src",
                    "--tgt", toy_data_dir / "dev.tgt", "--view", "none", *flags)  # fmt: skip
    return result


def test_align_mixes_in_the_link_prior_by_default(guided_model, toy_data_dir, tmp_path):
    default = _align(guided_model, toy_data_dir)
    assert default.exit_code == 0, default.stderr
    explicit = _align(guided_model, toy_data_dir, "--link-prior", str(LINK_PRIOR_SHARE))
    assert explicit.stdout == default.stdout
    off = _align(guided_model, toy_data_dir, "--link-prior", "0")
    assert off.exit_code == 0, off.stderr
    assert off.stdout != default.stdout  # the prior moved links of this barely trained model
    without = tmp_path / "without"
    without.mkdir()
    for path in guided_model.iterdir():
        if path.is_file() and path.name != checkpoint.LINK_RATES_FILE:
            (without / path.name).write_bytes(path.read_bytes())
    assert _align(without, toy_data_dir).stdout == off.stdout


@pytest.mark.parametrize(
    ("flags", "message"),
    [
        (("--link-prior", "0.5", "--corpus-prior", "0.5"), "give one"),
        (("--link-prior", "1"), "--link-prior must be in [0, 1)"),
        (("--link-prior", "-0.2"), "--link-prior must be in [0, 1)"),
        (("--link-prior", "0.5", "--unit", "piece"), "count word units, not --unit piece"),
    ],
)
def test_bad_link_prior_settings_are_one_line_errors(guided_model, toy_data_dir, flags, message):
    result = _align(guided_model, toy_data_dir, *flags)
    assert result.exit_code == 2
    assert message in result.stderr
    assert "Traceback" not in result.stderr


def test_link_prior_on_a_model_without_rates_says_how_to_get_them(toy_model_dir, toy_data_dir):
    result = _align(toy_model_dir, toy_data_dir, "--link-prior", "0.5")
    assert result.exit_code == 2
    assert "link_rates.tsv" in result.stderr and "guided alignment" in result.stderr


def test_a_low_threshold_alone_keeps_the_prior_and_drops_the_grow_above_it(
    guided_model, toy_data_dir
):
    low = _align(guided_model, toy_data_dir, "--threshold", "0.2")
    assert low.exit_code == 0, low.stderr
    explicit = _align(guided_model, toy_data_dir, "--method", "threshold", "--threshold", "0.2",
                      "--grow-threshold", "0", "--link-prior", str(LINK_PRIOR_SHARE))  # fmt: skip
    assert low.stdout == explicit.stdout
    other_unit = _align(guided_model, toy_data_dir, "--unit", "piece")  # no rates for pieces
    assert other_unit.exit_code == 0, other_unit.stderr


def test_naming_the_default_method_keeps_its_thresholds(guided_model, toy_data_dir):
    default = _align(guided_model, toy_data_dir)
    named = _align(guided_model, toy_data_dir, "--method", "threshold")
    assert default.exit_code == named.exit_code == 0, named.stderr
    assert named.stdout == default.stdout  # was threshold 0.5 without growing: other links
    plain = _align(guided_model, toy_data_dir, "--method", "threshold", "--threshold", "0.5",
                   "--grow-threshold", "0")  # fmt: skip
    assert plain.stdout != default.stdout  # the numbers the defaults add do change the links


def test_translate_align_draws_the_links_nmt_align_draws(guided_model, toy_data_dir, tmp_path):
    sources = (toy_data_dir / "dev.src").read_text(encoding="utf-8").splitlines()
    result = invoke("translate", "-m", guided_model, "--beam", "1", "--align",
                    "--input", toy_data_dir / "dev.src")  # fmt: skip
    assert result.exit_code == 0, result.stderr
    answers = [line.split(" ||| ") for line in result.stdout.splitlines()]
    assert len(answers) == len(sources)
    kept = [(s, t, links) for s, (t, links) in zip(sources, answers, strict=True) if t.strip()]
    assert kept, "the toy model translated every line to nothing"
    (tmp_path / "src").write_text("".join(s + "\n" for s, _, _ in kept), encoding="utf-8")
    (tmp_path / "tgt").write_text("".join(t + "\n" for _, t, _ in kept), encoding="utf-8")
    on_pairs = ("-m", guided_model, "--src", tmp_path / "src", "--tgt", tmp_path / "tgt")
    aligned = invoke("align", *on_pairs, "--view", "none")
    assert aligned.exit_code == 0, aligned.stderr
    # the search's attention of a greedy translation is the forced attention of that output
    assert [links for _, _, links in kept] == aligned.stdout.splitlines()
    plain = invoke("align", *on_pairs, "--view", "none", "--link-prior", "0", "--method", "argmax")
    assert plain.stdout != aligned.stdout  # the links are the model's defaults, not argmax
    as_json = invoke("translate", "-m", guided_model, "--beam", "1", "--json",
                     "--input", toy_data_dir / "dev.src")  # fmt: skip
    records = [json.loads(line) for line in as_json.stdout.splitlines()]
    assert [r["alignment"] for r in records] == [links for _, links in answers]


def test_translate_align_goes_on_without_a_damaged_rates_file(guided_model, toy_data_dir, tmp_path):
    damaged = tmp_path / "model"
    damaged.mkdir()
    for path in guided_model.iterdir():
        if path.is_file():
            (damaged / path.name).write_bytes(path.read_bytes())
    rates = damaged / checkpoint.LINK_RATES_FILE
    rates.write_text(rates.read_text(encoding="utf-8") + "a\tx\tmany\t3\n", encoding="utf-8")
    result = invoke("translate", "-m", damaged, "--beam", "1", "--align",
                    "--input", toy_data_dir / "dev.src")  # fmt: skip
    assert result.exit_code == 0, result.stderr
    assert "link_rates.tsv line" in result.stderr and "attention alone" in result.stderr
    sources = (toy_data_dir / "dev.src").read_text(encoding="utf-8").splitlines()
    assert len(result.stdout.splitlines()) == len(sources)
    assert all(" ||| " in line for line in result.stdout.splitlines())


def test_rates_read_from_counts_take_no_more_pairs():
    loaded = LinkRates.from_counts(_rates().counts())
    with pytest.raises(ValueError, match="cannot count more"):
        loaded.add(["a"], ["x"], {(0, 0)})


def test_char_link_rates_of_single_latin_letters_are_an_older_nmts():
    from nmt_cli.alignment import LinkRates
    from nmt_cli.cli.align import _single_character_rates

    old = LinkRates.from_counts([("T", "汤", 3, 4), ("o", "姆", 2, 4), ("。", "。", 4, 4)])
    new = LinkRates.from_counts([("Tom", "汤", 3, 4), ("a", "一", 2, 4), ("。", "。", 4, 4)])
    pure = LinkRates.from_counts([("汤", "湯", 3, 4), ("。", "。", 4, 4)])  # same units either way
    assert _single_character_rates(old)
    assert _single_character_rates(LinkRates.from_counts([("м", "汤", 3, 4)]))  # Cyrillic too
    assert not _single_character_rates(new) and not _single_character_rates(pure)
