"""Terminal heatmap and links view: widths in cells, CJK, splitting, link marks."""

from __future__ import annotations

import io

import numpy as np
import pytest
from rich.cells import cell_len
from rich.color import ColorSystem
from rich.console import Console

from nmt_cli.render.heatmap import LINK_MARK, render_heatmap, render_links

EN = ["A", "little", "house", "."]
ZH = ["一", "个", "小房子", "。"]


def _text(renderable, width: int, color_system: str | None = None) -> list[str]:
    console = Console(
        record=True,
        width=width,
        color_system=color_system,
        file=io.StringIO(),
        legacy_windows=False,
    )
    console.print(renderable)
    return console.export_text().splitlines()


def _weights(rows: int, cols: int) -> np.ndarray:
    weights = np.random.default_rng(0).random((rows, cols)) ** 3
    return weights / weights.sum(axis=1, keepdims=True)


def _grid_rows(lines: list[str]) -> list[str]:
    return [line for line in lines if "│" in line]


def _column_starts(header: str, words: list[str]) -> list[int]:
    """The cell offset at which each source word starts in the header line."""
    starts, position = [], 0
    for word in words:
        position = header.index(word, position)
        starts.append(cell_len(header[:position]))
        position += len(word)
    return starts


@pytest.mark.parametrize("color_system", [None, "truecolor"])
@pytest.mark.parametrize(("src", "tgt"), [(EN, ZH), (ZH, EN)])
def test_rows_have_equal_cell_widths_with_english_and_chinese(src, tgt, color_system):
    lines = _text(render_heatmap(_weights(len(tgt), len(src)), src, tgt, max_width=80), 80)
    rows = _grid_rows(lines)
    assert len(rows) == len(tgt)
    header = lines[0]
    assert {cell_len(row) for row in rows} == {cell_len(header)}
    for word in src:
        assert word in header
    for row, word in zip(rows, tgt, strict=True):
        assert row.strip().startswith(word)


def test_links_are_marked_exactly_at_the_chosen_cells():
    src, tgt = ["猫", "sat", "on", "mat"], ["the", "cat", "sat", "垫子"]
    links = {(1, 0), (0, 1), (1, 2), (3, 3), (2, 3)}
    lines = _text(render_heatmap(_weights(4, 4), src, tgt, links, max_width=80), 80)
    starts = _column_starts(lines[0], src)
    marked = set()
    for j, row in enumerate(_grid_rows(lines)):
        for k, char in enumerate(row):
            if char == LINK_MARK:
                offset = cell_len(row[:k])
                marked.add((max(i for i, s in enumerate(starts) if s <= offset), j))
    assert marked == links
    assert sum(row.count(LINK_MARK) for row in _grid_rows(lines)) == len(links)


def test_a_wide_sentence_is_split_with_a_notice_and_repeated_labels():
    src = [f"word{i}" for i in range(30)]
    tgt = ["Haus", "房子"]
    width = 50
    lines = _text(render_heatmap(_weights(2, 30), src, tgt, max_width=width), width)
    assert any("parts" in line for line in lines)
    assert all(cell_len(line) <= width for line in lines)
    rows = _grid_rows(lines)
    chunks = sum(1 for row in rows if row.strip().startswith("房子"))
    assert chunks > 1 and len(rows) == 2 * chunks
    shown = " ".join(lines)
    assert all(f"{word} " in shown for word in src)


def test_long_words_are_shortened_with_a_notice():
    src = ["Donaudampfschifffahrtsgesellschaftskapitän", "ja"]
    lines = _text(render_heatmap(_weights(1, 2), src, ["yes"], max_width=40), 40)
    assert any("shortened" in line for line in lines)
    assert "…" in lines[1] or "…" in lines[0]
    assert all(cell_len(line) <= 40 for line in lines)


def test_shading_reads_without_colour():
    weights = np.array([[1.0, 0.0], [0.3, 0.7]])
    lines = _text(render_heatmap(weights, ["a", "b"], ["x", "y"]), 60, color_system=None)
    rows = _grid_rows(lines)
    assert "██" in rows[0] and "▒▒" in rows[1] and "▓▓" in rows[1]
    assert any(LINK_MARK in line and "link" in line for line in lines)  # the legend


def test_links_view_lists_strongest_source_words_with_bars():
    weights = np.array([[0.82, 0.11, 0.07], [0.2, 0.3, 0.5]])
    src, tgt = ["apples", "red", "the"], ["苹果", "红"]
    lines = _text(render_links(weights, src, tgt, top_k=2), 100)
    first = lines[0]
    assert first.startswith("苹果") and "apples" in first and "0.82" in first
    assert "red" in first and "0.11" in first and "the" not in first  # top_k=2
    assert first.index("apples") < first.index("red")
    bars = [part.count("█") for part in first.split("·")]
    assert bars[0] > bars[1]
    assert lines[1].index("the") < lines[1].index("red")


def test_renderers_reject_weights_that_do_not_fit_the_words():
    with pytest.raises(ValueError, match="do not fit"):
        render_heatmap(np.ones((2, 2)), ["a"], ["x", "y"])
    with pytest.raises(ValueError, match="outside"):
        render_heatmap(np.ones((1, 1)), ["a"], ["x"], links={(1, 0)})


