"""`nmt average MODEL_DIR --last N -o OUT_DIR`: average the last kept checkpoints."""

from __future__ import annotations

from pathlib import Path

import typer

from nmt_cli.cli.boundary import command_boundary


@command_boundary
def average(
    model_dir: Path = typer.Argument(
        ..., metavar="MODEL_DIR", help="Model directory trained with --keep-checkpoints N."
    ),
    last: int = typer.Option(..., "--last", help="Average the last N kept checkpoints."),
    output: Path = typer.Option(..., "-o", "--output", help="Model directory to write."),
    force: bool = typer.Option(
        False,
        "--force",
        help="Replace OUTPUT if nmt average wrote it (once the new one is written).",
    ),
) -> None:
    """Average the weights of a model's last N kept checkpoints into a new model directory."""
    from nmt_cli.averaging import average_checkpoints
    from nmt_cli.cli.boundary import stderr_console

    done = average_checkpoints(model_dir, last, output, force)
    names = ", ".join(path.name for path in done.sources)
    stderr_console().print(f"averaged {names} into {done.out_dir}", markup=False)
