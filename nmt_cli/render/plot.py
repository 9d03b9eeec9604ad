"""Attention heatmaps as PNG files (matplotlib, the optional `plot` extra)."""

from __future__ import annotations

from pathlib import Path

import numpy as np

from nmt_cli.errors import ConfigError


def save_heatmap_png(
    weights: np.ndarray,
    src_words: list[str],
    tgt_words: list[str],
    links: set[tuple[int, int]],
    path: Path,
) -> None:
    """Target words as rows, source words as columns, links circled; written atomically."""
    try:
        import matplotlib

        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        raise ConfigError(
            "--png needs matplotlib: add it with pip install 'nmt-cli[plot]'"
        ) from None
    from nmt_cli import atomic

    plt.rcParams["font.sans-serif"] = ["Noto Sans CJK SC", "WenQuanYi Zen Hei", "DejaVu Sans"]
    fig, ax = plt.subplots(
        figsize=(max(4, 0.5 * len(src_words) + 2), max(3, 0.4 * len(tgt_words) + 1.5))
    )
    ax.imshow(weights, cmap="viridis", vmin=0, vmax=1, aspect="auto")
    ax.set_xticks(range(len(src_words)), src_words, rotation=60, ha="right")
    ax.set_yticks(range(len(tgt_words)), tgt_words)
    for i, j in links:
        ax.scatter(i, j, s=30, facecolors="none", edgecolors="red", linewidths=1.2)
    ax.set_xlabel("source")
    ax.set_ylabel("target")
    fig.tight_layout()
    with atomic.atomic_open(path, "wb") as handle:
        fig.savefig(handle, format="png", dpi=120)
    plt.close(fig)
