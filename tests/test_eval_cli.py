"""`nmt eval` through the command line: bad input gives one clean line, data goes to stdout."""

from __future__ import annotations

import dataclasses
import json
import re
import sys
import types
from pathlib import Path

import pytest
from typer.testing import CliRunner

from nmt_cli.cli.app import app

FIXTURES = Path(__file__).parent / "fixtures" / "eval"
HYP, REF, SRC = (str(FIXTURES / name) for name in ("hyp.en", "ref.en", "src.de"))

runner = CliRunner()


def _eval(*args: str):
    return runner.invoke(app, ["eval", *args])


def _assert_clean_error(result, *fragments: str, code: int = 2) -> None:
    """Non-zero exit, exactly one line on stderr holding every fragment, nothing on stdout."""
    lines = [line for line in result.stderr.splitlines() if line.strip()]
    assert result.exit_code == code, result.output
    assert len(lines) == 1, result.stderr
    assert lines[0].startswith("error: ")
    for fragment in fragments:
        assert fragment in lines[0]
    assert "Traceback" not in result.output
    assert result.stdout == ""


def test_eval_has_help():
    result = _eval("--help")
    assert result.exit_code == 0
    for option in ("--hyp", "--ref", "--by-length", "--buckets", "--compare", "--json", "--model"):
        assert option in result.stdout


# Bad input -----------------------------------------------------------------------------------


def test_mismatched_line_counts_name_both_files_and_counts(tmp_path):
    short_ref = tmp_path / "short.en"
    short_ref.write_text("".join(line + "\n" for line in Path(REF).read_text().splitlines()[:-1]))
    result = _eval("--hyp", HYP, "--ref", str(short_ref))
    _assert_clean_error(result, HYP, "36 lines", str(short_ref), "35")


@pytest.mark.parametrize("blank", ["\n", "\n \n"])
def test_empty_lines_ending_a_file_are_named_as_what_to_remove(tmp_path, blank):
    padded = tmp_path / "padded.en"
    padded.write_text(Path(HYP).read_text() + blank)  # an editor's blank line at the end
    extra = blank.count("\n")
    for args in (["--hyp", str(padded), "--ref", REF], ["--hyp", REF, "--ref", str(padded)]):
        result = _eval(*args)
        _assert_clean_error(result, f"{padded} ends with {extra} line", "left empty: remove")
    assert "parallel" not in result.stderr  # not the message for files that do not match


def test_empty_reference_lines_inside_the_file_are_warned_of_and_scored(tmp_path):
    lines = Path(REF).read_text(encoding="utf-8").splitlines()
    holed = tmp_path / "holed.en"
    holed.write_text("\n".join(["", *lines[1:4], "", *lines[5:]]) + "\n", encoding="utf-8")
    result = _eval("--hyp", HYP, "--ref", str(holed))
    said = " ".join(result.stderr.split())
    assert result.exit_code == 0 and "BLEU" in result.stdout
    assert f"{holed}: 2 lines with a translation but no reference (the first: line 1)" in said
    assert "no reference" not in _eval("--hyp", HYP, "--ref", REF).stderr
    both = tmp_path / "both.en"  # empty in the hypothesis too: nothing is lost there
    hyps = Path(HYP).read_text(encoding="utf-8").splitlines()
    both.write_text("\n".join(["", *hyps[1:4], "", *hyps[5:]]) + "\n", encoding="utf-8")
    quiet = _eval("--hyp", str(both), "--ref", str(holed))
    assert quiet.exit_code == 0 and "no reference" not in quiet.stderr
    second = _eval("--hyp", HYP, "--ref", str(holed), "--ref", REF)  # the other one has them
    assert second.exit_code == 0 and "no reference" not in second.stderr


def test_empty_translations_of_lines_with_references_are_warned_of_and_scored(tmp_path):
    hyps = Path(HYP).read_text(encoding="utf-8").splitlines()
    holed = tmp_path / "holed.hyp"
    holed.write_text("\n".join([*hyps[:2], "", *hyps[3:]]) + "\n", encoding="utf-8")
    result = _eval("--hyp", str(holed), "--ref", REF, "--compare", HYP)
    said = " ".join(result.stderr.split())
    assert result.exit_code == 0 and "BLEU" in result.stdout
    assert f"{holed}: 1 of {len(hyps)} lines is empty where the reference is not (the " in said
    assert "(the first: line 3)" in said and f"{HYP}:" not in said  # the full one is quiet
    blank = tmp_path / "blank.hyp"
    blank.write_text("\n" * len(hyps), encoding="utf-8")
    said = " ".join(_eval("--hyp", HYP, "--ref", REF, "--compare", str(blank)).stderr.split())
    assert f"{blank}: all {len(hyps)} lines are empty where the reference is not" in said


