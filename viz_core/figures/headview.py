"""Head view (in the spirit of BertViz): query tokens on the left, key tokens on the right,

joined by lines whose opacity is the attention weight, one colour per head.

Efficiency: every line of one head whose weight falls in the same opacity bucket goes into a
single trace as NaN-separated segments, so a head costs at most N_BUCKETS traces, not one
trace per edge. Long inputs draw only the strongest edges (top-k keys per query, above a
threshold) within an edge budget.

Long inputs: up to HEADVIEW_MAX tokens the whole block is drawn; beyond, ``block_head_view``
draws a window of at most HEADVIEW_WINDOW queries x keys, read with ``block.window`` (the
weights are those of the full softmax over every key, so a row's lines may sum to < 1).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING

import numpy as np
import plotly.graph_objects as go

from viz_core.i18n import _

from .common import base_layout, f32, plot_text

if TYPE_CHECKING:  # type hints only: figures read traces, they never capture
    from ..capture.trace import BlockTrace

HEAD_COLORS = (
    "#1f77b4", "#ff7f0e", "#2ca02c", "#d62728", "#9467bd", "#8c564b",
    "#e377c2", "#7f7f7f", "#bcbd22", "#17becf", "#393b79", "#637939",
    "#8c6d31", "#843c39", "#7b4173", "#3182bd",
)
N_BUCKETS = 5  # opacity levels: weights in [0, .2), [.2, .4), ... [.8, 1]
MAX_EDGES = 20_000  # all heads together; decides the automatic top-k for long inputs
HEADVIEW_MAX = 512  # longest block drawn whole
HEADVIEW_WINDOW = 128  # longest side of a window of a longer block


def bucket_of(weight: np.ndarray, n_buckets: int = N_BUCKETS) -> np.ndarray:
    """Opacity bucket index of each weight in [0, 1]."""
    return np.minimum((np.asarray(weight) * n_buckets).astype(int), n_buckets - 1)


def bucket_opacity(bucket: int, n_buckets: int = N_BUCKETS) -> float:
    """Opacity of a bucket: its midpoint weight, floored so faint lines stay visible."""
    return max(0.08, (bucket + 0.5) / n_buckets)


def select_edges(pattern_head: np.ndarray, top_k: int | None, threshold: float):
    """(q, k, w) arrays of the edges to draw for one head [q, k]."""
    p = np.asarray(pattern_head, dtype=np.float32)
    keep = p > threshold
    if top_k is not None and top_k < p.shape[1]:
        # k-th largest per row; ties at the cut may keep a few more than top_k
        kth = -np.partition(-p, top_k - 1, axis=1)[:, top_k - 1: top_k]
        keep &= p >= kth
    q, k = np.nonzero(keep)
    return q, k, p[q, k]


def head_view(
    pattern: np.ndarray,
    query_tokens: Sequence[str],
    key_tokens: Sequence[str],
    *,
    heads: Sequence[int] | None = None,
    top_k: int | None = None,
    threshold: float = 0.02,
    max_edges: int = MAX_EDGES,
    title: str | None = None,
    q_start: int = 0,
    k_start: int = 0,
) -> go.Figure:
    """Head view of one block: pattern [head, q, k] (or {head: [q, k]} for some heads).

    heads: which heads to draw (default all). top_k: keys per query to keep; None = all
    when they fit in max_edges, otherwise the largest k that fits. threshold: drop weights
    <= threshold (default 0.02: such lines would be near-invisible but cost bytes).
    Each line trace has meta {"head": h, "bucket": b}; its segments are
    (x=0, y=q) -> (x=1, y=k) separated by NaN. q_start / k_start: positions of the first
    query / key when the tokens are a window of a longer input (shown on hover).
    """
    if isinstance(pattern, Mapping):
        p = {int(h): np.asarray(m, dtype=np.float32) for h, m in pattern.items()}
        heads = sorted(p) if heads is None else [int(h) for h in heads]
    else:
        arr = np.asarray(pattern, dtype=np.float32)
        p = dict(enumerate(arr))
        heads = list(range(len(arr))) if heads is None else [int(h) for h in heads]
    nq, nk = len(query_tokens), len(key_tokens)
    if any(p[h].shape != (nq, nk) for h in heads):
        raise ValueError(f"pattern heads {[p[h].shape for h in heads]} do not match the "
                         f"{nq} x {nk} token lists")
    if top_k is None and nq * nk * max(1, len(heads)) > max_edges:
        top_k = max(1, max_edges // (nq * max(1, len(heads))))
    fig = go.Figure()
    for h in heads:
        color = HEAD_COLORS[h % len(HEAD_COLORS)]
        q, k, w = select_edges(p[h], top_k, threshold)
        buckets = bucket_of(w)
        first = True
        for b in range(N_BUCKETS):
            sel = buckets == b
            if not sel.any():
                continue
            n = int(sel.sum())
            xs = np.tile(np.array([0.0, 1.0, np.nan], dtype=np.float32), n)
            ys = np.empty(3 * n, dtype=np.float32)
            ys[0::3], ys[1::3], ys[2::3] = q[sel], k[sel], np.nan
            fig.add_trace(go.Scatter(
                x=xs, y=ys, mode="lines", opacity=bucket_opacity(b),
                line=dict(color=color, width=2), name=_("head {head}").format(head=h),
                legendgroup=f"head {h}",
                showlegend=first, hoverinfo="skip", meta={"head": h, "bucket": b},
            ))
            first = False
    # Token columns: text markers, hover names the token and its position.
    for x, toks, side, start in ((0.0, query_tokens, "query", q_start),
                                 (1.0, key_tokens, "key", k_start)):
        shown = _(side)
        hover = dict(hovertemplate=f"{shown} %{{y}}: %{{text}}<extra></extra>")
        if start:  # a window: hover names the absolute position, not the row
            hover = dict(hovertext=[f"{shown} {start + i}: {plot_text(t)}"
                                    for i, t in enumerate(toks)],
                         hovertemplate="%{hovertext}<extra></extra>")
        fig.add_trace(go.Scatter(
            x=f32(np.full(len(toks), x)), y=f32(np.arange(len(toks))), mode="text",
            text=[plot_text(t) for t in toks], textposition="middle left" if x == 0 else
            "middle right", name=f"{side} tokens", showlegend=False, **hover,
        ))
    n = max(nq, nk)
    fig.update_xaxes(visible=False, range=[-0.6, 1.6])
    fig.update_yaxes(visible=False, autorange="reversed")  # first token at the top
    note = _(" · top {k} keys per query").format(k=top_k) if top_k is not None and top_k < nk \
        else ""
    note += _(" · weights > {threshold:g}").format(threshold=threshold) if threshold > 0 else ""
    base_layout(fig, (title or _("Head view")) + note, height=min(4000, max(300, 18 * n + 100)),
                legend=dict(title=_("heads"), itemclick="toggle", itemdoubleclick="toggleothers"))
    return fig


def block_head_view(block: BlockTrace, heads: Sequence[int] | None = None,
                    rows: tuple[int, int] | None = None, cols: tuple[int, int] | None = None,
                    **kw) -> go.Figure:
    """Head view of one BlockTrace, reading only the chosen heads (``block.head``).

    Blocks longer than HEADVIEW_MAX need a window: rows (r0, r1) and cols (c0, c1), each of at
    most HEADVIEW_WINDOW positions, read with ``block.window``.
    """
    heads = list(range(block.n_heads)) if heads is None else [int(h) for h in heads]
    n_q, n_k = block.shape[1:]
    if rows is None and cols is None:
        if max(n_q, n_k) > HEADVIEW_MAX:
            raise ValueError(f"{block.name} has {n_q} x {n_k} tokens: the head view draws "
                             f"at most {HEADVIEW_MAX}; give a window (rows, cols)")
        kw.setdefault("title", _("{name} · head view").format(name=block.name))
        return head_view({h: block.head(h) for h in heads}, block.query_tokens,
                         block.key_tokens, heads=heads, **kw)
    r0, r1 = rows if rows is not None else (0, n_q)
    c0, c1 = cols if cols is not None else (0, n_k)
    r0, r1, c0, c1 = max(0, r0), min(n_q, r1), max(0, c0), min(n_k, c1)
    if max(r1 - r0, c1 - c0) > HEADVIEW_WINDOW:
        raise ValueError(f"a head view window is at most {HEADVIEW_WINDOW} queries x keys")
    kw.setdefault("title", _("{name} · head view · queries {r0}–{r1}, keys {c0}–{c1}").format(
        name=block.name, r0=r0, r1=r1 - 1, c0=c0, c1=c1 - 1))
    return head_view({h: block.window(h, (r0, r1), (c0, c1)) for h in heads},
                     block.query_tokens[r0:r1], block.key_tokens[c0:c1], heads=heads,
                     q_start=r0, k_start=c0, **kw)
