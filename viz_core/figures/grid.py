"""Layer x head grid: every head of one block kind as a small thumbnail, clickable.

Drawn as ONE heatmap of tiled thumbnails (rows = layers top to bottom, columns = heads)
instead of layers*heads subplots: one trace and two axes keep the JSON small and fast.

Which cell was clicked: Streamlit's ``st.plotly_chart(on_select="rerun")`` reports no
selection for heatmaps (streamlit/streamlit#8760), so a transparent scatter trace named
"cells" lays a 4 x 4 lattice of invisible markers over every thumbnail, each with
``customdata = [layer, head]``. A click anywhere on a thumbnail lands on one of them.
The page reads it with ``selected_cell(event.selection)``::

    event = st.plotly_chart(fig, on_select="rerun", selection_mode="points", key="grid")
    cell = selected_cell(event.selection)   # (layer, head) or None

Any input length: ``blocks_grid`` reads each block's ``overview(size)`` (block means computed
in row chunks), never the full patterns. Pooled thumbnails are scaled each to its own maximum:
block means of a long input are tiny (a bin of b keys holds ~b / N of a row's mass), so on a
fixed [0, 1] scale every thumbnail would be white.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import TYPE_CHECKING

import numpy as np
import plotly.graph_objects as go

from viz_core.i18n import _

from .common import WEIGHT_COLORSCALE, base_layout, colorbar, f32, pool2d, top_axis

if TYPE_CHECKING:  # type hints only: figures read traces, they never capture
    from ..capture.trace import AttentionTrace, BlockTrace

THUMBNAIL = 64  # thumbnail side: overview size of every block in the grid

LATTICE = 4  # clickable markers per thumbnail side


def tile_patterns(patterns: np.ndarray, max_size: int = 64, how: str = "max",
                  gap: int | None = None):
    """Pool each [q, k] of patterns [layer, head, q, k] to <= max_size and tile them.

    Returns (tiled float32 [rows, cols] with NaN gaps between thumbnails, (tq, tk) thumbnail
    size, gap).
    """
    p = np.asarray(patterns, dtype=np.float32)
    n_layers, n_heads = p.shape[:2]
    thumbs = [[pool2d(p[lay, h], max_size, how) for h in range(n_heads)]
              for lay in range(n_layers)]
    tq, tk = thumbs[0][0].shape
    if gap is None:
        gap = max(1, round(max(tq, tk) / 16))  # a visible gutter, small for tiny inputs
    tiled = np.full((n_layers * (tq + gap) - gap, n_heads * (tk + gap) - gap), np.nan,
                    dtype=np.float32)
    for lay in range(n_layers):
        for h in range(n_heads):
            r, c = lay * (tq + gap), h * (tk + gap)
            tiled[r: r + tq, c: c + tk] = thumbs[lay][h]
    return tiled, (tq, tk), gap


def layer_head_grid(
    patterns: np.ndarray,
    *,
    title: str | None = None,
    max_size: int = 64,
    how: str = "max",
    layers: list[int] | None = None,
    scale: str = "fixed",
    kv_group: list[int] | None = None,
) -> go.Figure:
    """Thumbnails of patterns [layer, head, q, k]; colour scale fixed to [0, 1].

    Thumbnails longer than max_size per side are pooled (how="max" keeps thin diagonals and
    sink columns visible). `layers` gives the layer numbers of the rows (default 0..L-1).
    scale="thumbnail": each thumbnail divided by its own maximum (pooled block means).
    kv_group: the key/value head each query head reads (grouped-query attention); when
    heads share one, a line separates the groups and a label under each names its heads.
    """
    if scale not in ("fixed", "thumbnail"):
        raise ValueError(f"scale must be 'fixed' or 'thumbnail', not {scale!r}")
    p = np.asarray(patterns)
    if p.ndim != 4:
        raise ValueError(f"patterns must be [layer, head, q, k], got shape {p.shape}")
    n_layers, n_heads = p.shape[:2]
    layers = list(range(n_layers)) if layers is None else list(layers)
    if scale == "thumbnail":
        top = np.nanmax(np.asarray(p, dtype=np.float32), axis=(2, 3), keepdims=True)
        p = np.asarray(p, dtype=np.float32) / np.where(top > 0, top, 1.0)
    tiled, (tq, tk), gap = tile_patterns(p, max_size, how)
    fig = go.Figure(
        go.Heatmap(z=tiled, colorscale=WEIGHT_COLORSCALE, zmin=0.0, zmax=1.0, hoverinfo="skip",
                   colorbar=colorbar("weight" if scale == "fixed" else "÷ thumbnail max"),
                   name="thumbnails")
    )
    # Click targets: LATTICE x LATTICE markers per thumbnail, each carrying (layer, head).
    frac = (np.arange(LATTICE) + 0.5) / LATTICE
    xs, ys, custom = [], [], []
    for li, lay in enumerate(layers):
        for h in range(n_heads):
            x0, y0 = h * (tk + gap) - 0.5, li * (tq + gap) - 0.5
            for fy in frac:
                for fx in frac:
                    xs.append(x0 + fx * tk)
                    ys.append(y0 + fy * tq)
                    custom.append([int(lay), h])
    fig.add_trace(go.Scatter(
        x=f32(xs), y=f32(ys), customdata=custom, mode="markers", name="cells",
        marker=dict(size=max(6, 40 // LATTICE), color="rgba(0,0,0,0)"),
        hovertemplate=_("layer") + " %{customdata[0]}, " + _("head") + " %{customdata[1]}"
                      "<extra></extra>",
        showlegend=False,
    ))
    heads = [f"H{h}" for h in range(n_heads)]
    angle, top = top_axis(heads, axis_title=False)
    # constrain="domain": the plot shrinks to the thumbnails' aspect, so the head labels on
    # top sit on the thumbnails, under the title (with "range" they stay at the top of the
    # whole plot height, where the title is)
    fig.update_xaxes(tickmode="array", tickvals=[h * (tk + gap) + (tk - 1) / 2
                                                 for h in range(n_heads)],
                     ticktext=heads, side="top", tickangle=angle, showgrid=False,
                     zeroline=False, range=[-0.5, tiled.shape[1] - 0.5], constrain="domain")
    fig.update_yaxes(tickmode="array", tickvals=[li * (tq + gap) + (tq - 1) / 2
                                                 for li in range(n_layers)],
                     ticktext=[f"L{lay}" for lay in layers], autorange="reversed",
                     showgrid=False, zeroline=False, scaleanchor="x", scaleratio=1,
                     constrain="domain")
    base_layout(fig, title, plot_bgcolor="white", dragmode=False, clickmode="event+select",
                height=max(260, 70 * n_layers + 80), margin=dict(t=top))
    if kv_group is not None:
        _mark_kv_groups(fig, list(kv_group), n_heads, tk, gap, tiled.shape[0])
    return fig


def _mark_kv_groups(fig: go.Figure, kv_group: list[int], n_heads: int, tk: int, gap: int,
                    height: int) -> None:
    """Separator lines between key/value groups and a "kv g: heads a-b" label under each."""
    if len(kv_group) != n_heads:
        raise ValueError(f"kv_group has {len(kv_group)} entries for {n_heads} heads")
    if len(set(kv_group)) == n_heads:  # plain multi-head attention: nothing is shared
        return
    starts = [h for h in range(n_heads) if h == 0 or kv_group[h] != kv_group[h - 1]]
    for a, b in zip(starts, starts[1:] + [n_heads], strict=True):
        if a > 0:
            x = a * (tk + gap) - gap / 2 - 0.5
            fig.add_shape(type="line", x0=x, x1=x, y0=-0.5, y1=height - 0.5,
                          line=dict(color="#444444", width=2))
        heads = (_("head {h}").format(h=a) if b - a == 1
                 else _("heads {first}-{last}").format(first=a, last=b - 1))
        fig.add_annotation(x=(a * (tk + gap) + (b - 1) * (tk + gap) + tk) / 2 - 0.5, y=0,
                           yref="paper", yanchor="top", showarrow=False,
                           text=_("kv {group}: {heads}").format(group=kv_group[a], heads=heads),
                           font=dict(size=11))


def blocks_grid(blocks: list[BlockTrace], size: int = THUMBNAIL, title: str | None = None
                ) -> go.Figure:
    """Layer x head grid of blocks of one kind, from ``b.overview(size)`` of each: exact
    thumbnails up to `size` tokens, block means (each scaled to its maximum) beyond."""
    if not blocks:
        raise ValueError("no blocks to draw")
    thumbs = np.stack([b.overview(size) for b in blocks])  # [layer, head, <=size, <=size]
    pooled = max(max(b.shape[1:]) for b in blocks) > size
    if pooled:
        _, n_q, n_k = blocks[0].shape
        title = (f"{title or ''} <sup>(block means of {n_q}×{n_k} pooled to "
                 f"{thumbs.shape[2]}×{thumbs.shape[3]}, each scaled to its max)</sup>")
    return layer_head_grid(thumbs, title=title, max_size=size, layers=[b.layer for b in blocks],
                           scale="thumbnail" if pooled else "fixed",
                           kv_group=blocks[0].kv_group)


def trace_grid(trace: AttentionTrace, kind: str, size: int = THUMBNAIL,
               title: str | None = None) -> go.Figure:
    """Convenience wrapper: all layers x heads of one block kind of a trace."""
    blocks = trace.layers(kind)
    if not blocks:
        raise ValueError(f"trace has no {kind} blocks; it has {trace.kinds()}")
    return blocks_grid(blocks, size, title or f"{kind}: layers × heads (click a head)")


def selected_cell(selection) -> tuple[int, int] | None:
    """(layer, head) of the first clicked point of a layer_head_grid, or None.

    `selection` is ``event.selection`` from st.plotly_chart(..., on_select="rerun") (a
    dict-like with "points"); each point of the "cells" trace has customdata [layer, head].
    """
    points = selection.get("points", []) if isinstance(selection, Mapping) else (
        getattr(selection, "points", None) or [])
    for pt in points:
        cd = pt.get("customdata") if isinstance(pt, Mapping) else None
        if isinstance(cd, (list, tuple)) and len(cd) >= 2:
            return int(cd[0]), int(cd[1])
    return None
