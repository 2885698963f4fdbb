"""Attention heatmap of one head (or of any [q, k] matrix over tokens).

Orientation is the matrix one: query rows top to bottom, keys left to right, so a causal
pattern is lower-triangular on screen just as on paper. Cross-attention: target queries
(rows) x source keys (columns).
"""

from __future__ import annotations

import json
from collections.abc import Sequence

import numpy as np
import plotly.graph_objects as go

from ..trace import BlockTrace
from .common import (
    BLOCKED_COLOR,
    BLOCKED_NOTE,
    SCORE_COLORSCALE,
    WEIGHT_COLORSCALE,
    blocked_marks,
    check_matrix,
    f32,
    json_bytes,
    layout_dict,
    pool2d,
    pool_factor,
    pooled_labels,
    token_axis,
)

# Cell budgets. Weights lie in [0, 1] and a full 512 x 512 float32 head (MiniLM's longest
# input) serialises to ~1.47 MB, so weights stay exact up to that size. Signed values
# (scores, similarities) have float32 bytes that base64-encode into many "/" characters,
# which plotly escapes as "\u002f" (6 bytes), so they get a smaller budget.
MAX_CELLS_WEIGHTS = 512 * 512
MAX_CELLS_SIGNED = 2 * 256 * 256
# Whatever the cell count, z + labels may take at most this many JSON bytes (the escaped
# "/" count depends on the data), so that one heatmap figure stays under 1.5 MB; the rest
# (colour scale, axes, template) is a few kB.
MAX_PAYLOAD_BYTES = 1_490_000


def matrix_heatmap(
    z: np.ndarray,
    query_tokens: Sequence[str],
    key_tokens: Sequence[str],
    *,
    mask: np.ndarray | None = None,
    title: str | None = None,
    value_name: str = "weight",
    colorscale: str = WEIGHT_COLORSCALE,
    zmin: float | None = 0.0,
    zmax: float | None = 1.0,
    zmid: float | None = None,
    x_title: str = "key",
    y_title: str = "query",
    max_cells: int | None = MAX_CELLS_WEIGHTS,
) -> go.Figure:
    """Heatmap of a [q, k] matrix; blocked cells (mask True) become NaN: grey, no colour.

    Hover reads "query -> key: value". The x/y data are unique labels ("3·the"), tick text
    is the bare token, so repeated words keep their own rows/columns. Beyond max_cells the
    matrix is mean-pooled f x f (labels become ranges, "8–15·the") to bound the payload;
    the title says so.
    """
    z = np.asarray(z)
    check_matrix(z, query_tokens, key_tokens)
    zz = f32(z).copy()
    if mask is not None:
        mask = np.asarray(mask, dtype=bool)
        zz[mask] = np.nan  # NaN is drawn as a gap showing the grey plot background
    f = pool_factor(*zz.shape, max_cells)
    full = zz
    while True:
        zz = pool2d(full, how="mean", factor=f) if f > 1 else full  # NaN-aware pooling
        xl, xt = pooled_labels(key_tokens, f)
        yl, yt = pooled_labels(query_tokens, f)
        payload = json_bytes(zz) + len(json.dumps(xl)) + len(json.dumps(yl))
        if payload <= MAX_PAYLOAD_BYTES:
            break
        f += 1
    if f > 1:
        title = f"{title or ''} (mean-pooled {f}×{f})"
    traces = [go.Heatmap(
        z=zz, x=xl, y=yl, colorscale=colorscale, zmin=zmin, zmax=zmax, zmid=zmid,
        hoverongaps=False, colorbar=dict(title=dict(text=value_name), thickness=12),
        hovertemplate=f"%{{y}} → %{{x}}: %{{z:.4f}}<extra>{value_name}</extra>",
        name=value_name,
    )]
    if mask is not None and f == 1:
        marks = blocked_marks(mask, xl, yl)
        if marks is not None:
            traces.append(marks)
    note = f"   <sup>{BLOCKED_NOTE}</sup>" if mask is not None and mask.any() else ""
    # one validated layout (each update_* call would re-validate and copy the figure)
    fig = go.Figure(traces, layout=layout_dict(
        (title or "") + note, xaxis={**token_axis(xl, xt, x_title), "side": "top"},
        yaxis=token_axis(yl, yt, y_title, reversed_=True),
        plot_bgcolor=BLOCKED_COLOR if mask is not None else "white", showlegend=False))
    return fig


def attention_heatmap(
    pattern: np.ndarray,
    query_tokens: Sequence[str],
    key_tokens: Sequence[str],
    *,
    mask: np.ndarray | None = None,
    scores: np.ndarray | None = None,
    view: str = "weights",
    title: str | None = None,
) -> go.Figure:
    """One head: pattern [q, k] (softmax weights) or, with view="scores", scores [q, k].

    weights: colour scale fixed to [0, 1] so heads and layers compare at a glance.
    scores: QK^T/sqrt(d_k) before masking, diverging colours centred on 0; blocked cells
    grey (NaN) and marked ✕ on small inputs, so -inf never looks like a colour extreme.
    """
    if view == "weights":
        return matrix_heatmap(pattern, query_tokens, key_tokens, mask=mask, title=title)
    if view == "scores":
        if scores is None:
            raise ValueError("this backend captured no pre-softmax scores (scores is None)")
        allowed = np.asarray(scores)[~np.asarray(mask, bool)] if mask is not None else scores
        lim = float(np.nanmax(np.abs(allowed))) if np.size(allowed) else 1.0
        return matrix_heatmap(scores, query_tokens, key_tokens, mask=mask, title=title,
                              value_name="score", colorscale=SCORE_COLORSCALE,
                              zmin=-lim, zmax=lim, zmid=None, max_cells=MAX_CELLS_SIGNED)
    raise ValueError(f"view must be 'weights' or 'scores', not {view!r}")


def block_heatmap(block: BlockTrace, head: int, view: str = "weights") -> go.Figure:
    """Convenience wrapper: one head of a BlockTrace."""
    scores = None if block.scores is None else block.scores[head]
    return attention_heatmap(
        block.pattern[head], block.query_tokens, block.key_tokens, mask=block.mask,
        scores=scores, view=view, title=f"{block.name} · head {head} · {view}",
    )
