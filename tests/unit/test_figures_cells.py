"""Clickable heatmap cells (issue 23, item 7): the invisible overlay of
viz_core.figures.cells and the selection parser of attention_lab.ui.cells.

The overlay must give exactly one click target per cell whose customdata is the cell's
absolute (query, key), also in a zoom window of a longer input; it must leave the heatmap
itself (z, labels, hover, axis ranges) as it was; it must not be added to pooled maps or
beyond its cell and byte caps."""

from __future__ import annotations

import json

import numpy as np
import pytest

from attention_lab.ui.cells import click_caption, clicked_cell
from viz_core.figures.cells import (
    BLOCKED_CELLS,
    CELLS,
    MAX_CLICK_BYTES,
    MAX_CLICK_CELLS,
    OUTLINE,
    SELECTED_CELL,
    clickable_cells,
    has_clickable_cells,
    label_positions,
    outline_cell,
    outlined_cell,
)
from viz_core.figures.heatmap import block_window_heatmap, matrix_heatmap, pooled_heatmap

TOKENS = ["<bos>", "the", "cat", "sat", "on", "the", "mat"]


def _overlay(fig):
    return {t.name: t for t in fig.data if t.name in (CELLS, BLOCKED_CELLS)}


def _cells(fig) -> dict[tuple[int, int], tuple[str, str, str]]:
    """(query, key) -> (trace name, x label, y label) over both overlay traces."""
    out = {}
    for name, t in _overlay(fig).items():
        for cd, x, y in zip(t.customdata, t.x, t.y, strict=True):
            key = (int(cd[0]), int(cd[1]))
            assert key not in out, f"two markers for cell {key}"
            out[key] = (name, x, y)
    return out


def test_one_click_target_per_cell_with_its_query_and_key():
    n = len(TOKENS)
    rng = np.random.default_rng(0)
    z = rng.random((n, n))
    mask = np.triu(np.ones((n, n), dtype=bool), 1)  # causal: blocked cells are NaN
    fig = matrix_heatmap(z, TOKENS, TOKENS, mask=mask)
    heat = fig.data[0].to_plotly_json()
    out = clickable_cells(fig)
    assert out is fig and has_clickable_cells(fig)
    hm = fig.data[0]
    assert json.dumps(hm.to_plotly_json(), default=str) == json.dumps(heat, default=str)
    cells = _cells(fig)
    assert set(cells) == {(q, k) for q in range(n) for k in range(n)}
    for (q, k), (name, x, y) in cells.items():
        assert (x, y) == (hm.x[k], hm.y[q])  # the marker sits on its own cell
        assert name == (BLOCKED_CELLS if mask[q, k] else CELLS)
    shown = _overlay(fig)[CELLS]
    values = np.asarray(shown.marker.color, dtype=np.float32)
    expect = np.array([z[int(q), int(k)] for q, k in shown.customdata], dtype=np.float32)
    np.testing.assert_array_equal(values, expect)  # the hover's value is the cell's own
    # the hover reads as the heatmap's: "<query label> → <key label>: <value>", same tag
    assert hm.hovertemplate == "%{y} → %{x}: %{z:.4f}<extra>weight</extra>"
    assert shown.hovertemplate == "%{y} → %{x}: %{marker.color:.4f}<extra>weight</extra>"
    # ... on hidden twin axes whose categories and ranges are the heatmap's (there %{x}
    # prints the label "3·cat"; on x / y, whose ticks show bare tokens, it would print "cat")
    assert (shown.xaxis, shown.yaxis) == ("x2", "y2")
    blocked = _overlay(fig)[BLOCKED_CELLS]  # whole labels both sides: "0·a → 2·c: blocked"
    assert (blocked.xaxis, blocked.yaxis) == ("x2", "y2")
    assert blocked.hovertemplate == "%{y} → %{x}: blocked<extra></extra>"
    x2, y2 = fig.layout.xaxis2, fig.layout.yaxis2
    assert (x2.overlaying, y2.overlaying, x2.visible, y2.visible) == ("x", "y", False, False)
    assert list(x2.categoryarray) == list(hm.x) and list(y2.categoryarray) == list(hm.y)
    assert list(x2.range) == list(fig.layout.xaxis.range)
    assert list(y2.range) == list(fig.layout.yaxis.range)
    # invisible, whether selected or not; no legend entry; the ✕ marks answer no hover;
    # one drawn SVG path per trace (hover and click read the data, not the paths)
    for t in _overlay(fig).values():
        assert t.marker.maxdisplayed == 1
        assert t.marker.opacity == 0 and t.selected.marker.opacity == 0
        assert t.unselected.marker.opacity == 0 and t.showlegend is False
    marks = [t for t in fig.data if t.type == "scatter" and t.name not in (CELLS, BLOCKED_CELLS)]
    assert marks and all(t.hoverinfo == "skip" for t in marks)
    # the axes keep the heatmap's own extent (markers would pad an autorange)
    assert list(fig.layout.xaxis.range) == [-0.5, n - 0.5]
    assert list(fig.layout.yaxis.range) == [n - 0.5, -0.5]  # queries top to bottom
    assert fig.layout.hoverdistance == -1 and fig.layout.clickmode == "event+select"
    clickable_cells(fig)  # a second call adds nothing
    assert len(_cells(fig)) == n * n


