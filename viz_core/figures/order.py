"""Order-blindness figures: how far each layer's heads move when the tokens are shuffled,
with positions on and off, and one head's pattern next to its shuffled-and-restored twin."""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
import plotly.graph_objects as go

from viz_core.i18n import _

from .common import base_layout, f32
from .heatmap import matrix_heatmap


def layer_difference_figure(layers: Sequence[str], on: Sequence[float],
                            off: Sequence[float] | None) -> go.Figure:
    """Per layer: the largest |pattern(original) - restored pattern(shuffled)| over heads."""
    fig = go.Figure()
    fig.add_trace(go.Bar(x=list(layers), y=f32(on), name=_("positions on"),
                         marker_color="#1f77b4",
                         hovertemplate="%{x}: %{y:.2e}<extra>" + _("positions on") + "</extra>"))
    if off is not None:
        fig.add_trace(go.Bar(x=list(layers), y=f32(off), name=_("positions off"),
                             marker_color="#ff7f0e",
                             hovertemplate="%{x}: %{y:.2e}<extra>" + _("positions off") + "</extra>"))
    fig.update_layout(barmode="group")
    fig.update_yaxes(title=_("max |Δ weight| over heads"), rangemode="tozero")
    return base_layout(fig, _("Does shuffling the tokens change the attention?"))


def restored_heatmap(pattern: np.ndarray, labels: Sequence[str], title: str) -> go.Figure:
    """One head's [q, k] pattern, axes in the original sentence order."""
    return matrix_heatmap(f32(pattern), list(labels), list(labels), title=title)