def test_an_empty_sentence_says_so():
    lines = _text(render_heatmap(np.zeros((0, 0)), [], []), 40)
    assert lines == ["(empty sentence: nothing to draw)"]


def test_links_view_marks_the_links_even_beyond_the_strongest_words():
    weights = np.array([[0.56, 0.44, 0.0], [0.1, 0.2, 0.7]])
    src, tgt = ["to", "talks", "them"], ["和", "他们"]
    lines = _text(render_links(weights, src, tgt, top_k=1, links={(1, 0), (0, 1)}), 100)
    first, second = lines[0], lines[1]
    assert first.index("to") < first.index(f"{LINK_MARK} talks")  # strongest first, unmarked
    assert f"{LINK_MARK} to" not in first and "0.44" in first
    assert second.index(f"{LINK_MARK} to") > second.index("them")  # a weak link listed after
    assert "0.10" in second and len(lines) == 2
    assert LINK_MARK not in "".join(_text(render_links(weights, src, tgt, top_k=1), 100))


def test_split_heatmap_numbers_its_source_words_as_the_links_do():
    src = [f"word{i:02d}" for i in range(30)]
    weights = np.full((1, 30), 1 / 30)
    lines = _text(render_heatmap(weights, src, ["x"], max_width=80), 80)
    captions = [line for line in lines if line.startswith("source words")]
    assert len(captions) > 1 and captions[0].startswith("source words 0–")
    last = captions[-1].split("–")[1].split()[0]
    assert int(last) == 29  # the last word's Pharaoh index


def test_png_heatmap_is_drawn_and_names_characters_no_font_has(tmp_path):
    pytest.importorskip("matplotlib")
    from nmt_cli.render.plot import save_heatmap_png

    weights = np.array([[0.9, 0.1], [0.2, 0.8]])
    plain = tmp_path / "plain.png"
    assert save_heatmap_png(weights, ["a", "b"], ["x", "y"], {(0, 0)}, plain) is None
    assert plain.read_bytes().startswith(b"\x89PNG")
    odd = tmp_path / "odd.png"  # private-use characters: no font draws them
    problem = save_heatmap_png(weights, ["a", "\ue000"], ["x", "\ue001"], set(), odd)
    assert odd.read_bytes().startswith(b"\x89PNG")
    assert problem is not None and str(odd) in problem and "\ue000" in problem
    assert "\n" not in problem and "empty boxes" in problem


def _coloured_runs(drawing, system: str, characters: str) -> list:
    """The styled segments made only of `characters`, as a console of `system` draws them."""
    console = Console(color_system=system, force_terminal=True, width=100, file=io.StringIO())
    return [
        segment
        for line in console.render_lines(drawing, pad=False)
        for segment in line
        if segment.text and set(segment.text) <= set(characters) and segment.style
    ]


def test_every_band_keeps_a_colour_of_its_own_on_a_16_colour_terminal():
    # Downgraded to 16 colours, the scale's solid blocks merged weights below 0.05 with the
    # ░ band (both grey) and the ▓ band with █ (both yellow); glyphs on the terminal's own
    # background, in a colour per band, keep all five apart.
    weights = np.array([[0.01, 0.1, 0.3, 0.6, 0.9]])
    src = ["a", "b", "c", "d", "e"]
    heatmap = render_heatmap(weights, src, ["x"])
    few = {s.text[0]: s.style for s in _coloured_runs(heatmap, "standard", "░▒▓█")}
    assert set(few) == set("░▒▓█") and not any(style.bgcolor for style in few.values())
    numbers = [few[glyph].color.downgrade(ColorSystem.STANDARD).number for glyph in "░▒▓█"]
    assert len(set(numbers)) == 4
    for system in ("truecolor", "256"):  # solid blocks
        solid = _coloured_runs(heatmap, system, "░▒▓█")
        assert solid and all(s.style.bgcolor == s.style.color for s in solid)

    bars = _coloured_runs(render_links(weights, src, ["x"], top_k=5), "standard", "█▏▎▍▌▋▊▉")
    numbers = [s.style.color.downgrade(ColorSystem.STANDARD).number for s in bars]
    assert len(bars) == 5 and len(set(numbers)) == 5


@pytest.mark.parametrize("view", ["heatmap", "links"])
def test_control_characters_in_words_are_drawn_as_their_pictures(view):
    """Words of a pair are shown as the user gave them: an ESC sequence printed raw would
    recolour the terminal and push the later columns out of line."""
    src = ["A", "\x1b[31mred\x1b[0m", "car\x07", "."]
    weights = _weights(len(ZH), len(src))
    draw = render_heatmap if view == "heatmap" else render_links
    lines = _text(draw(weights, src, ZH), 120, "truecolor")
    assert not any(c in "".join(lines) for c in "\x1b\x07")
    assert any("␛[31mred␛[0m" in line or "␛[31mred…" in line for line in lines)
    if view == "heatmap":
        rows = _grid_rows(lines)
        assert {cell_len(row) for row in rows} == {cell_len(lines[0])}
