"""Option values out of range, for every command: exit 2, one line naming the option, no work done."""

from __future__ import annotations

import pytest
from cli_runner import invoke
from outcome import assert_no_traceback, assert_refused

TRANSLATE = [
    (["--beam", "0"], "--beam"),
    (["--beam", "-1"], "--beam"),
    (["--batch-size", "0"], "--batch-size"),
    (["--batch-size", "-5"], "--batch-size"),
    (["--nbest", "0"], "--nbest"),
    (["--nbest", "9", "--beam", "2"], "--nbest"),
    (["--length-penalty", "-1"], "--length-penalty"),
    (["--length-penalty", "nan"], "--length-penalty"),  # beam search never ended
    (["--length-penalty", "inf"], "--length-penalty"),
    (["--max-len-ratio", "0"], "--max-len-ratio"),
    (["--max-len-ratio", "-1"], "--max-len-ratio"),
    (["--max-len-ratio", "nan"], "--max-len-ratio"),  # gave empty translations
    (["--max-len-ratio", "inf"], "--max-len-ratio"),
    (["--max-len", "-1"], "--max-len"),
    (["--on-invalid", "ignore"], "--on-invalid"),
    (["--device", "gpu0"], "--device"),  # was a torch traceback
    (["--threads", "-1"], "--threads"),  # was a torch traceback
]

TRAIN = [
    (["--attention", "bogus"], "--attention"),
    (["--cell", "rnn"], "--cell"),
    (["--decoder-style", "transformer"], "--decoder-style"),
    (["--hidden-size", "-3"], "--hidden-size"),
    (["--hidden-size", "1000000000000"], "--hidden-size"),
    (["--emb-size", "0"], "--emb-size"),
    (["--layers", "0"], "--layers"),
    (["--batch-tokens", "0"], "--batch-tokens"),
    (["--batch-tokens", "-400"], "--batch-tokens"),
    (["--lr", "0"], "--lr"),
    (["--lr", "nan"], "--lr"),
    (["--lr", "inf"], "--lr"),
    (["--dropout", "1.5"], "--dropout"),
    (["--label-smoothing", "1"], "--label-smoothing"),
    (["--max-steps", "-1"], "--max-steps"),
    (["--max-epochs", "-1"], "--max-epochs"),
    (["--patience", "-1"], "--patience"),
    (["--valid-every", "0"], "--valid-every"),
    (["--threads", "-1"], "--threads"),
    (["--device", "bogus"], "--device"),
    (["--max-time", "soon"], "--max-time"),
    (["--max-time", "-5m"], "--max-time"),
    (["--max-time", "nan"], "--max-time"),
    (["--max-time", "10x"], "--max-time"),
]

PREPARE = [
    (["--vocab-size", "0"], "--vocab-size"),
    (["--vocab-size", "-5"], "--vocab-size"),
    (["--vocab-size", "2147483648"], "too large"),  # a traceback from SentencePiece (and one
    # below 2**31 ran for over 10 minutes on a tiny corpus: not run here)
    (["--dev-size", "-1"], "--dev-size"),
    (["--test-size", "-1"], "--test-size"),
    (["--dev-size", "5000"], "--dev-size"),
    (["--max-len", "-1"], "--max-len"),
    (["--max-ratio", "0.5"], "--max-ratio"),
    (["--max-ratio", "nan"], "--max-ratio"),  # silently meant "no limit"
    (["--model-type", "wordpiece"], "--model-type"),
    (["--character-coverage", "2"], "--character-coverage"),
    (["--character-coverage", "nan"], "--character-coverage"),
]

EVAL = [
    (["--metrics", "bogus"], "bogus"),
    (["--metrics", ""], "metric"),
    (["--buckets", "a,b"], "--buckets"),
    (["--buckets", "0"], "0"),
    (["--buckets", "20,10"], "20,10"),
    (["--buckets", "-5"], "-5"),
    (["-m", "MODEL", "--src", "TEXT", "--beam", "0"], "--beam"),
    (["-m", "MODEL", "--src", "TEXT", "--batch-size", "0"], "--batch-size"),
]

ALIGN = [
    (["--unit", "syllable"], "--unit"),
    (["--method", "mean"], "--method"),
    (["--threshold", "0"], "--threshold"),
    (["--threshold", "2"], "--threshold"),
    (["--threshold", "nan"], "--threshold"),
    (["--shift", "3"], "--shift"),
    (["--view", "3d"], "--view"),
    (["--symmetrize", "both"], "--symmetrize"),
    (["--symmetrize", "union"], "--reverse-model"),  # was ignored without a reverse model
    (["--method", "argmax", "--threshold", "0.3"], "--method threshold"),  # was ignored
    (["--method", "mutual", "--threshold", "0.3"], "--method threshold"),
    (["--beam", "0"], "--beam"),  # was accepted, and ignored, with --src/--tgt
    (["--device", "bogus"], "--device"),  # was a torch traceback
    (["--png", "PNG_IN_MISSING_FOLDER"], "does not exist"),  # was a traceback after output
    (["--png", "heatmap.xyz"], ".xyz"),
]


