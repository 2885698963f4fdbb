"""Inside one head, for one query token: scaled dot-product attention step by step.

    scores = q · k_j / sqrt(d_k);  blocked keys -> -inf;  w = softmax(scores);  z = sum_j w_j v_j

Models with a logit softcap (Gemma 2) squash the scores before masking:
scores <- cap * tanh(scores / cap), so no logit leaves (-cap, cap); `softcap_figure` draws
each key's score before and after the cap on the tanh curve.

`head_internals` recomputes every intermediate from the block's own q, k, v and mask (numpy,
float64), so each panel shows numbers the page can check against the model's pattern and z.
`inside_head_figures` turns them into one small figure per step, in order.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING

import numpy as np
import plotly.graph_objects as go

from viz_core.i18n import _

from ..analysis.heads import masked_softmax
from .common import BLOCKED_COLOR, SCORE_COLORSCALE, base_layout, f32, token_axis, unique_labels

if TYPE_CHECKING:  # type hints only: figures read traces, they never capture
    from ..capture.trace import BlockTrace


MAX_KEY_ROWS = 64  # keys drawn one row (or one "−∞" label) each, at most


def head_internals(q: np.ndarray, k: np.ndarray, v: np.ndarray, mask: np.ndarray | None,
                   query_index: int, softcap: float | None = None,
                   scaling: float | None = None) -> dict[str, np.ndarray]:
    """Every step for query `query_index` of one head. q [nq, d_k], k and v [nk, d_k],
    mask bool [nq, nk] (True = blocked) or None; softcap: the model's logit cap (None: none);
    scaling: what q · k is multiplied by (None: 1 / sqrt(d_k)).

    Keys: q [d], k [nk, d], products [nk, d] (q * k elementwise), raw [nk] (q · k),
    scaled [nk] (raw * scaling), capped [nk] (softcap * tanh(scaled / softcap), only with a
    softcap), blocked bool [nk], masked [nk] (-inf where blocked), weights [nk] (softmax,
    zeros if every key is blocked), weighted_v [nk, d], z [d].
    """
    qv = np.asarray(q, dtype=np.float64)[query_index]
    kk = np.asarray(k, dtype=np.float64)
    vv = np.asarray(v, dtype=np.float64)
    d_k = qv.shape[-1]
    products = qv[None, :] * kk  # (nk, d)
    raw = products.sum(axis=-1)  # (nk,)
    scaled = raw * (1.0 / np.sqrt(d_k) if scaling is None else float(scaling))
    # the softcap acts before the mask (blocked keys become -inf whatever their score)
    logits = scaled if softcap is None else softcap * np.tanh(scaled / softcap)
    blocked = (np.zeros(len(kk), dtype=bool) if mask is None
               else np.asarray(mask, dtype=bool)[query_index])
    masked = np.where(blocked, -np.inf, logits)
    weights = masked_softmax(logits, blocked).astype(np.float64)
    weighted_v = weights[:, None] * vv  # (nk, d)
    steps = {"q": qv, "k": kk, "products": products, "raw": raw, "scaled": scaled}
    if softcap is not None:
        steps["capped"] = logits
    return {
        **steps, "blocked": blocked, "masked": masked, "weights": weights,
        "weighted_v": weighted_v, "z": weighted_v.sum(axis=0),
    }


def softcap_figure(before: np.ndarray, after: np.ndarray, softcap: float,
                   key_tokens: Sequence[str], title: str = "logit softcap",
                   blocked: np.ndarray | None = None) -> go.Figure:
    """One query's scores before (x) and after (y) the cap, one marker per key, on the curve
    y = cap * tanh(x / cap) with the asymptotes ±cap. Blocked keys are left out (the mask
    makes them -inf after the cap anyway)."""
    x, y = f32(before), f32(after)
    keep = np.ones(len(x), dtype=bool) if blocked is None else ~np.asarray(blocked, bool)
    labels = unique_labels(key_tokens)
    c = float(softcap)
    reach = max(2.5 * c, float(np.max(np.abs(x[keep]))) * 1.1 if keep.any() else 0.0)
    grid = np.linspace(-reach, reach, 201)
    fig = go.Figure()
    fig.add_trace(go.Scatter(x=f32(grid), y=f32(c * np.tanh(grid / c)), mode="lines",
                             name=_("{c:g}·tanh(s/{c:g})").format(c=c), line=dict(color="#999999"),
                             hoverinfo="skip"))
    fig.add_trace(go.Scatter(x=f32(grid), y=f32(grid), mode="lines", name=_("no cap (y = s)"),
                             line=dict(color="#cccccc", dash="dot"), hoverinfo="skip"))
    idx = np.nonzero(keep)[0]
    fig.add_trace(go.Scatter(
        x=x[idx], y=y[idx], mode="markers", name=_("this query's keys"),
        text=[labels[i] for i in idx], marker=dict(color="#3b6fb6", size=9),
        hovertemplate="%{text}: %{x:.4f} → %{y:.4f}<extra>softcap</extra>"))
    for side in (-c, c):
        fig.add_hline(y=side, line=dict(color=BLOCKED_COLOR, dash="dash", width=1))
    fig.update_xaxes(title=_("score before the cap"))
    fig.update_yaxes(title=_("score after the cap"), range=[-1.3 * c, 1.3 * c])
    return base_layout(fig, title, height=320)


def _vector_fig(vec: np.ndarray, title: str, name: str) -> go.Figure:
    """A d-vector as a one-row heatmap (dims left to right)."""
    lim = float(np.max(np.abs(vec))) or 1.0
    fig = go.Figure(go.Heatmap(
        z=f32(vec)[None, :], colorscale=SCORE_COLORSCALE, zmin=-lim, zmax=lim, name=name,
        hovertemplate=_("dim {d}").format(d="%{x}") + ": %{z:.4f}<extra>" + name + "</extra>",
        colorbar=dict(thickness=10)))
    fig.update_yaxes(visible=False)
    fig.update_xaxes(title=_("dimension"))
    # tall enough for a colour bar whose three tick labels do not touch
    return base_layout(fig, title, height=220, margin=dict(l=30, r=20, b=40))


def _key_matrix_fig(m: np.ndarray, key_tokens: Sequence[str], title: str,
                    name: str, rows: np.ndarray | None = None) -> go.Figure:
    """[nk, d] matrix, one row per key (top to bottom), dims left to right; ``rows``: only
    these keys, their tick labels with their positions ("1234·cat")."""
    labels = unique_labels(key_tokens)
    if rows is not None:
        m = m[rows]
        labels = key_tokens = [labels[i] for i in rows]
    lim = float(np.max(np.abs(m))) or 1.0
    fig = go.Figure(go.Heatmap(
        z=f32(m), y=labels, colorscale=SCORE_COLORSCALE, zmin=-lim, zmax=lim, name=name,
        hovertemplate="%{y}, " + _("dim {d}").format(d="%{x}") + ": %{z:.4f}<extra>" + name
        + "</extra>",
        colorbar=dict(thickness=10)))
    fig.update_yaxes(**token_axis(labels, key_tokens, "key", reversed_=True))
    fig.update_xaxes(title=_("dimension"))
    return base_layout(fig, title, height=max(220, 20 * len(labels) + 110))  # 20 px a row


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
        fig.add_trace(go.Scatter(  # many "−∞" labels: the browser measures each one
            x=[labels[i] for i in idx], y=f32(np.zeros(len(idx))),
            mode="markers+text" if len(idx) <= MAX_KEY_ROWS else "markers",
            marker=dict(symbol="x", color=BLOCKED_COLOR, size=12, line=dict(width=1)),
            text="−∞", textposition="top center", name=_("blocked → −∞"),
            hovertemplate="%{x}: −∞ (" + _("blocked") + ")<extra></extra>"))
    fig.update_xaxes(**token_axis(labels, key_tokens, "key"))
    fig.update_yaxes(title=name, range=yrange)
    return base_layout(fig, title, height=260, showlegend=bool(blocked is not None
                                                               and blocked.any()))


def inside_head_figures(
    q: np.ndarray, k: np.ndarray, v: np.ndarray, mask: np.ndarray | None,
    query_index: int, query_tokens: Sequence[str], key_tokens: Sequence[str],
    softcap: float | None = None, scaling: float | None = None,
    before_cap: np.ndarray | None = None, after_cap: np.ndarray | None = None,
) -> dict[str, go.Figure]:
    """One figure per step, in computation order (dict keeps the order):
    "q", "k", "products", "raw", "scaled", ["softcap",] "masked", "weights", "weighted_v", "z".

    With a softcap, the "softcap" panel draws before_cap / after_cap [nk] (the model's own
    score row before and after the cap, e.g. ``block.raw_scores`` and ``block.scores``)
    when given, else the recomputed ones.
    """
    s = head_internals(q, k, v, mask, query_index, softcap=softcap, scaling=scaling)
    tok = query_tokens[query_index]
    d_k = len(s["q"])
    blocked = s["blocked"]
    scale_text = (_("divided by √d_k = √{d_k} = {root:.3g}").format(d_k=d_k, root=np.sqrt(d_k))
                  if scaling is None else
                  _("times the model's scaling {scaling:.4g}").format(scaling=float(scaling)))
    logits = s.get("capped", s["scaled"])
    rows, rows_note = None, ""
    if len(key_tokens) > MAX_KEY_ROWS:  # 20 px a row: long inputs keep the weightiest keys
        rows = np.sort(np.argsort(-s["weights"], kind="stable")[:MAX_KEY_ROWS])
        rows_note = _(" · the {shown} of {n_keys} keys with the largest weights").format(
            shown=MAX_KEY_ROWS, n_keys=len(key_tokens))
    steps: list[tuple[str, str, object]] = [
        ("q", _("query vector q of {token}").format(token=f"{query_index}·{tok}"),
         lambda t: _vector_fig(s["q"], t, "q")),
        ("k", _("key vectors k_j (one row per key)") + rows_note,
         lambda t: _key_matrix_fig(s["k"], key_tokens, t, "k", rows)),
        ("products", _("elementwise products q ⊙ k_j (row sums = q·k_j)") + rows_note,
         lambda t: _key_matrix_fig(s["products"], key_tokens, t, "q⊙k", rows)),
        ("raw", _("raw scores q · k_j"), lambda t: _key_bar_fig(s["raw"], key_tokens, t, "q·k")),
        ("scaled", scale_text, lambda t: _key_bar_fig(s["scaled"], key_tokens, t, _("score"))),
    ]
    if softcap is not None:
        before = s["scaled"] if before_cap is None else before_cap
        after = s["capped"] if after_cap is None else after_cap
        steps.append(("softcap", _("softcap: s → {cap:g}·tanh(s / {cap:g}), before and "
                                   "after").format(cap=softcap),
                      lambda t: softcap_figure(before, after, softcap, key_tokens, t,
                                               blocked=blocked)))
    steps += [
        ("masked", _("mask: blocked keys → −∞"),
         lambda t: _key_bar_fig(logits, key_tokens, t, _("masked score"), blocked=blocked)),
        ("weights", _("softmax → attention weights"),
         lambda t: _key_bar_fig(s["weights"], key_tokens, t, _("weight"), blocked=blocked,
                                yrange=[0, 1])),
        ("weighted_v", _("weighted values w_j · v_j (column sums = z)") + rows_note,
         lambda t: _key_matrix_fig(s["weighted_v"], key_tokens, t, "w·v", rows)),
        ("z", _("output z = Σ_j w_j v_j (this head, this query)"),
         lambda t: _vector_fig(s["z"], t, "z")),
    ]
    return {name: build(f"{i} · {title}") for i, (name, title, build) in enumerate(steps, 1)}


def block_inside_head(block: BlockTrace, head: int, query_index: int) -> dict[str, go.Figure]:
    """Convenience wrapper for a BlockTrace that captured q, k, v. With a softcap (Gemma 2),
    the softcap panel shows the model's own scores before (``raw_scores``) and after
    (``scores``) the cap."""
    if block.q is None or block.k is None or block.v is None:
        raise ValueError(f"{block.name}: this backend did not capture q, k, v")
    before = after = None
    if block.softcap is not None:
        before = block.raw_scores[head, query_index]
        after = block.scores[head, query_index]
    return inside_head_figures(block.q[head], block.k[head], block.v[head], block.mask,
                               query_index, block.query_tokens, block.key_tokens,
                               softcap=block.softcap, scaling=getattr(block, "scaling", None),
                               before_cap=before, after_cap=after)