def test_mismatched_source_is_refused(tmp_path):
    source = tmp_path / "src.de"
    source.write_text("nur eine Zeile\n")
    result = _eval("--hyp", HYP, "--ref", REF, "--by-length", "--src", str(source))
    _assert_clean_error(result, HYP, "36 lines", str(source), "has 1:")


@pytest.mark.parametrize("kind", ["missing", "empty", "directory"])
@pytest.mark.parametrize("role", ["--hyp", "--ref"])
def test_unusable_files_are_named(tmp_path, kind, role):
    path = tmp_path / "file.txt"
    if kind == "empty":
        path.write_text("")
    elif kind == "directory":
        path.mkdir()
    files = {"--hyp": HYP, "--ref": REF, role: str(path)}
    result = _eval("--hyp", files["--hyp"], "--ref", files["--ref"])
    expected = {"missing": "does not exist", "empty": "is empty", "directory": "is a directory"}
    _assert_clean_error(result, str(path), expected[kind])


@pytest.mark.parametrize(
    ("args", "fragment"),
    [
        (["--metrics", "bleu,meteor"], "unknown metric 'meteor'"),
        (["--metrics", ","], "no metric given"),
        (["--by-length"], "add --src FILE"),
        (["--plot", "chart.png"], "add --src FILE"),
        (["--by-length", "--src", SRC, "--buckets", "10,x"], "whole numbers"),
        (["--by-length", "--src", SRC, "--buckets", "20,10"], "increasing positive"),
        (["--by-length", "--src", SRC, "--buckets", "0,10"], "increasing positive"),
        (["--save-hyp", "out.txt"], "add -m MODEL_DIR"),
        (["--bf16"], "drop --bf16"),
        (["--beam", "5"], "drop --beam"),
        (["--batch-size", "8"], "drop --batch-size"),
        (["--device", "cpu"], "drop --device"),
        (["--threads", "1"], "drop --threads"),
        (["--quantize"], "drop --quantize"),
        (["--shortlist"], "drop --shortlist"),
        (["--no-shortlist"], "drop --no-shortlist"),
        (["--length-penalty", "0.6"], "drop --length-penalty"),
        (["--max-len", "20"], "drop --max-len"),
    ],
    ids=[
        "unknown-metric",
        "no-metric",
        "by-length-without-src",
        "plot-without-src",
        "buckets-not-numbers",
        "buckets-decreasing",
        "buckets-zero",
        "save-hyp-without-model",
        "bf16-without-model",
        "beam-without-model",
        "batch-size-without-model",
        "device-without-model",
        "threads-without-model",
        "quantize-without-model",
        "shortlist-without-model",
        "no-shortlist-without-model",
        "length-penalty-without-model",
        "max-len-without-model",
    ],
)
def test_bad_options_give_one_line(args, fragment):
    _assert_clean_error(_eval("--hyp", HYP, "--ref", REF, *args), fragment)


def test_what_to_score_must_be_given():
    _assert_clean_error(_eval("--ref", REF), "--hyp FILE")
    _assert_clean_error(_eval("--hyp", HYP), "--ref FILE")
    _assert_clean_error(_eval("--hyp", HYP, "-m", "model", "--ref", REF), "one of the two")


def test_save_hyp_into_a_folder_is_refused_before_translating(tmp_path):
    result = _eval("-m", str(tmp_path / "no-model"), "--src", SRC, "--ref", REF,
                   "--save-hyp", str(tmp_path))  # fmt: skip
    _assert_clean_error(result, str(tmp_path), "it is a folder; give a file path")


@pytest.mark.skipif(not Path("/proc").is_dir(), reason="no /proc on this system")
def test_save_hyp_into_a_folder_that_takes_no_files_is_refused_before_translating(tmp_path):
    # /proc refuses new files even to root, for whom its folder looks writable
    result = _eval("-m", str(tmp_path / "no-model"), "--src", SRC, "--ref", REF,
                   "--save-hyp", "/proc/nmt-hyp.txt")  # fmt: skip
    _assert_clean_error(result, "/proc/nmt-hyp.txt")
    assert not Path("/proc/nmt-hyp.txt").exists()