def _ids(cases):
    return [" ".join(args).replace("MODEL ", "").replace("TEXT ", "") for args, _ in cases]


@pytest.mark.parametrize(("args", "named"), TRANSLATE, ids=_ids(TRANSLATE))
def test_translate_option_out_of_range(toy_model_dir, args, named):
    result = invoke("translate", "-m", toy_model_dir, *args, input="apple river\n")
    assert_refused(result, 2, named)
    assert result.stdout == ""


@pytest.mark.parametrize(("args", "named"), TRAIN, ids=_ids(TRAIN))
def test_train_option_out_of_range(toy_data_dir, tmp_path, args, named):
    out = tmp_path / "model"
    result = invoke("train", toy_data_dir, "-o", out, *args)
    assert_refused(result, 2, named)
    assert not out.exists()


def test_train_nproc_is_checked_before_any_process_starts(toy_data_dir, tmp_path):
    out = tmp_path / "model"
    for value in ("0", "-1"):
        assert_refused(invoke("train", toy_data_dir, "-o", out, "--nproc", value), 2, "--nproc")
    missing = tmp_path / "no-data"  # refused once, here, not by every process under torchrun
    result = invoke("train", missing, "-o", out, "--nproc", "2")
    assert_refused(result, 3, str(missing))
    assert "ChildFailedError" not in result.output
    assert not out.exists()


def test_train_refuses_an_empty_max_time(toy_data_dir, tmp_path):
    out = tmp_path / "model"
    small = ("--max-steps", "1", "--emb-size", "8", "--hidden-size", "8", "--valid-every", "1")
    result = invoke("train", toy_data_dir, "-o", out, "--max-time", "", *small)
    assert_refused(result, 2, "--max-time")
    assert not out.exists()


@pytest.mark.parametrize(("args", "named"), PREPARE, ids=_ids(PREPARE))
def test_prepare_option_out_of_range(tmp_path, args, named):
    from cli_runner import write_toy_corpus

    src, tgt = write_toy_corpus(tmp_path / "corpus", n=60)
    out = tmp_path / "data"
    result = invoke("prepare", "--src", src, "--tgt", tgt, "-o", out, *args)
    assert_refused(result, 2, named)
    assert not out.exists()
    assert [p.name for p in tmp_path.iterdir()] == ["corpus"]  # no staged directory left


@pytest.mark.parametrize(("args", "named"), EVAL, ids=_ids(EVAL))
def test_eval_option_out_of_range(toy_model_dir, tmp_path, args, named):
    text = tmp_path / "text"
    text.write_text("apple river\n")
    swap = {"MODEL": toy_model_dir, "TEXT": text}
    args = [swap.get(a, a) for a in args]
    scored = [] if "-m" in args else ["--hyp", text]
    result = invoke("eval", *scored, "--ref", text, *args)
    assert_refused(result, 2, named)
    assert result.stdout == ""


@pytest.mark.parametrize(("args", "named"), ALIGN, ids=_ids(ALIGN))
def test_align_option_out_of_range(toy_model_dir, tmp_path, args, named):
    src, tgt = tmp_path / "src", tmp_path / "tgt"
    src.write_text("apple river\n")
    tgt.write_text("RIVER APPLE\n")
    args = [
        str(tmp_path / "no" / "such" / "x.png") if a == "PNG_IN_MISSING_FOLDER" else a for a in args
    ]
    result = invoke("align", "-m", toy_model_dir, "--src", src, "--tgt", tgt, *args)
    assert_refused(result, 2, named)
    assert result.stdout == ""
    assert not list(tmp_path.rglob("*.png")) and not list(tmp_path.rglob("*.tmp"))


@pytest.mark.parametrize(
    "argv",
    [
        ["translate", "--beam", "two"],
        ["train", "DATA", "-o", "OUT", "--hidden-size", "1.5"],
        ["prepare", "--vocab-size", "many", "-o", "OUT"],
        ["eval", "--beam", "x"],
        ["align", "--threshold", "half"],
    ],
    ids=["translate", "train", "prepare", "eval", "align"],
)
def test_a_value_of_the_wrong_type_is_a_usage_error(argv, toy_model_dir, toy_data_dir, tmp_path):
    swap = {"DATA": toy_data_dir, "OUT": tmp_path / "out"}
    argv = [swap.get(a, a) for a in argv]
    if argv[0] in ("translate", "align", "eval"):
        argv[1:1] = ["-m", toy_model_dir]
    result = invoke(*argv)
    assert_no_traceback(result)
    assert result.exit_code == 2
    option = next(a for a in argv if str(a).startswith("--") and a != "-o")
    assert (
        result.stderr.startswith("error: invalid value for")
        and len(result.stderr.splitlines()) == 1
    )
    assert option.split("-")[-1] in result.stderr
    assert not (tmp_path / "out").exists()
