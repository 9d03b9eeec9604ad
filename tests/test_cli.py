"""The command-line contract: help everywhere, fast start-up, clean errors, stdout for data only."""

from __future__ import annotations

import importlib.util
import json
import os
import select
import shutil
import signal
import subprocess
import sys

import pytest
from cli_runner import invoke

COMMANDS = ["prepare", "train", "translate", "eval", "align"]


@pytest.mark.parametrize("command", COMMANDS)
def test_every_command_has_help(command):
    result = invoke(command, "--help")
    assert result.exit_code == 0
    assert "Usage" in result.output and len(result.output.splitlines()) > 5


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["train", "data", "--emb-size", "1e3"], "error: invalid value for '--emb-size': '1e3' "
         "is not a valid int; see 'nmt train -h'"),
        (["translate", "--beem", "3"], "error: no such option: --beem (Possible options: "
         "--beam, --nbest); see 'nmt translate -h'"),
        (["train"], "error: missing argument 'DATA_DIR'; see 'nmt train -h'"),
        (["frob"], "error: no such command 'frob'; see 'nmt -h'"),
        (["transalte"], "error: no such command 'transalte' (did you mean 'translate'?); see "
         "'nmt -h'"),
        (["translate", "-m"], "error: option '-m' requires an argument; see 'nmt translate -h'"),
        (["--frob"], "error: no such option: --frob; see 'nmt -h'"),
        (["eval", "--hyp", "a", "--ref", "r", "--hyp=b"], "error: --hyp was given 2 times, but "
         "it takes one value: give it once; see 'nmt eval -h'"),
        (["align", "-m", "A", "--model", "B"], "error: -m was given 2 times, but it takes one "
         "value: give it once; see 'nmt align -h'"),
        (["translate", "-m", "A", "-i", "a", "-i", "--beam"], "error: -i was given 2 times, but "
         "it takes one value: give it once; see 'nmt translate -h'"),
        (["prepare", "--src", "", "--tgt", "b"], "error: --src was given an empty path (an unset "
         "shell variable?): give a path; see 'nmt prepare -h'"),
        (["eval", "--ref", "r", "--hyp="], "error: --hyp was given an empty path (an unset shell "
         "variable?): give a path; see 'nmt eval -h'"),
    ],
)  # fmt: skip
def test_usage_errors_are_one_line_with_exit_code_2(args, message):
    result = invoke(*args)
    assert result.exit_code == 2
    assert result.stderr == message + "\n" and result.stdout == ""


@pytest.mark.parametrize("args", [["translate", "-m"], ["translate", "--frob"]])
def test_usage_hints_name_the_program_as_started(args):
    """Under `python -m nmt_cli` the hint names that, whether or not click had made the
    command's context when the error came (a missing value: not yet)."""
    run = subprocess.run(
        [sys.executable, "-m", "nmt_cli", *args], capture_output=True, text=True, check=False
    )
    assert run.returncode == 2
    assert run.stderr.endswith("; see 'python -m nmt_cli translate -h'\n"), run.stderr


def test_bare_nmt_shows_the_help_and_version_and_help_exit_0():
    bare = invoke()
    assert bare.exit_code == 2 and "Usage" in bare.stdout and bare.stderr == ""
    assert invoke("--version").exit_code == 0 and invoke("train", "-h").exit_code == 0


def test_help_does_not_import_heavy_libraries():
    code = (
        "import sys; from nmt_cli.cli.app import app; "
        "print(sorted(m for m in ('torch', 'sentencepiece', 'sacrebleu') if m in sys.modules))"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "[]"


def test_translate_imports_only_what_plain_output_needs(toy_model_dir):
    code = (
        "import sys; sys.argv = ['nmt', 'translate', '-m', sys.argv[1]]\n"
        "from nmt_cli.cli.app import app\n"
        "try:\n    app()\nexcept SystemExit:\n    pass\n"
        "heavy = ('pydantic', 'sacrebleu', 'nmt_cli.trainer', 'nmt_cli.alignment')\n"
        "print(sorted(m for m in heavy if m in sys.modules), file=sys.stderr)"
    )
    run = subprocess.run(
        [sys.executable, "-c", code, str(toy_model_dir)],
        input="apple river\n",
        capture_output=True,
        text=True,
        check=True,
    )
    assert len(run.stdout.splitlines()) == 1
    assert run.stderr.strip().splitlines()[-1] == "[]"


def test_python_dash_m_entry_point():
    out = subprocess.run(
        [sys.executable, "-m", "nmt_cli", "--version"], capture_output=True, text=True
    )
    assert out.returncode == 0 and out.stdout.startswith("nmt ")


def test_training_wrote_a_self_contained_model_dir(toy_model_dir):
    names = {p.name for p in toy_model_dir.iterdir()}
    assert {
        "model.pt",
        "config.json",
        "meta.json",
        "src.model",
        "tgt.model",
        "train.jsonl",
    } <= names
    meta = json.loads((toy_model_dir / "meta.json").read_text())
    assert meta["step"] > 0 and len(meta["data_fingerprint"]) > 4
    # both sides of the toy corpus are spaced words: translations and alignments stay in words
    assert meta["src_unsegmented"] is False and meta["tgt_unsegmented"] is False
    from nmt_cli.translator import Translator

    assert Translator.load(toy_model_dir, device="cpu").unsegmented == (False, False)
    events = [json.loads(line) for line in (toy_model_dir / "train.jsonl").read_text().splitlines()]
    assert any(e["event"] == "valid" for e in events)


def test_translate_keeps_one_line_per_input_line(toy_model_dir):
    lines = ["apple river", "", "   ", "stone " * 5000, "green 🍎 苹果 bird", "sun"]
    result = invoke("translate", "-m", toy_model_dir, "--beam", "2", input="\n".join(lines) + "\n")
    assert result.exit_code == 0, result.output
    out = result.stdout.split("\n")
    assert out[-1] == "" and len(out) - 1 == len(lines)
    assert out[1] == "" and out[2] == ""
    assert "line 4" in result.stderr  # the over-long line is truncated with a warning


def test_translate_batch_size_does_not_change_output(toy_model_dir):
    words = ["apple", "river", "stone", "green", "bird", "water", "tree", "night", "sun"]
    pairs = [(i, j) for i in range(9) for j in range(9) if i != j][:20]
    text = "\n".join(
        " ".join([words[i], words[j], *words[: k % 4]]) for k, (i, j) in enumerate(pairs)
    )
    assert len(set(text.split("\n"))) == 20  # distinct lines: each is decoded in its batch
    one = invoke("translate", "-m", toy_model_dir, "--batch-size", "1", input=text)
    many = invoke("translate", "-m", toy_model_dir, "--batch-size", "64", input=text)
    assert one.exit_code == 0 and one.stdout == many.stdout


def test_repeated_lines_are_decoded_once_per_chunk(toy_model_dir, monkeypatch):
    import nmt_cli.decoding as translator_module
    from nmt_cli.translator import SearchOptions, Translator

    translator = Translator.load(toy_model_dir)
    options = SearchOptions(beam_size=2)
    lines = ["apple river", "green bird", "apple river", "", " apple river ", "green bird"]
    alone = {line: translator.translate_chunk([line], options)[0].text for line in set(lines)}
    decoded = []
    real = translator_module.decode_ids

    def counting(model, sources, *args, **kwargs):
        decoded.append(len(sources))
        return real(model, sources, *args, **kwargs)

    monkeypatch.setattr(translator_module, "decode_ids", counting)
    results = translator.translate_chunk(lines, options)
    assert decoded == [2]  # "apple river" (stripped copies too) and "green bird"
    assert [r.text for r in results] == [alone[line] for line in lines]
    assert [r.source for r in results] == lines


@pytest.mark.parametrize("beam", [1, 3])
def test_a_search_without_attention_finds_the_same_hypotheses(toy_model_dir, beam):
    from nmt_cli.decoding import decode_ids
    from nmt_cli.translator import SearchOptions, Translator

    translator = Translator.load(toy_model_dir)
    sources = [translator._encode_source(line)[0] for line in ["apple river", "green bird sun"]]
    options = SearchOptions(beam_size=beam, nbest=beam)
    plain = decode_ids(translator.model, sources, translator.device, options, with_attention=False)
    full = decode_ids(translator.model, sources, translator.device, options)
    for without, with_ in zip(plain, full, strict=True):
        assert [h.tokens for h in without] == [h.tokens for h in with_]
        assert [h.score for h in without] == [h.score for h in with_]
        assert all(h.attention is None for h in without)
        assert all(h.attention.size(0) == len(h.tokens) + 1 for h in with_)


def _argmax_one_sentence(translator, line: str) -> list[int]:
    """Greedy decoding written out for one sentence: no batch, no search module."""
    import torch

    from nmt_cli.specials import BOS_ID, EOS_ID

    ids = translator.src_tokenizer.encode(line)
    src = torch.tensor([ids])
    state = translator.model.encode(src, torch.tensor([len(ids)]))
    limit = int(len(ids) * 2.0 + 10)  # SearchOptions' default max_len_ratio and extra
    prev, out = torch.tensor([BOS_ID]), []
    with torch.inference_mode():
        while True:
            log_probs, state, _ = translator.model.step_log_probs(prev, state)
            token = EOS_ID if len(out) >= limit else int(log_probs[0].argmax())
            if token == EOS_ID:
                return out
            out.append(token)
            prev = torch.tensor([token])


def _beam_search_of_one(translator, line: str) -> list[int]:
    import torch

    from nmt_cli.search import beam_search
    from nmt_cli.specials import BOS_ID, EOS_ID

    ids = translator.src_tokenizer.encode(line)
    state = translator.model.encode(torch.tensor([ids]), torch.tensor([len(ids)]))
    limits = torch.tensor([int(len(ids) * 2.0 + 10)])
    model = translator.model
    with torch.inference_mode():
        ((best,),) = beam_search(
            model.step_log_probs, model.reorder, state, 1, BOS_ID, EOS_ID, limits, beam_size=1
        )
    return best.tokens


def test_beam_one_is_the_argmax_path_and_equals_a_beam_of_one(toy_model_dir):
    from nmt_cli.translator import Translator

    lines = ["apple river stone", "green bird", "water tree night sun light"]
    result = invoke(
        "translate", "-m", toy_model_dir, "--beam", "1", "--json", input="\n".join(lines) + "\n"
    )
    assert result.exit_code == 0, result.stderr
    translator = Translator.load(toy_model_dir, device="cpu")
    pieces = [json.loads(record)["pieces"] for record in result.stdout.splitlines()]
    assert len(pieces) == len(lines)
    for line, got in zip(lines, pieces, strict=True):
        argmax = _argmax_one_sentence(translator, line)
        assert got == [translator.tgt_tokenizer.id_to_piece(t) for t in argmax]
        assert _beam_search_of_one(translator, line) == argmax


def test_early_stop_without_length_penalty_keeps_the_exact_output(toy_model_dir):
    text = "apple river stone\ngreen bird\nwater tree night sun light\n"
    args = ("translate", "-m", toy_model_dir, "--beam", "3", "--length-penalty", "0")
    exact = invoke(*args, input=text)
    early = invoke(*args, "--early-stop", input=text)
    assert early.exit_code == 0 and early.stdout == exact.stdout
    assert early.stdout.count("\n") == 3


def test_exact_stop_and_early_stop_together_are_refused(toy_model_dir):
    result = invoke(
        "translate", "-m", toy_model_dir, "--exact-stop", "--early-stop", input="green bird\n"
    )
    assert result.exit_code == 2
    assert "--exact-stop and --early-stop" in result.stderr and result.stdout == ""


def test_translate_json_has_attention_rows_per_piece(toy_model_dir):
    result = invoke("translate", "-m", toy_model_dir, "--json", input="apple river stone\n")
    record = json.loads(result.stdout)
    assert record["source"] == "apple river stone"
    assert len(record["attention"]) == len(record["pieces"]) + 1
    assert all(abs(sum(row) - 1) < 1e-3 for row in record["attention"])


def test_invalid_utf8_names_the_line(toy_model_dir):
    result = invoke("translate", "-m", toy_model_dir, input=b"apple\n\xff\xfe bad\n")
    assert result.exit_code == 2
    assert "line 2" in result.stderr and "Traceback" not in result.output


def test_invalid_utf8_replaced_on_request(toy_model_dir):
    result = invoke(
        "translate", "-m", toy_model_dir, "--on-invalid", "replace", input=b"apple\n\xff bad\n"
    )
    assert result.exit_code == 0 and result.stdout.count("\n") == 2


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["--beam", "0"], "--beam"),
        (["--nbest", "9", "--beam", "2"], "--nbest"),
        (["--batch-size", "0"], "--batch-size"),
    ],
)
def test_translate_bad_options(toy_model_dir, args, message):
    result = invoke("translate", "-m", toy_model_dir, *args, input="apple\n")
    assert result.exit_code == 2 and message in result.stderr
    assert len(result.stderr.strip().splitlines()) == 1


