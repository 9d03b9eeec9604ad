"""The checkpoint format: round trip, refusal of unsafe or broken files, atomic writes."""

from __future__ import annotations

import os
import pickle
import subprocess
import sys
import textwrap

import pytest
import torch

from nmt_cli import checkpoint
from nmt_cli.checkpoint import build_model
from nmt_cli.config import Config, ModelConfig
from nmt_cli.errors import ArtifactError
from nmt_cli.model.seq2seq import Seq2Seq


def small_config() -> Config:
    return Config(
        model=ModelConfig(src_vocab_size=30, tgt_vocab_size=30, emb_size=8, hidden_size=4)
    )


def test_round_trip_rebuilds_identical_model(tmp_path):
    config = small_config()
    model = Seq2Seq(config.model)
    path = tmp_path / "model.pt"
    checkpoint.save(path, {"config": config.to_dict(), "weights": model.state_dict()})
    rebuilt, loaded_config = build_model(checkpoint.load(path), path)
    assert loaded_config == config
    for (name, a), (_, b) in zip(
        model.state_dict().items(), rebuilt.state_dict().items(), strict=True
    ):
        assert torch.equal(a, b), name


def test_a_config_of_an_enormous_network_its_weights_do_not_fit_is_refused_before_allocating(
    tmp_path,
):
    """16 layers of 4,096 units (the largest a config may ask for: 45 GB of float32) in the
    stored config, the weights of a tiny model beside them: refused from shapes alone. Run under a 3 GiB address-space limit,
    so a loader that allocated the network first would fail there instead of taking the
    machine's memory."""
    config = small_config()
    weights = Seq2Seq(config.model).state_dict()
    huge = config.to_dict()
    huge["model"].update(layers=16, hidden_size=4096, emb_size=4096)
    path = tmp_path / "model.pt"
    checkpoint.save(path, {"config": huge, "weights": weights})
    script = textwrap.dedent(f"""
        import resource
        resource.setrlimit(resource.RLIMIT_AS, (3 << 30, 3 << 30))
        from pathlib import Path
        from nmt_cli import checkpoint
        from nmt_cli.errors import ArtifactError
        path = Path({str(path)!r})
        try:
            checkpoint.build_model(checkpoint.load(path), path)
        except ArtifactError as exc:
            print(exc)
    """)
    done = subprocess.run(
        [sys.executable, "-c", script], capture_output=True, text=True, timeout=120, check=False
    )
    assert done.returncode == 0, done.stderr[-2000:]
    assert "the weights do not fit the stored configuration" in done.stdout, done.stdout


class _Payload:
    """Unpickling this runs `touch <marker>`: what a hostile model file would do."""

    def __init__(self, marker):
        self.marker = str(marker)

    def __reduce__(self):
        return (os.system, (f"touch {self.marker}",))


def test_malicious_pickle_is_refused_without_running(tmp_path):
    marker = tmp_path / "pwned"
    path = tmp_path / "model.pt"
    torch.save(
        {"format": checkpoint.FORMAT, "version": checkpoint.VERSION, "weights": _Payload(marker)},
        path,
    )
    with pytest.raises(ArtifactError, match="refused"):
        checkpoint.load(path)
    assert not marker.exists()


def test_plain_pickle_file_is_refused(tmp_path):
    marker = tmp_path / "pwned"
    path = tmp_path / "model.pt"
    path.write_bytes(pickle.dumps(_Payload(marker)))
    with pytest.raises(ArtifactError):
        checkpoint.load(path)
    assert not marker.exists()


@pytest.mark.parametrize("content", [b"", b"not a checkpoint", b"PK\x03\x04garbage"])
def test_foreign_or_empty_file_is_a_clear_error(tmp_path, content):
    path = tmp_path / "model.pt"
    path.write_bytes(content)
    with pytest.raises(ArtifactError, match="model.pt"):
        checkpoint.load(path)


def test_truncated_checkpoint_is_a_clear_error(tmp_path):
    path = tmp_path / "model.pt"
    checkpoint.save(
        path,
        {"config": small_config().to_dict(), "weights": Seq2Seq(small_config().model).state_dict()},
    )
    data = path.read_bytes()
    path.write_bytes(data[: len(data) // 2])
    with pytest.raises(ArtifactError, match="truncated"):
        checkpoint.load(path)


def test_an_unreadable_checkpoint_is_not_called_truncated(tmp_path, monkeypatch):
    path = tmp_path / "model.pt"
    checkpoint.save(path, {"config": small_config().to_dict()})

    def denied(_path):  # what opening it gives a user without read permission (root has it)
        raise PermissionError(13, "Permission denied")

    monkeypatch.setattr(checkpoint, "_looks_like_a_checkpoint", denied)
    with pytest.raises(ArtifactError, match="cannot read .*: Permission denied; check its perm"):
        checkpoint.load(path)


def test_tensor_without_marker_is_refused(tmp_path):
    path = tmp_path / "model.pt"
    torch.save({"weights": {"x": torch.zeros(2)}}, path)
    with pytest.raises(ArtifactError, match="not an nmt checkpoint"):
        checkpoint.load(path)


def test_kill_during_save_keeps_previous_checkpoint(tmp_path):
    path = tmp_path / "last.pt"
    checkpoint.save(path, {"step": 1, "weights": {"w": torch.ones(4)}})
    # A child process starts saving a large checkpoint and is killed before it completes.
    script = textwrap.dedent(f"""
        import os, signal, torch
        from nmt_cli import atomic
        real_replace = os.replace
        def die(*args):
            os.kill(os.getpid(), signal.SIGKILL)
        os.replace = die
        from nmt_cli import checkpoint
        checkpoint.save(__import__("pathlib").Path({str(path)!r}), {{"step": 2, "weights": {{"w": torch.zeros(1000000)}}}})
    """)
    result = subprocess.run([sys.executable, "-c", script], capture_output=True)
    assert result.returncode == -9
    payload = checkpoint.load(path)
    assert payload["step"] == 1
    assert torch.equal(payload["weights"]["w"], torch.ones(4))


def test_a_model_directory_with_another_models_tokenizer_is_refused(toy_model_dir, tmp_path):
    import shutil

    from cli_runner import invoke
    from sentencepiece import SentencePieceTrainer

    copy = tmp_path / "model"
    shutil.copytree(toy_model_dir, copy)
    text = tmp_path / "text.txt"
    text.write_text("".join(f"w{i} o{i % 7} t\n" for i in range(300)), encoding="utf-8")
    SentencePieceTrainer.train(
        input=str(text), model_prefix=str(tmp_path / "other"), vocab_size=30, minloglevel=2,
        pad_id=0, unk_id=1, bos_id=2, eos_id=3,
    )  # fmt: skip
    shutil.copy(tmp_path / "other.model", copy / "src.model")
    result = invoke("translate", "-m", copy, input="apple river\n")
    assert result.exit_code == 3 and "Traceback" not in result.output
    assert "src.model has 30 pieces but the model was trained with" in result.stderr


def test_weights_of_another_number_type_are_refused_at_loading(tmp_path):
    """A float16 tensor in model.pt (a damaged or hand-edited file) fits every shape: it is
    refused at loading, not inside the first search."""
    config = small_config()
    weights = Seq2Seq(config.model).state_dict()
    weights["generator.bias"] = weights["generator.bias"].half()
    path = tmp_path / "model.pt"
    checkpoint.save(path, {"config": config.to_dict(), "weights": weights})
    with pytest.raises(
        ArtifactError, match="generator.bias is float16, where the model holds float32"
    ):
        build_model(checkpoint.load(path), path)
