"""`nmt train --nproc auto`: the layouts probed, the choice, and what the command does with it."""

from __future__ import annotations

import json

import pytest
from cli_runner import invoke

from nmt_cli import probe
from nmt_cli.config import Config, ModelConfig, TrainConfig
from nmt_cli.probe import Layout, Measurement


def test_layouts_go_from_one_process_on_every_core_to_more_processes_of_fewer_threads():
    assert probe.layouts(1) == [Layout(1, 1)]
    assert probe.layouts(2) == [Layout(1, 2), Layout(2, 1)]
    assert probe.layouts(6) == [Layout(1, 6), Layout(2, 3), Layout(4, 1)]
    assert probe.layouts(64) == [Layout(1, 64), Layout(2, 32), Layout(4, 16), Layout(8, 8)]
    assert (
        str(Layout(1, 2)) == "1 process × 2 threads"
        and str(Layout(2, 1)) == "2 processes × 1 thread"
    )


def test_more_processes_are_chosen_only_when_clearly_faster():
    one, two = Layout(1, 2), Layout(2, 1)
    assert probe.choose([Measurement(one, 3000.0), Measurement(two, 3100.0)]) == one  # within 5 %
    assert probe.choose([Measurement(one, 3000.0), Measurement(two, 3300.0)]) == two
    assert probe.choose([Measurement(one, 3000.0), Measurement(two, 0.0)]) == one  # could not split
    four = Layout(4, 1)
    measured = [Measurement(one, 1000.0), Measurement(two, 1500.0), Measurement(four, 1400.0)]
    assert probe.choose(measured) == two


def test_each_process_takes_its_share_of_the_tokens_per_update():
    config = Config(train=TrainConfig(batch_tokens=2001))
    assert probe.split_batch(config, 1).train.batch_tokens == 2001
    assert probe.split_batch(config, 2).train.batch_tokens == 1000
    assert config.train.batch_tokens == 2001  # the run's own settings are left alone


def test_the_probe_trains_each_layout_in_processes_of_its_own(toy_data_dir):
    """One process of 2 threads, then two DDP processes of 1 (Gloo): both train and are timed."""
    from nmt_cli.data.datadir import load_data_dir

    data = load_data_dir(toy_data_dir)
    config = Config(
        model=ModelConfig(emb_size=16, hidden_size=16, src_vocab_size=data.src_vocab_size,
                          tgt_vocab_size=data.tgt_vocab_size),
        train=TrainConfig(batch_tokens=400),
    )  # fmt: skip
    seen = []
    measured = probe.probe(config, toy_data_dir, cores=2, on_layout=seen.append)
    assert [m.layout for m in measured] == [Layout(1, 2), Layout(2, 1)] and seen == measured
    assert all(m.tokens_per_s > 0 for m in measured), measured


@pytest.fixture
def two_cores(monkeypatch):
    import nmt_cli.device

    monkeypatch.setattr(nmt_cli.device, "available_cores", lambda: 2)


def _probe_finds(monkeypatch, rates: list[float]) -> list:
    """Make the probe report `rates` for 1 × 2 and 2 × 1; returns the probes run."""
    runs = []

    def fake(config, data_dir, cores, on_layout=None):
        runs.append(config.train.batch_tokens)
        measured = [
            Measurement(layout, rate)
            for layout, rate in zip(probe.layouts(cores), rates, strict=True)
        ]
        for m in measured:
            on_layout(m)
        return measured

    monkeypatch.setattr(probe, "probe", fake)
    return runs


SMALL = ["--emb-size", "8", "--hidden-size", "8", "--batch-tokens", "300"]


def _no_torchrun(monkeypatch) -> list:
    """`_launch_ranks` replaced by one that records its arguments and exits as it does."""
    import typer

    import nmt_cli.cli.train

    launched = []

    def launch(*args):
        launched.append(args)
        raise typer.Exit(0)

    monkeypatch.setattr(nmt_cli.cli.train, "_launch_ranks", launch)
    return launched