def test_missing_model_directory_is_a_clean_error(tmp_path):
    pytest.importorskip("nmt_cli.translator")
    missing = tmp_path / "no-model"
    result = _eval("-m", str(missing), "--src", SRC, "--ref", REF)
    _assert_clean_error(result, str(missing), "does not exist", code=3)


# Output --------------------------------------------------------------------------------------


def test_text_output_is_plain_sacrebleu_lines_and_tables_go_to_stderr():
    result = _eval("--hyp", HYP, "--ref", REF)
    assert result.exit_code == 0, result.output
    lines = result.stdout.splitlines()
    assert lines[0].startswith("BLEU = ") and "BP = " in lines[0]
    assert lines[1].startswith("BLEU signature: nrefs:1|case:mixed|eff:no|tok:13a|smooth:exp")
    assert [line.split(" = ")[0] for line in lines[2::2]] == ["chrF2", "TER"]
    assert not any(mark in result.stdout for mark in "┃│━─")
    assert "signature" in result.stderr and "┃" in result.stderr


def test_json_output_holds_everything_and_nothing_else(tmp_path):
    second = tmp_path / "second.en"
    second.write_text(Path(REF).read_text(encoding="utf-8"), encoding="utf-8")
    args = ["--metrics", "bleu,chrf++", "--by-length", "--src", SRC, "--compare", str(second)]
    result = _eval("--hyp", HYP, "--ref", REF, "--json", *args)
    assert result.exit_code == 0, result.output
    document = json.loads(result.stdout)  # the whole of stdout is one JSON object
    assert [m["name"] for m in document["metrics"]] == ["BLEU", "chrF2++"]
    assert all(m["signature"].startswith("nrefs:1|") for m in document["metrics"])
    assert document["metrics"][0]["text"].startswith("BLEU = ")
    buckets = document["by_length"]["buckets"]
    assert document["by_length"]["unit"] == "words"
    assert [b["label"] for b in buckets] == ["1–10", "11–20", "21–30", "31–40", "41+"]
    assert sum(b["count"] for b in buckets) == 36
    comparison = document["comparison"]
    assert comparison["better"] == "B" and comparison["p_value"] < 0.05
    assert comparison["verdict"].startswith("B is better than A")
    assert document["files"] == {"hyp": HYP, "refs": [REF], "src": SRC, "compare": str(second)}
    assert "BLEU by source length" in result.stderr
    # by length, the second system too (it is the reference here: 100 in every bucket)
    compared = document["by_length"]["buckets_compare"]
    assert [(b["label"], b["count"]) for b in compared] == [
        (b["label"], b["count"]) for b in buckets
    ]
    assert all(b["bleu"] == pytest.approx(100) for b in compared)
    assert all(b["bleu"] < 100 for b in buckets)
    text = _eval("--hyp", HYP, "--ref", REF, *args)
    lines = text.stdout.splitlines()
    assert sum(line.startswith("BLEU 1–10 words = ") for line in lines) == 1
    assert "B: BLEU 41+ words = 100.00 (n = 3)" in lines
    assert "bars: A above B" in text.stderr
    alone = _eval("--hyp", HYP, "--ref", REF, "--json", "--by-length", "--src", SRC)
    assert json.loads(alone.stdout)["by_length"]["buckets_compare"] is None


def test_by_length_prints_buckets_and_a_bar_chart():
    result = _eval("--hyp", HYP, "--ref", REF, "--by-length", "--src", SRC, "--buckets", "20")
    assert result.exit_code == 0, result.output
    assert "BLEU 1–20 words = " in result.stdout and "(n = 21)" in result.stdout
    assert "BLEU 21+ words = " in result.stdout
    assert "█" in result.stderr and "█" not in result.stdout


def test_several_references_and_gzip(tmp_path):
    import gzip

    packed = tmp_path / "ref.en.gz"
    packed.write_bytes(gzip.compress(Path(REF).read_bytes()))
    result = _eval("--hyp", HYP, "--ref", REF, "--ref", str(packed), "--metrics", "bleu")
    assert result.exit_code == 0, result.output
    assert "nrefs:2" in result.stdout


def test_comparison_of_identical_systems_finds_no_difference():
    result = _eval("--hyp", HYP, "--ref", REF, "--compare", HYP, "--metrics", "bleu")
    assert result.exit_code == 0, result.output
    assert "verdict: no significant difference at p < 0.05" in result.stdout