def test_a_window_carries_absolute_positions():
    z = np.random.default_rng(1).random((3, 4))
    fig = clickable_cells(matrix_heatmap(z, ["a", "b", "c"], ["w", "x", "y", "z"],
                                         q_start=1030, k_start=7))
    assert set(_cells(fig)) == {(q, k) for q in range(1030, 1033) for k in range(7, 11)}
    assert BLOCKED_CELLS not in _overlay(fig)  # no mask: no blocked cells


def test_a_zoom_window_of_a_real_block():
    import viz_core as vc

    trace = vc.load("lm").trace("the cat sat on the mat and the dog sat on the cat",
                                capture=("pattern",))
    block = trace["decoder.1.self"]
    rows, cols = (4, 9), (2, 8)
    fig = clickable_cells(block_window_heatmap(block, 1, rows, cols))
    cells = _cells(fig)
    assert set(cells) == {(q, k) for q in range(*rows) for k in range(*cols)}
    mask = block.mask_window(rows, cols)
    for (q, k), (name, _, _) in cells.items():
        assert name == (BLOCKED_CELLS if mask[q - rows[0], k - cols[0]] else CELLS)
    shown = _overlay(fig)[CELLS]
    weights = block.window(1, rows, cols)
    for (q, k), v in zip(shown.customdata, shown.marker.color, strict=True):
        assert v == pytest.approx(weights[q - rows[0], k - cols[0]], abs=1e-7)
    # the scores view: signed values, the hover says "score"
    scores = clickable_cells(block_window_heatmap(block, 1, rows, cols, view="scores"))
    assert set(_cells(scores)) == set(cells)
    shown = _overlay(scores)[CELLS]
    assert shown.hovertemplate.endswith("<extra>score</extra>")
    values = block.window(1, rows, cols, what="scores")
    for (q, k), v in zip(shown.customdata, shown.marker.color, strict=True):
        assert v == pytest.approx(values[q - rows[0], k - cols[0]], abs=1e-6)


def test_no_overlay_over_the_caps_or_on_pooled_maps():
    side = int(MAX_CLICK_CELLS ** 0.5)
    big = matrix_heatmap(np.zeros((side + 1, side)), ["t"] * (side + 1), ["t"] * side)
    assert not has_clickable_cells(clickable_cells(big))  # one row too many
    small = matrix_heatmap(np.zeros((6, 6)), ["t"] * 6, ["t"] * 6)
    assert not has_clickable_cells(clickable_cells(small, max_cells=35))
    assert not has_clickable_cells(clickable_cells(small, max_bytes=1_000))
    # mean-pooled rows ("0–1·t"): a cell is no single query -> key pair
    pooled = matrix_heatmap(np.zeros((40, 40)), ["t"] * 40, ["t"] * 40, max_cells=400)
    assert "mean-pooled" in pooled.layout.title.text
    assert not has_clickable_cells(clickable_cells(pooled))
    # block means of a long input: axes are position ranges
    means = pooled_heatmap(np.zeros((4, 4)), 4096, 4096)
    assert not has_clickable_cells(clickable_cells(means))
    assert label_positions(["0–15", "16–31"]) is None
    assert label_positions(["3·a", "4·&lt;b>"]).tolist() == [3, 4]


@pytest.mark.parametrize("token", ["t", "token", "猫猫猫", "<b>&amp;"])
def test_a_clickable_figure_stays_within_the_byte_budget(token):
    side = int(MAX_CLICK_CELLS ** 0.5)
    for causal in (False, True):
        z = np.random.default_rng(2).standard_normal((side, side))
        mask = np.triu(np.ones((side, side), dtype=bool), 1) if causal else None
        tokens = [f"{token}{i}" for i in range(side)]
        fig = clickable_cells(matrix_heatmap(z, tokens, tokens, mask=mask))
        if has_clickable_cells(fig):
            assert len(fig.to_json()) <= MAX_CLICK_BYTES + 20_000  # + layout, ticks, colours
    # short tokens on a causal map: a cap-sized map (160 x 160) is clickable
    tokens = [f"t{i}" for i in range(side)]
    mask = np.triu(np.ones((side, side), dtype=bool), 1)
    assert has_clickable_cells(clickable_cells(matrix_heatmap(np.zeros((side, side)), tokens,
                                                              tokens, mask=mask)))


# ---- the outline of the explained cell --------------------------------------------------------
def _frame(fig):
    shapes = [sh for sh in fig.layout.shapes if sh.name == SELECTED_CELL]
    assert len(shapes) == 1, fig.layout.shapes
    return shapes[0]


