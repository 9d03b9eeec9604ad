"""Data and model directories that are from another version, half-written, truncated or foreign.

Each is refused with exit code 3 and one line that names the broken file and says how to
make a good one; nothing is trained or translated from it, and nothing is left half-written.
"""

from __future__ import annotations

import json
import shutil
from collections.abc import Callable
from pathlib import Path

import numpy as np
import pytest
import torch
from cli_runner import invoke
from outcome import assert_no_traceback, assert_refused

# -- data directories -------------------------------------------------------------------------


def _manifest(data: Path) -> dict:
    return json.loads((data / "prepare.json").read_text())


def _set_manifest(data: Path, manifest: dict) -> None:
    (data / "prepare.json").write_text(json.dumps(manifest))


def _other_version(data: Path) -> str:
    _set_manifest(data, {**_manifest(data), "format_version": 2})
    return "version 2"


def _foreign_manifest(data: Path) -> str:
    _set_manifest(data, {**_manifest(data), "format": "someone-else"})
    return "prepare.json"


def _no_manifest(data: Path) -> str:
    (data / "prepare.json").unlink()  # what a prepare killed before its last write leaves
    return "prepare.json"


def _half_written_manifest(data: Path) -> str:
    text = (data / "prepare.json").read_text()
    (data / "prepare.json").write_text(text[: len(text) // 2])
    return "prepare.json"


def _missing_ids(data: Path) -> str:
    (data / "train.src.ids.npy").unlink()
    return "train.src.ids.npy"


def _truncated_ids(data: Path) -> str:
    path = data / "train.tgt.ids.npy"
    path.write_bytes(path.read_bytes()[:100])
    return "train.tgt.ids.npy"


def _inconsistent_offsets(data: Path) -> str:
    offsets = np.load(data / "train.src.offsets.npy")
    offsets[-1] += 7  # points past the end of the ids
    np.save(data / "train.src.offsets.npy", offsets)
    return "train.src.offsets.npy"


def _wrong_dtype_ids(data: Path) -> str:
    np.save(data / "train.src.ids.npy", np.zeros(10, dtype=np.float32))
    return "train.src.ids.npy"


def _junk_tokenizer(data: Path) -> str:
    (data / "spm.model").write_bytes(b"this is not a sentencepiece model\n" * 10)
    return "spm.model"


def _another_prepares_tokenizer(data: Path) -> str:
    """A valid model of the same size, trained anew (its ids differ from those stored)."""
    import sentencepiece as spm

    size = _manifest(data)["tokenizer"]["src"]["vocab_size"]
    spm.SentencePieceTrainer.train(
        input=f"{data / 'train.src'},{data / 'train.tgt'}",
        model_prefix=str(data / "other"),
        vocab_size=size,
        model_type="bpe",
        hard_vocab_limit=False,
        pad_id=0,  # nmt's special ids, so that only the hash tells the two models apart
        unk_id=1,
        bos_id=2,
        eos_id=3,
        minloglevel=2,
    )
    (data / "other.model").replace(data / "spm.model")
    return "spm.model is not the tokenizer model this data directory was prepared with"


def _missing_tokenizer(data: Path) -> str:
    (data / "spm.model").unlink()
    return "spm.model"


def _cut_dev_reference(data: Path) -> str:
    lines = (data / "dev.tgt").read_bytes().splitlines(keepends=True)
    (data / "dev.tgt").write_bytes(b"".join(lines[: len(lines) // 2]))  # validation read it late
    return "dev.tgt"


def _dev_reference_cut_inside_a_character(data: Path) -> str:
    (data / "dev.tgt").write_bytes("Grüße\n".encode()[:3])
    return "dev.tgt"


def _missing_section(data: Path) -> str:
    manifest = _manifest(data)
    del manifest["splits"]
    _set_manifest(data, manifest)
    return "splits"


DATA_DAMAGE: list[Callable[[Path], str]] = [
    _other_version,
    _foreign_manifest,
    _no_manifest,
    _half_written_manifest,
    _missing_ids,
    _truncated_ids,
    _inconsistent_offsets,
    _wrong_dtype_ids,
    _junk_tokenizer,
    _another_prepares_tokenizer,
    _missing_tokenizer,
    _cut_dev_reference,
    _dev_reference_cut_inside_a_character,
    _missing_section,
]


@pytest.mark.parametrize("damage", DATA_DAMAGE, ids=[f.__name__[1:] for f in DATA_DAMAGE])
def test_train_refuses_a_broken_data_directory(damage, toy_data_dir, tmp_path):
    data = tmp_path / "data"
    shutil.copytree(toy_data_dir, data)
    named = damage(data)
    out = tmp_path / "model"
    result = invoke("train", data, "-o", out, "--max-steps", "1")
    assert_refused(result, 3, named)
    assert not out.exists()


# -- model directories ------------------------------------------------------------------------


def _payload(model: Path) -> dict:
    return torch.load(model / "model.pt", weights_only=True)


def _truncated_model(model: Path) -> str:
    data = (model / "model.pt").read_bytes()
    (model / "model.pt").write_bytes(data[: len(data) // 2])
    return "model.pt"


def _empty_model(model: Path) -> str:
    (model / "model.pt").write_bytes(b"")
    return "model.pt"


def _random_model(model: Path) -> str:
    (model / "model.pt").write_bytes(np.random.default_rng(0).bytes(4096))
    return "model.pt"


def _text_model(model: Path) -> str:
    (model / "model.pt").write_text("apple river\n" * 100)  # a text file copied over it
    return "model.pt is not a PyTorch checkpoint"


def _foreign_model(model: Path) -> str:
    torch.save({"state_dict": {"w": torch.zeros(3)}}, model / "model.pt")  # someone else's .pt
    return "model.pt"


def _future_model(model: Path) -> str:
    torch.save({**_payload(model), "version": 99}, model / "model.pt")
    return "version 99"


def _model_without_config(model: Path) -> str:
    payload = _payload(model)
    del payload["config"]
    torch.save(payload, model / "model.pt")
    return "model.pt"


def _config_not_matching_weights(model: Path) -> str:
    payload = _payload(model)
    payload["config"]["model"]["hidden_size"] *= 2
    torch.save(payload, model / "model.pt")
    return "model.pt"


def _missing_weights(model: Path) -> str:
    torch.save({**_payload(model), "weights": {}}, model / "model.pt")
    return "model.pt"


def _missing_model(model: Path) -> str:
    (model / "model.pt").unlink()
    return "model.pt"


def _junk_src_tokenizer(model: Path) -> str:
    (model / "src.model").write_bytes(b"junk" * 100)
    return "src.model"


def _empty_tgt_tokenizer(model: Path) -> str:
    (model / "tgt.model").write_bytes(b"")
    return "tgt.model"


def _missing_src_tokenizer(model: Path) -> str:
    (model / "src.model").unlink()
    return "src.model"


MODEL_DAMAGE: list[Callable[[Path], str]] = [
    _truncated_model,
    _empty_model,
    _random_model,
    _text_model,
    _foreign_model,
    _future_model,
    _model_without_config,
    _config_not_matching_weights,
    _missing_weights,
    _missing_model,
    _junk_src_tokenizer,
    _empty_tgt_tokenizer,
    _missing_src_tokenizer,
]


@pytest.fixture
def model_copy(toy_model_dir, tmp_path) -> Path:
    model = tmp_path / "model"
    shutil.copytree(toy_model_dir, model)
    return model


@pytest.mark.parametrize("damage", MODEL_DAMAGE, ids=[f.__name__[1:] for f in MODEL_DAMAGE])
def test_translate_refuses_a_broken_model_directory(damage, model_copy):
    named = damage(model_copy)
    result = invoke("translate", "-m", model_copy, input="apple river\n")
    assert_refused(result, 3, named)
    assert result.stdout == ""


@pytest.mark.parametrize("damage", [_truncated_model, _junk_src_tokenizer], ids=["model", "spm"])
@pytest.mark.parametrize("command", ["eval", "align"])
def test_eval_and_align_refuse_a_broken_model_directory(damage, command, model_copy, tmp_path):
    named = damage(model_copy)
    text = tmp_path / "text"
    text.write_text("apple river\n")
    argv = {
        "eval": ["eval", "-m", model_copy, "--src", text, "--ref", text],
        "align": ["align", "-m", model_copy, "--src", text, "--tgt", text],
    }[command]
    result = invoke(*argv)
    assert_refused(result, 3, named)
    assert result.stdout == ""


@pytest.mark.parametrize("name", ["config.json", "meta.json", "train.jsonl", "checkpoints"])
def test_translate_needs_only_weights_and_tokenizers(name, model_copy):
    path = model_copy / name
    shutil.rmtree(path) if path.is_dir() else path.unlink()
    result = invoke("translate", "-m", model_copy, "--beam", "1", input="apple river\nsun\n")
    assert_no_traceback(result)
    assert result.exit_code == 0 and result.stdout.count("\n") == 2


def test_resume_refuses_a_truncated_last_checkpoint(model_copy, toy_data_dir):
    last = model_copy / "checkpoints" / "last.pt"
    last.write_bytes(last.read_bytes()[:1000])
    before = {p.name: p.read_bytes() for p in model_copy.iterdir() if p.is_file()}
    result = invoke("train", toy_data_dir, "-o", model_copy, "--resume", "--max-steps", "61")
    assert_refused(result, 3, "last.pt", one_line=False)
    after = {p.name: p.read_bytes() for p in model_copy.iterdir() if p.is_file()}
    assert after["model.pt"] == before["model.pt"]  # the trained model is untouched
    assert not (model_copy / ".lock").exists()


def test_resume_refuses_a_corrupt_saved_config(model_copy, toy_data_dir):
    (model_copy / "config.json").write_text('{"model": {"hidden_size": ')
    result = invoke("train", toy_data_dir, "-o", model_copy, "--resume", "--max-steps", "61")
    assert_refused(result, 3, "config.json")


def test_resume_without_a_checkpoint_says_what_to_do(model_copy, toy_data_dir):
    shutil.rmtree(model_copy / "checkpoints")
    result = invoke("train", toy_data_dir, "-o", model_copy, "--resume", "--max-steps", "61")
    assert_refused(result, 2, "last.pt", "--resume")