def test_a_second_compare_is_refused_not_dropped(tmp_path):
    second = tmp_path / "second.en"
    second.write_text(Path(HYP).read_text(encoding="utf-8"), encoding="utf-8")
    result = _eval("--hyp", HYP, "--ref", REF, "--compare", str(second), "--compare", HYP)
    assert result.exit_code == 2 and result.stdout == ""
    assert result.stderr.startswith("error: --compare takes one system's translations, given 2")


def test_plot_writes_a_picture(tmp_path):
    pytest.importorskip("matplotlib")
    picture = tmp_path / "by_length.png"
    result = _eval("--hyp", HYP, "--ref", REF, "--src", SRC, "--plot", str(picture))
    assert result.exit_code == 0, result.output
    assert picture.read_bytes().startswith(b"\x89PNG")
    assert "BLEU 41+ words" in result.stdout  # --plot implies --by-length


def test_plot_with_an_unknown_format_is_refused(tmp_path):
    pytest.importorskip("matplotlib")
    result = _eval("--hyp", HYP, "--ref", REF, "--src", SRC, "--plot", str(tmp_path / "a.xyz"))
    _assert_clean_error(result, "a.xyz", ".png")


def test_plot_without_matplotlib_names_the_extra(monkeypatch, tmp_path):
    from nmt_cli.errors import ConfigError
    from nmt_cli.render.plot import require_matplotlib

    monkeypatch.setitem(sys.modules, "matplotlib", None)  # makes `import matplotlib` fail
    with pytest.raises(ConfigError, match=re.escape(f"{sys.executable} -m pip install matplotlib")):
        require_matplotlib()
    result = _eval("--hyp", HYP, "--ref", REF, "--src", SRC, "--plot", str(tmp_path / "a.png"))
    _assert_clean_error(result, "--plot needs matplotlib", "pip install matplotlib")
    assert not (tmp_path / "a.png").exists()


@dataclasses.dataclass
class _FakeOptions:
    beam_size: int = 5
    batch_size: int = 64
    alpha: float = 1.0
    max_len: int = 0

    def check(self) -> _FakeOptions:
        return self


class _FakeTranslator:
    """Stands in for the model: 'translates' by looking the reference up, in input order."""

    def __init__(self, table: dict[str, str]):
        self.table = table
        self.meta: dict = {}  # what training recorded: nothing here
        self.shortlist = None  # the whole output layer

    @classmethod
    def load(
        cls,
        model_dir,
        device="auto",
        quantize=False,
        threads=0,
        shortlist=False,
        partners=(),
        bf16=False,
    ):
        sources = Path(SRC).read_text(encoding="utf-8").splitlines()
        targets = Path(REF).read_text(encoding="utf-8").splitlines()
        return cls(dict(zip(sources, targets, strict=True)))

    def check(self, options):
        return options

    def translate_lines(self, lines, options):
        assert (options.beam_size, options.batch_size) == (2, 3)
        for line in lines:
            yield types.SimpleNamespace(text=self.table[line])


def test_model_mode_translates_then_scores(monkeypatch, tmp_path):
    fake = types.ModuleType("nmt_cli.translator")
    fake.Translator, fake.SearchOptions = _FakeTranslator, _FakeOptions
    monkeypatch.setitem(sys.modules, "nmt_cli.translator", fake)
    model, saved = tmp_path / "model", tmp_path / "hyp.txt"
    model.mkdir()
    args = ["-m", str(model), "--src", SRC, "--ref", REF, "--save-hyp", str(saved), "--json"]
    result = _eval(*args, "--metrics", "bleu", "--beam", "2", "--batch-size", "3")
    assert result.exit_code == 0, result.output
    document = json.loads(result.stdout)
    assert document["metrics"][0]["score"] == pytest.approx(100)
    assert saved.read_text(encoding="utf-8") == Path(REF).read_text(encoding="utf-8")
    assert document["files"]["hyp"] == str(saved)
    assert document["search"] == {"beam": 2, "length_penalty": 1.0, "max_len": None,
                                  "shortlist": False, "quantize": False, "bf16": False}  # fmt: skip
    assert "translated with beam 2, length penalty 1, " in result.stderr
    scored = _eval("--hyp", str(saved), "--ref", REF, "--metrics", "bleu", "--json")
    assert json.loads(scored.stdout)["search"] is None  # nothing translated