def test_translate_missing_model_dir(tmp_path):
    result = invoke("translate", "-m", tmp_path / "nope", input="x\n")
    assert result.exit_code == 3 and "does not exist" in result.stderr
    assert "Traceback" not in result.output


def test_align_forced_pairs_give_pharaoh_lines(toy_model_dir):
    text = "apple river ||| RIVER APPLE\ngreen bird sun ||| SUN BIRD GREEN\n"
    result = invoke("align", "-m", toy_model_dir, "--view", "none", input=text)
    assert result.exit_code == 0, result.output
    lines = result.stdout.splitlines()
    assert len(lines) == 2
    links = [tuple(map(int, link.split("-"))) for link in lines[1].split()]
    assert links and all(0 <= i < 3 and 0 <= j < 3 for i, j in links)


def test_gold_links_past_the_models_cut_count_as_missed_not_as_errors(toy_model_dir, tmp_path):
    """A gold link to a word the model did not read (the source is cut at its length) lies
    inside the sentence: it is scored (missed), and a gold file of the other direction is
    still recognised as such."""
    from nmt_cli import checkpoint

    limit = checkpoint.load_model(toy_model_dir, "cpu").config.train.max_len
    words = limit + 6  # "apple" alone is more than one piece: well past the cut
    text = f"{' '.join(['apple'] * words)} ||| RIVER APPLE\n"
    gold = tmp_path / "gold.align"
    gold.write_text(f"0-0 {words - 1}-1\n")
    result = invoke("align", "-m", toy_model_dir, "--view", "none", "--gold", gold, input=text)
    assert result.exit_code == 0, result.output
    assert "AER" in result.stderr and "longer than the model's" in result.stderr
    gold.write_text(f"0-0 1-{words - 1}\n")  # target-source links
    swapped = invoke("align", "-m", toy_model_dir, "--view", "none", "--gold", gold, input=text)
    assert swapped.exit_code == 2
    assert "every gold link fits with its two numbers swapped" in swapped.stderr


def test_align_refuses_beam_for_pairs_it_does_not_translate(toy_model_dir, tmp_path):
    fix = "these are sentence pairs, aligned as given: drop --beam"
    piped = invoke("align", "-m", toy_model_dir, "--beam", "3", "--view", "none",
                   input="apple river ||| RIVER APPLE\n")  # fmt: skip
    assert piped.exit_code == 2 and fix in piped.stderr and piped.stdout == ""
    (tmp_path / "s").write_text("apple river\n")
    (tmp_path / "t").write_text("RIVER APPLE\n")
    files = invoke("align", "-m", toy_model_dir, "--src", tmp_path / "s", "--tgt", tmp_path / "t",
                   "--beam", "3", "--view", "none")  # fmt: skip
    assert files.exit_code == 2 and fix in files.stderr and files.stdout == ""
    sources = invoke("align", "-m", toy_model_dir, "--beam", "3", "--view", "none",
                     input="apple river\n")  # fmt: skip
    assert sources.exit_code == 0 and len(sources.stdout.splitlines()) == 1, sources.output


def test_align_warns_of_a_source_longer_than_the_model_reads(toy_model_dir):
    from nmt_cli import checkpoint

    limit = checkpoint.load_model(toy_model_dir, "cpu").config.train.max_len
    long = " ".join(["apple river"] * limit)
    text = f"apple river ||| RIVER APPLE\n{long} ||| RIVER APPLE\n"
    result = invoke("align", "-m", toy_model_dir, "--view", "none", input=text)
    assert result.exit_code == 0, result.output
    assert len(result.stdout.splitlines()) == 2
    warning = f"<stdin> line 2: the source is longer than the model's {limit} pieces"
    assert warning in result.stderr and len(result.stderr.strip().splitlines()) == 1
    many = invoke("align", "-m", toy_model_dir, "--view", "none", input=f"{long} ||| SUN\n" * 7)
    assert many.exit_code == 0 and len(many.stdout.splitlines()) == 7, many.output
    warnings = many.stderr.strip().splitlines()
    assert [w.split(":")[1].strip() for w in warnings[:5]] == [
        f"<stdin> line {n}" for n in range(1, 6)
    ]
    assert (
        warnings[5].startswith(
            f"warning: 2 more lines with a source longer than the model's {limit} pieces"
        )
        and len(warnings) == 6
    )


def test_align_warns_of_a_source_to_translate_longer_than_the_model_reads(toy_model_dir):
    """Source lines that align translates first are cut as translate cuts them, and said so."""
    from nmt_cli import checkpoint

    limit = checkpoint.load_model(toy_model_dir, "cpu").config.train.max_len
    long = " ".join(["apple river"] * limit)
    result = invoke("align", "-m", toy_model_dir, "--view", "none", input=f"sun\n{long}\nsun\n")
    assert result.exit_code == 0, result.output
    assert len(result.stdout.splitlines()) == 3
    assert result.stderr.strip() == (
        f"warning: <stdin> line 2 is longer than the model's {limit} pieces: translated and "
        f"aligned its first {limit} (the words after them get no links)"
    )
    translated = invoke("translate", "-m", toy_model_dir, input=f"{long}\n")
    assert f"line 1 is longer than the model's {limit} pieces" in translated.stderr


def test_align_cuts_a_target_longer_than_the_model_reads_and_says_so(toy_model_dir):
    from nmt_cli import checkpoint

    limit = 10 * checkpoint.load_model(toy_model_dir, "cpu").config.train.max_len
    long = " ".join(["RIVER APPLE"] * limit)
    result = invoke("align", "-m", toy_model_dir, "--json", input=f"apple river ||| {long}\n")
    assert result.exit_code == 0, result.output
    warning = f"<stdin> line 1: the target is longer than the longest output's {limit} pieces"
    assert warning in result.stderr
    record = json.loads(result.stdout)
    assert len(record["tgt_words"]) <= limit and len(record["weights"]) <= limit


def test_align_line_without_separator_is_an_error(toy_model_dir):
    result = invoke("align", "-m", toy_model_dir, input="a ||| A\nno separator here\n")
    assert result.exit_code == 2 and "line 2" in result.stderr


def test_train_refuses_existing_model_without_resume(toy_data_dir, toy_model_dir):
    result = invoke("train", toy_data_dir, "-o", toy_model_dir, "--max-steps", "1")
    assert result.exit_code == 2 and "--resume" in result.stderr  # an option to add: usage


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["--attention", "bogus"], "--attention"),
        (["--hidden-size", "-3"], "--hidden-size"),
        (["--max-time", "soon"], "--max-time"),
        (["--decoder-style", "bahdanau", "--input-feed"], "a bahdanau decoder reads the context"),
        (["--attention", "none", "--input-feed"], "--attention none has no attentional vector"),
        (["--attention", "none", "--decoder-style", "bahdanau"], "--attention none has none"),
    ],
)
def test_train_bad_option_values(toy_data_dir, tmp_path, args, message):
    result = invoke("train", toy_data_dir, "-o", tmp_path / "m", *args)
    assert result.exit_code == 2 and message in result.stderr
    assert not (tmp_path / "m").exists()


def test_train_unknown_config_key_lists_valid_ones(toy_data_dir, tmp_path):
    config = tmp_path / "c.toml"
    config.write_text("[model]\nhiden_size = 3\n")
    result = invoke("train", toy_data_dir, "-o", tmp_path / "m", "--config", config)
    assert (
        result.exit_code == 2 and "hiden_size" in result.stderr and "hidden_size" in result.stderr
    )
    assert "(did you mean hidden_size?)" in result.stderr
    assert f"{config} line 2: [model]" in result.stderr
    assert "src_vocab_size" not in result.stderr  # valid in a saved config, refused in a user's


def test_a_config_key_in_the_wrong_section_says_where_it_belongs(toy_data_dir, tmp_path):
    config = tmp_path / "c.toml"
    config.write_text("[model]\nemb_size = 8\n\n[train]\nlr = 0.001\ndropout = 0.1\n", "utf-8")
    result = invoke("train", toy_data_dir, "-o", tmp_path / "m", "--config", config)
    assert result.exit_code == 2 and not (tmp_path / "m").exists()
    said = " ".join(result.stderr.split())
    assert f"unknown key dropout in {config} line 6: [train] (dropout belongs in [model])" in said
    config.write_text("max_steps = 10\n", "utf-8")  # above every section
    result = invoke("train", toy_data_dir, "-o", tmp_path / "m", "--config", config)
    assert result.exit_code == 2 and "(max_steps belongs in [train])" in result.stderr


@pytest.mark.parametrize(
    ("setting", "message"),
    [
        ("[train]\nlr = -1\n", "[train] lr must be in (0, 10], got -1.0"),
        ("[model]\nemb_size = 0\n", "[model] emb_size must be in 1..4096, got 0"),
        ('[model]\nattention = "mlp"\n', "[model] attention must be one of dot, general"),
        ('[model]\nhidden_size = "big"\n', "[model] hidden_size must be a whole number, got 'big'"),
        ('[train]\nlr = "fast"\n', "[train] lr must be a number, got 'fast'"),
        ("[train]\nvalid_every = 0\n", "[train] valid_every must be ≥ 1, got 0"),
        ("[train]\nlog_every = 0\n", "[train] log_every must be ≥ 1, got 0"),
        ("[train]\nmin_lr = 0.5\n", "[train] min_lr must be in [0, lr], got 0.5 with lr 0.002"),
    ],
)
def test_a_bad_value_in_a_config_file_is_named_by_file_and_key(
    toy_data_dir, tmp_path, setting, message
):
    config = tmp_path / "c.toml"
    config.write_text(setting)
    result = invoke("train", toy_data_dir, "-o", tmp_path / "m", "--config", config)
    assert result.exit_code == 2
    assert result.stderr.startswith(f"error: {config} line 2: {message}")  # the key's line
    assert not (tmp_path / "m").exists()


def test_an_inverse_square_root_schedule_without_warm_up_is_refused(toy_data_dir, tmp_path):
    """It would decay from nothing: a constant rate under a config that says otherwise."""
    config = tmp_path / "c.toml"
    config.write_text('[train]\nschedule = "inverse_sqrt"\nwarmup_steps = 0\n')
    result = invoke("train", toy_data_dir, "-o", tmp_path / "m", "--config", config)
    assert result.exit_code == 2 and len(result.stderr.strip().splitlines()) == 1
    assert "warmup_steps is 0: set warmup_steps ≥ 1" in result.stderr
    assert not (tmp_path / "m").exists()


def test_a_learning_rate_below_the_plateau_floor_says_which_setting_to_change(
    toy_data_dir, tmp_path
):
    result = invoke("train", toy_data_dir, "-o", tmp_path / "m", "--lr", "1e-6")
    assert result.exit_code == 2 and len(result.stderr.strip().splitlines()) == 1
    assert "min_lr must be in [0, lr], got 1e-05 with lr 1e-06" in result.stderr
    assert "raise lr (--lr)" in result.stderr and not (tmp_path / "m").exists()


