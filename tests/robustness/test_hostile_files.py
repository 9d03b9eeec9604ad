"""Files made to attack: pickles that run code, manifests that point outside, absurd configs.

Nothing in a model or data directory is executed or followed outside the directory, and no
configuration value can make nmt allocate without bound: each is refused with one line.
"""

from __future__ import annotations

import json
import pickle
import shutil
from pathlib import Path

import numpy as np
import pytest
import torch
from cli_runner import invoke
from outcome import assert_refused


class _Payload:
    """Creates `marker` when unpickled: what a malicious model file would do, harmlessly."""

    def __init__(self, marker: Path):
        self.marker = marker

    def __reduce__(self):
        return exec, (f"open({str(self.marker)!r}, 'w').write('pwned')",)


def _hostile_checkpoint(real: Path, path: Path, marker: Path) -> None:
    """A checkpoint that looks like ours but carries the payload among its weights."""
    payload = torch.load(real, weights_only=True)
    payload["weights"]["decoder.payload"] = _Payload(marker)
    torch.save(payload, path)


def test_the_payload_really_runs_when_unpickled_unsafely(tmp_path, toy_model_dir):
    marker = tmp_path / "marker"
    _hostile_checkpoint(toy_model_dir / "model.pt", tmp_path / "evil.pt", marker)
    torch.load(tmp_path / "evil.pt", weights_only=False)  # what nmt must never do
    assert marker.read_text() == "pwned"


@pytest.fixture
def model_copy(toy_model_dir, tmp_path) -> Path:
    model = tmp_path / "model"
    shutil.copytree(toy_model_dir, model)
    return model


@pytest.mark.parametrize("command", ["translate", "eval", "align"])
def test_model_pt_that_runs_code_is_refused_unrun(model_copy, tmp_path, command):
    marker = tmp_path / "marker"
    _hostile_checkpoint(model_copy / "model.pt", model_copy / "model.pt", marker)
    text = tmp_path / "text"
    text.write_text("apple river\n")
    argv = {
        "translate": ["translate", "-m", model_copy, "--input", text],
        "eval": ["eval", "-m", model_copy, "--src", text, "--ref", text],
        "align": ["align", "-m", model_copy, "--src", text, "--tgt", text],
    }[command]
    result = invoke(*argv)
    assert_refused(result, 3, "model.pt", "refused")
    assert not marker.exists()


def test_legacy_pickle_model_pt_is_refused_unrun(model_copy, tmp_path):
    marker = tmp_path / "marker"
    (model_copy / "model.pt").write_bytes(pickle.dumps({"weights": _Payload(marker)}, protocol=2))
    result = invoke("translate", "-m", model_copy, input="apple river\n")
    assert_refused(result, 3, "model.pt")
    assert not marker.exists()


def test_last_checkpoint_that_runs_code_is_refused_on_resume(model_copy, toy_data_dir, tmp_path):
    marker = tmp_path / "marker"
    last = model_copy / "checkpoints" / "last.pt"
    _hostile_checkpoint(last, last, marker)
    result = invoke("train", toy_data_dir, "-o", model_copy, "--resume", "--max-steps", "61")
    assert_refused(result, 3, "last.pt", "refused", one_line=False)
    assert not marker.exists()


def test_token_ids_holding_a_pickle_are_refused_unrun(toy_data_dir, tmp_path):
    data = tmp_path / "data"
    shutil.copytree(toy_data_dir, data)
    marker = tmp_path / "marker"
    hostile = np.empty(3, dtype=object)
    hostile[:] = [_Payload(marker), 1, 2]
    np.save(data / "train.src.ids.npy", hostile, allow_pickle=True)
    result = invoke("train", data, "-o", tmp_path / "model", "--max-steps", "1")
    assert_refused(result, 3, "train.src.ids.npy")
    assert not marker.exists() and not (tmp_path / "model").exists()


# -- prepare.json may only name plain files inside the data directory ---------------------------

ESCAPES = [
    ("tokenizer", "src", "model", "/etc/passwd"),
    ("tokenizer", "tgt", "model", "../outside/spm.model"),
    ("tokenizer", "src", "vocab", "sub/../spm.vocab"),
    ("splits", "train", "text", "/tmp/elsewhere.src"),
    ("splits", "train", "ids", "../outside/train.src"),
    ("splits", "dev", "ids", "..\\outside\\dev.src"),
    ("splits", "dev", "text", "C:\\data\\dev.src"),
    ("splits", "test", "ids", ".."),
]


