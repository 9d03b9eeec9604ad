"""Interrupted work: signals and kills during `nmt train`, a full disk, two runs on one directory.

Training runs here as a real process (`python -m nmt_cli train`) on the tiny toy data, so a
signal reaches it exactly as it would from a terminal, a scheduler or the OOM killer.
"""

from __future__ import annotations

import errno
import json
import os
import random
import signal
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path

import pytest
import torch
from cli_runner import invoke
from outcome import assert_no_leftovers, assert_refused, error_message

from nmt_cli import atomic, checkpoint

# Small and slow to finish: long enough to still be running whenever it is signalled.
CONFIG = """
[model]
emb_size = 16
hidden_size = 16
[train]
batch_tokens = 200
log_every = 1
valid_every = {valid_every}
valid_sentences = 4
warmup_steps = 10
max_steps = 100000
patience = 0
threads = 1
"""
STARTUP_S = 120  # generous: two busy cores may take long to import torch


def _config(tmp_path: Path, valid_every: int = 1000) -> Path:
    path = tmp_path / "train.toml"
    path.write_text(CONFIG.format(valid_every=valid_every))
    return path


class Training:
    """`nmt train` as a child process, its stderr in a file (a pipe could fill up and block)."""

    def __init__(self, data: Path, out: Path, config: Path, *extra: str):
        self.out = out
        self.stderr_path = out.parent / f"{out.name}.{time.monotonic_ns()}.stderr"
        env = {**os.environ, "NO_COLOR": "1", "OMP_NUM_THREADS": "1"}
        argv = [sys.executable, "-m", "nmt_cli", "train", data, "-o", out, "--config", config]
        with open(self.stderr_path, "w") as stderr:
            self.process = subprocess.Popen(
                [str(a) for a in (*argv, *extra)],
                stdout=subprocess.DEVNULL,
                stderr=stderr,
                env=env,
            )

    @property
    def stderr(self) -> str:
        return self.stderr_path.read_text()

    def events(self) -> list[dict]:
        log = self.out / "train.jsonl"
        if not log.exists():
            return []
        lines = log.read_text().splitlines()
        return [json.loads(line) for line in lines if line.endswith("}")]

    def wait_for(self, ready: Callable[[list[dict]], bool], timeout: float = STARTUP_S) -> None:
        deadline = time.monotonic() + timeout
        while not ready(self.events()):
            assert self.process.poll() is None, f"training ended early:\n{self.stderr}"
            assert time.monotonic() < deadline, f"training did not get there:\n{self.stderr}"
            time.sleep(0.05)

    def stop(self, sig: int, timeout: float = 120) -> int:
        self.process.send_signal(sig)
        return self.process.wait(timeout=timeout)

    def kill(self) -> None:
        if self.process.poll() is None:
            self.process.kill()
        self.process.wait(timeout=60)


@pytest.fixture
def runs():
    """Every training process a test starts is killed when it ends, whatever happened."""
    started: list[Training] = []
    yield started
    for run in started:
        run.kill()


def _trained_steps(n: int) -> Callable[[list[dict]], bool]:
    return lambda events: any(e["event"] == "train" and e["step"] >= n for e in events)


def _last_step(out: Path) -> int:
    payload = checkpoint.load(out / checkpoint.LAST_FILE)
    assert all(torch.isfinite(w).all() for w in payload["weights"].values())
    return payload["progress"]["step"]


def _resume(data: Path, out: Path, config: Path, until: int):
    result = invoke("train", data, "-o", out, "--config", config, "--resume", "--max-steps", until)
    assert result.exit_code == 0, result.stderr
    events = [json.loads(line) for line in (out / "train.jsonl").read_text().splitlines()]
    resumed = [e for e in events if e["event"] == "resumed"][-1]
    done = [e for e in events if e["event"] == "done"][-1]
    return resumed["step"], done["step"]


# -- SIGINT and SIGTERM: save, exit 130, resume -------------------------------------------------


