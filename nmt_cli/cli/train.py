"""`nmt train DATA_DIR -o MODEL_DIR`: train the attention encoder–decoder."""

from __future__ import annotations

from pathlib import Path

import typer

from nmt_cli.cli.boundary import command_boundary
from nmt_cli.cli.options import device_option, threads_option

_MODEL = "Model"
_TRAIN = "Training"


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
    cell: str | None = typer.Option(None, help="gru or lstm.", rich_help_panel=_MODEL),
    emb_size: int | None = typer.Option(None, help="Embedding size.", rich_help_panel=_MODEL),
    hidden_size: int | None = typer.Option(
        None, help="Encoder size per direction.", rich_help_panel=_MODEL
    ),
    layers: int | None = typer.Option(None, help="RNN layers.", rich_help_panel=_MODEL),
    bidirectional: bool | None = typer.Option(
        None,
        "--bidirectional/--no-bidirectional",
        help="Bidirectional encoder.",
        rich_help_panel=_MODEL,
    ),
    attention: str | None = typer.Option(
        None, help="dot, general, additive or none.", rich_help_panel=_MODEL
    ),
    decoder_style: str | None = typer.Option(
        None, help="luong or bahdanau.", rich_help_panel=_MODEL
    ),
    input_feed: bool | None = typer.Option(
        None, "--input-feed/--no-input-feed", help="Luong input feeding.", rich_help_panel=_MODEL
    ),
    dropout: float | None = typer.Option(None, help="Dropout probability.", rich_help_panel=_MODEL),
    tie_embeddings: bool | None = typer.Option(
        None,
        "--tie-embeddings/--no-tie-embeddings",
        help="Share target embedding and output layer.",
        rich_help_panel=_MODEL,
    ),
    label_smoothing: float | None = typer.Option(
        None, help="Label smoothing.", rich_help_panel=_TRAIN
    ),
    batch_tokens: int | None = typer.Option(
        None, help="Target tokens per batch.", rich_help_panel=_TRAIN
    ),
    lr: float | None = typer.Option(None, help="Adam learning rate.", rich_help_panel=_TRAIN),
    max_steps: int | None = typer.Option(
        None, help="Stop after N updates (0: no limit).", rich_help_panel=_TRAIN
    ),
    max_epochs: int | None = typer.Option(
        None, help="Stop after N epochs (0: no limit).", rich_help_panel=_TRAIN
    ),
    max_time: str | None = typer.Option(
        None, help="Stop after this long, e.g. 90s, 20m, 1.5h.", rich_help_panel=_TRAIN
    ),
    valid_every: int | None = typer.Option(
        None, help="Validate every N updates.", rich_help_panel=_TRAIN
    ),
    log_every: int | None = typer.Option(
        None, help="Report progress every N updates.", rich_help_panel=_TRAIN
    ),
    patience: int | None = typer.Option(
        None, help="Early stopping after N validations without gain.", rich_help_panel=_TRAIN
    ),
    seed: int | None = typer.Option(None, help="Random seed.", rich_help_panel=_TRAIN),
    device: str | None = device_option(None, _TRAIN),
    threads: int | None = threads_option(None, _TRAIN),
) -> None:
    """Train the encoder–decoder with attention on a prepared data directory."""
    if nproc > 1:
        _launch_torchrun(nproc)
    from nmt_cli.cli.boundary import stderr_console
    from nmt_cli.config import parse_duration
    from nmt_cli.render.progress import TrainDisplay
    from nmt_cli.training_run import run_training

    overrides = {
        "model": dict(
            cell=cell,
            emb_size=emb_size,
            hidden_size=hidden_size,
            layers=layers,
            bidirectional=bidirectional,
            attention=attention,
            decoder_style=decoder_style,
            input_feed=input_feed,
            dropout=dropout,
            tie_embeddings=tie_embeddings,
        ),
        "train": dict(
            label_smoothing=label_smoothing,
            batch_tokens=batch_tokens,
            lr=lr,
            max_steps=max_steps,
            max_epochs=max_epochs,
            max_time=parse_duration(max_time) if max_time is not None else None,
            valid_every=valid_every,
            log_every=log_every,
            patience=patience,
            seed=seed,
            device=device,
            threads=threads,
        ),
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
