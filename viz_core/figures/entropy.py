"""Head entropy (viz_core.analysis.entropy): blocks (rows, model order) x heads (columns)."""

from __future__ import annotations

import numpy as np
import pandas as pd
import plotly.graph_objects as go

from viz_core.i18n import N_, _

from ..model.choices import EntropyMeasure, choose
from .heatmap import matrix_heatmap

TITLES = {"entropy": N_("Mean attention entropy per head (nats)"),
          "normalised": N_("Mean attention entropy per head / log(allowed keys)")}
MEASURE_NAMES = {"entropy": N_("entropy"), "normalised": N_("normalised")}


def entropy_matrix(frame: pd.DataFrame, measure: EntropyMeasure = "normalised"
                   ) -> tuple[np.ndarray, list[str], list[str]]:
    """(float64 [block, head] of one column of head_entropy's table, NaN where a block has
    fewer heads; the block names in the table's order; the head labels "h0" ...)."""
    measure = choose(measure, EntropyMeasure, "measure")
    blocks = list(dict.fromkeys(frame["block"]))
    width = int(frame["head"].max()) + 1 if len(frame) else 0
    m = np.full((len(blocks), width), np.nan)
    row = {b: i for i, b in enumerate(blocks)}
    for b, h, v in zip(frame["block"], frame["head"], frame[measure]):
        m[row[b], int(h)] = float(v)
    return m, blocks, [f"h{h}" for h in range(width)]


def head_entropy_heatmap(frame: pd.DataFrame, measure: EntropyMeasure = "normalised",
                         title: str | None = None) -> go.Figure:
    """Heatmap of head_entropy's ``measure``: "normalised" on a fixed 0..1 scale (1 =
    uniform over the allowed keys), "entropy" in nats from 0 to the largest value."""
    m, blocks, heads = entropy_matrix(frame, measure)
    finite = m[np.isfinite(m)]
    top = 1.0 if measure == "normalised" else float(finite.max()) if finite.size else 1.0
    fig = matrix_heatmap(m, blocks, heads, title=title or _(TITLES[measure]),
                         value_name=MEASURE_NAMES[measure], colorscale="Viridis", zmin=0.0,
                         zmax=max(top, 1e-9), x_title=_("head"), y_title="", max_cells=None)
    fig.update_xaxes(side="bottom", automargin=True)  # not an attention matrix: keys on top
    fig.update_layout(margin=dict(t=60))
    return fig