def test_a_bad_flag_over_a_config_file_is_named_as_the_flag(toy_data_dir, tmp_path):
    config = tmp_path / "c.toml"
    config.write_text("[train]\nlr = -1\n")
    result = invoke("train", toy_data_dir, "-o", tmp_path / "m", "--config", config, "--lr", "20")
    assert result.exit_code == 2 and result.stderr.startswith("error: --lr must be in (0, 10]")


def test_a_value_of_the_wrong_type_in_a_config_file_is_refused_under_a_flag_too(
    toy_data_dir, tmp_path
):
    """`max_steps = "10"` was refused alone and accepted when --max-steps overrode it: the
    file is wrong either way, and the next run without the flag would fail on it."""
    config = tmp_path / "c.toml"
    config.write_text('[train]\nmax_steps = "10"\n')
    result = invoke("train", toy_data_dir, "-o", tmp_path / "m", "--config", config,
                    "--max-steps", "1")  # fmt: skip
    assert result.exit_code == 2 and not (tmp_path / "m").exists()
    assert f"{config} line 2: [train] max_steps must be a whole number, got '10'" in result.stderr


def test_a_config_file_may_start_with_a_byte_order_mark(tmp_path):
    from nmt_cli.config import load_toml

    config = tmp_path / "c.toml"
    config.write_bytes(b"\xef\xbb\xbf[model]\nhidden_size = 64\n")  # as Notepad saves it
    assert load_toml(config) == {"model": {"hidden_size": 64}}


def test_a_config_file_takes_max_time_as_the_flag_does():
    from nmt_cli.config import Config
    from nmt_cli.errors import ConfigError

    assert Config.from_dict({"train": {"max_time": "20m"}}).train.max_time == 1200.0
    assert Config.from_dict({"train": {"max_time": 90}}).train.max_time == 90.0  # seconds
    with pytest.raises(ConfigError, match=r"c.toml: \[train\] max_time must be seconds or look"):
        Config.from_dict({"train": {"max_time": "soon"}}, "c.toml")


@pytest.mark.parametrize("setting", ["align_shift = 7", "src_vocab_size = 5"])
def test_train_refuses_a_config_that_sets_what_training_derives(toy_data_dir, tmp_path, setting):
    config = tmp_path / "c.toml"
    config.write_text(f"[model]\n{setting}\n")  # align_shift moved translate --align's links
    result = invoke("train", toy_data_dir, "-o", tmp_path / "m", "--config", config)
    assert result.exit_code == 2 and "which nmt train derives" in result.stderr
    assert setting.split()[0] in result.stderr and not (tmp_path / "m").exists()


@pytest.mark.parametrize("beam", [1, 3])
def test_max_len_caps_every_output_at_that_many_pieces(toy_model_dir, beam):
    from nmt_cli.translator import SearchOptions, Translator

    translator = Translator.load(toy_model_dir)
    lines = ["apple river stone", "green bird", "water tree night sun light"]
    free = translator.translate_chunk(lines, SearchOptions(beam_size=beam))
    capped = translator.translate_chunk(lines, SearchOptions(beam_size=beam, max_len=2))
    assert max(len(t.pieces) for t in free) > 2  # the cap binds on this input
    assert all(len(t.pieces) <= 2 for t in capped)


def test_the_train_log_says_how_many_pairs_were_too_long():
    import io

    from rich.console import Console

    from nmt_cli.render.progress import TrainDisplay

    event = {"config": {"model": {}, "train": {}}, "parameters": 12, "device": "cpu",
             "train_pairs": 9_999, "long_pairs": 1, "max_len": 100, "output": "m"}  # fmt: skip
    display = TrainDisplay(Console(file=io.StringIO()))
    assert "9,999 training pairs (1 longer than max_len 100 left out) → m" in display._line(
        "config", event
    )
    assert "training pairs → m" in display._line("config", {**event, "long_pairs": 0})
    one = {**event, "train_pairs": 1, "long_pairs": 0}
    assert "cpu, 1 training pair → m" in display._line("config", one)
    amp = {**event, "config": {"model": {}, "train": {"amp": True}}}
    assert "amp=True (CUDA only: off here)" in display._line("config", amp)
    assert "off here" not in display._line("config", {**amp, "device": "cuda:0"})


def test_the_train_log_says_when_the_teacher_aligns_and_counts_epochs_as_its_steps_do():
    import io

    from rich.console import Console

    from nmt_cli.guide import ALIGNING
    from nmt_cli.progress import count
    from nmt_cli.render.progress import TrainDisplay

    out = io.StringIO()
    display = TrainDisplay(Console(file=out, width=200))
    display(count(ALIGNING, 0, 24_037))
    display(count(ALIGNING, 24_037, 24_037))
    lines = out.getvalue().splitlines()
    assert lines[0] == "aligning training pairs with eflomal: 24,037 pairs…"
    assert lines[1].startswith("aligning training pairs with eflomal: done in ")
    done = {"step": 529, "epoch": 3, "epochs_finished": 2, "batch_index": 17, "best_bleu": 1.0,
            "best_step": 500, "best_by": "bleu", "train_seconds": 5.0}  # fmt: skip
    assert "529 steps, epoch 3," in display._line("done", done)  # 2 complete, in the third


def test_a_run_resumed_before_its_first_validation_says_so_not_a_score():
    """It said `best dev BLEU -1.00 at step 0`, the placeholder of no validation."""
    import io

    from rich.console import Console

    from nmt_cli.render.progress import TrainDisplay
    from nmt_cli.train_report import Progress

    display = TrainDisplay(Console(file=io.StringIO()))
    fresh = Progress()
    resumed = {"step": 84, "epoch": 0, "batch_index": 84, "best_bleu": fresh.best_bleu,
               "best_step": fresh.best_step, "best_by": "bleu"}  # fmt: skip
    line = display._line("resumed", resumed)
    assert "no validation yet" in line and "-1.00" not in line
    validated = display._line("resumed", {**resumed, "best_bleu": 3.5, "best_step": 50})
    assert "best dev BLEU 3.50 at step 50" in validated


def test_the_shortlist_line_shows_a_difference_below_a_hundredth():
    """Its verdict "costs BLEU" beside two equal scores (0.02, 0.02) read as a contradiction."""
    from nmt_cli.render.progress import shortlist_line
    from nmt_cli.validation import ShortlistCheck

    close = ShortlistCheck(0.0213, 0.0241, 0.05, 100).record()
    line = shortlist_line(close)
    assert "0.0213 with it, 0.0241 without" in line and "it costs BLEU here" in line
    apart = shortlist_line(ShortlistCheck(12.03, 12.14, 0.05, 100).record())
    assert "12.03 with it, 12.14 without" in apart


@pytest.mark.parametrize("flag", ["--early-stop", "--exact-stop"])
def test_a_beam_stopping_rule_with_greedy_search_is_refused(toy_model_dir, flag):
    result = invoke("translate", "-m", toy_model_dir, "--beam", "1", flag, input="green bird\n")
    assert result.exit_code == 2
    assert result.stderr == (
        f"error: {flag} is a rule of beam search; --beam 1 is greedy, which ends each sentence "
        f"at its first EOS: drop {flag}, or give --beam 2 or more\n"
    )
    assert result.stdout == ""


def test_align_stops_at_the_first_pair_the_gold_file_has_no_line_for(toy_model_dir, tmp_path):
    gold = tmp_path / "gold.align"
    gold.write_text("0-0\n", encoding="utf-8")
    text = "apple river ||| RIVER APPLE\ngreen bird ||| BIRD GREEN\nsun ||| SUN\n"
    result = invoke("align", "-m", toy_model_dir, "--view", "links", "--gold", gold, input=text)
    assert result.exit_code == 2 and result.stdout == ""  # no links without their score
    assert "pair 1" in result.stderr and "pair 2" not in result.stderr  # the rest not aligned
    assert f"{gold} has 1 alignment but there are more pairs to align" in result.stderr
    gold.write_text("0-0\n0-0\n0-0\n0-0\n", encoding="utf-8")
    result = invoke("align", "-m", toy_model_dir, "--view", "none", "--gold", gold, input=text)
    assert result.exit_code == 2 and "has 4 alignments but 3 pairs were aligned" in result.stderr
    assert result.stdout == ""


def test_align_warns_that_piece_links_do_not_fit_a_gold_file_of_words(toy_model_dir, tmp_path):
    gold = tmp_path / "gold.align"
    gold.write_text("0-1 1-0\n", encoding="utf-8")
    text = "apple river ||| RIVER APPLE\n"
    for unit, warned in (("piece", True), ("word", False)):
        result = invoke("align", "-m", toy_model_dir, "--unit", unit, "--gold", gold, input=text)
        assert result.exit_code == 0, result.output
        assert ("--unit piece links SentencePiece pieces" in result.stderr) is warned
        assert "AER" in result.stderr and len(result.stdout.splitlines()) == 1


def test_align_writes_no_links_when_the_gold_file_does_not_fit_them(toy_model_dir, tmp_path):
    """A gold link outside its sentence is found only once the pairs are aligned: the links
    wait for the score, so the command fails with nothing on stdout."""
    src, tgt, gold = tmp_path / "a.src", tmp_path / "a.tgt", tmp_path / "gold.align"
    src.write_text("apple river\ngreen bird\n", encoding="utf-8")
    tgt.write_text("RIVER APPLE\nBIRD GREEN\n", encoding="utf-8")
    gold.write_text("0-1 1-0\n0-0 0-9\n", encoding="utf-8")
    args = ["align", "-m", toy_model_dir, "--src", src, "--tgt", tgt, "--gold", gold]
    result = invoke(*args)
    assert result.exit_code == 2 and result.stdout == "", result.output
    assert "sentence 2: link 0-9 lies outside the sentence" in result.stderr
    picture = tmp_path / "first.png"
    if importlib.util.find_spec("matplotlib") is not None:  # --png needs it
        assert invoke(*args, "--png", picture).exit_code == 2
        assert not picture.exists()  # nor the picture of a failed command
    gold.write_text("0-1 1-0\n0-1 1-0\n", encoding="utf-8")
    result = invoke(*args)
    assert result.exit_code == 0 and len(result.stdout.splitlines()) == 2 and "AER" in result.stderr
    if importlib.util.find_spec("matplotlib") is not None:
        assert invoke(*args, "--png", picture).exit_code == 0 and picture.stat().st_size > 0


def test_align_writes_its_score_as_json_where_asked_and_only_when_scored(toy_model_dir, tmp_path):
    from nmt_cli.alignment import parse_pharaoh, read_gold, score_alignments

    gold, scores = tmp_path / "gold.align", tmp_path / "score.json"
    gold.write_text("0-1 1-0\n0-0\n", encoding="utf-8")
    text = "apple river ||| RIVER APPLE\ngreen bird ||| BIRD GREEN\n"
    args = ["align", "-m", toy_model_dir, "--view", "none", "--gold", gold]
    result = invoke(*args, "--score-json", scores, input=text)
    assert result.exit_code == 0, result.output
    links = [parse_pharaoh(line) for line in result.stdout.splitlines()]
    expected = score_alignments(links, read_gold(gold))
    record = json.loads(scores.read_text(encoding="utf-8"))
    assert record["aer"] == pytest.approx(expected.aer) and record["pairs"] == 2
    assert (record["predicted_links"], record["sure_gold_links"]) == (expected.predicted, 3)
    assert f"AER {expected.aer * 100:.2f}%" in result.stderr  # the line is still said
    scores.unlink()
    result = invoke(*args[:-2], "--score-json", scores, input=text)  # no gold: nothing to score
    assert result.exit_code == 2 and "--score-json writes the score against gold links" in (
        result.stderr
    )
    gold.write_text("0-1 1-0\n0-9\n", encoding="utf-8")  # a link outside its sentence
    assert invoke(*args, "--score-json", scores, input=text).exit_code == 2
    result = invoke(*args, "--score-json", gold, input=text)  # the gold file itself
    assert result.exit_code == 2 and "also an input" in result.stderr
    assert not scores.exists() and gold.read_text(encoding="utf-8") == "0-1 1-0\n0-9\n"