@pytest.mark.parametrize(("section", "key", "field", "value"), ESCAPES, ids=[e[3] for e in ESCAPES])
def test_prepare_json_cannot_point_outside_the_data_directory(
    toy_data_dir, tmp_path, section, key, field, value
):
    data = tmp_path / "data"
    shutil.copytree(toy_data_dir, data)
    shutil.copytree(toy_data_dir, tmp_path / "outside")  # a real target, were it followed
    manifest = json.loads((data / "prepare.json").read_text())
    entry = manifest[section][key]
    entry[field] = value if section == "tokenizer" else {**entry[field], "src": value}
    (data / "prepare.json").write_text(json.dumps(manifest))
    result = invoke("train", data, "-o", tmp_path / "model", "--max-steps", "1")
    assert_refused(result, 3, repr(value), "prepare.json")
    assert not (tmp_path / "model").exists()


# -- absurd or malformed configuration values ----------------------------------------------------


@pytest.mark.parametrize(
    ("toml", "named"),
    [
        ("[model]\nhidden_size = 1000000000000\n", "c.toml line 2: [model] hidden_size must"),
        ("[model]\nemb_size = -1\n", "c.toml line 2: [model] emb_size must"),
        ('[model]\nhidden_size = "big"\n', "hidden_size"),
        ("[model]\nlayers = true\n", "layers"),
        ("[model]\ndropout = nan\n", "c.toml line 2: [model] dropout must"),
        ("[train]\nlr = nan\n", "c.toml line 2: [train] lr must"),
        ("[train]\nbatch_tokens = 1e12\n", "batch_tokens"),
        ("[train]\nmax_len = 100000000000\n", "c.toml line 2: [train] max_len must"),
        ("[train]\nmax_time = -1.0\n", "c.toml line 2: [train] max_time must"),
        ("[model]\nhiden_size = 3\n", "hiden_size"),
        ("model = 5\n", "[model]"),
        ("[model\nbroken", "TOML"),
    ],
    ids=lambda v: v.splitlines()[-1] if "\n" in str(v) else None,
)
def test_config_file_with_an_absurd_or_malformed_value(toy_data_dir, tmp_path, toml, named):
    config = tmp_path / "c.toml"
    config.write_text(toml)
    result = invoke("train", toy_data_dir, "-o", tmp_path / "model", "--config", config)
    assert_refused(result, 2, named)
    assert not (tmp_path / "model").exists()


@pytest.mark.parametrize(
    ("toml", "named"),
    [
        ("[train]\ndecay_factor = nan\n", "decay"),
        ("[train]\ndecay_factor = 5.0\n", "decay"),
        ("[train]\nmin_lr = -1.0\n", "min"),
        ("[train]\nclip_norm = nan\n", "clip"),
    ],
    ids=["decay nan", "decay 5", "min_lr -1", "clip nan"],
)
def test_config_file_with_an_out_of_range_schedule_value(toy_data_dir, tmp_path, toml, named):
    config = tmp_path / "c.toml"
    config.write_text(toml)
    small = ("--max-steps", "1", "--emb-size", "8", "--hidden-size", "8", "--valid-every", "1")
    result = invoke("train", toy_data_dir, "-o", tmp_path / "model", "--config", config, *small)
    assert_refused(result, 2, named)
    assert not (tmp_path / "model").exists()


@pytest.mark.parametrize(
    ("key", "value"),
    [("hidden_size", 10**12), ("hidden_size", "big"), ("tgt_vocab_size", 10**12), ("cell", 5)],
)
def test_model_pt_with_an_absurd_config_is_refused(model_copy, key, value):
    payload = torch.load(model_copy / "model.pt", weights_only=True)
    payload["config"]["model"][key] = value
    torch.save(payload, model_copy / "model.pt")
    result = invoke("translate", "-m", model_copy, input="apple river\n")
    assert_refused(result, 3, "model.pt")


def test_saved_config_with_an_absurd_value_is_refused_on_resume(model_copy, toy_data_dir):
    config = json.loads((model_copy / "config.json").read_text())
    config["model"]["hidden_size"] = 10**12
    (model_copy / "config.json").write_text(json.dumps(config))
    result = invoke("train", toy_data_dir, "-o", model_copy, "--resume", "--max-steps", "61")
    assert_refused(result, 2, "--hidden-size")
