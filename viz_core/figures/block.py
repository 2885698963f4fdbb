"""Figures of the whole block: the residual stream per layer, what each sublayer adds, and
each head's share of the attention output after W_O."""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
import plotly.graph_objects as go

from viz_core.i18n import _

from ..analysis.block import SUBLAYER_LABELS, LayerRow
from .common import base_layout, f32
from .heatmap import matrix_heatmap

_COLORS = {"self": "#1f77b4", "cross": "#2ca02c", "ffn": "#ff7f0e"}


def residual_figure(rows: Sequence[LayerRow], title: str | None = None) -> go.Figure:
    """Per layer: bars for what each sublayer adds, lines for the stream in and out
    (mean per-token L2 norms)."""
    x = [r.layer for r in rows]
    fig = go.Figure()
    kinds = [k for k in SUBLAYER_LABELS if any(k in r.adds for r in rows)]
    for kind in kinds:
        y = f32([r.adds.get(kind, np.nan) for r in rows])
        fig.add_trace(go.Bar(x=x, y=y, name=_("{value} adds").format(value=_(SUBLAYER_LABELS[kind])),
                             marker_color=_COLORS[kind],
                             hovertemplate="%{x}: ‖" + _("added") + "‖ = %{y:.3f}<extra></extra>"))
    fig.add_trace(go.Scatter(x=x, y=f32([r.stream_in for r in rows]), mode="lines+markers",
                             name=_("stream entering"), line=dict(color="#555555"),
                             hovertemplate="%{x}: ‖x_in‖ = %{y:.3f}<extra></extra>"))
    fig.add_trace(go.Scatter(x=x, y=f32([r.stream_out for r in rows]), mode="lines+markers",
                             name=_("stream leaving"), line=dict(color="#000000", dash="dot"),
                             hovertemplate="%{x}: ‖x_out‖ = %{y:.3f}<extra></extra>"))
    fig.update_layout(barmode="group", legend=dict(orientation="h", y=-0.25))
    fig.update_yaxes(title=_("mean L2 norm per token"))
    return base_layout(fig, title or _("Residual stream and what each sublayer adds"))


def ratio_figure(rows: Sequence[LayerRow], title: str | None = None) -> go.Figure:
    """Per layer: what each sublayer adds divided by the stream entering the layer."""
    x = [r.layer for r in rows]
    fig = go.Figure()
    for kind in [k for k in SUBLAYER_LABELS if any(k in r.adds for r in rows)]:
        y = f32([np.nan if r.ratio(kind) is None else r.ratio(kind) for r in rows])
        fig.add_trace(go.Scatter(x=x, y=y, mode="lines+markers", name=_(SUBLAYER_LABELS[kind]),
                                 line=dict(color=_COLORS[kind]),
                                 hovertemplate="%{x}: %{y:.3f} × ‖x_in‖<extra></extra>"))
    fig.update_yaxes(title=_("‖added‖ / ‖stream entering‖"), rangemode="tozero")
    return base_layout(fig, title or _("How much each sublayer changes the stream"))


def stream_heatmap(norms: np.ndarray, tokens: Sequence[str], stack: str) -> go.Figure:
    """Each token's stream norm at each layer boundary: rows = embedding, after layer 0, ..."""
    rows = [_("embedding (layer 0 input)")] + [_("after {layer}").format(layer=f"{stack}.{i}")
                                            for i in range(norms.shape[0] - 1)]
    return matrix_heatmap(f32(norms), rows, list(tokens), title=_("Stream norm per token"),
                          value_name="‖x‖", colorscale="Viridis", zmin=None, zmax=None,
                          x_title=_("token"), y_title="")


def head_share_heatmap(shares: np.ndarray, tokens: Sequence[str], head: int,
                       block_name: str) -> go.Figure:
    """‖z_h W_O[h]^T‖ per head (rows) and query token (columns)."""
    rows = [_("head {h}").format(h=h) + (" ◀" if h == head else "") for h in range(shares.shape[0])]
    return matrix_heatmap(f32(shares), rows, list(tokens),
                          title=_("{block_name}: each head's share after W_O (L2 norm)").format(
                                    block_name=block_name),
                          value_name="‖z_h W_O,h‖", colorscale="Viridis", zmin=0.0, zmax=None,
                          x_title=_("query token"), y_title="")
