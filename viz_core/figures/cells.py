"""Clickable heatmap cells: an invisible scatter overlay, one marker per cell.

Streamlit's ``st.plotly_chart(on_select="rerun")`` reports no selection for heatmap traces
(streamlit/streamlit#8760, #15042), so a click on a cell of ``matrix_heatmap`` (the Attention
page's head, or a zoom window of a long input) is read from markers laid over the cells, as
the layer x head grid does (grid.py). ``clickable_cells(fig)`` adds, to a heatmap whose rows
and columns are single token positions (labels "12·cat"), two scatter traces:

- "cells": one marker per shown cell, ``customdata = [query, key]`` (absolute positions, read
  from the labels, so a zoom window's offsets are included); its hover reads as the
  heatmap's, word for word ("12·cat → 3·the: 0.4210", tag "weight"), on the same #444 label.
  It lies on hidden twin axes x2 / y2 (see _twin_axes), where %{x} prints the label;
- "cells: blocked": one marker per blocked (NaN) cell, hover "3·the → 12·cat: blocked", on
  the same twin axes.

The markers are fully transparent and the axes keep the heatmap's own range: the figure
looks exactly as before (same pixels). ``hoverdistance=-1`` makes the nearest marker (the
cell under the pointer: every cell has one) answer anywhere in a cell, however large the
cells are drawn; the ✕ marks stop answering hovers (the overlay says the same), so a click
always lands on a marker with customdata.

Cost: ``marker.maxdisplayed = 1`` draws one SVG path per overlay trace instead of one per
cell (plotly thins the drawn points; hover and click-select read the trace's data, so every
cell still answers): Plotly.newPlot of a 128 x 128 map takes about as long with the overlay
as without (one path per cell took 1.2-1.9 s there, in headless Chromium). Scattergl was no
faster (software GL). What limits the overlay now is its JSON: every marker carries two
labels, two ints and a float (~50 bytes with short tokens), so it is added only up to
MAX_CLICK_CELLS cells (160 x 160: about the largest square whose z, labels and overlay fit
MAX_CLICK_BYTES with 5-character tokens) and while they do fit MAX_CLICK_BYTES.
Larger maps, and heatmaps whose rows or columns are pooled ranges ("8–15·the", block means
of long inputs), stay as they are: ``has_clickable_cells(fig)`` tells the page which.

``outline_cell(fig, query, key)`` frames one cell (the one the page explains) in a copy of
the figure, so a cached figure is never modified.
"""

from __future__ import annotations

import base64
import re
from collections.abc import Mapping

import numpy as np
import plotly.graph_objects as go
from plotly.io.json import to_json_plotly

from viz_core.i18n import _

from .common import f32, json_bytes
from .heatmap import MAX_PAYLOAD_BYTES

MAX_CLICK_CELLS = 160 * 160
# heatmap z + labels + overlay: one figure stays within the heatmap's own payload budget
MAX_CLICK_BYTES = MAX_PAYLOAD_BYTES
CELLS = "cells"
BLOCKED_CELLS = "cells: blocked"
_LABEL = "#444444"  # hover label background of a heatmap cell (plotly's default line colour)
SELECTED_CELL = "selected cell"  # name of outline_cell's frame (a layout shape)
OUTLINE = "#ff8c00"  # dark orange: seen on white and dark blue weights, on blue and red scores


def label_positions(labels) -> np.ndarray | None:
    """int64 positions of unique labels "12·cat" (common.unique_labels), or None when any
    label is not one position (pooled ranges "8–15·the", block-mean ranges "0–15")."""
    out = []
    for label in labels if labels is not None else ():
        head = str(label).split("·", 1)[0]
        if not head.isdigit():  # "8–15", "", "-3": not a single position
            return None
        out.append(int(head))
    return np.asarray(out, dtype=np.int64) if out else None


def _values(z) -> np.ndarray:
    """float32 z of a heatmap, also when it is plotly's typed-array spec (a figure rebuilt
    from its JSON or dict keeps {"dtype", "bdata", "shape"})."""
    if isinstance(z, Mapping) and "bdata" in z:
        a = np.frombuffer(base64.b64decode(z["bdata"]), dtype=np.dtype(z["dtype"]))
        shape = z.get("shape")
        if shape is not None:
            a = a.reshape([int(n) for n in str(shape).split(",")])
        return a.astype(np.float32)
    return np.asarray(z, dtype=np.float32)