def test_align_checks_every_pair_of_an_input_file_before_writing_any(toy_model_dir, tmp_path):
    pairs = tmp_path / "pairs.txt"
    pairs.write_text("apple river ||| RIVER APPLE\nno separator here\n", encoding="utf-8")
    result = invoke("align", "-m", toy_model_dir, "--view", "none", "--input", pairs)
    assert result.exit_code == 2 and result.stdout == ""
    assert f"{pairs} line 2 has no ' ||| ' separator" in result.stderr


def test_align_files_with_a_gold_file_of_another_length_write_nothing(toy_model_dir, tmp_path):
    src, tgt, gold = tmp_path / "a.src", tmp_path / "a.tgt", tmp_path / "gold.align"
    src.write_text("apple river\ngreen bird\nsun\n", encoding="utf-8")
    tgt.write_text("RIVER APPLE\nBIRD GREEN\nSUN\n", encoding="utf-8")
    for lines in (2, 4):
        gold.write_text("0-0\n" * lines, encoding="utf-8")
        result = invoke("align", "-m", toy_model_dir, "--src", src, "--tgt", tgt, "--gold", gold)
        assert result.exit_code == 2 and result.stdout == ""
        assert f"{gold} has {lines} alignments but there are 3 pairs to align" in result.stderr
    gold.write_text("0-1 1-0\n1-0 0-1\n0-0\n", encoding="utf-8")
    result = invoke("align", "-m", toy_model_dir, "--src", src, "--tgt", tgt, "--gold", gold)
    assert result.exit_code == 0 and len(result.stdout.splitlines()) == 3 and "AER" in result.stderr


def test_align_refuses_a_line_with_two_separators(toy_model_dir):
    text = "apple river ||| RIVER APPLE\ngreen ||| bird ||| BIRD GREEN\n"
    result = invoke("align", "-m", toy_model_dir, "--view", "none", input=text)
    assert result.exit_code == 2 and "<stdin> line 2 has 2 ' ||| ' separators" in result.stderr


def test_translate_refuses_align_with_an_nbest_list(toy_model_dir):
    result = invoke("translate", "-m", toy_model_dir, "--nbest", "2", "--align", input="sun\n")
    assert result.exit_code == 2 and result.stdout == ""
    assert "--align links one translation per line, and --nbest prints several" in result.stderr
    both = invoke("translate", "-m", toy_model_dir, "--nbest", "2", "--align", "--json",
                  input="sun\n")  # fmt: skip
    record = json.loads(both.stdout)
    assert both.exit_code == 0 and len(record["nbest"]) == 2 and "alignment" in record


def test_an_empty_line_has_its_one_empty_translation_in_every_nbest_form(toy_model_dir):
    as_json = invoke("translate", "-m", toy_model_dir, "--json", input="sun\n\n")
    assert as_json.exit_code == 0, as_json.output
    records = [json.loads(line) for line in as_json.stdout.splitlines()]
    assert records[1]["nbest"] == [{"translation": "", "score": 0.0}]
    assert records[0]["nbest"][0]["translation"] == records[0]["translation"]
    listed = invoke("translate", "-m", toy_model_dir, "--nbest", "2", input="\n")
    assert listed.exit_code == 0 and listed.stdout == "0 |||  ||| 0.0000\n"


def test_align_refuses_a_reverse_model_of_the_wrong_direction(toy_model_dir, tmp_path):
    import shutil

    forward, backward = tmp_path / "en-zh", tmp_path / "zh-en"
    for directory, (src, tgt) in ((forward, ("en", "zh")), (backward, ("en", "zh"))):
        shutil.copytree(toy_model_dir, directory)
        meta = json.loads((directory / "meta.json").read_text())
        meta.update(src_lang=src, tgt_lang=tgt, data_fingerprint=directory.name)  # other data
        (directory / "meta.json").write_text(json.dumps(meta))
    text = "apple river ||| RIVER APPLE\n"
    args = ["align", "-m", forward, "--reverse-model", backward, "--view", "none"]
    result = invoke(*args, input=text)
    assert result.exit_code == 2 and result.stdout == ""
    assert "translates en→zh, but the reverse of" in result.stderr
    meta = json.loads((backward / "meta.json").read_text())
    (backward / "meta.json").write_text(json.dumps({**meta, "src_lang": "ZH-cn", "tgt_lang": "en"}))
    assert invoke(*args, input=text).exit_code == 0  # language codes compared by their base


def test_align_says_when_the_reverse_model_saw_other_units(
    toy_model_dir, toy_reverse_dir, monkeypatch
):
    """A pair whose two directions count other units keeps the forward links; the command
    says how many pairs that was, once, instead of symmetrising nothing in silence."""
    from dataclasses import replace

    from nmt_cli import aligner

    text = "apple river ||| RIVER APPLE\nstone ||| STONE\n"
    args = ["align", "-m", toy_model_dir, "--reverse-model", toy_reverse_dir, "--view", "none"]
    both = invoke(*args, "--symmetrize", "intersection", input=text)
    assert both.exit_code == 0 and "alone" not in both.stderr, both.output
    forward = invoke("align", "-m", toy_model_dir, "--view", "none", input=text)
    real = aligner._forced_words

    def fewer(translator, source, target, options):  # the reverse model reads the upper case
        words = real(translator, source, target, options)
        if source.isupper() and len(source.split()) > 1:
            words = replace(words, weights=words.weights[:, 1:], src_words=words.src_words[1:])
        return words

    monkeypatch.setattr(aligner, "_forced_words", fewer)
    result = invoke(*args, "--symmetrize", "intersection", input=text)
    assert result.exit_code == 0, result.output
    first, second = result.stdout.splitlines()
    assert first == forward.stdout.splitlines()[0]  # the forward links, as they were
    assert second == both.stdout.splitlines()[1]  # the other pair still symmetrised
    assert "1 of 2 pairs have the links of -m alone" in result.stderr
    assert len(result.stderr.strip().splitlines()) == 1


def test_align_refuses_a_reverse_model_that_translates_the_same_way(toy_model_dir, tmp_path):
    import shutil

    text = "apple river ||| RIVER APPLE\n"
    itself = invoke("align", "-m", toy_model_dir, "--reverse-model", toy_model_dir, input=text)
    said = " ".join(itself.stderr.split())
    assert itself.exit_code == 2 and itself.stdout == ""
    assert "translates the same way as -m" in said and "--src and --tgt swapped" in said
    copy = tmp_path / "copy"  # another directory, trained on the same data: the same way
    shutil.copytree(toy_model_dir, copy)
    again = invoke("align", "-m", toy_model_dir, "--reverse-model", copy, input=text)
    assert again.exit_code == 2 and "translates the same way" in again.stderr
    meta = json.loads((copy / "meta.json").read_text())
    (copy / "meta.json").write_text(json.dumps({**meta, "data_fingerprint": None}))
    same = invoke("align", "-m", copy, "--reverse-model", tmp_path / "." / "copy", input=text)
    assert same.exit_code == 2 and "translates the same way" in same.stderr  # by its path


def test_align_refuses_gold_links_for_sentences_it_translates(toy_model_dir, tmp_path):
    gold = tmp_path / "gold.align"
    gold.write_text("0-0 1-1\n", encoding="utf-8")
    result = invoke("align", "-m", toy_model_dir, "--gold", gold, input="apple river\n")
    assert result.exit_code == 2 and result.stdout == ""
    assert "--gold scores the links of given sentence pairs, but <stdin> holds source" in (
        result.stderr
    )


def test_a_data_directory_given_as_the_model_is_named_as_one(toy_data_dir):
    result = invoke("translate", "-m", toy_data_dir, input="sun\n")
    assert result.exit_code == 3 and result.stdout == ""
    assert f"{toy_data_dir} is a data directory (written by `nmt prepare`), not a model" in (
        result.stderr
    )


def test_align_refuses_to_score_gold_links_that_fit_only_the_other_way_round(
    toy_model_dir, tmp_path
):
    gold = tmp_path / "gold.align"
    gold.write_text("2-0 1-1\n", encoding="utf-8")  # target-source: 3 target words, 2 source
    text = "apple river ||| RIVER APPLE SUN\n"
    result = invoke("align", "-m", toy_model_dir, "--view", "none", "--gold", gold, input=text)
    assert result.exit_code == 2 and "link 2-0 lies outside the sentence" in result.stderr
    assert "every gold link fits with its two numbers swapped" in result.stderr
    assert "AER" not in result.stderr and "Traceback" not in result.output  # no score
    assert len(result.stderr.strip().splitlines()) == 1
    gold.write_text("0-2 1-1\n", encoding="utf-8")  # the right way round: no warning at all
    result = invoke("align", "-m", toy_model_dir, "--view", "none", "--gold", gold, input=text)
    assert result.exit_code == 0 and "swapped" not in result.stderr


def test_align_reads_tabs_and_no_break_spaces_between_words_as_spaces(toy_model_dir):
    plain = invoke("align", "-m", toy_model_dir, "--json", input="apple river ||| RIVER APPLE\n")
    odd = invoke(
        "align", "-m", toy_model_dir, "--json", input="apple\u00a0river ||| RIVER\tAPPLE\n"
    )
    assert plain.exit_code == odd.exit_code == 0, odd.output
    expected, got = json.loads(plain.stdout), json.loads(odd.stdout)
    assert got["src_words"] == ["apple", "river"] and got["tgt_words"] == ["RIVER", "APPLE"]
    assert got["alignment"] == expected["alignment"] and got["weights"] == expected["weights"]


def test_align_decides_the_input_form_from_the_first_line_with_text(toy_model_dir):
    pairs = "apple river ||| RIVER APPLE\n"
    leading = invoke("align", "-m", toy_model_dir, "--view", "none", input="\n" + pairs)
    assert leading.exit_code == 2 and leading.stdout == ""  # not translated as a source line
    assert "<stdin> line 1 is empty" in leading.stderr
    trailing = invoke("align", "-m", toy_model_dir, "--view", "none", input=pairs + "\n\n")
    assert trailing.exit_code == 0 and len(trailing.stdout.splitlines()) == 1
    inside = invoke("align", "-m", toy_model_dir, "--view", "none", input=pairs + "\n" + pairs)
    assert inside.exit_code == 2 and "<stdin> line 2 is empty" in inside.stderr


def test_align_refuses_a_pair_after_a_source_line_as_it_refuses_the_reverse(
    toy_model_dir, tmp_path
):
    mixed = tmp_path / "mixed.txt"
    mixed.write_text("\napple river\ngreen bird ||| BIRD GREEN\n", encoding="utf-8")
    result = invoke("align", "-m", toy_model_dir, "--view", "none", "--input", mixed)
    assert result.exit_code == 2 and result.stdout == ""  # read through before any output
    told = f"{mixed} line 3 holds a `source ||| target` pair, but line 2 is a source sentence"
    assert told in " ".join(result.stderr.split())
    piped = invoke("align", "-m", toy_model_dir, "--view", "none", input="sun\nsun ||| SUN\n")
    assert piped.exit_code == 2 and "<stdin> line 2 holds a `source ||| target` pair" in (
        " ".join(piped.stderr.split())
    )