def test_auto_launches_the_ranks_with_threads_and_a_share_of_the_batch(
    toy_data_dir, tmp_path, monkeypatch, two_cores
):
    runs = _probe_finds(monkeypatch, [3000.0, 3600.0])
    launched = _no_torchrun(monkeypatch)
    result = invoke("train", toy_data_dir, "-o", tmp_path / "m", "--nproc", "auto", *SMALL)
    assert result.exit_code == 0 and not (tmp_path / "m").exists(), result.output
    assert launched == [(2, ["--threads", "1", "--batch-tokens", "150"])], result.output
    assert runs == [300]  # probed at the run's own tokens per update
    assert "layout probe: 2 processes × 1 thread: 3,600 target tokens/s" in result.stderr
    assert "training with 2 processes × 1 thread, 150 target tokens per process" in result.stderr


def test_auto_trains_in_this_process_on_every_core_when_one_process_is_as_fast(
    toy_data_dir, tmp_path, monkeypatch, two_cores
):
    _probe_finds(monkeypatch, [3000.0, 3100.0])
    launched = _no_torchrun(monkeypatch)
    model = tmp_path / "m"
    args = ["--max-steps", "2", "--valid-every", "2"]
    result = invoke("train", toy_data_dir, "-o", model, "--nproc", "auto", *SMALL, *args)
    assert result.exit_code == 0, result.output
    assert launched == [] and "training with 1 process × 2 threads" in result.stderr
    train = json.loads((model / "config.json").read_text())["train"]
    assert (train["threads"], train["batch_tokens"]) == (2, 300)


def test_auto_resumes_with_the_processes_of_the_run_it_resumes(
    toy_data_dir, tmp_path, monkeypatch, two_cores
):
    """The count comes from the run's own log (its progress reports say how many processes
    trained), not from a new probe: its saved batch is one process's share."""
    model = tmp_path / "m"
    first = invoke("train", toy_data_dir, "-o", model, *SMALL, "--max-steps", "2", "--threads", "1")
    assert first.exit_code == 0, first.output
    with open(model / "train.jsonl", "a", encoding="utf-8") as log:  # as 2 processes report
        log.write(json.dumps({"event": "train", "step": 3, "world_size": 2}) + "\n")
    (model / "meta.json").unlink()  # stopped before its first validation: no meta.json
    runs = _probe_finds(monkeypatch, [1.0, 2.0])
    launched = _no_torchrun(monkeypatch)
    result = invoke("train", toy_data_dir, "-o", model, "--nproc", "auto", "--resume")
    assert launched == [(2, ["--threads", "1"])] and runs == [], result.output
    (model / "train.jsonl").unlink()
    result = invoke("train", toy_data_dir, "-o", model, "--nproc", "auto", "--resume")
    assert result.exit_code == 2 and launched == [(2, ["--threads", "1"])], result.output
    assert "--nproc auto cannot tell how many processes trained" in result.stderr


def test_a_resume_given_new_tokens_per_update_shares_them_out(
    toy_data_dir, tmp_path, monkeypatch, two_cores
):
    """The saved config holds one process's share; tokens given again (--batch-tokens, or a
    --config file, default included) are a whole update's, as for a new run, and are split."""
    model = tmp_path / "m"
    first = invoke("train", toy_data_dir, "-o", model, *SMALL, "--max-steps", "2", "--threads", "1")
    assert first.exit_code == 0, first.output
    with open(model / "train.jsonl", "a", encoding="utf-8") as log:  # as 2 processes report
        log.write(json.dumps({"event": "train", "step": 3, "world_size": 2}) + "\n")
    runs = _probe_finds(monkeypatch, [1.0, 2.0])
    launched = _no_torchrun(monkeypatch)
    args = ("train", toy_data_dir, "-o", model, "--nproc", "auto", "--resume")
    result = invoke(*args, "--batch-tokens", "3000")
    assert launched[-1] == (2, ["--threads", "1", "--batch-tokens", "1500"]), result.output
    settings = tmp_path / "more.toml"
    settings.write_text("[train]\nbatch_tokens = 800\nmax_steps = 9\n", encoding="utf-8")
    result = invoke(*args, "--config", settings)
    assert launched[-1] == (2, ["--threads", "1", "--batch-tokens", "400"]), result.output
    assert runs == []


