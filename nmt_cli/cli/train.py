"""`nmt train DATA_DIR -o MODEL_DIR`: train the attention encoder–decoder."""

from __future__ import annotations

import os
from dataclasses import fields
from pathlib import Path
from typing import Any

import typer

from nmt_cli.cli.boundary import command_boundary
from nmt_cli.cli.options import DEVICE_HELP, THREADS_HELP, option
from nmt_cli.config import ModelConfig, TrainConfig

_MODEL = "Model"
_TRAIN = "Training"


def _settings(table: type, panel: str):
    """Flags of the [model] or [train] settings: `(name, help, *flags)` → typer.Option whose
    None (not given) leaves the config file's value, and whose help shows the built-in one."""
    defaults = {setting.name: setting.default for setting in fields(table)}

    def declare(name: str, help: str, *flags: str) -> Any:
        value = defaults[name]
        if isinstance(value, bool):  # as typer shows a flag pair's default
            shown = name.replace("_", "-") if value else f"no-{name.replace('_', '-')}"
        else:
            shown = f"{value:g}" if isinstance(value, float) else str(value)
        if shown:  # in the help text: typer would bracket a default that is not the value
            help = f"{help} [default: {shown}]"
        return typer.Option(None, *flags, help=help, rich_help_panel=panel, show_default=False)

    return declare


_model, _train = _settings(ModelConfig, _MODEL), _settings(TrainConfig, _TRAIN)


