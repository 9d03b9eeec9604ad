"""`nmt train DATA_DIR -o MODEL_DIR`: train the attention encoder–decoder."""

from __future__ import annotations

from pathlib import Path

import typer

from nmt_cli.cli.boundary import command_boundary
from nmt_cli.cli.options import device_option, in_panel, option, threads_option

_MODEL = "Model"
_TRAIN = "Training"


# A [model] or [train] setting of the config as a flag: None (not given) leaves the config's.
_model, _train = in_panel(_MODEL), in_panel(_TRAIN)


@command_boundary
def train(
    data_dir: Path = typer.Argument(..., help="Data directory written by `nmt prepare`."),
    output: Path = typer.Option(..., "-o", "--output", help="Model directory to write."),
    config_file: Path | None = option(
        None, "TOML file with [model] and [train] tables.", "--config"
    ),
    resume: bool = option(False, "Continue from OUTPUT/checkpoints/last.pt.", "--resume"),
    force: bool = option(False, "Start afresh even if OUTPUT holds a model.", "--force"),
    nproc: int = option(1, "Train with N processes (torchrun + DDP) on this machine.", "--nproc"),
    cell: str | None = _model(None, "gru or lstm."),
    emb_size: int | None = _model(None, "Embedding size."),
    hidden_size: int | None = _model(None, "Encoder size per direction."),
    layers: int | None = _model(None, "RNN layers."),
    bidirectional: bool | None = _model(
        None, "Bidirectional encoder.", "--bidirectional/--no-bidirectional"
    ),
    attention: str | None = _model(None, "dot, general, additive or none."),
    decoder_style: str | None = _model(None, "luong or bahdanau."),
    input_feed: bool | None = _model(None, "Luong input feeding.", "--input-feed/--no-input-feed"),
    dropout: float | None = _model(None, "Dropout probability."),
    tie_embeddings: bool | None = _model(
        None, "Share target embedding and output layer.", "--tie-embeddings/--no-tie-embeddings"
    ),
    label_smoothing: float | None = _train(None, "Label smoothing."),
    batch_tokens: int | None = _train(None, "Target tokens per batch."),
    lr: float | None = _train(None, "Adam learning rate."),
    max_steps: int | None = _train(None, "Stop after N updates (0: no limit)."),
    max_epochs: int | None = _train(None, "Stop after N epochs (0: no limit)."),
    max_time: str | None = _train(
        None,
        "Stop after this much training time in all, e.g. 90s, 20m, 1.5h: a --resume counts "
        "the runs before it, as --max-steps does, and keeps the budget unless given a new one.",
    ),
    valid_every: int | None = _train(None, "Validate every N updates."),
    log_every: int | None = _train(None, "Report progress every N updates."),
    patience: int | None = _train(None, "Early stopping after N validations without gain."),
    seed: int | None = _train(None, "Random seed."),
    keep_checkpoints: int | None = _train(
        None,
        "Also keep the weights of the last N validations (and the final save), for `nmt average` (0: none).",
    ),
    guided_alignment: float | None = _train(
        None,
        "Weight of the guided-alignment loss, which trains the attention towards word links "
        "of the training pairs (0: off; needs attention).",
    ),
    alignments: str | None = _train(
        None,
        "Pharaoh file of word links for the training pairs, from any aligner (default: "
        "computed once by eflomal and kept in DATA_DIR).",
    ),
    align_unit: str | None = _train(None, "Units of those links: word, char or piece."),
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
