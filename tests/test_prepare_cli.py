"""`nmt prepare` end to end on tiny generated corpora, every bad input, and load_data_dir."""

from __future__ import annotations

import gzip
import json
import random
from pathlib import Path

import pytest
from typer.testing import CliRunner

from nmt_cli.cli.app import app
from nmt_cli.data.datadir import MANIFEST, load_data_dir
from nmt_cli.data.tokenizer import Tokenizer
from nmt_cli.errors import ArtifactError

SHARED = Path(__file__).resolve().parents[1].parent / "shared"
runner = CliRunner()

# A toy language pair: word i of one side translates word i of the other.
DE = "der die ein Hund Katze Mann Frau sieht läuft schläft auf unter Tisch Haus rot groß".split()
EN = "the the a dog cat man woman sees runs sleeps on under table house red big".split()


def _pairs(n: int, seed: int = 0) -> list[tuple[str, str]]:
    rng = random.Random(seed)
    pairs = []
    for _ in range(n):
        words = [rng.randrange(len(DE)) for _ in range(rng.randint(3, 10))]
        pairs.append((" ".join(DE[i] for i in words), " ".join(EN[i] for i in words)))
    return pairs


def _write_pair(directory: Path, name: str, pairs, gz: bool = False) -> tuple[Path, Path]:
    paths = []
    for side, lang in enumerate(("de", "en")):
        path = directory / f"{name}.{lang}{'.gz' if gz else ''}"
        data = "".join(pair[side] + "\n" for pair in pairs).encode("utf-8")
        path.write_bytes(gzip.compress(data) if gz else data)
        paths.append(path)
    return paths[0], paths[1]


@pytest.fixture
def corpus(tmp_path):
    """Train (plain), dev and test (gzip) files of the toy pair."""
    src, tgt = _write_pair(tmp_path, "train", _pairs(400))
    dev = _write_pair(tmp_path, "dev", _pairs(20, seed=1), gz=True)
    test = _write_pair(tmp_path, "test", _pairs(20, seed=2), gz=True)
    return {"src": src, "tgt": tgt, "dev": dev, "test": test}


def _prepare(*args) -> object:
    return runner.invoke(app, ["prepare", *map(str, args)])


def _train_args(corpus) -> list:
    return ["--src", corpus["src"], "--tgt", corpus["tgt"], "--vocab-size", 60]


def _assert_clean_error(result, *fragments: str, code: int = 2) -> None:
    """Non-zero exit, one line on stderr holding every fragment, nothing on stdout."""
    lines = [line for line in result.stderr.splitlines() if line.strip()]
    assert result.exit_code == code, result.output
    assert len(lines) == 1, result.stderr
    assert lines[0].startswith("error: ")
    for fragment in fragments:
        assert fragment in lines[0], lines[0]
    assert "Traceback" not in result.output
    assert result.stdout == ""


def _assert_nothing_left(output: Path) -> None:
    assert not output.exists()
    assert not list(output.parent.glob(f".{output.name}.*")), "a staged directory was left"


def test_prepare_has_help():
    result = _prepare("--help")
    assert result.exit_code == 0
    for option in ("--src", "--tsv", "--dev-size", "--max-ratio", "--vocab-size", "--joint"):
        assert option in result.stdout


def test_prepare_writes_a_complete_data_directory(corpus, tmp_path):
    out = tmp_path / "data"
    dev, test = corpus["dev"], corpus["test"]
    result = _prepare(
        *_train_args(corpus),
        *("--dev-src", dev[0], "--dev-tgt", dev[1], "--test-src", test[0], "--test-tgt", test[1]),
        *("--src-lang", "de", "--tgt-lang", "en", "-o", out),
    )
    assert result.exit_code == 0, result.output
    assert result.stdout == ""
    assert "train" in result.stderr and "pairs" in result.stderr
    data = load_data_dir(out)
    assert data.joint and data.src_spm == data.tgt_spm == out / "spm.model"
    assert (data.src_lang, data.tgt_lang) == ("de", "en")
    assert len(data.fingerprint) == 16
    assert data.splits == ("train", "dev", "test")
    tokenizer = Tokenizer(data.src_spm)
    for split in data.splits:
        for side in ("src", "tgt"):
            lines = data.text(split, side).read_text(encoding="utf-8").splitlines()
            ids = data.ids(split, side)
            assert len(ids) == len(lines)
            assert ids[0].tolist() == tokenizer.encode(lines[0])
    manifest = json.loads((out / MANIFEST).read_text())
    assert manifest["counts"]["dev"]["origin"] == "given"
    assert manifest["inputs"]["train"] == {"src": str(corpus["src"]), "tgt": str(corpus["tgt"])}
    assert manifest["tokenizer"]["src"]["vocab_size"] == 60


