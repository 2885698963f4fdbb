"""Clicks on heatmap cells: which (query, key) a click chose.

The figure side is viz_core.figures.cells.clickable_cells (an invisible marker per cell with
``customdata = [query, key]``, absolute positions); a chart drawn with
``on_select=on_cell_click(key)`` hands the clicked cell to the next run, which takes it with
``take_click()`` (the Attention page's "why does this head attend here?", ui.contributions).
"""

from __future__ import annotations

import math
from collections.abc import Mapping

import streamlit as st

from viz_core.figures.cells import MAX_CLICK_CELLS, has_clickable_cells, outline_cell
from viz_core.i18n import _

from .charts import chart

CLICKED = "_clicked_cell"  # session entry: the (query, key) of the last click, until taken


def position(value, size: int | None) -> int | None:
    """A non-negative integer position below `size`, from an int or an integral float
    (browsers send numbers as JSON); None for anything else (bool, text, NaN, 2.5, -1)."""
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        return None
    if isinstance(value, float):
        if not math.isfinite(value) or not value.is_integer():
            return None
        value = int(value)
    if value < 0 or (size is not None and value >= size):
        return None
    return int(value)


def clicked_cell(selection, n_q: int | None = None, n_k: int | None = None
                 ) -> tuple[int, int] | None:
    """(query, key) of the first clicked point whose customdata is a valid [query, key]
    (within n_q x n_k when given), or None: an empty selection, a point of another trace
    (no customdata), or malformed / out-of-range values.

    `selection` is ``event.selection`` of st.plotly_chart(..., on_select=...): a dict-like
    with "points" (or an object with a .points attribute)."""
    for pt in points_in(selection):
        cd = pt.get("customdata")
        if not isinstance(cd, (list, tuple)) or len(cd) != 2:
            continue
        q, k = position(cd[0], n_q), position(cd[1], n_k)
        if q is not None and k is not None:
            return q, k
    return None


def _field(obj, name: str):
    """obj[name] of a mapping, else its attribute (None when it has neither)."""
    return obj.get(name) if isinstance(obj, Mapping) else getattr(obj, name, None)


def points_in(selection) -> list[Mapping]:
    """The points of a chart's selection that are mappings ([] for anything else)."""
    pts = _field(selection, "points")
    return [p for p in pts if isinstance(p, Mapping)] if isinstance(pts, (list, tuple)) else []


def points_of(event) -> list[Mapping]:
    """The clicked points of a chart's event (``st.session_state[key]``, or what
    st.plotly_chart returns): only those that are mappings, [] for anything else. What a
    browser sends is data: a stale or hostile client may send any JSON."""
    return points_in(_field(event, "selection"))


def _selection_of(key: str):
    return _field(st.session_state.get(key), "selection")


def on_cell_click(key: str):
    """A callback for chart(fig, key=key, on_select=...): keeps the clicked cell for
    take_click(). A click that deselects (an empty selection) keeps nothing."""

    def clicked() -> None:
        cell = clicked_cell(_selection_of(key))
        if cell is not None:
            st.session_state[CLICKED] = cell

    return clicked


def chart_key(name: str, cell: tuple[int, int] | None) -> str:
    """The key of a clickable chart that shows `cell` outlined (None: no cell explained).

    Plotly deselects a selected marker when it is clicked again, so a chart that kept the
    marker of an earlier click would swallow the next click on that cell (after the pickers
    chose another one): an empty selection, nothing handed over. A key naming the explained
    cell makes each handled click, and each picker change, start a new chart element whose
    selection is empty. The pickers and the toggle keep their own keys."""
    return name if cell is None else f"{name}-{int(cell[0])}-{int(cell[1])}"


def clickable_chart(fig, key: str, name: str, cell: tuple[int, int] | None) -> bool:
    """Draw a heatmap made clickable by figures.cells.clickable_cells: the explained `cell`
    (None: none) framed in a copy of `fig` (which may be cached), the chart keyed by that
    cell (chart_key), a click handed to take_click(). Returns whether its cells are
    clickable (a pooled or too large map is drawn as it is)."""
    clickable = has_clickable_cells(fig)
    chart_id = chart_key(key, cell)
    chart(outline_cell(fig, *cell) if cell else fig, key=chart_id, name=name,
          on_select=on_cell_click(chart_id) if clickable else "ignore")
    return clickable


def take_click() -> tuple[int, int] | None:
    """The cell clicked since the last run, once (None when there was no click)."""
    return st.session_state.pop(CLICKED, None)


def click_caption(clickable: bool, n_q: int, n_k: int, *, pooled: bool = False,
                  window: bool = False) -> str:
    """One sentence under a heatmap: whether (and where) a click opens a cell's QK attribution."""
    side = int(MAX_CLICK_CELLS ** 0.5)
    where = _("window") if window else _("map")
    pick = _("pick a cell under “Why does this head attend here?”")
    if clickable:
        return _("Click a cell of this {where} to see why the head attends there (its QK "
                 "attribution, under “Why does this head attend here?”).").format(where=where)
    if pooled:
        return _("Its cells are block means, not single query → key pairs, so a click here "
                 "opens nothing: click a cell of the zoom window below (exact cells) to see why "
                 "the head attends there.")
    if n_q * n_k <= MAX_CLICK_CELLS:  # few cells but long labels: one figure's byte budget
        shrink = _("shrink the window or ") if window else ""
        return _("This {where}'s token labels are too long to give every cell a click target "
                 "within one figure's size: {shrink}{pick}.").format(where=where, shrink=shrink,
                                                                      pick=pick)
    shrink = _("set the window size to at most {side} to click its cells, or ").format(
        side=side) if window else ""
    return _("This {where} has {n_q:,} × {n_k:,} cells, more than the {limit:,} ({side} × "
             "{side}) that can be clicked one by one: {shrink}{pick}.").format(
        where=where, n_q=n_q, n_k=n_k, limit=MAX_CLICK_CELLS, side=side, shrink=shrink, pick=pick)