@pytest.mark.parametrize("sig", [signal.SIGINT, signal.SIGTERM], ids=["SIGINT", "SIGTERM"])
def test_signal_saves_a_resumable_checkpoint_and_exits_130(toy_data_dir, tmp_path, runs, sig):
    config, out = _config(tmp_path), tmp_path / "model"
    run = Training(toy_data_dir, out, config)
    runs.append(run)
    run.wait_for(_trained_steps(3))
    assert run.stop(sig) == 130, run.stderr
    message = error_message(run.stderr, one_line=False, label="interrupted")
    assert "Traceback" not in run.stderr and "--resume" in message
    step = _last_step(out)
    assert f"stopped at step {step}" in message and step >= 3
    assert not (out / ".lock").exists()
    assert_no_leftovers(out)
    resumed, done = _resume(toy_data_dir, out, config, until=step + 3)
    assert (resumed, done) == (step, step + 3)


def test_an_interrupt_keeps_the_validated_checkpoints_it_had(toy_data_dir, tmp_path, runs):
    config, out = _config(tmp_path, valid_every=2), tmp_path / "model"
    run = Training(toy_data_dir, out, config, "--keep-checkpoints", "2")
    runs.append(run)
    run.wait_for(lambda events: sum(e["event"] == "valid" for e in events) >= 3)
    assert run.stop(signal.SIGINT) == 130, run.stderr
    validated = [e["step"] for e in run.events() if e["event"] == "valid"]
    kept = [int(p.stem.split("-")[1]) for p in checkpoint.kept_checkpoints(out)]
    assert kept == validated[-2:]  # the last two validations, not the step it stopped at


def test_an_interrupt_is_resumable_but_not_one_of_the_kept_checkpoints(
    toy_data_dir, tmp_path, runs
):
    config, out = _config(tmp_path), tmp_path / "model"  # no validation before the signal
    run = Training(toy_data_dir, out, config, "--keep-checkpoints", "3")
    runs.append(run)
    run.wait_for(_trained_steps(3))
    assert run.stop(signal.SIGINT) == 130, run.stderr
    assert _last_step(out) >= 3  # resumable from where it stopped
    stops = [e for e in run.events() if e["event"] == "interrupted"]  # the log says so
    assert len(stops) == 1 and stops[0]["step"] == _last_step(out)
    steps = [e for e in run.events() if e["event"] == "train"]
    # the epoch counted as the step lines count it (the one under way), the finished ones beside
    assert stops[0]["epoch"] >= max((e["epoch"] for e in steps), default=1) >= 1
    assert stops[0]["epochs_finished"] == stops[0]["epoch"] - (stops[0]["batch_index"] > 0)
    assert checkpoint.kept_checkpoints(out) == []  # kept ones are validations' weights only


# -- SIGKILL at random moments: the last checkpoint is always whole --------------------------------


def _check_after_kill(out: Path, previous: int | None) -> int | None:
    """The state a kill left: a loadable last.pt no older than before, or nothing to resume."""
    if not (out / checkpoint.LAST_FILE).exists():
        assert previous is None, "a checkpoint disappeared"
        return None
    step = _last_step(out)  # loads: never truncated or half-written
    assert previous is None or step >= previous
    return step


def _restart_args(out: Path) -> list[str]:
    if (out / checkpoint.LAST_FILE).exists():
        return ["--resume"]
    # Killed before the first save: the directory must take a fresh start. (--force only in
    # the instant between writing model.pt and last.pt, when a model but no state exists.)
    return ["--force"] if (out / checkpoint.MODEL_FILE).exists() else []


def test_sigkill_after_a_checkpoint_leaves_it_loadable(toy_data_dir, tmp_path, runs):
    config, out = _config(tmp_path, valid_every=5), tmp_path / "model"
    run = Training(toy_data_dir, out, config)
    runs.append(run)
    run.wait_for(lambda events: any(e["event"] == "valid" for e in events))
    time.sleep(random.Random(3).uniform(0.0, 1.0))
    run.kill()
    step = _check_after_kill(out, None)
    assert step is not None and step >= 5
    assert (out / ".lock").exists()  # left by the dead process: the next run takes it over
    resumed, done = _resume(toy_data_dir, out, config, until=step + 2)
    assert (resumed, done) == (step, step + 2)
    assert not (out / ".lock").exists()
    assert_no_leftovers(out)


