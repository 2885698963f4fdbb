"""Sentence pairs and BERT's input: an attention heatmap with the segment stripe and bold
special tokens, the norms of the three embedding parts, and one token's three rows."""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
import plotly.graph_objects as go

from viz_core.i18n import N_, _

from ..lessons.embeddings import EmbeddingParts, segment_runs
from .common import SCORE_COLORSCALE, base_layout, f32, plot_text, unique_labels
from .heatmap import matrix_heatmap

SEGMENT_COLORS = ["#1f77b4", "#ff7f0e", "#2ca02c", "#9467bd"]
STRIPE_PX = (3, 13)  # the segment stripes: from 3 to 13 px outside the plot
# the three parts of BERT's input embedding and their sum, as the figures name them
PART_NAMES = {"token": N_("token"), "segment": N_("segment"), "position": N_("position"),
              "total": N_("sum")}
SPECIALS = {"[CLS]", "[SEP]", "<s>", "</s>", "[PAD]", "<pad>"}


def segment_heatmap(pattern_head: np.ndarray, tokens: Sequence[str], segments: Sequence[int],
                    title: str | None = None) -> go.Figure:
    """One head's attention with the segment of every token as a coloured stripe above the
    keys and left of the queries (A blue, B orange), and [CLS]/[SEP] ticks in bold."""
    fig = matrix_heatmap(pattern_head, tokens, tokens, title=title or _("attention"))
    if len(fig.data[0].x) != len(tokens):
        return fig  # pooled: per-token stripes would not line up
    for a, b, s in segment_runs(list(segments)):
        color = SEGMENT_COLORS[s % len(SEGMENT_COLORS)]
        label = "AB"[s] if s in (0, 1) else str(s)
        # Stripes of a fixed width in pixels just outside the plot: under the keys (the top
        # holds their labels) and left of the queries, whose labels stand off past the stripe.
        fig.add_shape(type="rect", xref="x", yref="paper", x0=a - 0.5, x1=b - 0.5,
                      ysizemode="pixel", yanchor=0, y0=-STRIPE_PX[1], y1=-STRIPE_PX[0],
                      fillcolor=color, line_width=0)
        fig.add_shape(type="rect", xref="paper", yref="y", y0=a - 0.5, y1=b - 0.5,
                      xsizemode="pixel", xanchor=0, x0=-STRIPE_PX[1], x1=-STRIPE_PX[0],
                      fillcolor=color, line_width=0)
        fig.add_annotation(xref="x", yref="paper", x=(a + b - 1) / 2, y=0,
                           yshift=-STRIPE_PX[1] - 2, text=_("segment {label}").format(label=label),
                           showarrow=False, yanchor="top", font=dict(color=color))
    fig.update_yaxes(ticklabelstandoff=STRIPE_PX[1] + 4)
    for axis in (fig.layout.xaxis, fig.layout.yaxis):
        if axis.ticktext:
            axis.ticktext = [f"<b>{t}</b>" if t in SPECIALS else t for t in axis.ticktext]
    fig.update_layout(margin=dict(l=90, b=70))
    return fig


def embedding_norms_figure(parts: EmbeddingParts) -> go.Figure:
    """Grouped bars per token: ‖token‖, ‖segment‖, ‖position‖ and ‖sum‖."""
    labels = unique_labels(parts.tokens)
    norms = parts.norms()
    fig = go.Figure()
    for name in ("token", "segment", "position", "total"):
        shown = _(PART_NAMES[name])
        fig.add_trace(go.Bar(x=labels, y=f32(norms[name]), name=shown,
                             hovertemplate="%{x}: ‖" + shown + "‖ = %{y:.3f}<extra></extra>"))
    fig.update_xaxes(type="category", tickmode="array", tickvals=labels,
                     ticktext=[plot_text(t) for t in parts.tokens], title=_("token"))
    fig.update_yaxes(title=_("L2 norm"))
    return base_layout(fig, _("Norm of each part of the input embedding"), barmode="group")


def embedding_rows_figure(parts: EmbeddingParts, i: int) -> go.Figure:
    """Token i's rows: token, segment, position, their sum and LayerNorm(sum), by dimension."""
    rows = np.stack([parts.token[i], parts.segment[i], parts.position[i], parts.total[i],
                     parts.normed[i]])
    names = [_(PART_NAMES[n]) for n in ("token", "segment", "position", "total")]
    names.append(f"LayerNorm({names[-1]})")
    lim = float(np.max(np.abs(rows[:4]))) or 1.0
    fig = go.Figure(go.Heatmap(z=f32(rows), y=names, colorscale=SCORE_COLORSCALE, zmin=-lim,
                               zmax=lim, hovertemplate="%{y}, " + _("dim {d}").format(d="%{x}")
                               + ": %{z:.4f}<extra></extra>"))
    fig.update_yaxes(autorange="reversed")
    fig.update_xaxes(title=_("dimension"))
    return base_layout(fig, _("{plot_text}: token + segment + position = sum").format(
                                plot_text=plot_text(parts.tokens[i])),
                       height=300)