def test_a_resume_with_another_number_of_processes_says_so(toy_data_dir, tmp_path, monkeypatch):
    """Each process takes --batch-tokens: resuming a 2-process run with 1 halves its updates."""
    model = tmp_path / "m"
    first = invoke("train", toy_data_dir, "-o", model, *SMALL, "--max-steps", "2", "--threads", "1")
    assert first.exit_code == 0, first.output
    same = invoke("train", toy_data_dir, "-o", model, "--resume", "--max-steps", "3")
    assert same.exit_code == 0 and "process" not in same.stderr, same.output
    with open(model / "train.jsonl", "a", encoding="utf-8") as log:  # as 2 processes report
        log.write(json.dumps({"event": "train", "step": 3, "world_size": 2}) + "\n")
    other = invoke("train", toy_data_dir, "-o", model, "--resume", "--max-steps", "4")
    assert other.exit_code == 0, other.output
    assert (
        f"warning: {model} was trained by 2 process(es) and resumes with 1: each takes "
        "--batch-tokens, so an update holds 1/2 of the tokens it did; give --nproc 2"
    ) in other.stderr.replace("\n", " ")


def test_the_output_directory_is_checked_before_the_probe(toy_data_dir, tmp_path, monkeypatch):
    runs = _probe_finds(monkeypatch, [1.0, 2.0])
    model = tmp_path / "m"
    result = invoke("train", toy_data_dir, "-o", model, "--nproc", "auto", "--resume")
    assert result.exit_code == 2 and runs == [] and "nothing to resume" in result.stderr


def test_auto_is_refused_inside_torchrun(toy_data_dir, tmp_path, monkeypatch):
    runs = _probe_finds(monkeypatch, [1.0, 2.0])
    monkeypatch.setenv("WORLD_SIZE", "2")
    result = invoke("train", toy_data_dir, "-o", tmp_path / "m", "--nproc", "auto")
    assert result.exit_code == 2 and runs == [] and "inside torchrun" in result.stderr
    launched = _no_torchrun(monkeypatch)
    result = invoke("train", toy_data_dir, "-o", tmp_path / "m", "--nproc", "2")
    assert result.exit_code == 2 and launched == [] and "inside torchrun" in result.stderr


def test_a_layout_of_several_processes_that_fails_is_left_out(monkeypatch):
    from nmt_cli.errors import NmtError

    def run(config, data_dir, layout):
        if layout.processes == 2:
            raise NmtError(
                "the layout probe (2 processes × 1 thread) lost a process (exit code -9)"
            )
        return 1000.0, ""

    monkeypatch.setattr(probe, "_run_layout", run)
    measured = probe.probe(Config(), None, cores=2)
    assert [m.tokens_per_s for m in measured] == [1000.0, 0.0]
    assert "lost a process" in measured[1].problem and probe.choose(measured) == Layout(1, 2)

    def failing(config, data_dir, layout):
        raise NmtError("the layout probe (1 process × 2 threads) failed: MemoryError")

    monkeypatch.setattr(probe, "_run_layout", failing)
    with pytest.raises(NmtError, match="1 process × 2 threads"):
        probe.probe(Config(), None, cores=2)