@pytest.mark.slow
def test_sigkill_at_random_moments_never_breaks_the_checkpoint(toy_data_dir, tmp_path, runs):
    config, out = _config(tmp_path, valid_every=3), tmp_path / "model"
    rng = random.Random(20240611)
    step: int | None = None
    for _ in range(5):
        run = Training(toy_data_dir, out, config, *_restart_args(out))
        runs.append(run)
        time.sleep(rng.uniform(0.5, 15.0))  # anywhere from start-up to well into training
        run.kill()
        step = _check_after_kill(out, step)
    final = (step or 0) + 2
    result = invoke(
        "train", toy_data_dir, "-o", out, "--config", config, *_restart_args(out),
        "--max-steps", final,
    )  # fmt: skip
    assert result.exit_code == 0, result.stderr
    events = [json.loads(line) for line in (out / "train.jsonl").read_text().splitlines()]
    if step is not None:
        assert [e for e in events if e["event"] == "resumed"][-1]["step"] == step
    assert [e for e in events if e["event"] == "done"][-1]["step"] == final
    assert_no_leftovers(out)


# -- a full disk during a save ---------------------------------------------------------------------


class _FillingFile:
    """A file on a disk with `room` bytes left: a bigger write stores half, then ENOSPC."""

    def __init__(self, handle, room: int):
        self._handle = handle
        self._room = room

    def write(self, data):
        if len(data) > self._room:
            self._handle.write(data[: len(data) // 2])
            raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC))
        self._room -= len(data)
        return self._handle.write(data)

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self._handle.close()

    def __getattr__(self, name):
        return getattr(self._handle, name)


class _FullDisk:
    """Stands in for `os` inside nmt_cli.atomic, whose writes then find the disk nearly full."""

    def __init__(self, room: int):
        self.room = room

    def fdopen(self, fd, *args, **kwargs):
        return _FillingFile(os.fdopen(fd, *args, **kwargs), self.room)

    def __getattr__(self, name):
        return getattr(os, name)


@pytest.fixture
def model_copy(toy_model_dir, tmp_path) -> Path:
    import shutil

    model = tmp_path / "model"
    shutil.copytree(toy_model_dir, model)
    return model


def test_full_disk_during_a_checkpoint_keeps_the_previous_one(
    model_copy, toy_data_dir, monkeypatch
):
    before = {
        name: (model_copy / name).read_bytes() for name in ("model.pt", "checkpoints/last.pt")
    }
    saved_step = _last_step(model_copy)
    monkeypatch.setattr(atomic, "os", _FullDisk(room=4096))  # config.json fits, weights do not
    result = invoke(
        "train", toy_data_dir, "-o", model_copy, "--resume", "--max-steps", saved_step + 2
    )
    message = assert_refused(result, 1, "No space left on device", "free", one_line=False)
    assert ".pt" in message
    monkeypatch.undo()
    for name, data in before.items():
        assert (model_copy / name).read_bytes() == data
    assert _last_step(model_copy) == saved_step
    assert not (model_copy / ".lock").exists()
    assert_no_leftovers(model_copy)


def test_full_disk_during_prepare_leaves_no_directory(tmp_path, monkeypatch):
    from cli_runner import write_toy_corpus

    src, tgt = write_toy_corpus(tmp_path / "corpus", n=300)
    monkeypatch.setattr(atomic, "os", _FullDisk(room=4096))
    out = tmp_path / "data"
    result = invoke("prepare", "--src", src, "--tgt", tgt, "--vocab-size", "60", "-o", out)
    assert_refused(result, 1, "No space left on device", one_line=False)
    assert not out.exists()
    assert_no_leftovers(tmp_path)


