"""`nmt shortlist DATA_DIR MODEL_DIR`: (re)write a model's lexical shortlist."""

from __future__ import annotations

from pathlib import Path

import typer

from nmt_cli.cli.boundary import command_boundary


@command_boundary
def shortlist(
    data_dir: Path = typer.Argument(
        ..., metavar="DATA_DIR", help="The data directory the model was trained on."
    ),
    model_dir: Path = typer.Argument(
        ..., metavar="MODEL_DIR", help="Model directory written by `nmt train`."
    ),
) -> None:
    """Write a model's lexical shortlist again and check it on the dev split.

    The shortlist is what `translate --shortlist` searches over; `nmt train` writes and checks
    it too. Translate uses it by default where the check found it costs no BLEU."""
    from nmt_cli.cli.boundary import stderr_console
    from nmt_cli.render.progress import shortlist_line
    from nmt_cli.training_run import write_shortlist

    console = stderr_console()

    def say(event) -> None:
        console.print(shortlist_line(event.data), markup=False, highlight=False)

    path, record = write_shortlist(data_dir, model_dir, on_event=say)
    typer.echo(path)
    console.print(shortlist_line(record or {}), markup=False, highlight=False)
