"""Two CPU processes with Gloo: the DDP gradient equals the single-process gradient; torchrun trains."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest
import torch
from cli_runner import invoke

GRADIENT_SCRIPT = textwrap.dedent("""
    import sys, torch
    from pathlib import Path
    from nmt_cli.batching import collate
    from nmt_cli.config import Config, ModelConfig, TrainConfig
    from nmt_cli.data.datadir import load_data_dir
    from nmt_cli.distributed import from_environment, shutdown
    from nmt_cli.trainer import Trainer

    data_dir, out, links, cases = Path(sys.argv[1]), Path(sys.argv[2]), sys.argv[3], sys.argv[4:]
    data = load_data_dir(data_dir)
    ranks = from_environment(False)
    src, tgt = data.ids("train", "src"), data.ids("train", "tgt")
    # unequal shares (5 and 11 sentences), so a per-rank normalisation would show
    rows = list(range(16)) if ranks.world == 1 else [range(5), range(5, 16)][ranks.rank]
    for case in cases:  # "guided-normalization": one process group serves every case
        guided, normalization = case.split("-")
        guided = guided == "True"
        config = Config(
            model=ModelConfig(emb_size=16, hidden_size=8, dropout=0.0, attention="additive",
                              input_feed=True, src_vocab_size=data.src_vocab_size,
                              tgt_vocab_size=data.tgt_vocab_size),
            train=TrainConfig(clip_norm=0.0, label_smoothing=0.1, threads=1, lr=1e-3,
                              guided_alignment=0.5 if guided else 0.0,
                              alignments=links if guided else "",
                              normalization=normalization),
        )
        model_dir = out / case / f"rank{ranks.rank}"
        model_dir.mkdir(parents=True, exist_ok=True)
        trainer = Trainer(config, data, model_dir, ranks=ranks)
        guides = [trainer.guides.pair(i) for i in rows] if guided else None
        trainer.train_step(collate([src[i] for i in rows], [tgt[i] for i in rows], guides))
        grads = {n: p.grad.clone() for n, p in trainer.model.named_parameters()
                 if p.grad is not None}
        if ranks.main:
            torch.save(grads, out / case / f"grads-world{ranks.world}.pt")
    shutdown()