@command_boundary
def train(
    data_dir: Path = typer.Argument(
        ..., metavar="DATA_DIR", help="Data directory written by `nmt prepare`."
    ),
    output: Path = typer.Option(..., "-o", "--output", help="Model directory to write."),
    config_file: Path | None = option(
        None, "TOML file with [model] and [train] tables.", "--config"
    ),
    resume: bool = option(False, "Continue from OUTPUT/checkpoints/last.pt.", "--resume"),
    force: bool = option(False, "Start afresh even if OUTPUT holds a model.", "--force"),
    nproc: str = option(
        "1",
        "Train with N processes (DDP, started as torchrun would) on this machine; auto: on a "
        "CPU, the layout of processes and threads a short probe finds fastest, at the same "
        "tokens per update.",
        "--nproc",
    ),
    cell: str | None = _model("cell", "gru or lstm."),
    emb_size: int | None = _model("emb_size", "Embedding size."),
    hidden_size: int | None = _model("hidden_size", "Encoder size per direction."),
    layers: int | None = _model("layers", "RNN layers."),
    bidirectional: bool | None = _model(
        "bidirectional", "Bidirectional encoder.", "--bidirectional/--no-bidirectional"
    ),
    attention: str | None = _model("attention", "dot, general, additive or none."),
    decoder_style: str | None = _model("decoder_style", "luong or bahdanau."),
    input_feed: bool | None = _model(
        "input_feed", "Luong input feeding.", "--input-feed/--no-input-feed"
    ),
    dropout: float | None = _model("dropout", "Dropout probability."),
    tie_embeddings: bool | None = _model(
        "tie_embeddings",
        "Share target embedding and output layer.",
        "--tie-embeddings/--no-tie-embeddings",
    ),
    label_smoothing: float | None = _train("label_smoothing", "Label smoothing."),
    batch_tokens: int | None = _train("batch_tokens", "Target tokens per batch."),
    lr: float | None = _train("lr", "Adam learning rate."),
    max_steps: int | None = _train("max_steps", "Stop after N updates (0: no limit)."),
    max_epochs: int | None = _train("max_epochs", "Stop after N epochs (0: no limit)."),
    max_time: str | None = _train(
        "max_time",
        "Stop after this much training time in all, e.g. 90s, 20m, 1.5h: a --resume counts "
        "the runs before it, as --max-steps does, and keeps the budget unless given a new one "
        "(0: no limit).",
    ),
    valid_every: int | None = _train(
        "valid_every",
        "Validate (dev loss and BLEU) and save a checkpoint every N updates, at the end of every "
        "epoch and at the end.",
    ),
    log_every: int | None = _train("log_every", "Report progress every N updates."),
    patience: int | None = _train(
        "patience", "Stop after N validations in a row without a better dev score (0: never)."
    ),
    seed: int | None = _train("seed", "Random seed."),
    keep_checkpoints: int | None = _train(
        "keep_checkpoints",
        "Also keep the weights of the last N validations (and the final save), for `nmt average` (0: none).",
    ),
    bf16: bool | None = _train(
        "bf16",
        "bfloat16 mixed precision: products with weights in bfloat16; weights, optimizer and "
        "loss in float32. Needs a CPU with AMX or AVX-512 BF16, or a GPU with bfloat16.",
        "--bf16/--no-bf16",
    ),
    guided_alignment: float | None = _train(
        "guided_alignment",
        "Weight of the guided-alignment loss, which trains the attention towards word links "
        "of the training pairs (0: off; needs attention).",
    ),
    alignments: str | None = _train(
        "alignments",
        "Pharaoh file of word links for the training pairs, from any aligner (default: "
        "computed once by eflomal and kept in DATA_DIR).",
    ),
    align_unit: str | None = _train("align_unit", "Units of those links: word, char or piece."),
    device: str | None = _train("device", DEVICE_HELP, "--device"),
    threads: int | None = _train("threads", THREADS_HELP, "--threads"),
) -> None:
    """Train the encoder–decoder with attention on a prepared data directory.

    A flag given overrides the --config file, which overrides the defaults shown."""
    given = dict(locals())  # every flag, None where not given: then the config file decides
    processes = _process_count(nproc)  # 0: auto
    from nmt_cli.cli.boundary import stderr_console
    from nmt_cli.config import parse_duration
    from nmt_cli.training_run import checked_settings, run_training

    given["max_time"] = parse_duration(max_time) if max_time is not None else None
    overrides = {
        table: {f.name: given[f.name] for f in fields(kind) if f.name in given}
        for table, kind in (("model", ModelConfig), ("train", TrainConfig))
    }
    if resume and processes and not os.environ.get("WORLD_SIZE") and batch_tokens is None:
        _warn_when_other_processes(output, processes)  # (tokens given again: the user's choice)
    if processes != 1:  # refused here once, not by every process with a torchrun trace
        from nmt_cli.training_run import check_model_dir

        if os.environ.get("WORLD_SIZE"):
            from nmt_cli.errors import ConfigError

            raise ConfigError(
                "--nproc is not for use inside torchrun: drop it, torchrun sets the ranks"
            )
        _, config = checked_settings(data_dir, output, config_file, overrides, resume)
        check_model_dir(output, resume, force)
        extra: list[str] = []
        if processes == 0:
            if threads is not None:
                from nmt_cli.errors import ConfigError

                raise ConfigError(
                    "--nproc auto chooses the threads itself: drop --threads, or give --nproc N"
                )
            # a --config file or --batch-tokens gives a whole update's tokens, as for a new run
            whole = config_file is not None or overrides["train"].get("batch_tokens") is not None
            processes, extra = _auto_layout(config, data_dir, output, resume, whole)
            overrides["train"]["threads"] = int(extra[extra.index("--threads") + 1])
        if processes > 1:
            _check_processes(processes, config.train.device)
            _launch_ranks(processes, extra)
    from nmt_cli.render.progress import TrainDisplay

    with TrainDisplay(stderr_console()) as display:
        run_training(
            data_dir, output, config_file, overrides, resume=resume, force=force, on_event=display
        )


def _process_count(nproc: str) -> int:
    """--nproc as a number of processes, 0 for auto; ConfigError (exit 2) otherwise."""
    from nmt_cli.errors import ConfigError

    if nproc.strip().lower() == "auto":
        return 0
    try:
        count = int(nproc)
    except ValueError:
        count = 0
    if count < 1:
        raise ConfigError(
            f"--nproc must be a number of processes (at least 1) or auto, got {nproc!r}"
        )
    return count