def test_align_naacl_gold_may_end_before_pairs_without_gold_links(toy_model_dir, tmp_path):
    src, tgt, gold = tmp_path / "a.src", tmp_path / "a.tgt", tmp_path / "gold.naacl"
    src.write_text("apple river\ngreen bird\n", encoding="utf-8")
    tgt.write_text("RIVER APPLE\nBIRD GREEN\n", encoding="utf-8")
    gold.write_text("1 1 2 S\n1 2 1 S\n", encoding="utf-8")  # the second pair has no gold link
    result = invoke("align", "-m", toy_model_dir, "--src", src, "--tgt", tgt, "--gold", gold)
    assert result.exit_code == 0, result.output
    assert "2 sure gold links, 2 pairs" in " ".join(result.stderr.split())
    told = "gold.naacl lists no link for the last 1 of the 2 pairs (from pair 2 on)"
    assert told in " ".join(result.stderr.split())  # scored, but a cut file would look so too
    whole = tmp_path / "whole.naacl"
    whole.write_text("1 1 2 S\n1 2 1 S\n2 1 2 S\n", encoding="utf-8")
    listed = invoke("align", "-m", toy_model_dir, "--src", src, "--tgt", tgt, "--gold", whole)
    assert listed.exit_code == 0 and "lists no link" not in listed.stderr
    streamed = invoke(
        "align", "-m", toy_model_dir, "--view", "none", "--gold", gold,
        input="apple river ||| RIVER APPLE\ngreen bird ||| BIRD GREEN\n",
    )  # fmt: skip
    assert streamed.exit_code == 0 and "2 sure gold links, 2 pairs" in " ".join(
        streamed.stderr.split()
    )


def test_a_model_stopped_before_its_first_validation_points_to_resume(toy_model_dir, tmp_path):
    import shutil

    from nmt_cli import checkpoint

    stopped = tmp_path / "stopped"
    shutil.copytree(toy_model_dir, stopped)
    (stopped / checkpoint.MODEL_FILE).unlink()
    (stopped / checkpoint.LAST_FILE).parent.mkdir(exist_ok=True)
    (stopped / checkpoint.LAST_FILE).write_bytes(b"")
    result = invoke("translate", "-m", stopped, input="apple\n")
    said = " ".join(result.stderr.split())
    assert result.exit_code == 3 and "stopped before its first validation" in said
    assert f"nmt train DATA_DIR -o {stopped} --resume" in said


def test_more_threads_than_cores_are_warned_of_once(toy_model_dir):
    from nmt_cli.device import available_cores

    many = available_cores() + 7
    result = invoke("translate", "-m", toy_model_dir, "--threads", str(many), input="apple\n")
    said = " ".join(result.stderr.split())
    assert result.exit_code == 0 and len(result.stdout.splitlines()) == 1
    assert said.count(f"--threads {many} is more than the {available_cores()} core") == 1
    fitting = invoke("translate", "-m", toy_model_dir, "--threads", "1", input="apple\n")
    assert "--threads" not in fitting.stderr


def test_align_src_alone_points_to_aligning_source_sentences(toy_model_dir, tmp_path):
    src = tmp_path / "a.src"
    src.write_text("apple river\n", encoding="utf-8")
    result = invoke("align", "-m", toy_model_dir, "--src", src)
    said = " ".join(result.stderr.split())
    assert result.exit_code == 2 and "--src was given without --tgt" in said
    assert "--input FILE" in said and result.stdout == ""


def test_a_naacl_gold_link_outside_its_sentence_is_named_as_the_file_writes_it(
    toy_model_dir, tmp_path
):
    src, tgt, gold = tmp_path / "a.src", tmp_path / "a.tgt", tmp_path / "gold.naacl"
    src.write_text("apple river\n", encoding="utf-8")
    tgt.write_text("RIVER APPLE\n", encoding="utf-8")
    gold.write_text("1 1 2 S\n1 99 1 S\n", encoding="utf-8")  # source word 99 of 2
    result = invoke("align", "-m", toy_model_dir, "--src", src, "--tgt", tgt, "--gold", gold)
    said = " ".join(result.stderr.split())
    assert result.exit_code == 2, result.output
    assert "sentence 1: link 99-1 (words counted from 1, as in the file) lies outside" in said
    one_off = tmp_path / "one-off.naacl"  # fits if lowered by one, but NAACL counts from 1
    one_off.write_text("1 1 2 S\n1 3 2 S\n", encoding="utf-8")
    result = invoke("align", "-m", toy_model_dir, "--src", src, "--tgt", tgt, "--gold", one_off)
    said = " ".join(result.stderr.split())
    assert result.exit_code == 2 and "link 3-2 (words counted from 1" in said, said
    assert "subtract 1" not in said and "give the gold links of these sentence pairs" in said


def test_align_says_when_a_naacl_gold_numbers_its_sentences_from_elsewhere(toy_model_dir, tmp_path):
    src, tgt, gold = tmp_path / "a.src", tmp_path / "a.tgt", tmp_path / "gold.naacl"
    src.write_text("apple river\ngreen bird\n", encoding="utf-8")
    tgt.write_text("RIVER APPLE\nBIRD GREEN\n", encoding="utf-8")
    gold.write_text("101 1 2 S\n101 2 1 S\n102 1 2 S\n", encoding="utf-8")  # a cut file
    result = invoke("align", "-m", toy_model_dir, "--src", src, "--tgt", tgt, "--gold", gold)
    told = "gold.naacl has 102 alignments but there are 2 pairs to align"
    assert result.exit_code == 2 and told in " ".join(result.stderr.split())
    assert "its sentence numbers start at 101" in " ".join(result.stderr.split())
    gold.write_text("1 1 2 S\n2 1 2 S\n3 1 1 S\n", encoding="utf-8")  # one pair too many
    longer = invoke("align", "-m", toy_model_dir, "--src", src, "--tgt", tgt, "--gold", gold)
    assert longer.exit_code == 2 and "start at" not in longer.stderr


def test_align_warns_of_a_naacl_gold_counted_from_0_and_of_one_without_sure_links(
    toy_model_dir, tmp_path
):
    src, tgt, gold = tmp_path / "a.src", tmp_path / "a.tgt", tmp_path / "gold.naacl"
    src.write_text("apple river stone\ngreen bird\n", encoding="utf-8")
    tgt.write_text("RIVER APPLE STONE\nBIRD GREEN\n", encoding="utf-8")
    args = ["align", "-m", toy_model_dir, "--src", src, "--tgt", tgt, "--gold", gold]
    # counted from 0: first words linked (0 0), which NAACL's numbering cannot mean
    gold.write_text("1 0 1 S\n1 1 0 S\n1 2 2 S\n2 0 1 S\n2 1 0 S\n", encoding="utf-8")
    result = invoke(*args)
    said = " ".join(result.stderr.split())
    assert result.exit_code == 0, result.output
    assert "links word 0 to word 0" not in said  # no 0-0 link yet: only counted
    assert "4 gold links to NULL left out" in said
    gold.write_text("1 0 0 S\n1 1 1 S\n1 2 2 S\n2 0 0 S\n2 1 1 S\n", encoding="utf-8")
    result = invoke(*args)
    said = " ".join(result.stderr.split())
    assert "links word 0 to word 0 in 2 sentences" in said, said
    assert "its 2 links to word 0 are left out and the others read one word off" in said
    assert f"awk 'NF {{$2++; $3++}} 1' {gold} > gold-1based.wa" in said
    assert "2 gold links to NULL left out" in said
    legit = "1 1 2 S\n1 2 1 S\n1 3 0 S\n2 1 2 S\n2 2 1 S\n"  # one unaligned word, 1-based
    gold.write_text(legit, encoding="utf-8")
    result = invoke(*args)
    said = " ".join(result.stderr.split())
    assert "warning" not in said and "1 gold link to NULL left out" in said, said
    gold.write_text("1 0 1 S\n2 1 0 S\n", encoding="utf-8")
    nothing = " ".join(invoke(*args).stderr.split())
    assert "gold.naacl leaves no link to score against" in nothing
    assert "check that it is the gold file of these pairs" in nothing
    gold.write_text("1 1 2 P\n2 1 2 P\n", encoding="utf-8")
    possible = " ".join(invoke(*args).stderr.split())
    assert "gold.naacl has no sure links: recall is 0" in possible and "NULL" not in possible
    gold.write_text("1 1 2 S\n1 2 1 S\n2 1 2 S\n", encoding="utf-8")
    clean = invoke(*args).stderr
    assert "warning" not in clean and "NULL" not in clean


def test_align_threshold_without_a_method_selects_the_threshold_method(toy_model_dir):
    pairs = "apple river ||| RIVER APPLE\ngreen bird sun ||| SUN BIRD GREEN\n"
    argmax = invoke("align", "-m", toy_model_dir, "--view", "none", input=pairs)
    high = invoke("align", "-m", toy_model_dir, "--view", "none", "--threshold", "1", input=pairs)
    assert argmax.exit_code == high.exit_code == 0, high.output
    assert all(argmax.stdout.splitlines())  # argmax links every target word
    assert high.stdout.splitlines() == ["", ""]  # the toy model spreads its weight (max ~0.6)


def test_align_with_include_eos_checks_gold_links_against_the_real_words(toy_model_dir, tmp_path):
    gold = tmp_path / "gold.align"
    gold.write_text("0-2\n", encoding="utf-8")  # target word 2 is the pseudo-word </s>
    result = invoke(
        "align", "-m", toy_model_dir, "--view", "none", "--include-eos", "--gold", gold,
        input="apple river ||| RIVER APPLE\n",
    )  # fmt: skip
    assert result.exit_code == 2 and "AER" not in result.stderr
    assert "link 0-2 lies outside the sentence (2 source words, 2 target words)" in " ".join(
        result.stderr.split()
    )


@pytest.mark.parametrize(
    ("flags", "message"),
    [
        (["--beam", "1000000"], "--beam must be at most the target vocabulary of"),
        (["--max-len", "100000000"], "--max-len must be at most"),
        (["--threads", "100000"], "--threads must be from 0 (torch's default) to 1024"),
    ],
)
def test_translate_refuses_values_too_large_to_finish(toy_model_dir, flags, message):
    result = invoke("translate", "-m", toy_model_dir, *flags, input="apple river\n")
    assert result.exit_code == 2 and result.stdout == "" and "Traceback" not in result.output
    assert message in result.stderr and len(result.stderr.strip().splitlines()) == 1


def test_align_refuses_gold_links_outside_their_sentences_and_says_if_counted_from_one(
    toy_model_dir, tmp_path
):
    gold = tmp_path / "gold.align"
    gold.write_text("1-2 2-1\n3-3 1-1\n", encoding="utf-8")  # 1-based: 3-3 is outside pair 2
    text = "apple river ||| RIVER APPLE\ngreen bird sun ||| SUN BIRD GREEN\n"
    result = invoke("align", "-m", toy_model_dir, "--view", "none", "--gold", gold, input=text)
    assert result.exit_code == 2 and "AER" not in result.stderr  # 3-3 would count as missed
    message = " ".join(result.stderr.split())
    assert f"{gold}: sentence 1: link 1-2 lies outside the sentence" in message
    assert "(and 2 more such links)" in message  # 2-1 and 3-3
    assert "the file may count words from 1" in message
    assert result.stdout == ""  # a failed command writes no links (drop --gold to get them)


def test_commands_with_their_own_path_checks_skip_clicks_readability_check():
    """click answers an unreadable path with a boxed usage message (exit 2 even for a model
    directory); these commands' own checks answer in one line with the kind's exit code
    (tests/robustness/test_bad_paths.py runs them where the tests do not run as root).
    The others keep click's check, as they have no check of their own for every path."""
    import typer.main

    from nmt_cli.cli.app import app

    group = typer.main.get_command(app)
    own = {"prepare", "translate", "eval", "align", "average"}
    checked = {
        (name, param.name): param.type.readable
        for name, command in group.commands.items()
        for param in command.params
        if hasattr(param.type, "readable")
    }
    assert {name for name, _ in checked} >= own | {"train", "serve"}
    assert all(readable == (name not in own) for (name, _), readable in checked.items())


