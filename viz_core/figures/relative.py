"""Relative-position figures: T5's bias per head, bias against distance with the bucket
edges, and Transformer-XL's four score terms side by side."""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
import plotly.graph_objects as go
from plotly.subplots import make_subplots

from viz_core.i18n import N_, _

from .common import SCORE_COLORSCALE, base_layout, f32, plot_text
from .heatmap import MAX_CELLS_SIGNED, matrix_heatmap


def bias_heatmap(bias_head: np.ndarray, title: str) -> go.Figure:
    """One head's bias [q, k] over positions (query rows top to bottom)."""
    b = np.asarray(bias_head, dtype=np.float32)
    lim = float(np.max(np.abs(b))) or 1.0
    q = [str(i) for i in range(b.shape[0])]
    k = [str(j) for j in range(b.shape[1])]
    return matrix_heatmap(b, q, k, title=title, value_name=N_("bias"), colorscale=SCORE_COLORSCALE,
                          zmin=-lim, zmax=lim, x_title=_("key position"),
                          y_title=_("query position"), max_cells=MAX_CELLS_SIGNED)


def bias_distance_figure(distances: np.ndarray, bias: np.ndarray, boundaries: Sequence[float],
                         heads: Sequence[int], title: str | None = None) -> go.Figure:
    """Bias against k - q for the chosen heads; dotted lines where the bucket changes."""
    fig = go.Figure()
    for h in heads:
        fig.add_trace(go.Scatter(x=f32(distances), y=f32(bias[h]), mode="lines",
                                 line_shape="hv", name=_("head {h}").format(h=h),
                                 hovertemplate=_("head {h}").format(h=h) + ", k−q = %{x}: %{y:.4f}"
                                               "<extra></extra>"))
    for x in boundaries:
        fig.add_vline(x=x, line_dash="dot", line_color="#999999", line_width=1)
    fig.update_xaxes(title=_("relative position k − q (key after query > 0)"))
    fig.update_yaxes(title=_("bias added to the logit"))
    return base_layout(fig, title or _("Bias by distance (dotted: bucket edges)"))


def xl_terms_figure(terms: dict[str, np.ndarray], tokens: Sequence[str] | None = None
                    ) -> go.Figure:
    """The four Transformer-XL terms and their sum on one colour scale."""
    names = list(terms)
    fig = make_subplots(rows=1, cols=len(names), subplot_titles=[_(n) for n in names],
                        horizontal_spacing=0.03)
    lim = max(float(np.max(np.abs(t))) for t in terms.values()) or 1.0
    n = next(iter(terms.values())).shape[0]
    ticks = [plot_text(t) for t in tokens] if tokens is not None and len(tokens) == n else \
        [str(i) for i in range(n)]
    for c, name in enumerate(names, start=1):
        fig.add_trace(go.Heatmap(
            z=f32(terms[name]), colorscale=SCORE_COLORSCALE, zmin=-lim, zmax=lim,
            showscale=c == len(names), name=name,
            hovertemplate="i %{y}, j %{x}: %{z:.3f}<extra>" + _(name) + "</extra>"), row=1, col=c)
        fig.update_yaxes(autorange="reversed", tickvals=list(range(n)), ticktext=ticks,
                         title=_("query i") if c == 1 else None, row=1, col=c)
        fig.update_xaxes(tickvals=list(range(n)), ticktext=ticks, title=_("key j"), row=1, col=c)
    return base_layout(fig, _("Transformer-XL score = a + b + c + d"), height=360)