def test_every_filter_is_counted_and_given_splits_are_kept_whole(tmp_path):
    train = _pairs(300) + [("", "leer"), ("Hund Hund", "dog dog"), ("Hund Hund", "dog dog")]
    train += [("x " * 150, "y " * 150), ("@@", "the big dog sees the small cat on the table")]
    src, tgt = _write_pair(tmp_path, "train", train)
    dev = _write_pair(tmp_path, "dev", [("", "kept as a reference"), ("a", "b c d e f g h")])
    out = tmp_path / "data"
    result = _prepare(
        *("--src", src, "--tgt", tgt, "--dev-src", dev[0], "--dev-tgt", dev[1]),
        *("--vocab-size", 60, "-o", out),
    )
    assert result.exit_code == 0, result.output
    counts = json.loads((out / MANIFEST).read_text())["counts"]
    train_counts = counts["train"]
    assert train_counts["read"] == 305
    assert (train_counts["empty"], train_counts["too_long"], train_counts["ratio"]) == (1, 1, 1)
    assert train_counts["duplicate"] >= 1
    assert train_counts["kept"] == 305 - 3 - train_counts["duplicate"]
    assert counts["dev"]["kept"] == 2
    assert (out / "dev.src").read_text() == "\na\n"


def test_crlf_bom_and_decomposed_text_are_normalised(tmp_path):
    pairs = _pairs(200)
    src = tmp_path / "train.de"
    tgt = tmp_path / "train.en"
    # spaces at the end of even lines (not counted as a change), a doubled space inside odd ones
    raw = [f"{s}  " if k % 2 == 0 else s.replace(" ", "  ", 1) for k, (s, _) in enumerate(pairs)]
    src.write_bytes(b"\xef\xbb\xbf" + "".join(f"{line}\r\n" for line in raw).encode())
    tgt.write_bytes("".join(f"{t}\r\n" for _, t in pairs).encode())
    out = tmp_path / "data"
    result = _prepare("--src", src, "--tgt", tgt, "--vocab-size", 60, "--no-dedup", "-o", out)
    assert result.exit_code == 0, result.output
    text = (out / "train.src").read_bytes()
    assert b"\r" not in text and not text.startswith(b"\xef\xbb\xbf") and b"  " not in text
    assert text.decode().splitlines() == [s for s, _ in pairs]
    inside = sum(1 for k, (s, _) in enumerate(pairs) if k % 2 and " " in s)
    assert inside > 50
    assert json.loads((out / MANIFEST).read_text())["counts"]["train"]["normalized"] == inside


def test_tsv_with_held_out_dev_and_test_and_separate_models(tmp_path):
    pairs = _pairs(400)
    tsv = tmp_path / "corpus.tsv"
    tsv.write_text("".join(f"{s}\t{t}\n" for s, t in pairs), encoding="utf-8")
    outs = []
    for name in ("a", "b"):
        out = tmp_path / name
        args = ("--tsv", tsv, "--dev-size", 30, "--test-size", 20, "--separate", "--no-dedup")
        args += ("--model-type", "bpe")
        result = _prepare(*args, "--vocab-size", 50, "-o", out)
        assert result.exit_code == 0, result.output
        outs.append(load_data_dir(out))
    data = outs[0]
    assert not data.joint and data.src_spm != data.tgt_spm
    assert [len(data.ids(split, "src")) for split in data.splits] == [350, 30, 20]
    # The same seed holds out the same pairs.
    assert data.text("dev", "src").read_text() == outs[1].text("dev", "src").read_text()
    manifest = data.manifest
    assert manifest["counts"]["train"]["held_out"] == 50
    assert manifest["inputs"]["dev"]["held_out_from"] == "train"


def test_small_corpus_falls_back_to_a_smaller_vocabulary_with_a_warning(tmp_path):
    src, tgt = _write_pair(tmp_path, "train", _pairs(60))
    out = tmp_path / "data"
    result = _prepare("--src", src, "--tgt", tgt, "-o", out)
    assert result.exit_code == 0, result.output
    assert "warning:" in result.stderr and "--vocab-size 8000" in result.stderr
    tokenizer = json.loads((out / MANIFEST).read_text())["tokenizer"]["src"]
    assert tokenizer["vocab_fallback"] is True
    assert tokenizer["requested_vocab_size"] == 8000
    assert tokenizer["vocab_size"] == Tokenizer(out / "spm.model").vocab_size < 8000


def test_pairs_with_text_on_one_side_only_are_dropped_with_a_warning(tmp_path):
    pairs = _pairs(300)
    pairs[100] = ("", pairs[100][1])  # a stray empty source line: the rest is out of step
    pairs[200] = ("", "")  # an empty pair: nothing to warn about
    src, tgt = _write_pair(tmp_path, "train", pairs)
    out = tmp_path / "data"
    result = _prepare("--src", src, "--tgt", tgt, "--vocab-size", 50, "-o", out)
    assert result.exit_code == 0, result.output
    assert f"dropped 1 train pair with text on one side only (it is line 101 of {src}" in (
        " ".join(result.stderr.split())  # the terminal wraps long lines
    )
    counts = json.loads((out / MANIFEST).read_text())["counts"]["train"]
    assert counts["empty"] == 2 and counts["one_sided"] == 1 and counts["first_one_sided"] == 101