""")
CASES = [(False, "tokens"), (True, "tokens"), (False, "sentences")]


def _torchrun(nproc: int, *args: str, timeout: int = 300) -> subprocess.CompletedProcess:
    env = {**os.environ, "OMP_NUM_THREADS": "1"}
    command = [
        sys.executable,
        "-m",
        "torch.distributed.run",
        "--standalone",
        f"--nproc-per-node={nproc}",
        *args,
    ]
    return subprocess.run(command, capture_output=True, text=True, env=env, timeout=timeout)


@pytest.fixture(scope="module")
def gradients(toy_data_dir, tmp_path_factory) -> Path:
    """One single-process run and one two-process run, each computing every case's gradient
    (starting two processes with torch and Gloo is most of the cost, so it is paid once)."""
    tmp_path = tmp_path_factory.mktemp("gradients")
    script = tmp_path / "grad.py"
    script.write_text(GRADIENT_SCRIPT)
    # the toy corpus is a reversal: source word i is target word n - 1 - i
    links = tmp_path / "train.links"
    sources = (toy_data_dir / "train.src").read_text(encoding="utf-8").splitlines()
    lines = (" ".join(f"{i}-{len(s.split()) - 1 - i}" for i in range(len(s.split())))
             for s in sources)  # fmt: skip
    links.write_text("".join(line + "\n" for line in lines), encoding="utf-8")
    args = [str(script), str(toy_data_dir), str(tmp_path), str(links)]
    args += [f"{guided}-{normalization}" for guided, normalization in CASES]
    single = subprocess.run([sys.executable, *args], capture_output=True, text=True, timeout=300)
    assert single.returncode == 0, single.stderr
    double = _torchrun(2, *args)
    assert double.returncode == 0, double.stderr
    return tmp_path


@pytest.mark.parametrize(("guided", "normalization"), CASES)
def test_all_reduced_gradient_equals_single_process_gradient(gradients, guided, normalization):
    one = torch.load(gradients / f"{guided}-{normalization}" / "grads-world1.pt")
    two = torch.load(gradients / f"{guided}-{normalization}" / "grads-world2.pt")
    assert one.keys() == two.keys() and len(one) > 5
    for name in one:
        assert torch.allclose(one[name], two[name], atol=1e-6, rtol=1e-4), name


def test_torchrun_training_learns_and_rank0_checkpoint_translates(toy_data_dir, tmp_path):
    model = tmp_path / "ddp-model"
    result = _torchrun(
        2,
        "-m",
        "nmt_cli",
        "train",
        str(toy_data_dir),
        "-o",
        str(model),
        "--emb-size",
        "32",
        "--hidden-size",
        "32",
        "--max-steps",
        "40",
        "--valid-every",
        "20",
        "--batch-tokens",
        "300",
        "--lr",
        "0.01",
    )
    assert result.returncode == 0, result.stderr[-2000:]
    events = [json.loads(line) for line in (model / "train.jsonl").read_text().splitlines()]
    losses = [e["loss"] for e in events if e["event"] == "train"]
    assert all(e.get("world_size") == 2 for e in events if e["event"] == "train")
    assert len(losses) >= 2 and losses[-1] < losses[0]
    out = invoke("translate", "-m", model, "--beam", "2", input="apple river stone\n")
    assert out.exit_code == 0 and out.stdout.count("\n") == 1


def test_nproc_2_stops_on_ctrl_c_in_one_line_and_resumes(toy_data_dir, tmp_path):
    """Ctrl-C (SIGINT to the command) reaches both ranks once: they save and stop together,
    one error line says so (no launcher noise, no traceback), exit 130; --resume goes on."""
    import signal
    import time

    model = tmp_path / "m"
    args = [sys.executable, "-m", "nmt_cli", "train", str(toy_data_dir), "-o", str(model),
            "--nproc", "2", "--threads", "1", "--emb-size", "16", "--hidden-size", "16",
            "--batch-tokens", "100", "--log-every", "1", "--valid-every", "1000000"]  # fmt: skip
    env = {**os.environ, "OMP_NUM_THREADS": "1"}
    command = subprocess.Popen(
        [*args, "--max-steps", "100000"], env=env, stderr=subprocess.PIPE, text=True
    )
    log, deadline = model / "train.jsonl", time.monotonic() + 120
    while not (log.is_file() and '"event": "train"' in log.read_text()):
        assert command.poll() is None and time.monotonic() < deadline, command.stderr.read()
        time.sleep(0.2)
    command.send_signal(signal.SIGINT)
    _, stderr = command.communicate(timeout=120)
    assert command.returncode == 130, stderr
    lines = [line for line in stderr.splitlines() if not line.startswith(("step ", "config:"))]
    stopped = [line for line in lines if line.startswith("interrupted: training stopped at step")]
    assert len(stopped) == 1 and "Traceback" not in stderr, stderr
    assert not [line for line in lines if "torch" in line or line.strip() == "interrupted"], stderr
    step = int(stopped[0].split("step ")[1].split(";")[0])
    resumed = subprocess.run(
        [*args, "--max-steps", str(step + 2), "--resume"], env=env, capture_output=True,
        text=True, timeout=300,
    )  # fmt: skip
    assert resumed.returncode == 0, resumed.stderr[-2000:]
    events = [json.loads(line) for line in log.read_text().splitlines()]
    assert max(e["step"] for e in events if e["event"] == "train") == step + 2


def test_more_processes_than_batches_stop_with_the_reason():
    """Every rank gets the same number of batches (len // world): with more processes than
    batches each would get none and the run would train nothing and report success."""
    from types import SimpleNamespace

    import numpy as np

    from nmt_cli.config import Config, TrainConfig
    from nmt_cli.distributed import Ranks
    from nmt_cli.errors import ConfigError
    from nmt_cli.trainer import Trainer

    trainer = Trainer.__new__(Trainer)  # only what epoch_batches reads
    lengths = np.full(6, 10)
    trainer.train_rows = np.arange(6)
    trainer.train_src = trainer.train_tgt = SimpleNamespace(lengths=lengths)
    trainer.config = Config(train=TrainConfig(batch_tokens=30))  # a few pairs a batch
    trainer.ranks = Ranks(rank=1, world=2)
    assert len(trainer.epoch_batches(0)) >= 1
    trainer.ranks = Ranks(rank=0, world=7)  # more processes than the 6 pairs' batches
    with pytest.raises(ConfigError, match="batch.* fewer than the 7 processes"):
        trainer.epoch_batches(0)


def test_a_meeting_port_taken_is_one_line_not_a_traceback(monkeypatch):
    """The launcher picks a free port and rank 0 binds it later: taken meanwhile (or a wrong
    torchrun address), the rank says so in one line."""
    import socket

    from nmt_cli.distributed import from_environment
    from nmt_cli.errors import NmtError

    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        port = taken.getsockname()[1]
        for name, value in dict(RANK="0", LOCAL_RANK="0", WORLD_SIZE="2",
                                MASTER_ADDR="127.0.0.1", MASTER_PORT=str(port)).items():  # fmt: skip
            monkeypatch.setenv(name, value)
        with pytest.raises(NmtError, match=f"could not meet at 127.0.0.1:{port}.*run again"):
            from_environment(use_cuda=False)