def _heatmap(fig: go.Figure) -> go.Heatmap | None:
    return next((t for t in fig.data if t.type == "heatmap"), None)


def overlay_bytes(ylabels, xlabels, shown: np.ndarray) -> int:
    """About how many JSON bytes clickable_cells adds for these labels (plotly escapes "·",
    ">" and every non-ASCII character as 6-byte \\uXXXX): per cell its two labels, its
    customdata [query, key] and commas; per shown cell its value (base64 float32); the twin
    axes' category lists."""
    yj = np.array([len(to_json_plotly(str(lab))) for lab in ylabels], dtype=np.int64)
    xj = np.array([len(to_json_plotly(str(lab))) for lab in xlabels], dtype=np.int64)
    digits = len(str(max(int(p) for p in (*label_positions(ylabels), *label_positions(xlabels)))))
    per_cell = yj[:, None] + xj[None, :] + 8 + 2 * digits  # x, y, [q,k] and separators
    return int(per_cell.sum() + 6 * shown.sum() + yj.sum() + xj.sum() + len(yj) + len(xj))


def clickable_cells(fig: go.Figure, max_cells: int = MAX_CLICK_CELLS,
                    max_bytes: int = MAX_CLICK_BYTES) -> go.Figure:
    """Add the invisible per-cell click targets to `fig` in place (see the module docstring)
    and return it; unchanged when its heatmap has pooled rows/columns, more than max_cells
    cells, or labels so long that its z, labels and overlay would take more than max_bytes
    of JSON."""
    hm = _heatmap(fig)
    if hm is None or hm.z is None or has_clickable_cells(fig):
        return fig
    z = _values(hm.z)
    if z.ndim != 2 or z.size == 0 or z.size > max_cells:
        return fig
    qpos, kpos = label_positions(hm.y), label_positions(hm.x)
    if qpos is None or kpos is None or (len(qpos), len(kpos)) != z.shape:
        return fig
    ylab, xlab = list(hm.y), list(hm.x)
    shown = np.isfinite(z)
    heatmap_bytes = json_bytes(z) + len(to_json_plotly(ylab)) + len(to_json_plotly(xlab))
    if heatmap_bytes + overlay_bytes(ylab, xlab, shown) > max_bytes:
        return fig
    extra = re.search(r"<extra>.*?</extra>", hm.hovertemplate or "")
    value = re.search(r"%\{z(:[^}]*)?\}", hm.hovertemplate or "")
    fmt = value.group(1) if value and value.group(1) else ":.4f"

    def targets(cells: np.ndarray, axes: tuple[str, str], **kw) -> go.Scatter:
        rr, cc = np.nonzero(cells)
        return go.Scatter(x=[xlab[c] for c in cc], y=[ylab[r] for r in rr],
                          customdata=np.column_stack([qpos[rr], kpos[cc]]).tolist(),
                          mode="markers", showlegend=False, xaxis=axes[0], yaxis=axes[1],
                          **kw)

    traces = []
    if shown.any():  # on the twin axes (see _twin_axes): %{x} / %{y} print the labels; the
        # value rides as the marker colour (a one-colour scale: #444, the hover label colour
        # of a heatmap), 4 bytes a cell, formatted by plotly as the heatmap's %{z}
        traces.append(targets(shown, ("x2", "y2"), name=CELLS, marker=dict(
            size=6, opacity=0, color=f32(z[shown]), colorscale=[[0, _LABEL], [1, _LABEL]],
            showscale=False),
            hovertemplate=f"%{{y}} → %{{x}}: %{{marker.color{fmt}}}"
                          + (extra.group(0) if extra else "<extra></extra>")))
    if not shown.all():  # on the twin axes too: "14·the → 23·cat: blocked" (on x / y a
        # label with tick text would print bare, the other whole: "the → 23·cat")
        traces.append(targets(~shown, ("x2", "y2"), name=BLOCKED_CELLS, marker=dict(
            size=6, opacity=0, color=_LABEL),
            hovertemplate="%{y} → %{x}: " + _("blocked") + "<extra></extra>"))
    for t in traces:  # transparent whether selected or not (a click selects a marker)
        t.selected = dict(marker=dict(opacity=0))
        t.unselected = dict(marker=dict(opacity=0))
        # Draw one SVG path per trace, not one per cell: hover and click-select read the
        # trace's data, not its paths, so every cell still answers (see "Cost" above)
        t.marker.maxdisplayed = 1
    for t in fig.data:  # the ✕ marks: the overlay answers their hover; a selection must
        if t.type == "scatter":  # not dim them either
            t.hoverinfo = "skip"
            color = t.textfont.color if t.textfont is not None else None
            if color is not None:
                t.unselected = dict(textfont=dict(color=color))
    fig.add_traces(traces)
    # Markers pad an axis' autorange by their radius (a grey frame would show round the
    # heatmap): pin each axis to the heatmap's own extent, the range autorange gave it.
    n_q, n_k = z.shape
    down = fig.layout.yaxis.autorange == "reversed"
    xrange = list(fig.layout.xaxis.range or [-0.5, n_k - 0.5])
    yrange = list(fig.layout.yaxis.range or ([n_q - 0.5, -0.5] if down else [-0.5, n_q - 0.5]))
    fig.layout.xaxis.update(range=xrange, autorange=False)
    fig.layout.yaxis.update(range=yrange, autorange=False)
    _twin_axes(fig, xlab, ylab, xrange, yrange)
    # Streamlit turns a selectable chart's default drag into "pan": keep plotly's box zoom
    fig.update_layout(hoverdistance=-1, clickmode="event+select",
                      dragmode=fig.layout.dragmode or "zoom")
    return fig