def test_the_first_one_sided_pair_is_found_past_the_chunks_cleaned_in_this_process(
    tmp_path, monkeypatch
):
    from nmt_cli.data import splits

    monkeypatch.setattr(splits, "_CHUNK", 40)  # chunks 6 and on go to worker processes
    pairs = _pairs(600)
    for stray in (431, 517):  # lines 432 and 518: the 11th and 13th chunks
        pairs[stray] = (pairs[stray][0], "")
    src, tgt = _write_pair(tmp_path, "train", pairs)
    out = tmp_path / "data"
    result = _prepare("--src", src, "--tgt", tgt, "--vocab-size", 50, "-o", out)
    assert result.exit_code == 0, result.output
    counts = json.loads((out / MANIFEST).read_text())["counts"]["train"]
    assert counts["one_sided"] == 2 and counts["first_one_sided"] == 432
    assert "(the first is line 432 of" in " ".join(result.stderr.split())


def test_a_length_filter_that_drops_a_large_share_is_warned_about(tmp_path):
    pairs = _pairs(300)
    long_pairs = [(f"{src} " * 12, f"{tgt} " * 12) for src, tgt in pairs[:90]]  # 30 %
    src, tgt = _write_pair(tmp_path, "train", long_pairs + pairs[90:])
    out = tmp_path / "data"
    limit = str(max(len(s.split()) for s, _ in pairs) + 1)  # every short pair passes
    result = _prepare("--src", src, "--tgt", tgt, "--vocab-size", 50, "--max-len", limit, "-o", out)
    assert result.exit_code == 0, result.output
    message = " ".join(result.stderr.split())
    assert f"dropped 30% of the train pairs (90 of 300) as too long (--max-len {limit}: words" in (
        message
    )
    quiet = _prepare("--src", src, "--tgt", tgt, "--vocab-size", 50, "-o", tmp_path / "all")
    assert quiet.exit_code == 0 and "too long" not in quiet.stderr


def test_one_file_as_both_source_and_target_is_warned_about(tmp_path):
    src, _ = _write_pair(tmp_path, "train", _pairs(200))
    result = _prepare("--src", src, "--tgt", src, "--vocab-size", 50, "-o", tmp_path / "data")
    assert result.exit_code == 0, result.output
    message = " ".join(result.stderr.split())
    assert f"the train source and target are the same file ({src})" in message


def test_given_dev_and_test_pairs_that_training_holds_are_counted(tmp_path):
    pairs = list(dict.fromkeys(_pairs(400)))  # distinct pairs
    src, tgt = _write_pair(tmp_path, "train", pairs[:300])
    dev_src, dev_tgt = _write_pair(tmp_path, "dev", pairs[:10] + pairs[300:340])  # 10 seen
    test_src, test_tgt = _write_pair(tmp_path, "test", pairs[300:303] + pairs[340:380])
    args = ("--src", src, "--tgt", tgt, "--vocab-size", 50, "--dev-src", dev_src,
            "--dev-tgt", dev_tgt)  # fmt: skip
    result = _prepare(*args, "--test-src", test_src, "--test-tgt", test_tgt, "-o", tmp_path / "d")
    assert result.exit_code == 0, result.output
    message = " ".join(result.stderr.split())
    assert "10 of the 50 dev pairs are also training pairs" in message
    assert "test pairs are also training pairs" not in message
    assert "3 of the 43 test pairs are also dev pairs" in message
    dev_src.write_text("".join(p[0] + "\n" for p in pairs[300:340]), encoding="utf-8")
    dev_tgt.write_text("".join(p[1] + "\n" for p in pairs[300:340]), encoding="utf-8")
    clean = _prepare(*args, "-o", tmp_path / "clean")
    assert clean.exit_code == 0 and "also" not in clean.stderr, clean.output


def test_language_codes_the_text_contradicts_are_warned_about(tmp_path):
    pairs = [(src, "我们 " + "的朋友" * (1 + len(tgt) % 3)) for src, tgt in _pairs(200)]
    src, tgt = _write_pair(tmp_path, "train", pairs)  # German-like source, Chinese target
    right = ("--src-lang", "de", "--tgt-lang", "zh")
    ok = _prepare("--src", src, "--tgt", tgt, *right, "--vocab-size", 60, "-o", tmp_path / "a")
    assert ok.exit_code == 0 and "swapped" not in ok.stderr, ok.output
    swapped = ("--src-lang", "zh", "--tgt-lang", "de")
    result = _prepare(
        "--src", src, "--tgt", tgt, *swapped, "--vocab-size", 60, "-o", tmp_path / "b"
    )
    message = " ".join(result.stderr.split())
    assert result.exit_code == 0
    assert "--src-lang zh, but only 0% of the src text's characters are CJK" in message
    assert "--tgt-lang de, but" in message and "swapped?" in message
    codes = ("--src-lang", "deu", "--tgt-lang", "zho")  # ISO 639-3 codes are understood too
    iso = _prepare("--src", src, "--tgt", tgt, *codes, "--vocab-size", 60, "-o", tmp_path / "c")
    assert iso.exit_code == 0 and "swapped" not in iso.stderr