def test_eval_says_whether_the_shortlist_translated(toy_model_dir, tmp_path):
    """Models differ in whether their search uses the shortlist by default (their training
    decides): a comparison of models by eval -m must be able to tell."""
    from cli_runner import invoke

    src, ref = tmp_path / "src.txt", tmp_path / "ref.txt"
    src.write_text("apple river\ngreen bird\n", encoding="utf-8")
    ref.write_text("RIVER APPLE\nBIRD GREEN\n", encoding="utf-8")
    for flag, used in (("--shortlist", True), ("--no-shortlist", False)):
        result = invoke("eval", "-m", toy_model_dir, "--src", src, "--ref", ref, "--json", flag)
        assert result.exit_code == 0, result.output
        assert json.loads(result.stdout)["search"]["shortlist"] is used
        assert f"shortlist {'on' if used else 'off'}" in result.stderr


def test_tokenisation_and_case_are_chosen_as_in_sacrebleu(tmp_path):
    """--tokenize and --lowercase give sacreBLEU's own scores and signatures (sacrebleu
    --tokenize, -lc for BLEU and --chrf-lowercase for chrF); TER ignores case already."""
    from sacrebleu.metrics import BLEU, CHRF

    hyps = Path(HYP).read_text(encoding="utf-8").splitlines()
    lower = tmp_path / "ref.lc.en"
    lower.write_text(Path(REF).read_text(encoding="utf-8").lower(), encoding="utf-8")
    refs = [lower.read_text(encoding="utf-8").splitlines()]
    for args, bleu, chrf in (
        ([], BLEU(), CHRF()),
        (["--lowercase"], BLEU(lowercase=True), CHRF(lowercase=True)),
        (["--tokenize", "intl", "--lowercase"], BLEU(tokenize="intl", lowercase=True),
         CHRF(lowercase=True)),
        (["--tokenize", "none"], BLEU(tokenize="none"), CHRF()),
    ):  # fmt: skip
        result = _eval("--hyp", HYP, "--ref", str(lower), "--metrics", "bleu,chrf", "--json", *args)
        assert result.exit_code == 0, result.output
        scores = json.loads(result.stdout)["metrics"]
        expected = [bleu.corpus_score(hyps, refs), chrf.corpus_score(hyps, refs)]
        assert [m["score"] for m in scores] == pytest.approx([e.score for e in expected])
        assert [m["signature"] for m in scores] == [
            str(bleu.get_signature()),
            str(chrf.get_signature()),
        ]
    assert json.loads(_eval("--hyp", HYP, "--ref", str(lower), "--metrics", "bleu", "--json",
                            "--lowercase").stdout)["metrics"][0]["score"] > json.loads(
        _eval("--hyp", HYP, "--ref", str(lower), "--metrics", "bleu", "--json").stdout
    )["metrics"][0]["score"]  # fmt: skip
    refused = _eval("--hyp", HYP, "--ref", REF, "--tokenize", "ja-mecab")
    assert refused.exit_code == 2 and "--tokenize must be auto or one of 13a" in refused.output


def test_bars_scale_to_the_longest_and_resolve_eighths():
    from nmt_cli.render.scores import bar

    assert bar(50, 100, width=10) == "█████"
    assert bar(100, 100, width=10) == "█" * 10
    assert bar(1, 100, width=10) == "▏"  # a tenth of a character rounds to an eighth
    assert bar(0, 100) == "" and bar(5, 0) == ""


def test_save_hyp_refuses_to_overwrite_an_input(toy_model_dir, tmp_path):
    from cli_runner import invoke

    src, ref = tmp_path / "a.src", tmp_path / "a.ref"
    src.write_text("apple river\n", encoding="utf-8")
    ref.write_text("RIVER APPLE\n", encoding="utf-8")
    for target in (src, ref):
        before = target.read_bytes()
        result = invoke("eval", "-m", toy_model_dir, "--src", src, "--ref", ref, "--save-hyp",
                        target, "--metrics", "bleu")  # fmt: skip
        assert result.exit_code == 2 and "is also an input here" in result.stderr
        assert target.read_bytes() == before


def test_pictures_refuse_to_overwrite_an_input(toy_model_dir, tmp_path):
    from cli_runner import invoke

    hyp, src = tmp_path / "hyp.png", tmp_path / "src.png"  # inputs that happen to end in .png
    hyp.write_text("RIVER APPLE\n", encoding="utf-8")
    src.write_text("apple river\n", encoding="utf-8")
    runs = [
        ["eval", "--hyp", hyp, "--ref", hyp, "--src", src, "--by-length", "--plot", hyp],
        ["eval", "--hyp", hyp, "--ref", hyp, "--src", src, "--by-length", "--plot", src],
        ["align", "-m", toy_model_dir, "--src", src, "--tgt", hyp, "--png", hyp],
    ]
    for argv in runs:
        result = invoke(*argv)
        assert result.exit_code == 2 and "is also an input here" in result.stderr, argv
        assert result.stdout == ""
    assert hyp.read_text(encoding="utf-8") == "RIVER APPLE\n"
    assert src.read_text(encoding="utf-8") == "apple river\n"


