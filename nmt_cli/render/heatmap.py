"""Attention for people: a shaded word-by-word heatmap and a list of what each word attends to.

Both take plain data (a (T, S) weight matrix, source and target words) and return a rich
renderable. Cells carry a density glyph as well as a colour, so the picture still reads
without colour (NO_COLOR, pipes, copy and paste). Widths are measured in terminal cells
(`rich.cells.cell_len`), so CJK and other wide characters line up.

With 256 colours or more a cell is a solid block of the scale's colour. On a terminal of 16
(or 8) colours the scale falls into four colours whose edges are not the bands' (grey below
about 0.18, so weights below 0.05 and the ░ band look alike, then cyan, white and yellow from
about 0.70, which splits ▓), so there each glyph is drawn in its band's colour on the
terminal's background, dark or light, and the glyphs tell the bands apart.
"""

from __future__ import annotations

import math
import textwrap
from collections.abc import Callable

import numpy as np
from rich.cells import cell_len, set_cell_size
from rich.color import Color, blend_rgb
from rich.color_triplet import ColorTriplet
from rich.console import Console, ConsoleOptions, Group, RenderableType, RenderResult
from rich.measure import Measurement
from rich.style import Style
from rich.text import Text

from nmt_cli.errors import ConfigError
from nmt_cli.render.scores import bar

LINK_MARK = "●"
SHADES = " ░▒▓█"
SHADE_FLOORS = (0.05, 0.25, 0.5, 0.75)  # the weight at which each glyph after " " starts
BAR_CELLS = 10  # cells of a bar for weight 1 in the links view
LABEL_CAP = 20  # widest target-word label, in cells
COLUMN_CAP = 12  # widest source-word column, in cells
COLUMN_MIN = 2  # narrowest column, so a cell shows shade around a link mark
# A viridis-like scale (dark violet, teal, yellow): ordered in lightness, colour-blind safe.
SCALE = (ColorTriplet(68, 1, 84), ColorTriplet(33, 145, 140), ColorTriplet(253, 231, 37))
# The bands' glyph colours on terminals of 16 or 8 colours, in the same order as the scale.
BAND_COLOURS = ("bright_black", "blue", "cyan", "green", "yellow")  # each shows on black and white
FEW_COLOURS = ("standard", "windows")  # rich's names of the 16- and 8-colour systems
# A control character in a word (ESC, BEL, ...; `nmt align` shows the words of a pair as the
# user gave them) is drawn as its Unicode picture (␛, ␇), one cell wide: printed raw it would
# drive the terminal, and the columns after it would not line up.
_PICTURES = {c: 0x2400 + c for c in range(0x20)} | {0x7F: 0x2421}
_PICTURES |= dict.fromkeys(range(0x80, 0xA0), 0xFFFD)  # C1 controls have no picture


def shown(word: str) -> str:
    """`word` with its control characters drawn as their pictures (see _PICTURES)."""
    return word if word.isprintable() else word.translate(_PICTURES)


class _ForColours:
    """A drawing made when printed, for the colour system of the console that prints it:
    `draw(solid)` gets solid=False on a terminal of 16 or 8 colours (see the module notes)."""

    def __init__(self, draw: Callable[[bool], Group]):
        self.draw = draw

    def __rich_console__(self, console: Console, options: ConsoleOptions) -> RenderResult:
        yield self.draw(console.color_system not in FEW_COLOURS)

    def __rich_measure__(self, console: Console, options: ConsoleOptions) -> Measurement:
        return Measurement.get(console, options, self.draw(console.color_system not in FEW_COLOURS))


def render_heatmap(
    weights: np.ndarray,
    src_words: list[str],
    tgt_words: list[str],
    links: set[tuple[int, int]] | None = None,
    max_width: int = 80,
) -> RenderableType:
    """Target words as rows, source words as columns, cells shaded by weight, links marked "●".

    A grid wider than `max_width` cells is cut into column chunks that repeat the row labels,
    and long words are abbreviated with "…"; a notice says so. Links are (source, target).
    """
    weights = _checked_weights(weights, src_words, tgt_words)
    links = _checked_links(links, len(src_words), len(tgt_words))
    src_words, tgt_words = [shown(w) for w in src_words], [shown(w) for w in tgt_words]
    if not src_words or not tgt_words:
        return Group(Text("(empty sentence: nothing to draw)", style="dim"))
    return _ForColours(lambda solid: _grid(weights, src_words, tgt_words, links, max_width, solid))