def test_existing_output_is_refused_unless_forced(corpus, tmp_path):
    out = tmp_path / "data"
    assert _prepare(*_train_args(corpus), "-o", out).exit_code == 0
    (out / "keep.txt").write_text("mine")
    _assert_clean_error(_prepare(*_train_args(corpus), "-o", out), str(out), "--force")
    assert (out / "keep.txt").read_text() == "mine"
    result = _prepare(*_train_args(corpus), "-o", out, "--force")
    assert result.exit_code == 0, result.output
    assert not (out / "keep.txt").exists()
    assert load_data_dir(out).has_split("train")


def test_forced_output_through_a_symlink_replaces_the_link_and_keeps_its_target(corpus, tmp_path):
    real = tmp_path / "runs" / "data-v1"
    assert _prepare(*_train_args(corpus), "-o", real).exit_code == 0
    (real / "keep.txt").write_text("old")
    link = tmp_path / "current"
    link.symlink_to(real, target_is_directory=True)
    before = sorted(p.name for p in tmp_path.iterdir())
    result = _prepare(*_train_args(corpus), "-o", link, "--force")
    assert result.exit_code == 0, result.output
    assert not link.is_symlink() and load_data_dir(link).has_split("train")  # a directory now
    assert (real / "keep.txt").read_text() == "old"  # the run it pointed to is kept
    assert sorted(p.name for p in tmp_path.iterdir()) == before  # no .current.old left


def test_force_never_replaces_a_directory_nmt_did_not_write_or_one_holding_an_input(
    corpus, tmp_path
):
    mine = tmp_path / "mine"
    mine.mkdir()
    (mine / "notes.txt").write_text("mine")
    _assert_clean_error(
        _prepare(*_train_args(corpus), "-o", mine, "--force"), str(mine), "has no prepare.json"
    )
    assert (mine / "notes.txt").read_text() == "mine"
    holder = Path(_train_args(corpus)[1]).parent  # the directory the corpus is read from
    before = sorted(p.name for p in holder.iterdir())
    _assert_clean_error(
        _prepare(*_train_args(corpus), "-o", holder, "--force"), str(holder), "an input here"
    )
    assert sorted(p.name for p in holder.iterdir()) == before


def test_force_never_deletes_a_folder_inside_the_data_directory(corpus, tmp_path):
    out = tmp_path / "data"
    assert _prepare(*_train_args(corpus), "-o", out).exit_code == 0
    (out / "model").mkdir()  # as `nmt train data -o data/model` makes
    (out / "model" / "model.pt").write_bytes(b"weights")
    _assert_clean_error(
        _prepare(*_train_args(corpus), "-o", out, "--force"), str(out), "holds a folder, model,"
    )
    assert (out / "model" / "model.pt").read_bytes() == b"weights"
    (out / "model").rename(tmp_path / "model")
    (out / "runs").symlink_to(tmp_path / "model", target_is_directory=True)  # a link is no folder
    result = _prepare(*_train_args(corpus), "-o", out, "--force")
    assert result.exit_code == 0, result.output
    assert (tmp_path / "model" / "model.pt").read_bytes() == b"weights"


def test_an_output_path_through_a_file_is_refused_with_what_blocks_it(corpus, tmp_path):
    plain = tmp_path / "notes.txt"
    plain.write_text("mine")
    for force in ([], ["--force"]):  # the same answer with --force: a file is never replaced
        result = _prepare(*_train_args(corpus), "-o", plain, *force)
        _assert_clean_error(result, str(plain), "not a directory")
    _assert_clean_error(
        _prepare(*_train_args(corpus), "-o", plain / "data"), str(plain), "not a directory"
    )
    assert plain.read_text() == "mine"


def test_a_failed_prepare_removes_the_parent_directories_it_made(tmp_path):
    src, tgt = _write_pair(tmp_path, "train", _pairs(50))
    tgt.write_text("only one line\n", encoding="utf-8")  # the sides disagree: refused
    (tmp_path / "kept").mkdir()
    out = tmp_path / "kept" / "new" / "deeper" / "data"
    _assert_clean_error(_prepare("--src", src, "--tgt", tgt, "-o", out), "no partner")
    assert sorted(p.name for p in (tmp_path / "kept").iterdir()) == []  # kept stays, new is gone


