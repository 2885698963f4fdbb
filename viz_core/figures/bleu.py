"""Per-token log-probabilities of the n-best hypotheses."""

from __future__ import annotations

import plotly.graph_objects as go

from viz_core.i18n import _

from ..lessons.bleu import token_logprobs
from .common import base_layout, f32, plot_text


def token_logprob_figure(tree, max_hypotheses: int = 8) -> go.Figure:
    """One line per hypothesis (best first): log P(token | prefix) at each step."""
    fig = go.Figure()
    for rank, h in enumerate(tree.hypotheses[:max_hypotheses], start=1):
        pairs = token_logprobs(tree, h)
        fig.add_trace(go.Scatter(
            x=f32(range(1, len(pairs) + 1)), y=f32([lp for _, lp in pairs]),
            mode="lines+markers", name=f"#{rank}", text=[plot_text(t) for t, _ in pairs],
            hovertemplate=f"#{rank}, " + _("step") + " %{x}: %{text} log P %{y:.3f}<extra></extra>"))
    fig.update_xaxes(title=_("step"), dtick=1)
    fig.update_yaxes(title=_("log P(token | prefix)"))
    return base_layout(fig, _("Per-token log-probabilities of the n-best"))
