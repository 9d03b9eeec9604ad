"""Pictures (matplotlib, the optional `plot` extra): attention heatmaps and BLEU by length.

Each picture is drawn on its own `Figure` (no pyplot state) and written atomically; its file
suffix picks the format.
"""

from __future__ import annotations

import os
import sys
from collections.abc import Iterable
from pathlib import Path
from typing import TYPE_CHECKING

import numpy as np

from nmt_cli.errors import ConfigError, InputError

if TYPE_CHECKING:
    from nmt_cli.alignment import Link
    from nmt_cli.evaluate import BucketScore

PICTURE_FORMATS = ("png", "pdf", "svg", "jpg", "jpeg", "eps", "ps", "tif", "tiff", "webp")
# Sans-serif fonts tried in order, so labels in Chinese, Japanese or Korean find their glyphs
# on Linux (Noto, Source Han, WenQuanYi), macOS (PingFang, Hiragino, Apple SD Gothic) and
# Windows (Microsoft YaHei, SimHei, Yu Gothic, Malgun Gothic); matplotlib's own DejaVu last.
CJK_FONTS = [
    "Noto Sans CJK SC", "Noto Sans CJK JP", "Noto Sans CJK KR", "Noto Sans SC",
    "Source Han Sans SC", "WenQuanYi Zen Hei", "WenQuanYi Micro Hei", "PingFang SC",
    "Hiragino Sans GB", "Hiragino Sans", "Apple SD Gothic Neo", "Heiti SC", "Microsoft YaHei",
    "SimHei", "Yu Gothic", "Malgun Gothic", "DejaVu Sans",
]  # fmt: skip


def require_matplotlib(option: str = "--plot") -> None:
    """Raise ConfigError with the install command when the optional plotting extra is missing."""
    try:
        import matplotlib  # noqa: F401
    except ImportError as exc:
        raise ConfigError(
            f"{option} needs matplotlib, which is not installed: add it with "
            f"{sys.executable} -m pip install matplotlib"
        ) from exc


def check_plot_path(
    path: str | os.PathLike, option: str = "--plot", inputs: Iterable[Path | None] = ()
) -> None:
    """Raise an NmtError before any work when the picture cannot be written where asked (one
    of the command's `inputs` included)."""
    from nmt_cli.atomic import check_output_file

    path = Path(path)
    if path.suffix.lstrip(".").lower() not in PICTURE_FORMATS:
        raise InputError(
            f"cannot draw {path}: end the name with one of "
            f"{', '.join('.' + name for name in PICTURE_FORMATS)}"
        )
    check_output_file(path, option, inputs)
    require_matplotlib(option)


def _save(figure, path: str | os.PathLike) -> None:
    from nmt_cli.atomic import atomic_open

    path = Path(path)
    with atomic_open(path, "wb") as handle:
        figure.savefig(handle, format=path.suffix.lstrip(".").lower() or "png")


def save_length_plot(
    buckets: list[BucketScore],
    unit: str,
    path: str | os.PathLike,
    compared: list[BucketScore] | None = None,
) -> None:
    """Draw BLEU per length bucket as a bar chart; with `compared` (the second system's
    buckets) a bar of each system per bucket, A beside B."""
    from matplotlib.figure import Figure

    figure = Figure(figsize=(6, 3.5), layout="constrained")
    axes = figure.add_subplot()
    places = np.arange(len(buckets))
    systems = [("A", buckets)] if compared is None else [("A", buckets), ("B", compared)]
    width = 0.8 / len(systems)
    for k, ((name, series), colour) in enumerate(
        zip(systems, ("#4878a8", "#c0504d"), strict=False)
    ):
        offset = (k - (len(systems) - 1) / 2) * width
        bars = axes.bar(places + offset, [b.bleu or 0.0 for b in series], width, color=colour,
                        label=name)  # fmt: skip
        if k == len(systems) - 1:
            axes.bar_label(bars, labels=[f"n={b.count:,}" for b in series], fontsize="small")
    axes.set_xticks(places, [b.label for b in buckets])
    if compared is not None:
        axes.legend()
    axes.set_xlabel(f"source length ({unit})")
    axes.set_ylabel("BLEU")
    axes.set_title("BLEU by source length")
    _save(figure, path)


def save_heatmap_png(
    weights: np.ndarray,
    src_words: list[str],
    tgt_words: list[str],
    links: set[Link],
    path: Path,
) -> str | None:
    """Target words as rows, source words as columns, links circled, a colour scale beside.

    Returns a one-line problem to tell the user, or None: characters of the labels that no
    installed font has (matplotlib draws them as empty boxes).
    """
    require_matplotlib("--png")
    import warnings

    import matplotlib
    from matplotlib.figure import Figure

    with (
        matplotlib.rc_context({"font.sans-serif": CJK_FONTS}),
        warnings.catch_warnings(record=True) as caught,
    ):
        warnings.simplefilter("always")
        size = (max(4, 0.5 * len(src_words) + 3), max(3, 0.4 * len(tgt_words) + 1.5))
        figure = Figure(figsize=size, dpi=120)
        ax = figure.add_subplot()
        image = ax.imshow(weights, cmap="viridis", vmin=0, vmax=1, aspect="auto")
        ax.set_xticks(range(len(src_words)), src_words, rotation=60, ha="right")
        ax.set_yticks(range(len(tgt_words)), tgt_words)
        for i, j in links:
            ax.scatter(i, j, s=30, facecolors="none", edgecolors="red", linewidths=1.2)
        ax.set_xlabel("source")
        ax.set_ylabel("target")
        figure.colorbar(image, ax=ax, label="weight", fraction=0.05, pad=0.02)
        figure.tight_layout()
        _save(figure, path)
    messages = [str(w.message) for w in caught]
    for warning, message in zip(caught, messages, strict=True):  # the others, as they came
        if "missing from font" not in message:
            warnings.warn_explicit(
                warning.message, warning.category, warning.filename, warning.lineno
            )
    return _missing_glyphs(messages, path)


def _missing_glyphs(messages: list[str], path: Path) -> str | None:
    """What to tell the user when matplotlib warned of characters no installed font has."""
    import re

    codes = [int(m[1]) for m in map(re.compile(r"Glyph (\d+) .*missing").match, messages) if m]
    if not codes:
        return None
    sample = " ".join(chr(code) for code in list(dict.fromkeys(codes))[:5])
    return (
        f"{path}: characters such as {sample} have no glyph in the installed fonts and are "
        "drawn as empty boxes; install a font that has them (for Chinese, Japanese and Korean: "
        "Noto Sans CJK, e.g. the fonts-noto-cjk package)"
    )