def _bad(tmp_path: Path, kind: str) -> tuple[list, list[str]]:
    """Arguments for one kind of bad input, and the fragments its message must hold."""
    src, tgt = _write_pair(tmp_path, "train", _pairs(50))
    ok = ["--src", src, "--tgt", tgt]
    if kind == "missing":
        return ["--src", tmp_path / "nope.de", "--tgt", tgt], ["nope.de", "does not exist"]
    if kind == "directory":
        return ["--src", tmp_path, "--tgt", tgt], [str(tmp_path), "is a directory"]
    if kind == "mismatch":
        short = tmp_path / "short.en"
        short.write_text("".join(f"{t}\n" for _, t in _pairs(49)), encoding="utf-8")
        return ["--src", src, "--tgt", short], [f"{src} has 50 lines but {short} has 49"]
    if kind == "utf8":
        src.write_bytes(src.read_bytes() + "Grüße\n".encode("latin-1"))
        tgt.write_bytes(tgt.read_bytes() + b"greetings\n")
        return ok, [str(src), "line 51", "UTF-8"]
    if kind == "nul":
        tgt.write_bytes(b"ok\x00\n" + tgt.read_bytes())
        return ok, [str(tgt), "line 1", "NUL"]
    if kind == "tsv-columns":
        tsv = tmp_path / "c.tsv"
        tsv.write_text("a\tb\nno tab here\n", encoding="utf-8")
        return ["--tsv", tsv], [str(tsv), "line 2", "1 tab-separated column,"]
    if kind == "nothing-left":
        return [*ok, "--max-len", 1], ["no training pairs left after cleaning", "--max-len"]
    if kind == "empty-corpus":
        src.write_bytes(b"")
        tgt.write_bytes(b"")
        return ok, ["holds no sentences"]
    if kind == "empty-dev":
        dev = tmp_path / "dev.de"
        dev.write_bytes(b"")
        return [*ok, "--dev-src", dev, "--dev-tgt", dev], ["holds no sentences", "dev"]
    options = {
        "vocab-size": (["--vocab-size", 4], ["--vocab-size 4"]),
        "vocab-below-alphabet": (["--vocab-size", 10], ["--vocab-size 10", "at least"]),
        "negative-dev": (["--dev-size", -1], ["--dev-size -1", "negative"]),
        "negative-max-len": (["--max-len", -5], ["--max-len -5"]),
        "ratio-below-one": (["--max-ratio", 0.5], ["--max-ratio 0.5"]),
        "dev-test-too-big": (["--dev-size", 30, "--test-size", 30], ["--dev-size 30", "lower"]),
        "model-type": (["--model-type", "wordpiece"], ["--model-type", "unigram"]),
        "coverage": (["--character-coverage", 2], ["--character-coverage 2"]),
        "dev-twice": (["--dev-size", 5, "--dev-src", src, "--dev-tgt", tgt], ["not both"]),
    }
    if kind in options:
        extra, fragments = options[kind]
        return [*ok, *extra], fragments
    if kind == "src-without-tgt":
        return ["--src", src], ["--src was given without --tgt"]
    if kind == "no-corpus":
        return [], ["no corpus given"]
    raise AssertionError(kind)


BAD_KINDS = [
    "missing",
    "directory",
    "mismatch",
    "utf8",
    "nul",
    "tsv-columns",
    "nothing-left",
    "empty-corpus",
    "empty-dev",
    "vocab-size",
    "vocab-below-alphabet",
    "negative-dev",
    "negative-max-len",
    "ratio-below-one",
    "dev-test-too-big",
    "model-type",
    "coverage",
    "dev-twice",
    "src-without-tgt",
    "no-corpus",
]


@pytest.mark.parametrize("kind", BAD_KINDS)
def test_bad_input_gives_one_line_and_leaves_nothing(tmp_path, kind):
    args, fragments = _bad(tmp_path, kind)
    out = tmp_path / "out"
    _assert_clean_error(_prepare(*args, "-o", out), *fragments)
    _assert_nothing_left(out)


def test_interrupt_leaves_nothing_behind(corpus, tmp_path, monkeypatch):
    import nmt_cli.data.prepare as prepare_module

    def interrupted(*args, **kwargs):
        raise KeyboardInterrupt

    monkeypatch.setattr(prepare_module, "train_tokenizer", interrupted)
    out = tmp_path / "out"
    result = _prepare(*_train_args(corpus), "-o", out)
    assert result.exit_code == 130
    assert result.stderr.strip() == "interrupted", result.stderr  # asked for: not an error
    _assert_nothing_left(out)