def test_a_line_too_long_for_ter_is_refused_naming_it_and_bleu_still_scores(tmp_path):
    from cli_runner import invoke

    hyp, ref = tmp_path / "hyp.txt", tmp_path / "ref.txt"
    hyp.write_text("a b c\n" + "word " * 6_000 + "\n", encoding="utf-8")
    ref.write_text("a b c\nword word\n", encoding="utf-8")
    refused = invoke("eval", "--hyp", hyp, "--ref", ref)  # TER is among the default metrics
    assert refused.exit_code == 2 and "Traceback" not in refused.output
    assert f"{hyp} line 2 has 6,000 words, more than TER scores" in refused.stderr
    scored = invoke("eval", "--hyp", hyp, "--ref", ref, "--metrics", "bleu,chrf")
    assert scored.exit_code == 0 and "BLEU" in scored.stdout


def test_ter_counts_each_chinese_character_as_a_word_for_its_length_limit():
    from nmt_cli.errors import InputError
    from nmt_cli.evaluate import check_ter_lengths

    with pytest.raises(InputError, match="line 1 has 6,000 words"):
        check_ter_lengths([("zh.txt", ["我喜欢吃桔子" * 1_000])])
    check_ter_lengths([("zh.txt", [" ".join("我喜欢吃桔子" * 800)])])  # 4,800 words: fine


def test_hypotheses_may_come_on_standard_input(tmp_path):
    from cli_runner import invoke

    ref = tmp_path / "ref.txt"
    ref.write_text("a b c d\ne f g h\n", encoding="utf-8")
    piped = invoke(
        "eval", "--hyp", "-", "--ref", ref, "--metrics", "bleu", input="a b c d\ne f g h\n"
    )
    assert piped.exit_code == 0 and "100.00" in piped.stdout
    short = invoke("eval", "--hyp", "-", "--ref", ref, "--metrics", "bleu", input="a b c d\n")
    assert short.exit_code == 2 and "<stdin> has 1 line but" in short.stderr
    twice = invoke("eval", "--hyp", "-", "--ref", "-", input="a\n")
    assert twice.exit_code == 2 and "only one file can be read from standard input" in twice.stderr


@pytest.mark.parametrize(
    "search",
    [
        ["--length-penalty", "0", "--max-len", "3"],
        ["--quantize"],
        ["--shortlist", "--beam", "3"],
    ],
    ids=["length", "quantize", "shortlist"],
)
def test_eval_translates_as_translate_does_with_the_same_search(toy_model_dir, tmp_path, search):
    """`eval -m` takes translate's search and precision options, and its scores are those of
    `translate` with them: the translations it saves are translate's, line for line."""
    from cli_runner import invoke

    src, ref = tmp_path / "a.src", tmp_path / "a.ref"
    src.write_text("apple river stone\ngreen sun\nriver\n", encoding="utf-8")
    ref.write_text("STONE RIVER APPLE\nSUN GREEN\nRIVER\n", encoding="utf-8")
    translated = invoke("translate", "-m", toy_model_dir, "-i", src, *search)
    assert translated.exit_code == 0, translated.output
    saved = tmp_path / "hyp.txt"
    scored = invoke("eval", "-m", toy_model_dir, "--src", src, "--ref", ref, "--save-hyp", saved,
                    "--metrics", "bleu", *search)  # fmt: skip
    assert scored.exit_code == 0, scored.output
    assert saved.read_text(encoding="utf-8") == translated.stdout
    if "--max-len" in search:
        assert all(len(line.split()) <= 3 for line in translated.stdout.splitlines())


def test_buckets_without_by_length_are_refused_and_dev_null_is_an_empty_file():
    _assert_clean_error(
        _eval("--hyp", HYP, "--ref", REF, "--src", SRC, "--buckets", "5,100"),
        "--buckets sets the length buckets of --by-length",
        "add --by-length",
    )
    _assert_clean_error(_eval("--hyp", "/dev/null", "--ref", REF), "/dev/null is empty")