class _Rank:
    """A stand-in for a rank's process: `exits` is its exit code from the first poll (None: it
    runs until it is terminated or killed)."""

    started: list = []
    exits: list = []

    def __init__(self, command, env, **kwargs):
        self.command, self.env, self.kwargs = command, env, kwargs
        self.returncode = None
        self.exit = self.exits[len(self.started)]
        self.signals = []
        self.pid = 1000 + len(self.started)
        self.started.append(self)

    def poll(self):
        if self.returncode is None and self.exit is not None:
            self.returncode = self.exit
        return self.returncode

    def terminate(self):
        self.signals.append("TERM")
        self.returncode = -15

    def kill(self):
        self.signals.append("KILL")
        self.returncode = -9

    def send_signal(self, signum):
        self.signals.append(signum)

    def wait(self):
        return self.returncode


def _launched(monkeypatch, exits: list):
    """`_launch_ranks(2, …)` over stand-in ranks: (its exit code, the ranks)."""
    import subprocess
    import sys

    import typer

    from nmt_cli.cli.train import _launch_ranks

    monkeypatch.setattr(_Rank, "started", [])
    monkeypatch.setattr(_Rank, "exits", exits)
    monkeypatch.setattr(subprocess, "Popen", _Rank)
    monkeypatch.delenv("WORLD_SIZE", raising=False)
    monkeypatch.setattr(sys, "argv", ["nmt", "train", "d", "--nproc=auto", "-o", "m",
                                      "--batch-tokens", "300"])  # fmt: skip
    with pytest.raises(typer.Exit) as ended:
        _launch_ranks(len(exits), ["--threads", "1", "--batch-tokens", "150"])
    return ended.value.exit_code, _Rank.started


def test_the_ranks_get_the_command_without_nproc_and_with_the_chosen_flags(monkeypatch):
    code, started = _launched(monkeypatch, [0, 0])
    assert code == 0 and len(started) == 2
    for rank, process in enumerate(started):
        env = process.env
        assert (env["RANK"], env["LOCAL_RANK"], env["WORLD_SIZE"]) == (str(rank), str(rank), "2")
        assert env["MASTER_PORT"] == started[0].env["MASTER_PORT"]
        # one process group of their own (the first's), apart from the terminal's
        assert process.kwargs["process_group"] == (0 if rank == 0 else started[0].pid)
        command = process.command
        assert not any("auto" in str(a) for a in command)
        tail = command[command.index("nmt_cli") + 1 :]
        assert tail == [
            "train",
            "d",
            "-o",
            "m",
            "--batch-tokens",
            "300",
            "--threads",
            "1",
            "--batch-tokens",
            "150",
        ]  # fmt: skip  (click takes the last of a flag)


def test_a_rank_that_fails_while_the_first_runs_stops_the_others(monkeypatch):
    """Rank 1 refusing a setting would leave rank 0 waiting to meet it for good."""
    code, (first, second) = _launched(monkeypatch, [None, 2])
    assert code == 2 and first.signals == ["TERM"] and second.signals == []


def test_an_interrupted_rank_is_waited_for_not_stopped(monkeypatch):
    code, (first, second) = _launched(monkeypatch, [130, 130])
    assert code == 130 and first.signals == second.signals == []


@pytest.mark.parametrize(
    ("extra", "named"),
    [
        (["--nproc", "two"], "--nproc must be a number of processes (at least 1) or auto"),
        (["--nproc", "0"], "got '0'"),
        (["--nproc", "auto", "--threads", "1"], "--nproc auto chooses the threads itself"),
    ],
)
def test_a_bad_nproc_is_one_line_exit_2(toy_data_dir, tmp_path, monkeypatch, extra, named):
    runs = _probe_finds(monkeypatch, [1.0, 2.0])
    result = invoke("train", toy_data_dir, "-o", tmp_path / "m", *extra)
    assert result.exit_code == 2 and runs == [], result.output
    assert len(result.stderr.strip().splitlines()) == 1 and named in result.stderr
    assert "Traceback" not in result.stderr and not (tmp_path / "m").exists()