def test_progress_is_reported_through_the_callback(corpus, tmp_path):
    from nmt_cli.data.corpus import ParallelSource
    from nmt_cli.data.prepare import PrepareOptions, prepare

    events = []
    options = PrepareOptions(
        train=ParallelSource(src=corpus["src"], tgt=corpus["tgt"]),
        output=tmp_path / "out",
        vocab_size=60,
    )
    report = prepare(options, progress=lambda event: events.append(tuple(event.data.values())))
    steps = {step for step, _, _ in events}
    assert any(step.startswith("reading") for step in steps)
    assert any(step.startswith("training SentencePiece") for step in steps)
    pairs = report.splits[0].pairs
    assert ("encoding train", 2 * pairs, 2 * pairs) in events  # both sides


# load_data_dir ------------------------------------------------------------------------------


@pytest.fixture
def prepared(corpus, tmp_path) -> Path:
    out = tmp_path / "data"
    assert _prepare(*_train_args(corpus), "--dev-size", 10, "-o", out).exit_code == 0
    return out


def _edit_manifest(path: Path, edit) -> None:
    manifest = json.loads((path / MANIFEST).read_text())
    edit(manifest)
    (path / MANIFEST).write_text(json.dumps(manifest))


def test_load_data_dir_refuses_a_missing_or_half_written_directory(tmp_path, prepared):
    with pytest.raises(ArtifactError, match="does not exist"):
        load_data_dir(tmp_path / "nowhere")
    (prepared / MANIFEST).unlink()
    with pytest.raises(ArtifactError, match="no prepare.json"):
        load_data_dir(prepared)


def test_load_data_dir_refuses_a_missing_file(prepared):
    (prepared / "dev.tgt.ids.npy").unlink()
    with pytest.raises(ArtifactError, match="dev.tgt.ids.npy is missing"):
        load_data_dir(prepared)


@pytest.mark.parametrize(
    "edit, message",
    [
        (lambda m: m.update(format_version=99), "version 99"),
        (lambda m: m.update(format="something-else"), "not an `nmt prepare` manifest"),
        (lambda m: m["tokenizer"].pop("tgt"), "malformed"),
        (lambda m: m["splits"].update(extra=m["splits"]["train"]), "unknown split"),
    ],
)
def test_load_data_dir_refuses_foreign_or_other_versions(prepared, edit, message):
    _edit_manifest(prepared, edit)
    with pytest.raises(ArtifactError, match=message):
        load_data_dir(prepared)


def test_load_data_dir_refuses_garbage_json(prepared):
    (prepared / MANIFEST).write_text("{not json")
    with pytest.raises(ArtifactError, match="corrupt"):
        load_data_dir(prepared)


@pytest.mark.parametrize("name", ["../secret", "/etc/passwd", "sub/train.src", "..", ""])
def test_load_data_dir_refuses_paths_outside_it(prepared, name):
    _edit_manifest(prepared, lambda m: m["splits"]["train"]["text"].update(src=name))
    with pytest.raises(ArtifactError, match="not a plain file name"):
        load_data_dir(prepared)
    _edit_manifest(prepared, lambda m: m["splits"]["train"]["text"].update(src="train.src"))
    _edit_manifest(prepared, lambda m: m["tokenizer"]["src"].update(model=name))
    with pytest.raises(ArtifactError, match="not a plain file name"):
        load_data_dir(prepared)


def test_data_dir_names_a_missing_split(prepared):
    data = load_data_dir(prepared)
    assert data.has_split("dev") and not data.has_split("test")
    with pytest.raises(ArtifactError, match="no test split"):
        data.ids("test", "src")


# Real corpora from ../shared (skipped when absent) ------------------------------------------


def _head(source: Path, target: Path, n: int) -> None:
    opener = gzip.open if source.suffix == ".gz" else open
    with opener(source, "rt", encoding="utf-8") as handle:
        target.write_text("".join(line for _, line in zip(range(n), handle, strict=False)))


@pytest.mark.skipif(not (SHARED / "data" / "tatoeba-cmn-eng").is_dir(), reason="no shared data")
def test_chinese_english_tatoeba_sample(tmp_path):
    folder = SHARED / "data" / "tatoeba-cmn-eng"
    for lang in ("en", "zh"):
        _head(folder / f"all.{lang}", tmp_path / f"all.{lang}", 3000)
    out = tmp_path / "data"
    result = _prepare(
        *("--src", tmp_path / "all.en", "--tgt", tmp_path / "all.zh", "--separate"),
        *("--dev-size", 100, "--test-size", 100, "--vocab-size", 2000, "-o", out),
    )
    assert result.exit_code == 0, result.output
    data = load_data_dir(out)
    tokenizer = data.manifest["tokenizer"]
    assert tokenizer["tgt"]["character_coverage"] == 0.9995
    assert tokenizer["src"]["character_coverage"] == 1.0
    assert data.manifest["counts"]["train"]["ratio"] < 10  # short zh↔en pairs survive
    zh = Tokenizer(data.tgt_spm)
    line = data.text("dev", "tgt").read_text(encoding="utf-8").splitlines()[0]
    assert zh.decode(data.ids("dev", "tgt")[0]) == line


