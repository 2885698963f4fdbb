"""Clickable heatmap cells: an invisible scatter overlay, one marker per cell.

Streamlit's ``st.plotly_chart(on_select="rerun")`` reports no selection for heatmap traces
(streamlit/streamlit#8760, #15042), so a click on a cell of ``matrix_heatmap`` (the Attention
page's head, or a zoom window of a long input) is read from markers laid over the cells, as
the layer x head grid does (grid.py). ``clickable_cells(fig)`` adds, to a heatmap whose rows
and columns are single token positions (labels "12·cat"), two scatter traces:

- "cells": one marker per shown cell, ``customdata = [query, key]`` (absolute positions, read
  from the labels, so a zoom window's offsets are included); its hover reads as the
  heatmap's, word for word ("12·cat → 3·the: 0.4210", tag "weight"), on the same #444 label;
- "cells: blocked": one marker per blocked (NaN) cell, hover "cat → the: blocked" as the ✕
  marks'.

The markers are fully transparent and the axes keep the heatmap's own range: the figure
looks exactly as before (same pixels). ``hoverdistance=-1`` makes the nearest marker (the
cell under the pointer: every cell has one) answer anywhere in a cell, however large the
cells are drawn; the ✕ marks stop answering hovers (the overlay says the same), so a click
always lands on a marker with customdata.

Cost: every marker is an SVG path and carries two labels, a hover text, two ints and a
float (~90 bytes of JSON), so the overlay is added only up to MAX_CLICK_CELLS cells
(128 x 128: the zoom window's default) and while z, labels and overlay fit MAX_CLICK_BYTES.
Larger maps, and heatmaps whose rows or columns are pooled ranges ("8–15·the", block means
of long inputs), stay as they are: ``has_clickable_cells(fig)`` tells the page which.
"""

from __future__ import annotations

import base64
import json
import re
from collections.abc import Mapping

import numpy as np
import plotly.graph_objects as go

from .common import f32, json_bytes
from .heatmap import MAX_PAYLOAD_BYTES

MAX_CLICK_CELLS = 128 * 128
# heatmap z + labels + overlay: one figure stays within the heatmap's own payload budget
MAX_CLICK_BYTES = MAX_PAYLOAD_BYTES
CELLS = "cells"
BLOCKED_CELLS = "cells: blocked"
_LABEL = "#444444"  # hover label background of a heatmap cell (plotly's default line colour)


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
    """About how many JSON bytes clickable_cells adds for these labels ("·", "→" and every
    non-ASCII character are escaped as 6-byte \\uXXXX): per shown cell its two labels
    twice (position and hover text), per blocked cell once, plus customdata and the value."""
    yj = np.array([len(json.dumps(str(lab))) for lab in ylabels], dtype=np.int64)
    xj = np.array([len(json.dumps(str(lab))) for lab in xlabels], dtype=np.int64)
    per_cell = yj[:, None] + xj[None, :] + 4 + 2 * len(str(len(ylabels)))  # x, y, [q,k],
    text = yj[:, None] + xj[None, :] + 8  # "<q label> \u2192 <k label>",
    return int(per_cell.sum() + text[shown].sum() + 6 * shown.sum())  # value: base64 f32


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
    heatmap_bytes = json_bytes(z) + len(json.dumps(ylab)) + len(json.dumps(xlab))
    if heatmap_bytes + overlay_bytes(ylab, xlab, shown) > max_bytes:
        return fig
    extra = re.search(r"<extra>.*?</extra>", hm.hovertemplate or "")
    value = re.search(r"%\{z(:[^}]*)?\}", hm.hovertemplate or "")
    fmt = value.group(1) if value and value.group(1) else ":.4f"
    common = dict(mode="markers", showlegend=False, xaxis=hm.xaxis or "x",
                  yaxis=hm.yaxis or "y")

    def targets(cells: np.ndarray, text: bool, **kw) -> go.Scatter:
        rr, cc = np.nonzero(cells)
        if text:  # %{x} / %{y} of a scatter on a category axis print the tick text ("the"),
            # a heatmap's the label ("3·the"): the labels travel as the point's text
            kw["text"] = [f"{ylab[r]} → {xlab[c]}" for r, c in zip(rr, cc, strict=True)]
        return go.Scatter(x=[xlab[c] for c in cc], y=[ylab[r] for r in rr],
                          customdata=np.column_stack([qpos[rr], kpos[cc]]).tolist(),
                          **common, **kw)

    traces = []
    if shown.any():  # the value rides as the marker colour (on a one-colour scale: #444, the
        # hover label colour of a heatmap), so it costs 4 bytes a cell, formatted by plotly
        traces.append(targets(shown, True, name=CELLS, marker=dict(
            size=6, opacity=0, color=f32(z[shown]), colorscale=[[0, _LABEL], [1, _LABEL]],
            showscale=False),
            hovertemplate=f"%{{text}}: %{{marker.color{fmt}}}"
                          + (extra.group(0) if extra else "<extra></extra>")))
    if not shown.all():
        traces.append(targets(~shown, False, name=BLOCKED_CELLS, marker=dict(
            size=6, opacity=0, color=_LABEL),  # the ✕ marks' hover, word for word
            hovertemplate="%{y} → %{x}: blocked<extra></extra>"))
    for t in traces:  # transparent whether selected or not (a click selects a marker)
        t.selected = dict(marker=dict(opacity=0))
        t.unselected = dict(marker=dict(opacity=0))
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
    if fig.layout.xaxis.range is None:
        fig.layout.xaxis.update(range=[-0.5, n_k - 0.5], autorange=False)
    if fig.layout.yaxis.range is None:
        down = fig.layout.yaxis.autorange == "reversed"
        fig.layout.yaxis.update(range=[n_q - 0.5, -0.5] if down else [-0.5, n_q - 0.5],
                                autorange=False)
    # Streamlit turns a selectable chart's default drag into "pan": keep plotly's box zoom
    fig.update_layout(hoverdistance=-1, clickmode="event+select",
                      dragmode=fig.layout.dragmode or "zoom")
    return fig


def has_clickable_cells(fig: go.Figure) -> bool:
    """Whether `fig` carries the click targets of clickable_cells."""
    return any(t.type == "scatter" and t.name in (CELLS, BLOCKED_CELLS) for t in fig.data)
