"""`nmt train DATA_DIR -o MODEL_DIR`: train the attention encoder–decoder."""

from __future__ import annotations

from pathlib import Path

import typer

from nmt_cli.cli.boundary import command_boundary
from nmt_cli.cli.options import device_option, threads_option

_MODEL = "Model"
_TRAIN = "Training"


def _model(help: str, *flags: str):
    """A [model] setting of the config as a flag; None (not given) leaves the config's value."""
    return typer.Option(None, *flags, help=help, rich_help_panel=_MODEL)


def _train(help: str, *flags: str):
    """A [train] setting of the config as a flag; None (not given) leaves the config's value."""
    return typer.Option(None, *flags, help=help, rich_help_panel=_TRAIN)


@command_boundary
def train(
    data_dir: Path = typer.Argument(..., help="Data directory written by `nmt prepare`."),
    output: Path = typer.Option(..., "-o", "--output", help="Model directory to write."),
    config_file: Path | None = typer.Option(
        None, "--config", help="TOML file with [model] and [train] tables."
    ),
    resume: bool = typer.Option(
        False, "--resume", help="Continue from OUTPUT/checkpoints/last.pt."
    ),
    force: bool = typer.Option(False, "--force", help="Start afresh even if OUTPUT holds a model."),
    nproc: int = typer.Option(
        1, "--nproc", help="Train with N processes (torchrun + DDP) on this machine."
    ),
    cell: str | None = _model("gru or lstm."),
    emb_size: int | None = _model("Embedding size."),
    hidden_size: int | None = _model("Encoder size per direction."),
    layers: int | None = _model("RNN layers."),
    bidirectional: bool | None = _model(
        "Bidirectional encoder.", "--bidirectional/--no-bidirectional"
    ),
    attention: str | None = _model("dot, general, additive or none."),
    decoder_style: str | None = _model("luong or bahdanau."),
    input_feed: bool | None = _model("Luong input feeding.", "--input-feed/--no-input-feed"),
    dropout: float | None = _model("Dropout probability."),
    tie_embeddings: bool | None = _model(
        "Share target embedding and output layer.", "--tie-embeddings/--no-tie-embeddings"
    ),
    label_smoothing: float | None = _train("Label smoothing."),
    batch_tokens: int | None = _train("Target tokens per batch."),
    lr: float | None = _train("Adam learning rate."),
    max_steps: int | None = _train("Stop after N updates (0: no limit)."),
    max_epochs: int | None = _train("Stop after N epochs (0: no limit)."),
    max_time: str | None = _train("Stop after this long, e.g. 90s, 20m, 1.5h."),
    valid_every: int | None = _train("Validate every N updates."),
    log_every: int | None = _train("Report progress every N updates."),
    patience: int | None = _train("Early stopping after N validations without gain."),
    seed: int | None = _train("Random seed."),
    keep_checkpoints: int | None = _train(
        "Also keep the weights of the last N checkpoints, for `nmt average` (0: none)."
    ),
    device: str | None = device_option(None, _TRAIN),
    threads: int | None = threads_option(None, _TRAIN),
) -> None:
    """Train the encoder–decoder with attention on a prepared data directory."""
    given = dict(locals())  # every flag, None where not given: then the config file decides
    if nproc > 1:
        _launch_torchrun(nproc)
    from dataclasses import fields

    from nmt_cli.cli.boundary import stderr_console
    from nmt_cli.config import ModelConfig, TrainConfig, parse_duration
    from nmt_cli.render.progress import TrainDisplay
    from nmt_cli.training_run import run_training

    given["max_time"] = parse_duration(max_time) if max_time is not None else None
    overrides = {
        table: {f.name: given[f.name] for f in fields(kind) if f.name in given}
        for table, kind in (("model", ModelConfig), ("train", TrainConfig))
    }
    with TrainDisplay(stderr_console()) as display:
        run_training(
            data_dir, output, config_file, overrides, resume=resume, force=force, on_event=display
        )


def _launch_torchrun(nproc: int) -> None:
    """Re-run this command under torchrun with N processes (the same as calling torchrun yourself)."""
    import os
    import subprocess
    import sys

    from nmt_cli.errors import ConfigError

    if os.environ.get("WORLD_SIZE"):
        raise ConfigError(
            "--nproc is not for use inside torchrun: drop it, torchrun sets the ranks"
        )
    args, skip = [], False
    for arg in sys.argv[1:]:
        if skip:
            skip = False
        elif arg == "--nproc":
            skip = True
        elif not arg.startswith("--nproc="):
            args.append(arg)
    env = dict(os.environ)
    env.setdefault("OMP_NUM_THREADS", str(max(1, (os.cpu_count() or 1) // nproc)))
    command = [
        sys.executable,
        "-m",
        "torch.distributed.run",
        "--standalone",
        f"--nproc-per-node={nproc}",
        "-m",
        "nmt_cli",
        *args,
    ]
    raise typer.Exit(subprocess.call(command, env=env))