def test_align_warns_of_a_cut_only_for_text_too_long_once_normalised(toy_model_dir):
    from nmt_cli.translator import Translator

    translator = Translator.load(toy_model_dir)
    source = "\t".join(["apple"] * 60)  # tabs are pieces of their own until normalised
    assert len(translator.src_tokenizer.encode(source)) > translator.max_source_pieces
    assert len(translator.src_tokenizer.encode(source.replace("\t", " "))) <= 60
    result = invoke("align", "-m", toy_model_dir, "--json", input=f"{source} ||| APPLE\n")
    assert result.exit_code == 0 and result.stderr == ""
    assert len(json.loads(result.stdout)["src_words"]) == 60


def test_lines_typed_at_a_terminal_go_to_a_redirected_stdout_one_by_one(toy_model_dir):
    """stdin a terminal, stdout a pipe: data on stdout (not the prompt's view on stderr), each
    typed line answered before the next is typed; with --json too."""
    import os
    import pty

    typed = ["apple river stone", "green house"]
    expected = invoke("translate", "-m", toy_model_dir, input="\n".join(typed) + "\n")
    assert expected.exit_code == 0, expected.stderr
    for extra, check in (
        ((), lambda line: line),
        (("--json",), lambda line: json.loads(line)["translation"]),
    ):
        leader, follower = pty.openpty()
        process = subprocess.Popen(
            [sys.executable, "-m", "nmt_cli", "translate", "-m", str(toy_model_dir), *extra],
            stdin=follower, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
        )  # fmt: skip
        os.close(follower)
        answers = []
        for line in typed:
            os.write(leader, line.encode() + b"\n")
            ready, _, _ = select.select([process.stdout], [], [], 60)
            assert ready, "no answer before the next line was typed"
            answers.append(check(process.stdout.readline().decode().rstrip("\n")))
        os.write(leader, b"\x04")  # Ctrl-D
        rest, errors = process.communicate(timeout=120)
        os.close(leader)
        assert process.returncode == 0, errors.decode()
        assert rest == b"" and answers == expected.stdout.splitlines()


def _read_until(fd: int, wanted: bytes, seconds: float = 60.0) -> bytes:
    """What a terminal shows (the leader side of a pty) until `wanted` appears."""
    import time

    seen, end = b"", time.monotonic() + seconds
    while wanted not in seen and time.monotonic() < end:
        if select.select([fd], [], [], 1)[0]:
            try:
                seen += os.read(fd, 1 << 16)
            except OSError:  # the process closed the terminal
                break
    return seen


def test_the_prompt_edits_a_typed_line_with_the_arrow_keys(toy_model_dir):
    """At the prompt, ← moves the cursor (line editing), as in a shell: it does not put an
    escape sequence into the sentence."""
    import pty

    pytest.importorskip("readline")

    expected = invoke("translate", "-m", toy_model_dir, input="apple river\n").stdout.strip()
    leader, follower = pty.openpty()
    process = subprocess.Popen(
        [sys.executable, "-m", "nmt_cli", "translate", "-m", str(toy_model_dir)],
        stdin=follower, stdout=follower, stderr=follower,
    )  # fmt: skip
    os.close(follower)
    try:
        assert b"> " in _read_until(leader, b"> ")
        os.write(leader, b"apple rier\x1b[D\x1b[Dv\n")  # "rier", ← ←, "v": "river"
        shown = _read_until(leader, b"> ").decode(errors="replace")  # up to the next prompt
        for _ in range(30):  # Ctrl-D, again if it came before line editing took the terminal
            os.write(leader, b"\x04")
            try:
                assert process.wait(timeout=2) == 0
                break
            except subprocess.TimeoutExpired:
                continue
        assert process.poll() == 0
    finally:
        process.kill()
        os.close(leader)
    assert expected in shown
    assert "river" in shown.split(expected, 1)[1]  # a source word of the links view


def test_align_refuses_tab_separated_pairs_on_stdin_and_names_tsv(toy_model_dir, tmp_path):
    result = invoke("align", "-m", toy_model_dir, input="\napple river\tRIVER APPLE\n")
    assert result.exit_code == 2 and result.stdout == ""  # not translated as one source line
    assert "<stdin> line 2 holds a tab" in result.stderr and "--tsv" in result.stderr
    assert len(result.stderr.strip().splitlines()) == 1
    tsv = tmp_path / "pairs.tsv"
    tsv.write_text("apple river\tRIVER APPLE\n", encoding="utf-8")
    given = invoke("align", "-m", toy_model_dir, "--tsv", tsv, "--view", "none")
    piped = invoke(
        "align", "-m", toy_model_dir, "--view", "none", input="apple river ||| RIVER APPLE\n"
    )
    assert given.exit_code == piped.exit_code == 0 and given.stdout == piped.stdout


def test_a_gold_file_of_the_other_direction_is_warned_of_where_every_link_fits_both_ways(
    toy_model_dir, tmp_path
):
    """Source and target of one length: every link fits read either way, so no link tells a
    target-source gold file. Where the swapped reading scores better, the user is told."""
    text = "apple river green ||| GREEN RIVER APPLE\ngreen bird house ||| HOUSE BIRD GREEN\n"
    pairs = tmp_path / "pairs.txt"
    pairs.write_text(text, encoding="utf-8")
    aligned = invoke("align", "-m", toy_model_dir, "--view", "none", "-i", pairs)
    assert aligned.exit_code == 0, aligned.output
    links = [{tuple(map(int, x.split("-"))) for x in line.split()}
             for line in aligned.stdout.splitlines()]  # fmt: skip
    assert any(own != {(j, i) for i, j in own} for own in links)  # (not all symmetric)
    for name, written in (
        ("same", links),
        ("swapped", [{(j, i) for i, j in own} for own in links]),
    ):
        gold = tmp_path / f"{name}.align"
        gold.write_text(
            "".join(" ".join(f"{i}-{j}" for i, j in sorted(own)) + "\n" for own in written),
            encoding="utf-8",
        )
        scored = invoke("align", "-m", toy_model_dir, "--view", "none", "-i", pairs, "--gold", gold)
        assert scored.exit_code == 0, scored.output
        told = "read the other way round (target-source links) every gold link fits too"
        said = " ".join(scored.stderr.split())
        assert (told in said) is (name == "swapped"), scored.stderr
    assert "and the AER is 0.00% against" in said  # the links, read as the file meant them


def test_align_gold_files_may_end_in_empty_lines(toy_model_dir, tmp_path):
    src, tgt, gold = tmp_path / "a.src", tmp_path / "a.tgt", tmp_path / "gold.align"
    src.write_text("apple river\ngreen bird\n", encoding="utf-8")
    tgt.write_text("RIVER APPLE\nBIRD GREEN\n", encoding="utf-8")
    gold.write_text("0-1 1-0\n1-0 0-1\n", encoding="utf-8")
    files = ("--src", src, "--tgt", tgt)
    text = "apple river ||| RIVER APPLE\ngreen bird ||| BIRD GREEN\n"
    exact = invoke("align", "-m", toy_model_dir, *files, "--gold", gold)
    assert exact.exit_code == 0, exact.stderr
    gold.write_text("0-1 1-0\n1-0 0-1\n\n", encoding="utf-8")  # an editor's extra newline
    for args, given in ((files, None), (("--view", "none"), text)):
        result = invoke("align", "-m", toy_model_dir, *args, "--gold", gold, input=given)
        assert result.exit_code == 0, result.stderr
        assert result.stdout == exact.stdout and "AER" in result.stderr
        assert exact.stderr.splitlines()[-1] in result.stderr  # the same scores, 2 pairs
    for more in ("\n0-0\n", "\n\n"):  # a linked line, or two empty ones, are pairs
        gold.write_text("0-1 1-0\n1-0 0-1\n" + more, encoding="utf-8")
        result = invoke("align", "-m", toy_model_dir, *files, "--gold", gold)
        assert result.exit_code == 2 and "has 4 alignments but there are 2 pairs" in result.stderr


def test_align_views_say_when_the_links_weigh_more_than_the_drawn_weights(toy_model_dir):
    pairs = "apple river ||| RIVER APPLE\ngreen bird ||| BIRD GREEN\n"
    plain = invoke("align", "-m", toy_model_dir, "--view", "links", input=pairs)
    assert plain.exit_code == 0 and "also weigh" not in plain.stderr
    mixed = invoke(
        "align", "-m", toy_model_dir, "--view", "links", "--corpus-prior", "0.5", input=pairs
    )
    assert mixed.exit_code == 0, mixed.stderr
    said = " ".join(mixed.stderr.split())
    assert said.count("links also weigh the corpus link rates (--corpus-prior 0.5)") == 1
    assert "--link-prior 0" not in said  # it would not remove the corpus rates
    assert said.count("● links (the output's)") == 1  # the legend once, not per pair


def test_align_json_and_shown_words_name_words_as_written_not_by_unknown_pieces(toy_model_dir):
    from nmt_cli.aligner import shown_words, translation_words
    from nmt_cli.translator import SearchOptions, Translator

    line = "apple Ωriver ||| RIVER APPLE"
    result = invoke("align", "-m", toy_model_dir, "--json", input=line + "\n")
    assert result.exit_code == 0, result.stderr
    record = json.loads(result.stdout)
    assert record["src_words"] == ["apple", "Ωriver"] and record["tgt_words"] == ["RIVER", "APPLE"]
    chars = invoke("align", "-m", toy_model_dir, "--json", "--unit", "char", input=line + "\n")
    assert chars.exit_code == 0 and json.loads(chars.stdout)["src_words"] == ["apple", "Ωriver"]
    plain = invoke("align", "-m", toy_model_dir, "--json", input="apple ωriver ||| RIVER APPLE\n")
    assert json.loads(plain.stdout)["alignment"] == record["alignment"]  # links as before
    translator = Translator.load(toy_model_dir)
    (translation,) = translator.translate_chunk(
        ["Ωapple river"], SearchOptions(), with_attention=True
    )
    assert "<unk>" in " ".join(translation_words(translation).src_words)  # the piece names
    assert shown_words(translation).src_words == ["Ωapple", "river"]


def test_translate_says_which_translations_reached_the_length_limit(toy_model_dir):
    text = "apple river stone green\nsun\n"
    free = invoke("translate", "-m", toy_model_dir, input=text)
    assert free.exit_code == 0 and "length limit" not in free.stderr
    capped = invoke("translate", "-m", toy_model_dir, "--max-len", "2", "--json", input=text)
    assert capped.exit_code == 0, capped.stderr
    records = [json.loads(line) for line in capped.stdout.splitlines()]
    assert [len(r["pieces"]) <= 2 for r in records] == [True, True]
    for number, record in enumerate(records, start=1):
        warned = f"<stdin> line {number}: the translation reached its length limit"
        assert (warned in capped.stderr) == (len(record["pieces"]) == 2)
    assert "<stdin> line 1: the translation reached its length limit (2 pieces)" in capped.stderr
    assert "cut" not in records[0]  # the JSON object keeps its keys


def test_translate_names_the_first_lines_at_a_limit_and_counts_the_rest(toy_model_dir):
    text = "apple river stone green\n" * 9
    capped = invoke("translate", "-m", toy_model_dir, "--max-len", "1", "--json", input=text)
    assert capped.exit_code == 0, capped.stderr
    cut = sum(len(json.loads(line)["pieces"]) == 1 for line in capped.stdout.splitlines())
    assert cut == 9  # every line has more than one piece to say
    warnings = capped.stderr.strip().splitlines()
    named = [w for w in warnings if "the translation reached its length limit" in w]
    assert [w.split(":")[1].strip() for w in named] == [f"<stdin> line {n}" for n in range(1, 6)]
    assert "limit (1 piece) and ends there" in named[0]
    assert warnings[-1] == (
        "warning: 4 more lines at the length limit (the first 5 are named above): raise "
        "--max-len (or --max-len-ratio) if translations are cut short"
    )
    assert len(warnings) == 6


