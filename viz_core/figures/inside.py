"""Inside one head, for one query token: scaled dot-product attention step by step.

    scores = q · k_j / sqrt(d_k);  blocked keys -> -inf;  w = softmax(scores);  z = sum_j w_j v_j

`head_internals` recomputes every intermediate from the block's own q, k, v and mask (numpy,
float64), so each panel shows numbers the page can check against the model's pattern and z.
`inside_head_figures` turns them into one small figure per step, in order.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
import plotly.graph_objects as go

from ..analysis import masked_softmax
from ..trace import BlockTrace
from .common import (
    BLOCKED_COLOR,
    SCORE_COLORSCALE,
    base_layout,
    f32,
    token_axis,
    unique_labels,
)


def head_internals(q: np.ndarray, k: np.ndarray, v: np.ndarray, mask: np.ndarray | None,
                   query_index: int) -> dict[str, np.ndarray]:
    """Every step for query `query_index` of one head. q [nq, d_k], k and v [nk, d_k],
    mask bool [nq, nk] (True = blocked) or None.

    Keys: q [d], k [nk, d], products [nk, d] (q * k elementwise), raw [nk] (q · k),
    scaled [nk] (raw / sqrt(d_k)), blocked bool [nk], masked [nk] (-inf where blocked),
    weights [nk] (softmax, zeros if every key is blocked), weighted_v [nk, d], z [d].
    """
    qv = np.asarray(q, dtype=np.float64)[query_index]
    kk = np.asarray(k, dtype=np.float64)
    vv = np.asarray(v, dtype=np.float64)
    d_k = qv.shape[-1]
    products = qv[None, :] * kk  # (nk, d)
    raw = products.sum(axis=-1)  # (nk,)
    scaled = raw / np.sqrt(d_k)
    blocked = (np.zeros(len(kk), dtype=bool) if mask is None
               else np.asarray(mask, dtype=bool)[query_index])
    masked = np.where(blocked, -np.inf, scaled)
    weights = masked_softmax(scaled, blocked).astype(np.float64)
    weighted_v = weights[:, None] * vv  # (nk, d)
    return {
        "q": qv, "k": kk, "products": products, "raw": raw, "scaled": scaled,
        "blocked": blocked, "masked": masked, "weights": weights,
        "weighted_v": weighted_v, "z": weighted_v.sum(axis=0),
    }


def _vector_fig(vec: np.ndarray, title: str, name: str) -> go.Figure:
    """A d-vector as a one-row heatmap (dims left to right)."""
    lim = float(np.max(np.abs(vec))) or 1.0
    fig = go.Figure(go.Heatmap(
        z=f32(vec)[None, :], colorscale=SCORE_COLORSCALE, zmin=-lim, zmax=lim, name=name,
        hovertemplate="dim %{x}: %{z:.4f}<extra>" + name + "</extra>",
        colorbar=dict(thickness=10)))
    fig.update_yaxes(visible=False)
    fig.update_xaxes(title="dimension")
    return base_layout(fig, title, height=170, margin=dict(l=30, r=20, t=50, b=40))


def _key_matrix_fig(m: np.ndarray, key_tokens: Sequence[str], title: str,
                    name: str) -> go.Figure:
    """[nk, d] matrix, one row per key (top to bottom), dims left to right."""
    labels = unique_labels(key_tokens)
    lim = float(np.max(np.abs(m))) or 1.0
    fig = go.Figure(go.Heatmap(
        z=f32(m), y=labels, colorscale=SCORE_COLORSCALE, zmin=-lim, zmax=lim, name=name,
        hovertemplate="%{y}, dim %{x}: %{z:.4f}<extra>" + name + "</extra>",
        colorbar=dict(thickness=10)))
    fig.update_yaxes(**token_axis(labels, key_tokens, "key", reversed_=True))
    fig.update_xaxes(title="dimension")
    return base_layout(fig, title, height=max(220, 16 * len(labels) + 90))


def _key_bar_fig(values: np.ndarray, key_tokens: Sequence[str], title: str, name: str,
                 blocked: np.ndarray | None = None, yrange=None) -> go.Figure:
    """One bar per key. Blocked keys (-inf after masking) get no bar but a grey ✕ marker."""
    labels = unique_labels(key_tokens)
    vals = f32(values).copy()
    fig = go.Figure()
    if blocked is not None:
        vals[blocked] = np.nan  # -inf cannot be drawn as a bar; the ✕ marks it instead
    fig.add_trace(go.Bar(x=labels, y=vals, name=name, marker_color="#3b6fb6",
                         hovertemplate="%{x}: %{y:.4f}<extra>" + name + "</extra>"))
    if blocked is not None and blocked.any():
        idx = np.nonzero(blocked)[0]
        fig.add_trace(go.Scatter(
            x=[labels[i] for i in idx], y=f32(np.zeros(len(idx))), mode="markers+text",
            marker=dict(symbol="x", color=BLOCKED_COLOR, size=12, line=dict(width=1)),
            text="−∞", textposition="top center", name="blocked → −∞",
            hovertemplate="%{x}: −∞ (blocked)<extra></extra>"))
    fig.update_xaxes(**token_axis(labels, key_tokens, "key"))
    fig.update_yaxes(title=name, range=yrange)
    return base_layout(fig, title, height=260, showlegend=bool(blocked is not None
                                                               and blocked.any()))


def inside_head_figures(
    q: np.ndarray, k: np.ndarray, v: np.ndarray, mask: np.ndarray | None,
    query_index: int, query_tokens: Sequence[str], key_tokens: Sequence[str],
) -> dict[str, go.Figure]:
    """One figure per step, in computation order (dict keeps the order):
    "q", "k", "products", "raw", "scaled", "masked", "weights", "weighted_v", "z".
    """
    s = head_internals(q, k, v, mask, query_index)
    tok = query_tokens[query_index]
    d_k = len(s["q"])
    blocked = s["blocked"]
    return {
        "q": _vector_fig(s["q"], f"1 · query vector q of {query_index}·{tok}", "q"),
        "k": _key_matrix_fig(s["k"], key_tokens, "2 · key vectors k_j (one row per key)", "k"),
        "products": _key_matrix_fig(
            s["products"], key_tokens, "3 · elementwise products q ⊙ k_j (row sums = q·k_j)",
            "q⊙k"),
        "raw": _key_bar_fig(s["raw"], key_tokens, "4 · raw scores q · k_j", "q·k"),
        "scaled": _key_bar_fig(s["scaled"], key_tokens,
                               f"5 · divided by √d_k = √{d_k} = {np.sqrt(d_k):.3g}", "score"),
        "masked": _key_bar_fig(s["scaled"], key_tokens, "6 · mask: blocked keys → −∞",
                               "masked score", blocked=blocked),
        "weights": _key_bar_fig(s["weights"], key_tokens, "7 · softmax → attention weights",
                                "weight", blocked=blocked, yrange=[0, 1]),
        "weighted_v": _key_matrix_fig(s["weighted_v"], key_tokens,
                                      "8 · weighted values w_j · v_j (column sums = z)", "w·v"),
        "z": _vector_fig(s["z"], "9 · output z = Σ_j w_j v_j (this head, this query)", "z"),
    }


def block_inside_head(block: BlockTrace, head: int, query_index: int) -> dict[str, go.Figure]:
    """Convenience wrapper for a BlockTrace that captured q, k, v."""
    if block.q is None or block.k is None or block.v is None:
        raise ValueError(f"{block.name}: this backend did not capture q, k, v")
    return inside_head_figures(block.q[head], block.k[head], block.v[head], block.mask,
                               query_index, block.query_tokens, block.key_tokens)