@pytest.mark.skipif(not (SHARED / "data" / "multi30k").is_dir(), reason="no shared data")
def test_multi30k_gzip_sample(tmp_path):
    folder = SHARED / "data" / "multi30k"
    out = tmp_path / "data"
    result = _prepare(
        *("--src", folder / "val.de.gz", "--tgt", folder / "val.en.gz", "--dev-size", 50),
        *("--vocab-size", 1000, "-o", out),
    )
    assert result.exit_code == 0, result.output
    data = load_data_dir(out)
    counts = data.manifest["counts"]["train"]
    assert counts["read"] == 1014 and counts["held_out"] == 50
    dropped = sum(counts[reason] for reason in ("empty", "too_long", "ratio", "duplicate"))
    assert counts["kept"] + dropped == 1014  # every line read is kept or dropped for a reason
    for split, lines in (("train", counts["kept"] - 50), ("dev", 50)):  # dev held out of kept
        for side in ("src", "tgt"):
            assert len(data.text(split, side).read_text(encoding="utf-8").splitlines()) == lines
            assert len(data.ids(split, side)) == lines


def test_same_input_gives_the_same_fingerprint(corpus, tmp_path):
    fingerprints = set()
    for name in ("one", "two"):
        assert _prepare(*_train_args(corpus), "-o", tmp_path / name).exit_code == 0
        fingerprints.add(load_data_dir(tmp_path / name).fingerprint)
    assert len(fingerprints) == 1


def test_a_failed_stage_never_removes_a_directory_it_did_not_make(tmp_path, monkeypatch):
    from nmt_cli.atomic import staged_directory

    monkeypatch.chdir(tmp_path)
    (tmp_path / "mine").mkdir()  # empty, and the user's
    with pytest.raises(RuntimeError), staged_directory("made/../mine/out"):
        raise RuntimeError("the run failed")
    assert sorted(p.name for p in tmp_path.iterdir()) == ["mine"]  # made/ is gone, mine/ kept


def test_a_stage_left_by_a_killed_prepare_is_removed_by_the_next_one(corpus, tmp_path):
    import os
    import signal
    import socket
    import subprocess
    import sys
    import time

    out = tmp_path / "data"
    # A real prepare killed with SIGKILL while it works leaves its staging directory behind.
    sides = {}
    for side in ("src", "tgt"):
        lines = Path(corpus[side]).read_text(encoding="utf-8").splitlines()
        sides[side] = tmp_path / f"big.{side}"
        sides[side].write_text(
            "".join(f"{line} {k}\n" for k in range(100) for line in lines), encoding="utf-8"
        )
    command = [sys.executable, "-m", "nmt_cli", "prepare", "--src", sides["src"],
               "--tgt", sides["tgt"], "-o", out]  # fmt: skip
    process = subprocess.Popen(list(map(str, command)), stderr=subprocess.DEVNULL)
    while not list(tmp_path.glob(".data.*.partial")) and process.poll() is None:
        time.sleep(0.005)
    process.send_signal(signal.SIGKILL)
    process.wait()
    stale = list(tmp_path.glob(".data.*.partial"))
    assert len(stale) == 1 and not out.exists()
    # The stage of a live process (here: this one's parent) or of another host stays.
    host = socket.gethostname()
    others = [tmp_path / f".data.{host}.{os.getppid()}.live.partial",
              tmp_path / ".data.elsewhere.1.away.partial"]  # fmt: skip
    for other in others:
        other.mkdir()
    assert _prepare(*_train_args(corpus), "-o", out).exit_code == 0
    assert not stale[0].exists() and all(other.is_dir() for other in others)
    assert load_data_dir(out).fingerprint


@pytest.mark.parametrize("seed", ["-1", "4294967296"])
def test_a_seed_out_of_range_is_a_one_line_error(corpus, tmp_path, seed):
    out = tmp_path / "data"
    _assert_clean_error(_prepare(*_train_args(corpus), "-o", out, f"--seed={seed}"), "--seed")
    assert not out.exists()


def test_an_empty_output_directory_made_beforehand_is_used_without_force(corpus, tmp_path):
    out = tmp_path / "data"
    out.mkdir()
    result = _prepare(*_train_args(corpus), "-o", out)
    assert result.exit_code == 0, result.output
    assert load_data_dir(out).has_split("train")


def test_the_current_directory_is_refused_as_output_before_any_work(corpus, tmp_path, monkeypatch):
    here = tmp_path / "here"
    here.mkdir()
    monkeypatch.chdir(here)
    _assert_clean_error(_prepare(*_train_args(corpus), "-o", "."), "is the current directory")
    assert list(here.iterdir()) == []


