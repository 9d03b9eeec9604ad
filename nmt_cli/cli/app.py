"""The `nmt` Typer application: one short command per step of the workflow.

Each command module imports only typer at import time; torch, sentencepiece and sacrebleu are
imported inside the command bodies so that `nmt --help` answers fast.
"""

from __future__ import annotations

import typer

from nmt_cli import __version__
from nmt_cli.cli import align, evaluate, prepare, train, translate

app = typer.Typer(
    name="nmt",
    help="Attention-based neural machine translation: prepare → train → translate → eval → align.",
    no_args_is_help=True,
    add_completion=False,
    pretty_exceptions_enable=False,
    context_settings={"help_option_names": ["-h", "--help"]},
)


def _version(value: bool) -> None:
    if value:
        typer.echo(f"nmt {__version__}")
        raise typer.Exit()


@app.callback()
def _root(
    version: bool = typer.Option(
        False, "--version", callback=_version, is_eager=True, help="Print the version and exit."
    ),
) -> None:
    """Attention-based neural machine translation: prepare → train → translate → eval → align."""


app.command("prepare")(prepare.prepare)
app.command("train")(train.train)
app.command("translate")(translate.translate)
app.command("eval")(evaluate.evaluate)
app.command("align")(align.align)


def main() -> None:
    app()
