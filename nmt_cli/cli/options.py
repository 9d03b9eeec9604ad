"""The options several commands share: one declaration, one help text and one check each.

Each factory returns the `typer.Option` a command declares; `check_device_options` runs the
checks that torch would otherwise answer with a traceback, before any model is loaded. The
search options (--beam, --batch-size, …) are checked by `SearchOptions.check`.
"""

from __future__ import annotations

import functools
from typing import Any

import typer

MODEL_HELP = "Model directory written by `nmt train`."
ENSEMBLE_HELP = " Repeat -m for an ensemble (mean of the models' log-probs; same target vocabulary"
ALIGNED_BY_FIRST = "; word links from the first"
DEVICE_HELP = "auto, cpu, cuda or cuda:N."
THREADS_HELP = "CPU threads (0: torch's default, all cores)."
BEAM_HELP = "Beam size (1 = greedy)."
BATCH_SIZE_HELP = "Sentences per batch."
QUANTIZE_HELP = "int8 dynamic quantization (CPU)."
BF16_HELP = (
    "bfloat16 weights and products, for CPUs with AMX or AVX-512 BF16 (Intel Xeon 4th "
    "generation and later) and GPUs with bfloat16 (refused elsewhere, where it would be "
    "emulated, slower): faster beam search over large batches; a few translations may differ "
    "from float32's."
)


def option(default: Any, help: str, *flags: str, panel: str | None = None) -> Any:
    """`(default, help, *flags)` → typer.Option, in the default help panel unless `panel` is given."""
    return typer.Option(default, *flags, help=help, rich_help_panel=panel)


def in_panel(panel: str):
    """A factory of the options of one help panel: `(default, help, *flags)` → typer.Option."""
    return functools.partial(option, panel=panel)


def given(flag: str, help: str, metavar: str | None = None, panel: str | None = None) -> Any:
    """An option without a default (a file, a name): None when not given."""
    return typer.Option(
        None, flag, metavar=metavar, help=help, rich_help_panel=panel, show_default=False
    )


def model_option(
    default: Any = ..., help: str = MODEL_HELP, repeat: bool = False, links: bool = True
) -> Any:
    """-m/--model MODEL_DIR; with `repeat`, the command takes several (declare a list), whose
    word links (with `links`: the command draws some) come from the first."""
    if repeat:
        help += ENSEMBLE_HELP + (ALIGNED_BY_FIRST if links else "") + ")."
    return typer.Option(default, "-m", "--model", metavar="MODEL_DIR", help=help)


def device_option(panel: str | None = None) -> Any:
    return typer.Option("auto", "--device", help=DEVICE_HELP, rich_help_panel=panel)


def threads_option(panel: str | None = None) -> Any:
    return typer.Option(0, "--threads", help=THREADS_HELP, rich_help_panel=panel)


def beam_option(panel: str | None = None, help: str = BEAM_HELP) -> Any:
    return typer.Option(5, "--beam", "-b", help=help, rich_help_panel=panel)


def batch_size_option(panel: str | None = None, help: str = BATCH_SIZE_HELP) -> Any:
    return typer.Option(64, "--batch-size", help=help, rich_help_panel=panel)


def quantize_option(panel: str | None = None) -> Any:
    return typer.Option(False, "--quantize", help=QUANTIZE_HELP, rich_help_panel=panel)


SHORTLIST_HELP = (
    "Score only the target pieces likely for each sentence's source pieces (the lexical "
    "shortlist `nmt train` writes): faster on CPU; output may differ slightly, and scores are "
    "normalised over the shortlist. Default: on for one model on a CPU where training found "
    'that it cost no dev BLEU (meta.json\'s "shortlist", checked in float32 and followed '
    "with --quantize and --bf16 alike), else off."
)
LENGTH_PENALTY_HELP = "GNMT length penalty alpha (0 = none)."
MAX_LEN_HELP = "Output at most N pieces for every sentence (0: the --max-len-ratio rule)."


def shortlist_option(panel: str | None = None) -> Any:
    return typer.Option(
        None,
        "--shortlist/--no-shortlist",
        help=SHORTLIST_HELP,
        rich_help_panel=panel,
        show_default=False,
    )


def length_penalty_option(panel: str | None = None) -> Any:
    return typer.Option(1.0, "--length-penalty", help=LENGTH_PENALTY_HELP, rich_help_panel=panel)


def max_len_option(panel: str | None = None, help: str = MAX_LEN_HELP) -> Any:
    return typer.Option(0, "--max-len", help=help, rich_help_panel=panel)


def bf16_option(panel: str | None = None) -> Any:
    return typer.Option(False, "--bf16", help=BF16_HELP, rich_help_panel=panel)


def check_device_options(device: str, threads: int) -> None:
    """Refuse a --device or --threads value torch cannot take (ConfigError, exit 2); warn of
    more threads than this process has cores (they only wait for one another)."""
    from nmt_cli.device import available_cores, check_device, check_threads

    check_device(device)
    check_threads(threads)
    cores = available_cores()
    if threads > cores and not device.startswith("cuda"):
        from nmt_cli.cli.boundary import warn

        warn(
            f"--threads {threads} is more than the {cores:,} core{'s' * (cores != 1)} this "
            f"process may use: the extra threads only wait; give --threads {cores} or 0"
        )


def given_on_the_command_line(context: typer.Context, names: tuple[str, ...]) -> list[str]:
    """Those of the parameters `names` the user set (not left at their defaults)."""

    def given(name: str) -> bool:
        source = context.get_parameter_source(name)
        return source is not None and source.name not in ("DEFAULT", "DEFAULT_MAP")

    return [name for name in names if given(name)]