def _auto_layout(
    config, data_dir: Path, output: Path, resume: bool, whole_update: bool = True
) -> tuple[int, list[str]]:
    """--nproc auto: the processes, and the flags each takes (--threads, and its share of
    --batch-tokens), from a probe on a CPU. A resumed run keeps the processes it was trained
    with; its saved tokens per batch are one process's share already, unless `whole_update`
    (a --config file or --batch-tokens given again) says the tokens are a whole update's. A GPU
    run takes one process per GPU (`--device cuda:N`: one)."""
    import torch

    from nmt_cli import probe
    from nmt_cli.cli.boundary import stderr_console
    from nmt_cli.device import available_cores, pick_device

    console = stderr_console()
    device = pick_device(config.train.device)
    cores = available_cores()
    if resume:
        world = _saved_processes(output)
        threads = max(1, cores // world) if device.type == "cpu" else 1
        console.print(f"--nproc auto: {world} process(es), as the run being resumed")
        extra = ["--threads", str(threads)]
        if world > 1 and whole_update:
            extra += ["--batch-tokens", str(probe.split_batch(config, world).train.batch_tokens)]
        return world, extra
    if device.type == "cuda":
        gpus = torch.cuda.device_count() if device.index is None else 1
        console.print(f"--nproc auto: {gpus} process(es), one per GPU")
        return gpus, ["--threads", str(max(1, cores // gpus))]
    if cores < 2:
        console.print("--nproc auto: 1 process × 1 thread (this process may use 1 core)")
        return 1, ["--threads", "1"]

    def shown(measured: probe.Measurement) -> None:
        rate = f"{measured.tokens_per_s:,.0f} target tokens/s"
        console.print(
            f"layout probe: {measured.layout}: {measured.problem or rate}",
            markup=False,
            highlight=False,
        )

    console.print(
        f"--nproc auto: timing {probe.TIMED_UPDATES} updates of each layout on {cores} cores"
    )
    layout = probe.choose(probe.probe(config, data_dir, cores, on_layout=shown))
    share = probe.split_batch(config, layout.processes).train.batch_tokens
    console.print(
        f"training with {layout}"
        + (f", {share} target tokens per process and update" if layout.processes > 1 else "")
    )
    extra = ["--threads", str(layout.threads)]
    return layout.processes, extra + (
        ["--batch-tokens", str(share)] if layout.processes > 1 else []
    )


def _warn_when_other_processes(output: Path, processes: int) -> None:
    """A resumed run given another number of processes than it was trained with changes its
    tokens per update (each process takes --batch-tokens): said, not refused."""
    from nmt_cli.cli.boundary import warn
    from nmt_cli.errors import NmtError

    try:
        saved = _saved_processes(output, required=False)
    except (NmtError, OSError):  # a damaged or unreadable log: the resume says what is wrong
        return
    if saved is not None and saved != processes:
        warn(
            f"{output} was trained by {saved} process(es) and resumes with {processes}: each "
            f"takes --batch-tokens, so an update holds {processes}/{saved} of the tokens it "
            f"did; give --nproc {saved} to keep them"
        )


def _saved_processes(output: Path, required: bool = True) -> int | None:
    """How many processes trained the run in OUTPUT: the last progress report in its
    train.jsonl (one every --log-every updates), else its meta.json (written at validation);
    if neither says, ConfigError (None when not `required`)."""
    import json

    from nmt_cli import checkpoint
    from nmt_cli.errors import ConfigError

    world = None
    log = output / checkpoint.LOG_FILE
    if log.is_file():
        with open(log, encoding="utf-8", errors="replace") as lines:
            for line in lines:
                try:
                    record = json.loads(line)
                except ValueError:  # a line cut short by a crash
                    continue
                if isinstance(record, dict) and isinstance(record.get("world_size"), int):
                    world = record["world_size"]
    meta = output / checkpoint.META_FILE
    if world is None and meta.is_file():
        world = checkpoint.read_json(meta).get("world_size")
    if not isinstance(world, int) or world < 1:
        if not required:
            return None
        raise ConfigError(
            f"--nproc auto cannot tell how many processes trained {output} (its "
            f"{checkpoint.LOG_FILE} names none): give --nproc N, the number it was trained with"
        )
    return world


def _check_processes(nproc: int, device: str) -> None:
    """Refuse more CPU training processes than cores: they would only take turns on them."""
    from nmt_cli.device import available_cores, pick_device
    from nmt_cli.errors import ConfigError

    cores = available_cores()
    if pick_device(device).type == "cpu" and nproc > cores:
        raise ConfigError(
            f"--nproc {nproc} is more than the {cores} cores this process may use: give at "
            f"most --nproc {cores} (with --threads 1) on this machine"
        )


def _launch_ranks(nproc: int, extra: list[str] | None = None) -> None:
    """Re-run this command in N processes on this machine, one per rank, with the environment
    `torchrun --standalone` gives its workers (RANK, LOCAL_RANK, WORLD_SIZE, MASTER_ADDR,
    MASTER_PORT), `extra` flags added after the user's (the last of a repeated flag counts).

    The ranks share a process group of their own, so a terminal's Ctrl-C reaches this process
    alone, which passes it on once to every rank (SIGTERM and SIGHUP as SIGTERM): they save
    and stop together and rank 0 alone says so; a second Ctrl-C stops them at once, as in one
    process, and a third kills them (a rank waiting in a collective hears no signal). On Linux
    a rank also gets SIGTERM if this process dies, however it dies. When a rank fails, the
    others are stopped. The exit code is the first failing rank's (130: interrupted)."""
    import signal
    import subprocess
    import sys
    import time

    from nmt_cli.cli.boundary import error_line, interrupted_line
    from nmt_cli.distributed import free_port, rank_environment
    from nmt_cli.errors import Interrupted

    args, skip = [], False  # (inside the ranks, `train` has refused --nproc already)
    for arg in sys.argv[1:]:
        if skip:
            skip = False
        elif arg == "--nproc":
            skip = True
        elif not arg.startswith("--nproc="):
            args.append(arg)
    base, port = dict(os.environ), free_port()
    base.setdefault("OMP_NUM_THREADS", str(max(1, (os.cpu_count() or 1) // nproc)))
    command = [sys.executable, "-m", "nmt_cli", *args, *(extra or [])]
    ranks: list[subprocess.Popen] = []
    sent: list[int] = []  # the signals passed on, in order
    prctl = _prctl()  # looked up before any fork

    def pass_on(signum: int, _frame=None) -> None:
        sent.append(signal.SIGTERM if signum == signal.SIGHUP else signum)
        for rank in ranks:
            if rank.poll() is not None:
                continue
            if len(sent) >= 3:
                rank.kill()
            else:
                rank.send_signal(sent[-1])

    stops = (signal.SIGINT, signal.SIGTERM, signal.SIGHUP)
    previous = {sig: signal.signal(sig, pass_on) for sig in stops}
    failed: tuple[int, int] | None = None  # (rank, exit code) of the first seen to fail
    deadline = None
    try:
        for index in range(nproc):
            env = {**base, **rank_environment(index, nproc, port)}
            group = ranks[0].pid if ranks else 0
            signal.pthread_sigmask(signal.SIG_BLOCK, stops)  # a signal now waits for `ranks`
            try:
                ranks.append(
                    subprocess.Popen(
                        command, env=env, process_group=group, preexec_fn=lambda: _rank_start(prctl)
                    )
                )
            finally:
                signal.pthread_sigmask(signal.SIG_UNBLOCK, stops)
        while running := [rank for rank in ranks if rank.poll() is None]:
            if failed is None:
                failed = next(
                    ((i, r.returncode) for i, r in enumerate(ranks) if r.returncode), None
                )
                if failed and failed[1] != Interrupted.exit_code and not sent:
                    deadline = time.monotonic() + 60  # the others would wait for it for ever
                    for rank in running:
                        rank.terminate()
            if deadline is not None and time.monotonic() > deadline:
                for rank in running:
                    rank.kill()
            time.sleep(0.1)
    finally:
        for rank in ranks:  # this process itself failed: leave no rank behind
            if rank.poll() is None:
                rank.kill()
                rank.wait()
        for sig, handler in previous.items():
            signal.signal(sig, handler)
    if failed is None:
        failed = next(((i, r.returncode) for i, r in enumerate(ranks) if r.returncode), (0, 0))
    index, code = failed
    if len(sent) >= 3:
        interrupted_line("training stopped at once (a third Ctrl-C): --resume continues from "
                         "the last checkpoint saved")  # fmt: skip
        raise typer.Exit(130)  # asked for, as every interrupt (the ranks were killed: 137)
    elif code < 0 and -code not in sent:  # killed by a signal not ours (out of memory, kill -9)
        error_line(
            f"training process of rank {index} was killed ({signal.Signals(-code).name}) and "
            "the others stopped: continue from the last checkpoint with --resume"
        )
    raise typer.Exit(128 - code if code < 0 else code)  # killed by signal N: 128 + N


def _rank_start(prctl) -> None:
    """In a rank about to run: the stop signals the launcher held while starting it let
    through, and, with Linux's `prctl`, SIGTERM when the launcher dies (PR_SET_PDEATHSIG)."""
    import signal

    signal.pthread_sigmask(signal.SIG_UNBLOCK, (signal.SIGINT, signal.SIGTERM, signal.SIGHUP))
    if prctl is not None:
        prctl(1, signal.SIGTERM)  # 1: PR_SET_PDEATHSIG


def _prctl():
    """libc's prctl on Linux (looked up before any fork), else None."""
    import sys

    if not sys.platform.startswith("linux"):
        return None
    import ctypes

    try:
        return ctypes.CDLL(None, use_errno=True).prctl
    except (OSError, AttributeError):
        return None