@pytest.mark.parametrize("bad", [["--lr", "-1"], ["--valid-every", "0"]])
def test_a_bad_setting_with_nproc_is_refused_once_before_torchrun_starts(
    toy_data_dir, tmp_path, bad, monkeypatch
):
    import nmt_cli.cli.train

    launched = []
    monkeypatch.setattr(nmt_cli.cli.train, "_launch_ranks", launched.append)
    result = invoke("train", toy_data_dir, "-o", tmp_path / "m", "--nproc", "2", *bad)
    assert result.exit_code == 2 and launched == []
    assert len(result.stderr.strip().splitlines()) == 1 and bad[0] in result.stderr
    assert not (tmp_path / "m").exists()


def test_an_output_that_cannot_be_made_is_one_line_exit_2(toy_data_dir, tmp_path):
    blocker = tmp_path / "afile"
    blocker.write_text("not a folder\n")
    result = invoke("train", toy_data_dir, "-o", blocker / "sub", "--max-steps", "1")
    assert result.exit_code == 2 and len(result.stderr.strip().splitlines()) == 1
    assert "cannot make the model directory" in result.stderr and "Traceback" not in result.stderr
    assert blocker.read_text() == "not a folder\n"


def test_resume_and_force_together_are_refused(toy_data_dir, tmp_path):
    result = invoke("train", toy_data_dir, "-o", tmp_path / "m", "--resume", "--force")
    assert result.exit_code == 2 and "give one of them" in result.stderr
    assert not (tmp_path / "m").exists()


def test_a_toml_boolean_in_an_error_is_spelled_as_toml(tmp_path):
    from nmt_cli.config import Config
    from nmt_cli.errors import ConfigError

    with pytest.raises(
        ConfigError, match=r"c.toml: \[model\] layers must be a whole number, got true$"
    ):
        Config.from_dict({"model": {"layers": True}}, "c.toml")


@pytest.mark.parametrize(
    ("text", "said"),
    [
        # a key that begins like another is found on its own line
        ("[train]\nlr = 0.001\nlr-decay = 0.5\n", "unknown key lr-decay in {} line 3: [train]"),
        # lines end at \n only (U+2028 may sit in a comment); a multi-line string sets nothing
        (
            '# one\u2028comment\n[train]\nalignments = """\nlr = 5\n"""\nlr = -1\n',
            "{} line 6: [train] lr must be in (0, 10]",
        ),
        (
            "[model]\nhiden_size = 4\nthreads = 1\n",
            "unknown keys hiden_size, threads in {} line 2: [model] (threads belongs in [train]; "
            "did you mean hidden_size?)",
        ),
        # a key nmt train derives is not sent to [model], which would refuse it too
        ("[train]\nsrc_vocab_size = 5\n", "unknown key src_vocab_size in {} line 2: [train];"),
    ],
)
def test_config_errors_name_the_line_that_sets_the_key(tmp_path, text, said):
    from nmt_cli.config import resolve
    from nmt_cli.errors import ConfigError

    config = tmp_path / "c.toml"
    config.write_text(text, encoding="utf-8")
    with pytest.raises(ConfigError) as error:
        resolve(config, {})
    assert str(error.value).startswith(said.format(config)), str(error.value)


@pytest.mark.parametrize(
    ("extra", "named"),
    [
        (["--guided-alignment", "1", "--alignments", "nofile.txt"], "nofile.txt is not a file"),
        (["--device", "cuda"], "--device cuda"),
        (["--nproc", "3"], "--nproc 3 is more than"),
    ],
)
def test_nproc_refuses_what_every_process_would_refuse_before_torchrun(
    toy_data_dir, tmp_path, monkeypatch, extra, named
):
    import torch

    import nmt_cli.cli.train
    import nmt_cli.device

    if "cuda" in extra and torch.cuda.is_available():
        pytest.skip("CUDA is present here")
    monkeypatch.setattr(nmt_cli.device, "available_cores", lambda: 2)
    launched = []
    monkeypatch.setattr(nmt_cli.cli.train, "_launch_ranks", launched.append)
    nproc = [] if "--nproc" in extra else ["--nproc", "2"]
    result = invoke("train", toy_data_dir, "-o", tmp_path / "m", *nproc, *extra)
    assert result.exit_code == 2 and launched == [], result.output
    assert len(result.stderr.strip().splitlines()) == 1 and named in result.stderr
    assert not (tmp_path / "m").exists()


def test_batches_of_one_sentence_each_are_warned_about(toy_data_dir, tmp_path):
    small = ("--max-steps", "1", "--valid-every", "1", "--emb-size", "8", "--hidden-size", "8")
    tiny = invoke("train", toy_data_dir, "-o", tmp_path / "a", "--batch-tokens", "5", *small)
    assert tiny.exit_code == 0, tiny.output
    assert "warning: --batch-tokens 5 holds fewer than two of most training targets" in tiny.stderr
    usual = invoke("train", toy_data_dir, "-o", tmp_path / "b", "--batch-tokens", "400", *small)
    assert usual.exit_code == 0 and "--batch-tokens" not in usual.stderr, usual.output


def test_a_training_refused_at_its_start_leaves_no_directory_behind(toy_data_dir, tmp_path):
    """A bad --alignments file is found once the run has made its model directory: the
    directory goes again, and one that was there before stays."""
    links = tmp_path / "links.txt"
    links.write_text("0-0\n")  # one line for a corpus of many pairs
    args = ("--guided-alignment", "1", "--alignments", links, "--max-steps", "2")
    # (a warning, of --batch-tokens, comes only once every input is accepted: nothing written)
    result = invoke("train", toy_data_dir, "-o", tmp_path / "m", *args, "--batch-tokens", "5")
    assert result.exit_code == 2 and "training pairs" in result.stderr, result.output
    assert not (tmp_path / "m").exists()
    (tmp_path / "kept").mkdir()
    again = invoke("train", toy_data_dir, "-o", tmp_path / "kept", *args)
    assert again.exit_code == 2 and (tmp_path / "kept").is_dir()


def test_alignments_without_a_guided_alignment_weight_are_reported_unused(toy_data_dir, tmp_path):
    links = tmp_path / "links.txt"
    links.write_text("0-0\n")
    result = invoke(
        "train", toy_data_dir, "-o", tmp_path / "m", "--alignments", links, "--max-steps", "2",
        "--valid-every", "2", "--emb-size", "8", "--hidden-size", "8", "--threads", "1",
        "--align-unit", "char",
    )  # fmt: skip
    assert result.exit_code == 0, result.output
    assert f"warning: --alignments {links} is not used" in result.stderr
    assert "warning: --align-unit char is not used" in result.stderr


def test_training_goes_on_when_the_reader_of_its_log_goes_away(toy_data_dir, tmp_path):
    """`nmt train ... 2>&1 | head -1`: once head has its line, the display falls silent and the
    training finishes and saves (rich alone would exit 1 before anything was saved)."""
    out = tmp_path / "m"
    read, write = os.pipe()
    command = [sys.executable, "-m", "nmt_cli", "train", str(toy_data_dir), "-o", str(out),
               "--max-steps", "30", "--valid-every", "15", "--log-every", "1",
               "--emb-size", "8", "--hidden-size", "8", "--threads", "1"]  # fmt: skip
    child = subprocess.Popen(command, stdout=subprocess.DEVNULL, stderr=write)
    os.close(write)
    with os.fdopen(read, "rb") as log:
        assert log.readline().startswith(b"config:")
    assert child.wait(timeout=300) == 0
    assert (out / "model.pt").is_file()
    events = [json.loads(line) for line in (out / "train.jsonl").read_text().splitlines()]
    assert events[-1]["event"] == "done" and events[-1]["step"] > 0  # trained after the reader left


_WITH_EXIT_HOOK = (
    "import atexit, sys\n"
    "atexit.register(lambda: sys.stderr.write('teardown ran\\n'))\n"
    "sys.argv = ['nmt', *sys.argv[1:]]\n"
    "from nmt_cli.cli.app import main\n"
    "main()\n"
)


def _run_with_exit_hook(*args: str, input: str = "") -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, "-c", _WITH_EXIT_HOOK, *map(str, args)],
        input=input,
        capture_output=True,
        text=True,
        check=False,
    )


def test_a_translation_that_succeeds_ends_without_teardown_and_with_all_its_output(
    toy_model_dir,
):
    lines = [f"apple river {'stone ' * (i % 4)}".strip() for i in range(300)]
    run = _run_with_exit_hook("translate", "-m", toy_model_dir, input="\n".join(lines) + "\n")
    assert run.returncode == 0, run.stderr
    assert len(run.stdout.splitlines()) == 300  # flushed before the process ended
    assert run.stdout.endswith("\n")
    assert "teardown ran" not in run.stderr


def test_a_failing_command_ends_the_usual_way(toy_model_dir, tmp_path):
    run = _run_with_exit_hook("translate", "-m", toy_model_dir, "-i", tmp_path / "missing.txt")
    assert run.returncode == 2
    assert run.stderr.splitlines()[0].startswith("error: ")
    assert "teardown ran" in run.stderr


def test_commands_that_write_a_directory_end_the_usual_way(tmp_path):
    from cli_runner import write_toy_corpus

    src, tgt = write_toy_corpus(tmp_path)
    run = _run_with_exit_hook(
        "prepare", "--src", src, "--tgt", tgt, "--vocab-size", "60", "-o", tmp_path / "data"
    )
    assert run.returncode == 0, run.stderr
    assert "teardown ran" in run.stderr


def test_an_input_that_stdout_writes_to_is_refused(toy_model_dir, tmp_path):
    """`nmt translate -i f > f`: the shell empties f first, and exit 0 with nothing would hide
    it; `>> f`: the translations, flushed batch by batch, would be read back without end."""
    same = tmp_path / "same.txt"
    lines = "apple river\n" * 300  # more than one batch of 256: `>>` used to loop

    def run(*args, stdin=False, append=False):
        same.write_text(lines, encoding="utf-8")
        with open(same, "rb") as source, open(same, "ab" if append else "wb") as out:
            return subprocess.run(  # "wb" is what `> same.txt` does, "ab" `>> same.txt`
                [sys.executable, "-m", "nmt_cli", *map(str, args)],
                stdin=source if stdin else subprocess.DEVNULL, stdout=out,
                stderr=subprocess.PIPE, text=True, check=False, timeout=120,
            )  # fmt: skip

    for args, stdin, append, told in (
        (("translate", "-m", toy_model_dir, "-i", same), False, False, f"{same} is also stdout, and empty"),
        (("translate", "-m", toy_model_dir), True, False, f"stdin ({same}) is also stdout, and empty"),
        (("translate", "-m", toy_model_dir, "-i", same), False, True, f"{same} is also stdout (a `>>` redirect)"),
        (("align", "-m", toy_model_dir, "--view", "none", "--input", same), False, True, "(a `>>` redirect)"),
    ):  # fmt: skip
        result = run(*args, stdin=stdin, append=append)
        said = " ".join(result.stderr.split())
        assert result.returncode == 2 and told in said, said
        assert same.read_text(encoding="utf-8") == ("" if not append else lines)  # nothing added


def test_sigterm_stops_translate_as_ctrl_c_does(toy_model_dir):
    """`kill PID` (SIGTERM) ends a command as Ctrl-C does: one `interrupted` line, exit 130
    (it used to end at once, with 143 and no word)."""
    process = subprocess.Popen(
        [sys.executable, "-m", "nmt_cli", "translate", "-m", str(toy_model_dir)],
        stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
    )  # fmt: skip
    process.stdin.write(b"apple river\n")
    process.stdin.flush()
    ready, _, _ = select.select([process.stdout], [], [], 120)
    assert ready and process.stdout.readline().strip(), "no translation of the first line"
    process.send_signal(signal.SIGTERM)  # while it waits for the next line
    _, errors = process.communicate(timeout=60)
    assert process.returncode == 130, errors.decode()
    assert errors.decode().strip() == "interrupted"


