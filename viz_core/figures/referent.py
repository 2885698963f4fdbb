"""Where "it" looks, sentence beside sentence: one head's attention row from the pronoun's
query over the source tokens, the noun it refers to in blue and the other noun in orange
(analysis.referent; the Attention page's "it follows the adjective" box)."""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
import plotly.graph_objects as go
from plotly.subplots import make_subplots

from viz_core.i18n import _

from .common import TITLE_PX, f32, label_px, layout_dict, plot_text, title_dict, unique_labels

RIGHT_COLOR = "#1f77b4"  # the noun "it" refers to
WRONG_COLOR = "#ff7f0e"  # the other noun
OTHER_COLOR = "#c7c7c7"


def referent_panels(panels: Sequence[dict], title: str | None = None) -> go.Figure:
    """One bar chart per panel, side by side, on one 0-1 weight axis.

    panels: dicts with "title" (short: a subplot title), "tokens" (the keys), "weights"
    (float [len(tokens)], one attention row), "right" and "wrong" (key positions of the noun
    the pronoun refers to and of the other one)."""
    if not panels:
        raise ValueError("need at least one panel")
    for p in panels:
        if len(p["weights"]) != len(p["tokens"]):
            raise ValueError("weights and tokens differ in length")
    fig = make_subplots(rows=1, cols=len(panels), shared_yaxes=True, horizontal_spacing=0.06,
                        subplot_titles=[plot_text(p["title"]) for p in panels])
    longest = 0
    for i, p in enumerate(panels, start=1):
        labels = unique_labels(p["tokens"])
        longest = max(longest, label_px(labels))
        colors = [RIGHT_COLOR if k == p["right"] else WRONG_COLOR if k == p["wrong"]
                  else OTHER_COLOR for k in range(len(labels))]
        w = f32(np.asarray(p["weights"]))
        fig.add_trace(go.Bar(x=labels, y=w, marker_color=colors, showlegend=False,
                             text=[f"{v:.2f}" if k in (p["right"], p["wrong"]) else ""
                                   for k, v in enumerate(w)], textposition="outside",
                             cliponaxis=False,
                             hovertemplate="%{x}: %{y:.3f}<extra></extra>"), row=1, col=i)
        fig.update_xaxes(tickangle=-90, row=1, col=i, categoryorder="array",
                         categoryarray=labels)
    fig.update_yaxes(range=[0, 1.12], title_text=_("attention weight"), row=1, col=1)
    fig.update_layout(**layout_dict(title and title_dict(title, above=24),
                                    height=TITLE_PX + 60 + 280 + longest,
                                    margin=dict(t=TITLE_PX + 40, b=longest + 20)))
    return fig
