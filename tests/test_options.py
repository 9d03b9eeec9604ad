"""Options shared by several commands: one help text each, one check, exit code 2."""

from __future__ import annotations

import re

import pytest
import torch
import typer.main
from cli_runner import invoke

from nmt_cli.cli.app import app

COMMANDS = typer.main.get_command(app).commands


@pytest.mark.parametrize("option", ["--device", "--threads"])
def test_a_shared_option_says_the_same_everywhere(option):
    """One help text; train's help adds the value a --config file would otherwise leave."""

    def text(help: str) -> str:
        return re.sub(r" \[default: [^\]]*\]$", "", help)

    declared = {
        name: text(p.help) for name, c in COMMANDS.items() for p in c.params if option in p.opts
    }
    assert len(declared) >= 3, declared  # train, translate, align
    assert len(set(declared.values())) == 1, declared


@pytest.mark.skipif(torch.cuda.is_available(), reason="a CUDA device is present")
def test_asking_for_a_missing_gpu_is_a_usage_error(toy_model_dir):
    result = invoke("translate", "-m", toy_model_dir, "--device", "cuda", input="apple\n")
    assert result.exit_code == 2, result.output
    assert result.stderr.startswith("error: --device cuda") and "Traceback" not in result.output