def test_full_disk_during_eval_save_hyp_leaves_no_file(toy_model_dir, tmp_path, monkeypatch):
    text = tmp_path / "text"
    text.write_text("apple river\nsun\n")
    monkeypatch.setattr(atomic, "os", _FullDisk(room=0))
    hyp = tmp_path / "hyp.txt"
    result = invoke(
        "eval", "-m", toy_model_dir, "--src", text, "--ref", text, "--beam", "1", "--save-hyp", hyp
    )
    assert_refused(result, 1, str(hyp), "No space left on device")
    assert not hyp.exists() and result.stdout == ""
    assert_no_leftovers(tmp_path)


# -- two runs on one directory -------------------------------------------------------------------


def test_second_run_on_a_busy_directory_is_refused(toy_data_dir, tmp_path, runs):
    config, out = _config(tmp_path), tmp_path / "model"
    first = Training(toy_data_dir, out, config)
    runs.append(first)
    first.wait_for(_trained_steps(1))
    files = sorted(p.name for p in out.iterdir())
    # --force would delete the first run's files: the lock must stop it before that.
    second = invoke("train", toy_data_dir, "-o", out, "--config", config, "--force")
    assert_refused(second, 1, "in use", f"pid {first.process.pid}")
    assert set(files) <= {p.name for p in out.iterdir()}
    assert first.process.poll() is None  # the first run goes on
    assert first.stop(signal.SIGTERM) == 130
    assert not (out / ".lock").exists()


def test_lock_of_a_live_process_is_respected(toy_data_dir, tmp_path):
    out = tmp_path / "model"
    out.mkdir()
    holder = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(60)"])
    try:
        (out / ".lock").write_text(f"{holder.pid}\n")
        result = invoke("train", toy_data_dir, "-o", out, "--max-steps", "1")
        assert_refused(result, 1, "in use", f"pid {holder.pid}")
        assert (out / ".lock").read_text() == f"{holder.pid}\n"
        # a run still starting has no checkpoint to resume yet: "in use" comes first
        result = invoke("train", toy_data_dir, "-o", out, "--resume")
        assert_refused(result, 1, "in use", f"pid {holder.pid}")
    finally:
        holder.kill()
        holder.wait()


@pytest.mark.parametrize("content", ["dead", "garbage", "empty"])
def test_stale_lock_is_taken_over(toy_data_dir, tmp_path, content):
    out = tmp_path / "model"
    out.mkdir()
    if content == "dead":
        gone = subprocess.Popen([sys.executable, "-c", "pass"])
        gone.wait()
        (out / ".lock").write_text(f"{gone.pid}\n")
    else:
        (out / ".lock").write_text("not a pid\n" if content == "garbage" else "")
    small = ("--emb-size", "8", "--hidden-size", "8", "--valid-every", "2", "--threads", "1")
    result = invoke("train", toy_data_dir, "-o", out, "--max-steps", "2", *small)
    assert result.exit_code == 0, result.stderr
    assert (out / "model.pt").exists() and not (out / ".lock").exists()


def test_a_second_ctrl_c_says_what_was_saved_before_it(toy_data_dir, tmp_path, monkeypatch):
    from cli_runner import invoke

    from nmt_cli import training_run

    def interrupted(*_args, **_kwargs):
        raise training_run._StoppedAtOnce  # what the second SIGINT raises inside the training

    monkeypatch.setattr(training_run, "_train_ranked", interrupted)
    out = tmp_path / "model"
    result = invoke("train", toy_data_dir, "-o", out, "--max-steps", "5")
    assert result.exit_code == 130 and "Traceback" not in result.output
    assert "stopped at once (a second Ctrl-C) before any state was saved" in result.stderr
    (out / checkpoint.LAST_FILE).parent.mkdir(parents=True, exist_ok=True)
    (out / checkpoint.LAST_FILE).write_bytes(b"saved by the first Ctrl-C")
    result = invoke("train", toy_data_dir, "-o", out, "--max-steps", "5", "--resume")
    message = " ".join(result.stderr.split())
    assert result.exit_code == 130 and "continue from there with --resume" in message