def test_outline_frames_the_cell_and_leaves_the_figure_alone():
    n = len(TOKENS)
    z = np.random.default_rng(3).random((n, n))
    fig = clickable_cells(matrix_heatmap(z, TOKENS, TOKENS,
                                         mask=np.triu(np.ones((n, n), dtype=bool), 1)))
    before = fig.to_json()
    out = outline_cell(fig, 4, 2)
    assert out is not fig and fig.to_json() == before  # a cached figure is never modified
    assert not fig.layout.shapes
    frame = _frame(out)
    # a category axis puts cell i at i: the frame spans exactly key 2's column and query
    # 4's row, the row and column whose labels are "4·on" / "2·cat"
    assert (frame.x0, frame.x1, frame.y0, frame.y1) == (1.5, 2.5, 3.5, 4.5)
    assert (frame.xref, frame.yref, frame.type, frame.layer) == ("x", "y", "rect", "above")
    assert out.data[0].x[2] == "2·cat" and out.data[0].y[4] == "4·on"
    assert frame.line.color == OUTLINE and frame.fillcolor == "rgba(0,0,0,0)"
    assert outlined_cell(out) == (4, 2) and outlined_cell(fig) is None
    # everything else is the figure as it was: same traces, same click targets
    assert json.loads(out.to_json())["data"] == json.loads(before)["data"]
    assert has_clickable_cells(out) and _cells(out) == _cells(fig)
    # a blocked cell is framed too (the page explains any cell the pickers name)
    assert outlined_cell(outline_cell(fig, 1, 5)) == (1, 5)


def test_outline_in_a_zoom_window_uses_absolute_positions():
    z = np.random.default_rng(4).random((3, 4))
    fig = clickable_cells(matrix_heatmap(z, ["a", "b", "c"], ["w", "x", "y", "z"],
                                         q_start=1030, k_start=7))
    out = outline_cell(fig, 1032, 8)  # last row, second column of the window
    frame = _frame(out)
    assert (frame.x0, frame.x1, frame.y0, frame.y1) == (0.5, 1.5, 1.5, 2.5)
    assert out.data[0].y[2] == "1032·c" and out.data[0].x[1] == "8·x"
    # cells outside the window (or a window missing the row / the column): no frame, and
    # the very same figure back (no copy)
    for q, k in [(2, 1), (1029, 8), (1033, 8), (1031, 6), (1031, 11)]:
        assert outline_cell(fig, q, k) is fig
    # a pooled map's rows are ranges, no single cell: nothing is framed
    pooled = matrix_heatmap(np.zeros((40, 40)), ["t"] * 40, ["t"] * 40, max_cells=400)
    assert outline_cell(pooled, 0, 0) is pooled


# ---- the selection parser -------------------------------------------------------------------
def _event(*customdata):
    return {"points": [{"curve_number": 2, "point_number": 0, "customdata": c}
                       for c in customdata]}


def test_clicked_cell_reads_the_first_valid_point():
    assert clicked_cell(_event([3, 1])) == (3, 1)
    assert clicked_cell(_event([3.0, 1.0])) == (3, 1)  # JSON numbers may come as floats
    assert clicked_cell(_event(None, [2, 0])) == (2, 0)  # a ✕ mark first: skipped
    assert clicked_cell(_event([3, 1]), n_q=4, n_k=2) == (3, 1)

    class Selection:
        points = [{"customdata": [5, 4]}]

    assert clicked_cell(Selection()) == (5, 4)


@pytest.mark.parametrize("selection", [
    None, {}, {"points": []}, {"points": None}, {"points": "3,1"}, "garbage", 42,
    {"points": [{"x": "3·the"}]}, {"points": ["3,1"]},
    _event([-1, 2]), _event([2, -1]), _event([True, 1]), _event(["3", 1]), _event([2.5, 1]),
    _event([float("nan"), 1]), _event([float("inf"), 1]), _event([1, 2, 3]), _event([1]),
    _event({"q": 1, "k": 2}), _event([10**30, 1]),
])
def test_clicked_cell_refuses_empty_and_malformed_selections(selection):
    assert clicked_cell(selection, n_q=100, n_k=100) is None


def test_clicked_cell_refuses_out_of_range_cells():
    assert clicked_cell(_event([4, 1]), n_q=4, n_k=8) is None
    assert clicked_cell(_event([1, 8]), n_q=4, n_k=8) is None
    assert clicked_cell(_event([4, 1], [3, 7]), n_q=4, n_k=8) == (3, 7)


def test_click_captions_say_where_to_click():
    assert "Click a cell of this map" in click_caption(True, 8, 8)
    assert "zoom window below" in click_caption(False, 8192, 8192, pooled=True)
    assert "more than the 25,600 (160 × 160)" in click_caption(False, 300, 300)
    assert "at most 160" in click_caption(False, 448, 448, window=True)
    assert "too long" in click_caption(False, 100, 100)