def test_two_vocabularies_of_one_size_get_two_embeddings(tmp_path):
    """prepare --separate trains two SentencePiece models: one id names unrelated pieces in
    them, so training must not share (or tie across) source and target embeddings, even
    where the two vocabularies have the same size."""
    from nmt_cli.model.seq2seq import Seq2Seq
    from nmt_cli.training_run import checked_settings

    src, tgt = _write_pair(tmp_path, "train", _pairs(300))
    out = tmp_path / "data"
    result = _prepare("--src", src, "--tgt", tgt, "--separate", "--vocab-size", 30, "-o", out)
    assert result.exit_code == 0, result.output
    data, config = checked_settings(out, tmp_path / "model", None, {})
    assert not data.joint
    assert config.model.src_vocab_size == config.model.tgt_vocab_size
    assert not config.model.share_embeddings  # (as the saved config.json will say)
    model = Seq2Seq(config.model)
    assert model.encoder.embedding is not model.decoder.embedding
    assert model.generator.weight is model.decoder.embedding.weight  # tied on the target side
    # --resume keeps the embeddings the model was built with, with or without a --config file
    # (whose share_embeddings is true by default)
    from nmt_cli import checkpoint

    (tmp_path / "model").mkdir()
    checkpoint.write_json(tmp_path / "model" / checkpoint.CONFIG_FILE, config.to_dict())
    toml = tmp_path / "c.toml"
    toml.write_text("[train]\nlr = 0.001\n", encoding="utf-8")
    for config_file in (None, toml):
        _, resumed = checked_settings(out, tmp_path / "model", config_file, {}, resume=True)
        assert not resumed.model.share_embeddings


def test_the_counts_are_whole_in_a_log_whatever_its_width(tmp_path):
    """stderr to a file (nohup, 2> log, CI): rich assumes 80 columns there and cut the counts
    of a large corpus to "2,000,0…"; the table is written at the width its numbers need."""
    import os
    import subprocess
    import sys

    src, tgt = _write_pair(tmp_path, "train", _pairs(300))
    out = tmp_path / "data"
    done = subprocess.run(
        [sys.executable, "-m", "nmt_cli", "prepare", "--src", str(src), "--tgt", str(tgt),
         "--vocab-size", "50", "-o", str(out)],
        capture_output=True, text=True, check=False, env={**os.environ, "COLUMNS": "30"},
    )  # fmt: skip
    assert done.returncode == 0, done.stderr
    counts = json.loads((out / MANIFEST).read_text())["counts"]["train"]
    row = next(line for line in done.stderr.splitlines() if line.startswith("train"))
    assert "…" not in row and row.split()[1] == f"{counts['read']:,}"


def test_a_dev_pair_too_long_to_train_on_is_left_out_of_the_dev_loss(tmp_path):
    """A dev line never split into sentences (a paragraph, a pasted document) went whole into
    the dev loss, whose attention takes memory as the square of its length: one of a million
    characters asked for 4 TB at the first validation, after the updates before it. It is
    left out, as from training, and said so once."""
    import torch

    from nmt_cli.config import Config, ModelConfig, TrainConfig
    from nmt_cli.model.seq2seq import Seq2Seq
    from nmt_cli.validation import Validator

    src, tgt = _write_pair(tmp_path, "train", _pairs(300))
    dev = _pairs(20, seed=1)
    outs = {}
    for name, extra in (("short", []), ("long", [(" ".join(["haus"] * 400), "house " * 400)])):
        dev_src, dev_tgt = _write_pair(tmp_path, f"dev-{name}", dev + extra)
        outs[name] = tmp_path / name
        args = ("--src", src, "--tgt", tgt, "--dev-src", dev_src, "--dev-tgt", dev_tgt)
        assert _prepare(*args, "--vocab-size", 50, "-o", outs[name]).exit_code == 0
    data = {name: load_data_dir(out) for name, out in outs.items()}
    assert data["short"].src_spm.read_bytes() == data["long"].src_spm.read_bytes()
    vocab = Tokenizer(data["short"].src_spm).vocab_size
    torch.manual_seed(0)
    config = Config(model=ModelConfig(emb_size=8, hidden_size=8, src_vocab_size=vocab,
                                      tgt_vocab_size=vocab), train=TrainConfig(max_len=100))  # fmt: skip
    model = Seq2Seq(config.model)
    losses = {}
    for name, one in data.items():
        validator = Validator(
            one, config.train, torch.device("cpu"), torch.autocast("cpu", enabled=False)
        )
        losses[name] = (validator.dev_loss(model), validator.long_dev_pairs())
    assert losses["long"] == (losses["short"][0], 1) and losses["short"][1] == 0
    model_dir = tmp_path / "model"
    trained = runner.invoke(app, ["train", str(outs["long"]), "-o", str(model_dir), "--max-steps",
                                  "2", "--valid-every", "2", "--emb-size", "8", "--hidden-size", "8"])  # fmt: skip
    assert trained.exit_code == 0, trained.output
    assert "1 dev pair is longer than max_len 100 pieces on a side" in " ".join(
        trained.stderr.split()
    )