def _twin_axes(fig: go.Figure, xlab: list, ylab: list, xrange: list, yrange: list) -> None:
    """x2 / y2: hidden category axes laid over x / y with the same categories and ranges (a
    drag zooms overlaid axes together). On x / y, whose ticks show the bare tokens, a
    scatter's %{x} prints the tick text ("the"); on these tick-less twins it prints the
    label ("3·the"), as the heatmap's hover does, so no hover text per cell is needed."""
    twin = dict(type="category", categoryorder="array", visible=False, autorange=False,
                showgrid=False, zeroline=False, fixedrange=False)
    fig.update_layout(xaxis2=dict(twin, overlaying="x", anchor="y2", categoryarray=xlab,
                                  range=xrange, side="top"),
                      yaxis2=dict(twin, overlaying="y", anchor="x2", categoryarray=ylab,
                                  range=yrange))


def has_clickable_cells(fig: go.Figure) -> bool:
    """Whether `fig` carries the click targets of clickable_cells."""
    return any(t.type == "scatter" and t.name in (CELLS, BLOCKED_CELLS) for t in fig.data)


def outline_cell(fig: go.Figure, query: int, key: int) -> go.Figure:
    """A copy of `fig` with a thin orange frame (no fill) round the cell (query, key), in
    absolute positions read from the labels as clickable_cells reads them (a zoom window's
    offsets included); `fig` itself, unchanged, when that cell is not one of its cells
    (outside a zoom window, a pooled map). `fig` may be a cached figure shared by every
    session: it is never modified."""
    hm = _heatmap(fig)
    if hm is None:
        return fig
    qpos, kpos = label_positions(hm.y), label_positions(hm.x)
    if qpos is None or kpos is None:
        return fig
    rows, cols = np.flatnonzero(qpos == int(query)), np.flatnonzero(kpos == int(key))
    if not len(rows) or not len(cols):
        return fig
    r, c = int(rows[0]), int(cols[0])
    # `fig` is valid already: building the copy without plotly's validation takes ~60 ms at
    # 128 x 128 instead of ~200 ms (go.Figure(fig))
    out = go.Figure(fig.to_dict(), _validate=False)
    # on category axes a number is a cell index: cell (r, c) spans c ± 0.5, r ± 0.5
    out.add_shape(type="rect", xref="x", yref="y", x0=c - 0.5, x1=c + 0.5, y0=r - 0.5,
                  y1=r + 0.5, line=dict(color=OUTLINE, width=2), fillcolor="rgba(0,0,0,0)",
                  layer="above", name=SELECTED_CELL)
    return out


def outlined_cell(fig: go.Figure) -> tuple[int, int] | None:
    """(row, column) index of the cell outline_cell framed in `fig`, or None."""
    for shape in fig.layout.shapes or ():
        if shape.name == SELECTED_CELL:
            return int(round(shape.y0 + 0.5)), int(round(shape.x0 + 0.5))
    return None