def _grid(weights, src_words, tgt_words, links, max_width: int, solid: bool) -> Group:
    label_width = min(max((cell_len(w) for w in tgt_words), default=1), LABEL_CAP)
    label_width = max(1, min(label_width, max_width // 3))
    column_cap = max(1, min(COLUMN_CAP, max_width - label_width - 3))
    widths = [max(COLUMN_MIN, min(cell_len(w), column_cap)) for w in src_words]
    chunks = _column_chunks(widths, max_width - label_width - 3)
    parts: list[Text] = [Text(line) for line in _notices(src_words, widths, chunks, max_width)]
    for chunk in chunks:
        if len(chunks) > 1:
            parts.append(Text(_chunk_caption(chunk), style="dim"))
        parts.append(_header(src_words, widths, chunk, label_width))
        for j, word in enumerate(tgt_words):
            parts.append(_row(weights[j], j, word, widths, chunk, label_width, links, solid))
    parts.append(_legend(solid))
    return Group(*parts)


def render_links(
    weights: np.ndarray,
    src_words: list[str],
    tgt_words: list[str],
    top_k: int = 3,
    links: set[tuple[int, int]] | None = None,
) -> RenderableType:
    """Each target word with the `top_k` source words it attends to most, as bars and weights;
    with `links` (source, target), its linked source words are marked "●" (and listed after
    the strongest when they are not among them)."""
    if top_k < 1:
        raise ConfigError(f"top_k must be ≥ 1, got {top_k}")
    weights = _checked_weights(weights, src_words, tgt_words)
    marked = _checked_links(links, len(src_words), len(tgt_words))
    src_words, tgt_words = [shown(w) for w in src_words], [shown(w) for w in tgt_words]
    return _ForColours(
        lambda solid: _link_lines(weights, src_words, tgt_words, top_k, marked, solid)
    )


def _link_lines(weights, src_words, tgt_words, top_k: int, marked, solid: bool) -> Group:
    label_width = min(max((cell_len(w) for w in tgt_words), default=1), LABEL_CAP)
    lines = []
    for j, word in enumerate(tgt_words):
        line = Text(_fit(word, label_width, align_right=False) + "  ←")
        order = [i for i in np.argsort(-weights[j], kind="stable")[:top_k] if weights[j, i] > 0]
        order += sorted(i for i, row in marked if row == j and i not in order)
        for rank, i in enumerate(order):
            line.append(" ·" if rank else "")
            if (i, j) in marked:
                line.append(f" {LINK_MARK}", style="bold")
            line.append(f" {_fit(src_words[i], COLUMN_CAP, pad=False)} ")
            shown = bar(weights[j, i], 1.0, BAR_CELLS, never_empty=True)
            line.append(shown, style=_ink(weights[j, i], solid))
            line.append(f" {weights[j, i]:.2f}")
        if not order:
            line.append(" (no attention)", style="dim")
        lines.append(line)
    return Group(*lines)


def _checked_weights(weights: np.ndarray, src_words: list[str], tgt_words: list[str]):
    """The weights as floats in [0, 1] after checking they fit the words; NaN reads as 0."""
    weights = np.nan_to_num(np.asarray(weights, dtype=np.float64))
    if weights.shape != (len(tgt_words), len(src_words)):
        raise ValueError(
            f"weights of shape {weights.shape} do not fit {len(tgt_words)} target and "
            f"{len(src_words)} source words"
        )
    return np.clip(weights, 0.0, 1.0)


def _checked_links(links, n_src: int, n_tgt: int) -> set[tuple[int, int]]:
    """The links as a set, after checking that each names a cell of the grid."""
    links = set(links or ())
    outside = sorted((i, j) for i, j in links if not (0 <= i < n_src and 0 <= j < n_tgt))
    if outside:
        raise ValueError(f"links {outside} lie outside a {n_src}×{n_tgt} (source×target) grid")
    return links


def _column_chunks(widths: list[int], room: int) -> list[list[int]]:
    """Consecutive column indices that fit in `room` cells each (one-cell gaps between them)."""
    chunks: list[list[int]] = [[]]
    used = 0
    for i, width in enumerate(widths):
        needed = width + (1 if chunks[-1] else 0)
        if chunks[-1] and used + needed > room:
            chunks.append([])
            used, needed = 0, width
        chunks[-1].append(i)
        used += needed
    return chunks


def _chunk_caption(chunk: list[int]) -> str:
    """Which source words a chunk shows, counted from 0 as the Pharaoh links count them."""
    first, last = chunk[0], chunk[-1]
    shown = f"source word {first}" if first == last else f"source words {first}–{last}"
    return f"{shown} (counted from 0, as in the links)"


def _notices(src_words, widths, chunks, max_width: int) -> list[str]:
    """Lines telling the reader the grid was split or words were shortened."""
    notes = []
    if len(chunks) > 1:
        notes.append(
            f"The grid is wider than {max_width} columns: its {len(src_words)} source words "
            f"are shown in {len(chunks)} parts."
        )
    if any(cell_len(word) > width for word, width in zip(src_words, widths, strict=True)):
        notes.append("Long source words are shortened with …")
    return [line for note in notes for line in textwrap.wrap(note, max(max_width, 20))]


def _header(src_words, widths, chunk, label_width: int) -> Text:
    """The source words over their columns, left-aligned, abbreviated to the column width."""
    cells = " ".join(_fit(src_words[i], widths[i], align_right=False) for i in chunk)
    return Text(" " * label_width + "  " + cells + " ", style="bold")


def _row(row, j: int, word: str, widths, chunk, label_width: int, links, solid: bool) -> Text:
    """One target word: its label, then a shaded cell per source word, links marked."""
    line = Text(_fit(word, label_width), style="bold")
    line.append(" │")
    for position, i in enumerate(chunk):
        if position:
            line.append(" ")
        line.append_text(_cell(float(row[i]), widths[i], (i, j) in links, solid))
    line.append("│")
    return line


def _cell(weight: float, width: int, linked: bool, solid: bool) -> Text:
    """A cell of `width` shade glyphs in the weight's colour; a link puts "●" in its middle."""
    shade = _shade(weight, solid)
    glyph = SHADES[_band(weight)]
    if not linked:
        return Text(glyph * width, style=shade)
    if solid:
        ink = Color.from_rgb(0, 0, 0) if weight >= 0.5 else Color.from_rgb(255, 255, 255)
        mark = Style(color=ink, bgcolor=_colour(weight), bold=True)
    else:
        mark = Style(bold=True)
    before = width // 2
    cell = Text(glyph * before, style=shade)
    cell.append(LINK_MARK, style=mark)
    cell.append(glyph * (width - before - 1), style=shade)
    return cell


def _band(weight: float) -> int:
    """The weight's band: the index of its glyph in SHADES."""
    return sum(weight >= floor for floor in SHADE_FLOORS)


def _shade(weight: float, solid: bool) -> Style:
    """A heatmap cell's style: a solid block of the weight's colour, or its band's glyph colour."""
    if solid:
        colour = _colour(weight)
        return Style(color=colour, bgcolor=colour)
    return Style(color=BAND_COLOURS[_band(weight)])


def _ink(weight: float, solid: bool) -> Style:
    """A bar's colour in the links view: the weight's, or its band's on few colours."""
    return Style(color=_colour(weight) if solid else BAND_COLOURS[_band(weight)])


def _legend(solid: bool) -> Text:
    """The scale: glyph and colour per weight band, and the link mark."""
    legend = Text("weight", style="dim")
    for level, floor in enumerate(SHADE_FLOORS, start=1):
        legend.append(" ")
        legend.append(SHADES[level], style=_shade(floor, solid))
        legend.append(f"≥{floor:g}", style="dim")
    legend.append(f"  {LINK_MARK}", style="bold")
    legend.append(" link", style="dim")
    return legend


def _colour(weight: float) -> Color:
    """The scale's colour for a weight; the square root lifts small weights so they show."""
    position = math.sqrt(max(0.0, min(1.0, weight))) * (len(SCALE) - 1)
    low = min(int(position), len(SCALE) - 2)
    return Color.from_triplet(blend_rgb(SCALE[low], SCALE[low + 1], position - low))


def colour_scale(steps: int = 101) -> list[str]:
    """The scale's colours for weights 0, 1/(steps-1), …, 1 as "#rrggbb" (the page of `nmt serve`)."""
    return [_colour(i / (steps - 1)).triplet.hex for i in range(steps)]


def _fit(word: str, width: int, align_right: bool = True, pad: bool = True) -> str:
    """The word in exactly `width` cells (or at most, without `pad`), "…" marking a cut."""
    if cell_len(word) > width:
        word = set_cell_size(word, width - 1).rstrip() + "…" if width > 1 else "…"
    if not pad:
        return word
    space = " " * (width - cell_len(word))
    return space + word if align_right else word + space