def test_a_file_translated_to_a_file_shows_its_progress_on_the_terminal(toy_model_dir, tmp_path):
    """`nmt translate -i big.de > big.en` at a terminal: a bar of the file's lines on stderr
    (it said nothing for hours on a large file); the output is the same as without it."""
    import pty

    source = tmp_path / "in.txt"
    words = ["apple", "river", "green", "bird", "house", "stone"]
    source.write_text("".join(f"{words[k % 6]} {words[(k * 5) % 6]}\n" for k in range(600)))
    leader, follower = pty.openpty()
    process = subprocess.Popen(
        [sys.executable, "-m", "nmt_cli", "translate", "-m", str(toy_model_dir), "-i", str(source)],
        stdin=subprocess.DEVNULL, stdout=subprocess.PIPE, stderr=follower,
    )  # fmt: skip
    os.close(follower)
    import threading

    output = []  # read beside the terminal, so that neither side's buffer fills and blocks
    reader = threading.Thread(target=lambda: output.append(process.stdout.read()))
    reader.start()
    try:
        shown = _read_until(leader, b"600/600", seconds=60)
        assert process.wait(timeout=60) == 0
    finally:
        process.kill()
        reader.join(timeout=60)
        os.close(leader)
    assert b"translating" in shown and b"600/600" in shown
    quiet = invoke("translate", "-m", toy_model_dir, "-i", source)  # stderr not a terminal
    assert quiet.stderr == "" and [quiet.stdout.encode()] == output


def test_ctrl_c_while_the_application_loads_ends_as_it_does_later():
    """Ctrl-C in the first tenths of a second (while typer and rich load) printed a traceback;
    it ends as it does later: one `interrupted` line, exit 130."""
    script = (
        "import builtins\n"
        "real = builtins.__import__\n"
        "def slow(name, *args, **kwargs):\n"
        "    if name == 'nmt_cli.cli.app':\n"
        "        raise KeyboardInterrupt  # Ctrl-C arriving while it is imported\n"
        "    return real(name, *args, **kwargs)\n"
        "builtins.__import__ = slow\n"
        "from nmt_cli.__main__ import main\n"
        "main()\n"
    )
    done = subprocess.run(
        [sys.executable, "-c", script, "translate"], capture_output=True, text=True, check=False
    )
    assert done.returncode == 130 and done.stderr == "interrupted\n"


def test_the_heatmap_is_drawn_where_columns_is_0(toy_model_dir):
    """COLUMNS=0 (a width nobody knows) drew nothing, in silence: rich takes it as it stands."""
    done = subprocess.run(
        [sys.executable, "-m", "nmt_cli", "align", "-m", str(toy_model_dir), "--view", "heatmap"],
        input="apple river ||| RIVER APPLE\n", capture_output=True, text=True, check=False,
        env={**os.environ, "COLUMNS": "0"},
    )  # fmt: skip
    assert done.returncode == 0, done.stderr
    rows = [line for line in done.stderr.splitlines() if "│" in line]
    assert len(rows) == 2 and rows[0].split("│")[0].strip() == "RIVER"


def test_align_refuses_a_separator_alone_wherever_it_stands(toy_model_dir):
    """` ||| ` alone is a pair with both sides empty, not an editor's last newline: it used to
    be dropped without a word at the end of the input (and refused elsewhere)."""
    for text, number in (("apple river ||| RIVER APPLE\n ||| \n", 2), ("|||\n", 1)):
        result = invoke("align", "-m", toy_model_dir, "--view", "none", input=text)
        said = " ".join(result.stderr.split())
        assert result.exit_code == 2 and f"<stdin> line {number} holds ' ||| ' alone" in said
    ending = invoke("align", "-m", toy_model_dir, "--view", "none",
                    input="apple river ||| RIVER APPLE\n\n\n")  # fmt: skip
    assert ending.exit_code == 0 and len(ending.stdout.splitlines()) == 1  # empty lines end it


def test_align_with_a_model_without_attention_is_refused(toy_plain_model_dir, toy_model_dir):
    # it printed "translation ||| " with no link, as if the model linked no word
    alone = invoke("translate", "-m", toy_plain_model_dir, "--align", input="apple river\n")
    assert alone.exit_code == 2 and alone.stdout == ""
    assert "--attention none" in alone.stderr and "drop --align" in alone.stderr
    first = invoke(
        "translate", "-m", toy_plain_model_dir, "-m", toy_model_dir, "--align", input="apple\n"
    )
    assert first.exit_code == 2 and "give a model with attention first" in first.stderr
    swapped = invoke(
        "translate", "-m", toy_model_dir, "-m", toy_plain_model_dir, "--align", input="apple\n"
    )
    assert swapped.exit_code == 0, swapped.output
    plain = invoke("translate", "-m", toy_plain_model_dir, input="apple river\n")
    assert plain.exit_code == 0 and len(plain.stdout.splitlines()) == 1
    unk = invoke("translate", "-m", toy_plain_model_dir, "--replace-unk", input="apple\n")
    assert unk.exit_code == 2 and unk.stdout == ""
    assert "--attention none" in unk.stderr and "drop --replace-unk" in unk.stderr


def test_train_says_what_was_given_in_place_of_a_data_directory(
    toy_data_dir, toy_model_dir, tmp_path
):
    a_file = tmp_path / "in.txt"
    a_file.write_text("a line\n", encoding="utf-8")
    given_a_file = invoke("train", a_file, "-o", tmp_path / "m1")
    assert given_a_file.exit_code == 3 and "Traceback" not in given_a_file.output
    assert "is a file, not a data directory" in given_a_file.stderr
    assert "nmt prepare -o" in given_a_file.stderr and f"-o {a_file}" not in given_a_file.stderr
    given_a_model = invoke("train", toy_model_dir, "-o", tmp_path / "m2")
    assert given_a_model.exit_code == 3 and "is a model directory" in given_a_model.stderr
    assert str(toy_data_dir) in given_a_model.stderr  # the data its training read
    assert not (tmp_path / "m1").exists() and not (tmp_path / "m2").exists()


def test_resuming_an_average_says_it_keeps_no_training_state(toy_data_dir, toy_model_dir, tmp_path):
    average = tmp_path / "avg"
    shutil.copytree(toy_model_dir, average, ignore=shutil.ignore_patterns("checkpoints"))
    meta = json.loads((average / "meta.json").read_text(encoding="utf-8"))
    meta["averaged"] = ["step-30.pt", "step-60.pt"]  # as `nmt average` marks its output
    (average / "meta.json").write_text(json.dumps(meta), encoding="utf-8")
    result = invoke("train", toy_data_dir, "-o", average, "--resume")
    assert result.exit_code == 2 and "written by `nmt average`" in result.stderr


def test_a_gpu_asked_for_by_a_config_file_is_named_as_the_file_asks(toy_data_dir, tmp_path):
    import torch

    if torch.cuda.is_available():
        pytest.skip("a CUDA device is present: nothing to refuse")
    config = tmp_path / "gpu.toml"
    config.write_text('[train]\ndevice = "cuda"\n', encoding="utf-8")
    from_file = invoke("train", toy_data_dir, "-o", tmp_path / "m", "--config", config)
    assert from_file.exit_code == 2 and f'{config} asks for device "cuda"' in from_file.stderr
    from_flag = invoke("train", toy_data_dir, "-o", tmp_path / "m", "--device", "cuda")
    assert from_flag.exit_code == 2 and "--device cuda was asked for" in from_flag.stderr
    assert not (tmp_path / "m").exists()


def test_serve_without_its_web_stack_names_the_install_command(toy_model_dir, monkeypatch):
    monkeypatch.setitem(sys.modules, "uvicorn", None)  # makes `import uvicorn` fail
    result = invoke("serve", "-m", toy_model_dir, "--port", "0")
    assert result.exit_code == 2 and "Traceback" not in result.output
    assert "uvicorn is missing" in result.stderr
    assert f"{sys.executable} -m pip install fastapi uvicorn httptools" in result.stderr


def _typed_console(monkeypatch, lines: list[str], width: int = 100):
    """The console the prompt draws on, its user typing `lines` (to input(), which the prompt
    reads through readline), then Ctrl-D."""
    import io

    from rich.console import Console

    def typing(prompt: str = "") -> str:
        line = next(typed, None)
        if line is None:
            raise EOFError
        return line

    typed = iter(lines)
    monkeypatch.setattr("builtins.input", typing)
    return Console(file=io.StringIO(), width=width, color_system=None)


def test_a_typed_line_is_read_as_a_file_line_is_and_a_bad_one_does_not_end_the_prompt(
    toy_model_dir, monkeypatch
):
    """At the prompt, bytes that are not UTF-8 (which Python's stdin hands over as surrogates)
    are refused with the line's number and the fixes, or replaced with --on-invalid replace;
    NUL bytes are read as spaces with a warning; a line longer than the model takes is cut
    with a warning; and the prompt goes on after each."""

    from nmt_cli.cli import boundary
    from nmt_cli.cli.translate import _prompt_loop
    from nmt_cli.decoding import SearchOptions
    from nmt_cli.translator import Translator

    translator = Translator.load(toy_model_dir)
    long = " ".join(["apple river"] * (translator.max_source_pieces + 5))
    typed = ["apple \udcff river", "apple\0river", long, "green house"]

    def shown(on_invalid: str) -> str:
        console = _typed_console(monkeypatch, typed, width=400)
        monkeypatch.setattr(boundary, "_console", console)
        _prompt_loop(translator, SearchOptions(beam_size=1), on_invalid=on_invalid)
        return console.file.getvalue()

    refused = shown("error")
    assert (
        "error: typed line 1 is not valid UTF-8 (byte 0xff at column 7): set the terminal's "
        "encoding to UTF-8, or pass --on-invalid replace" in refused
    )
    assert "warning: typed line 2 holds NUL bytes: translated with a space for each" in refused
    assert (
        f"typed line 3 is longer than the model's {translator.max_source_pieces} pieces" in refused
    )
    expected = invoke(
        "translate", "-m", toy_model_dir, "-b", "1", input="apple river\ngreen house\n"
    )
    first, last = expected.stdout.splitlines()
    assert first in refused and last in refused  # the NUL line as "apple river", and the last
    replaced = shown("replace")
    assert "not valid UTF-8" not in replaced and replaced.count("warning:") == 2


def test_the_prompt_shows_links_or_says_why_there_are_none(
    toy_model_dir, toy_plain_model_dir, monkeypatch
):
    """The prompt (stdin and stdout a terminal) draws where the model looked under each
    translation; a model without attention says once that there is nothing to draw."""

    from nmt_cli.cli import boundary
    from nmt_cli.cli.translate import _prompt_loop
    from nmt_cli.decoding import SearchOptions
    from nmt_cli.translator import Translator

    def shown(model_dir) -> str:
        console = _typed_console(monkeypatch, ["apple river", "", "green house"])
        monkeypatch.setattr(boundary, "_console", console)
        _prompt_loop(Translator.load(model_dir), SearchOptions(beam_size=1))
        return console.file.getvalue()

    with_attention = shown(toy_model_dir)
    assert "← " in with_attention and "no word links" not in with_attention
    without = shown(toy_plain_model_dir)
    assert without.count("--attention none: no word links to show") == 1
    assert "← " not in without
    expected = invoke("translate", "-m", toy_plain_model_dir, input="apple river\ngreen house\n")
    for translation in expected.stdout.splitlines():
        assert translation in without  # both lines translated, the empty one skipped


def test_translate_reads_dev_null_as_an_empty_file(toy_model_dir):
    """/dev/null is a device, but gives what an empty file gives: no line, no output, exit 0
    (where other devices and sockets are refused)."""
    result = invoke("translate", "-m", toy_model_dir, "-i", "/dev/null")
    assert result.exit_code == 0, result.output
    assert result.stdout == ""
