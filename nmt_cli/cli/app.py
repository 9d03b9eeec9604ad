"""The `nmt` Typer application: one short command per step of the workflow.

Each command module imports only typer at import time; torch, sentencepiece and sacrebleu are
imported inside the command bodies so that `nmt --help` answers fast.
"""

from __future__ import annotations

import contextlib
import sys

import typer
import typer.core

from nmt_cli import __version__
from nmt_cli.cli import align, average, evaluate, prepare, serve, shortlist, train, translate


class _HelpAsWritten:
    """Help text shown as written: rich markup is escaped, so "[model]" stays "[model]".

    Escaped when help is asked for only, so that a command that runs never imports rich.
    """

    def format_help(self, ctx, formatter) -> None:
        from rich.markup import escape

        for item in (self, *getattr(self, "commands", {}).values(), *self.params):
            for name in ("help", "short_help"):
                text = getattr(item, name, None)
                if text and not getattr(item, "_escaped_" + name, False):
                    setattr(item, name, escape(text))
                    setattr(item, "_escaped_" + name, True)
        super().format_help(ctx, formatter)


class _Command(_HelpAsWritten, typer.core.TyperCommand):
    def parse_args(self, ctx, args):
        _check_path_options(self, ctx, args)
        return super().parse_args(ctx, args)


def _check_path_options(command, ctx, args: list[str]) -> None:
    """An empty path ("", read as ".") is a usage error, and so is a file or directory option
    of one value given twice (`eval --hyp a --hyp b`, `align -m A -m B`): click would keep the last in silence, where other path options
    repeat to mean several (`--ref`, `translate -m`: an ensemble). A setting given twice
    (`--lr 0.1 … --lr 0.2`) keeps its last value, as scripts that add to a base line expect."""
    names = {}
    for param in command.params:
        if param.param_type_name == "option" and hasattr(param.type, "readable"):  # a path
            for name in (*param.opts, *param.secondary_opts):
                names[name] = param
    given: dict = {}
    tokens = iter(args)
    for token in tokens:
        if token == "--":
            break
        name, equals, value = token.partition("=") if token.startswith("--") else (token, "", "")
        param = names.get(name)
        if param is None:
            continue
        if not equals:
            value = next(tokens, None)  # its value, whatever it looks like
        if value == "":  # which click reads as "." (the current directory)
            ctx.fail(f"{name} was given an empty path (an unset shell variable?): give a path")
        given.setdefault(param, []).append(name)
    for param, names_given in given.items():
        if len(names_given) > 1 and not param.multiple:
            ctx.fail(
                f"{names_given[0]} was given {len(names_given)} times, but it takes one "
                "value: give it once"
            )


class _OwnPathChecks(_Command):
    """A command whose path options are checked by the command itself: click's own check of
    a path it cannot read ends in a boxed usage message, where nmt's checks give one line
    naming the file, with the exit code of its kind (2 for a file, 3 for a model directory)."""

    def __init__(self, *args, **kwargs) -> None:
        super().__init__(*args, **kwargs)
        for param in self.params:
            if getattr(param.type, "readable", False):  # a path type (typer's own click)
                param.type.readable = False


def _say(line: str) -> None:
    """`line` on stderr, if there is one (`2>&-` closes it): the exit code still tells."""
    with contextlib.suppress(AttributeError, OSError):
        sys.stderr.write(line + "\n")


class _Group(_HelpAsWritten, typer.core.TyperGroup):
    def main(self, *args, standalone_mode: bool = True, **kwargs):
        """A usage error (unknown option, value of the wrong type, missing argument) on one
        line, as every other error of nmt: "error: …, see 'nmt train -h'", exit code 2.
        Typer would draw it in a box under the usage line."""
        if not standalone_mode:
            return super().main(*args, standalone_mode=False, **kwargs)
        try:
            code = super().main(*args, standalone_mode=False, **kwargs)
        except typer.Abort as abort:  # end of input at a prompt, or Ctrl-C outside a command
            if isinstance(abort.__cause__, KeyboardInterrupt) or isinstance(
                abort.__context__, KeyboardInterrupt
            ):
                _say("interrupted")
                raise SystemExit(130) from None
            _say("error: aborted")
            raise SystemExit(1) from None
        except Exception as err:  # typer's own click: its ClickException, duck-typed
            if not (hasattr(err, "format_message") and hasattr(err, "exit_code")):
                raise
            if type(err).__name__ != "NoArgsIsHelpError":  # bare `nmt`: the help is shown
                given = kwargs.get("args", args[0] if args else None)
                program = _program_name(kwargs.get("prog_name"))
                hint = f"; see '{self._path_of(err, given, program)} -h'"
                message = " ".join(err.format_message().split()).rstrip(".")
                if message.endswith("?"):  # "no such command 'x'. Did you mean 'y'?"
                    message = message.replace(". Did you mean", " (did you mean", 1) + ")"
                if message[1:2].islower():  # "No such option" as nmt's own: "no such option"
                    message = message[0].lower() + message[1:]
                _say(f"error: {message}{hint}")
            raise SystemExit(err.exit_code) from None
        raise SystemExit(code if isinstance(code, int) else 0)

    def _path_of(self, err: Exception, args, program: str) -> str:
        """The command a usage error is about: its context's, or (an option's missing value
        is reported before the context exists) the subcommand named on the command line."""
        ctx = getattr(err, "ctx", None)
        if ctx is not None:
            return ctx.command_path
        argv = sys.argv[1:] if args is None else list(args)
        name = next((arg for arg in argv if not arg.startswith("-")), None)
        return f"{program} {name}" if name in self.commands else program


def _program_name(given: str | None) -> str:
    """The program's name as its usage line shows it: the one it was given, else the one
    click finds (`nmt`, or `python -m nmt_cli`), so that every hint names the same."""
    if given:
        return given
    try:
        from typer._click.utils import _detect_program_name
    except ImportError:  # another typer: its click is its own business
        return "nmt"
    return _detect_program_name()


app = typer.Typer(
    cls=_Group,
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


app.command("prepare", cls=_OwnPathChecks)(prepare.prepare)
app.command("train", cls=_Command)(train.train)
app.command("translate", cls=_OwnPathChecks)(translate.translate)
app.command("eval", cls=_OwnPathChecks)(evaluate.evaluate)
app.command("align", cls=_OwnPathChecks)(align.align)
app.command("shortlist", cls=_Command)(shortlist.shortlist)
app.command("average", cls=_OwnPathChecks)(average.average)
app.command("serve", cls=_Command)(serve.serve)


def main() -> None:
    if sys.stdout is None:  # started with stdout closed (`nmt translate >&-`)
        sys.stderr.write("error: standard output is closed: redirect it to a file or /dev/null\n")
        raise SystemExit(2)
    from nmt_cli.cli import boundary

    boundary.keep_teardown()  # until this run's command asks otherwise
    try:
        app()
    except SystemExit as done:
        from nmt_cli.cli.boundary import end_without_teardown

        end_without_teardown(done.code)
        raise
