"""Every command's --help shows each option's help text as written, brackets included."""

from __future__ import annotations

import pytest
import typer.main
from typer.testing import CliRunner

from nmt_cli.cli.app import app

COMMANDS = sorted(typer.main.get_command(app).commands)


def _flat(text: str) -> str:
    """Help output without the panels' borders and line breaks: words separated by one space."""
    for border in "│╭╮╰╯─":
        text = text.replace(border, " ")
    return " ".join(text.split())


def test_every_command_is_checked():
    assert {"prepare", "train", "translate", "eval", "align"} <= set(COMMANDS)


@pytest.mark.parametrize("name", COMMANDS)
def test_help_shows_every_option_help_as_written(name):
    command = typer.main.get_command(app).commands[name]
    expected = [(p.name, p.help) for p in command.params if getattr(p, "help", None)]
    assert expected, f"{name} declares no option help"
    result = CliRunner().invoke(app, [name, "--help"], env={"COLUMNS": "2000", "NO_COLOR": "1"})
    assert result.exit_code == 0, result.output
    shown = _flat(result.stdout)
    for option, text in expected:
        assert _flat(text) in shown, f"{name} --help: the help of {option} is not shown as written"


def test_bracketed_words_survive():
    result = CliRunner().invoke(app, ["train", "--help"], env={"COLUMNS": "2000"})
    assert "TOML file with [model] and [train] tables." in _flat(result.stdout)


def test_train_help_shows_the_built_in_value_of_each_setting():
    from nmt_cli.config import ModelConfig, TrainConfig

    result = CliRunner().invoke(app, ["train", "--help"], env={"COLUMNS": "2000"})
    shown = _flat(result.stdout)
    assert f"Target tokens per batch. [default: {TrainConfig().batch_tokens}]" in shown
    assert f"dot, general, additive or none. [default: {ModelConfig().attention}]" in shown
    feed = "input-feed" if ModelConfig().input_feed else "no-input-feed"
    assert f"Luong input feeding. [default: {feed}]" in shown  # a flag pair: the one in force
    assert f"auto, cpu, cuda or cuda:N. [default: {TrainConfig().device}]" in shown
    assert f"(0: torch's default, all cores). [default: {TrainConfig().threads}]" in shown
    assert "overrides the --config file, which overrides the defaults shown" in shown


@pytest.mark.parametrize("name", COMMANDS)
def test_file_options_show_one_placeholder_in_every_command(name):
    """A file option shows typer's <path> in every command's help, not FILE in one and <path>
    in another; directories of models keep their own name (MODEL_DIR)."""
    import click

    command = typer.main.get_command(app).commands[name]
    for param in command.params:
        if isinstance(param, click.Option) and isinstance(param.type, click.Path):
            assert param.metavar in (None, "MODEL_DIR"), f"{name} {param.opts}: {param.metavar}"
    result = CliRunner().invoke(app, [name, "--help"], env={"COLUMNS": "2000", "NO_COLOR": "1"})
    shown = _flat(result.stdout)
    assert " FILE " not in shown and "FILE." not in shown


def test_each_command_is_summed_up_in_one_unbroken_line_of_nmt_help():
    """`nmt --help` lists each command by the first paragraph of its docstring, its line
    breaks kept: a summary running on into a second line broke mid-sentence there."""
    result = CliRunner().invoke(app, ["--help"], env={"COLUMNS": "2000", "NO_COLOR": "1"})
    assert result.exit_code == 0, result.output
    rows = [line.strip("│ ").split(None, 1) for line in result.stdout.splitlines()]
    listed = {row[0]: row[1] for row in rows if len(row) == 2 and row[0] in COMMANDS}
    assert set(listed) == set(COMMANDS)
    for name, summary in listed.items():
        assert summary.rstrip(" │").endswith("."), f"nmt {name}: its summary breaks: {summary!r}"
