"""Figures over many heads: mean/max over heads, attention rollout, head similarity,
per-head statistics and cross-attention alignment. The numbers come from viz_core.analysis.heads.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING

import numpy as np
import pandas as pd
import plotly.graph_objects as go

from viz_core.i18n import _

from ..analysis import heads as analysis
from .common import base_layout, f32, top_axis
from .heatmap import (
    EXACT_MAX_TOKENS,
    POOLED_SIZE,
    fitted_pool,
    is_long,
    matrix_heatmap,
    pooled_heatmap,
)

if TYPE_CHECKING:  # type hints only: figures read traces, they never capture
    from ..capture.trace import AttentionTrace, BlockTrace


def aggregate_heatmap(pattern: np.ndarray, query_tokens: Sequence[str],
                      key_tokens: Sequence[str], how: str = "mean",
                      mask: np.ndarray | None = None, title: str | None = None) -> go.Figure:
    """Mean or max over heads of one block, pattern [head, q, k] -> one [q, k] heatmap."""
    if how == "mean":
        z = analysis.mean_over_heads(pattern)
    elif how == "max":
        z = analysis.max_over_heads(pattern)
    else:
        raise ValueError(f"how must be 'mean' or 'max', not {how!r}")
    return matrix_heatmap(z, query_tokens, key_tokens, mask=mask,
                          title=title or _("{how} over heads").format(how=_(how)))


def block_aggregate_heatmap(block: BlockTrace, how: str = "mean",
                            exact_max: int = EXACT_MAX_TOKENS, size: int = POOLED_SIZE
                            ) -> go.Figure:
    """Mean or max over the heads of a block: exact up to exact_max tokens; beyond, from
    ``block.overview`` of every head (the mean of block means is the block mean of the mean;
    the max is the max over heads of each head's block means, said in the title)."""
    title = _("{name}: {how} over heads").format(name=block.name, how=_(how))
    if not is_long(block, exact_max):
        return aggregate_heatmap(block.pattern, block.query_tokens, block.key_tokens, how=how,
                                 mask=block.mask, title=title)
    if how not in ("mean", "max"):
        raise ValueError(f"how must be 'mean' or 'max', not {how!r}")
    z, blocked = fitted_pool(block, None, "pattern", size,  # overview: [head, bq, bk]
                             lambda ov: ov.mean(axis=0) if how == "mean" else ov.max(axis=0))
    if how == "max":
        title = f"{block.name}: max over heads of each head's block means"
    n_q, n_k = block.shape[1:]
    return pooled_heatmap(z, n_q, n_k, blocked=blocked, title=title)


def rollout_bytes(blocks: Sequence[BlockTrace]) -> int:
    """Bytes of the float32 [layer, head, N, N] patterns attention rollout multiplies."""
    return sum(4 * int(np.prod(b.shape, dtype=np.int64)) for b in blocks)


def rollout_figure(patterns: np.ndarray, tokens: Sequence[str], title: str | None = None
                   ) -> go.Figure:
    """Attention rollout of self-attention patterns [layer, head, n, n] as a heatmap."""
    return matrix_heatmap(analysis.rollout(patterns), tokens, tokens,
                          title=title or _("attention rollout over {n_patterns} layers").format(
                                             n_patterns=len(patterns)),
                          value_name="rollout")


def trace_rollout_figure(trace: AttentionTrace, kind: str = "encoder.self") -> go.Figure:
    blocks = trace.layers(kind)
    if not blocks:
        raise ValueError(f"trace has no {kind} blocks; it has {trace.kinds()}")
    return rollout_figure(trace.stack(kind), blocks[0].query_tokens,
                          title=_("{kind}: attention rollout over {n_blocks} layers").format(
                                    kind=kind, n_blocks=len(blocks)))


def head_similarity_figure(matrix: np.ndarray, labels: Sequence[str],
                           order: Sequence[int] | None = None,
                           title: str | None = None) -> go.Figure:
    """JS-divergence matrix between heads, optionally reordered (analysis.cluster_order)."""
    m = np.asarray(matrix, dtype=np.float32)
    labels = list(labels)
    if order is not None:
        idx = list(order)
        m, labels = m[np.ix_(idx, idx)], [labels[i] for i in idx]
    fig = go.Figure(go.Heatmap(
        z=f32(m), x=labels, y=labels, colorscale="Viridis_r", zmin=0.0, zmax=float(np.log(2)),
        colorbar=dict(title=dict(text=_("JS (nats)")), thickness=12),
        hovertemplate="%{y} vs %{x}: %{z:.4f}<extra>" + _("JS divergence") + "</extra>"))
    fig.update_xaxes(type="category", tickangle=-90, showgrid=False)
    fig.update_yaxes(type="category", autorange="reversed", showgrid=False)
    return base_layout(fig, title or _("Head similarity (Jensen-Shannon divergence, 0 = same)"),
                       height=max(400, 12 * len(labels) + 120))


def head_stat_figure(stats: pd.DataFrame, stat: str, kind: str, title: str | None = None
                     ) -> go.Figure:
    """Layer (rows) x head (columns) heatmap of one column of analysis.head_stats."""
    df = stats[stats["kind"] == kind]
    table = df.pivot(index="layer", columns="head", values=stat).sort_index()
    fig = go.Figure(go.Heatmap(
        z=f32(table.to_numpy()), x=[int(h) for h in table.columns],
        y=[int(v) for v in table.index], colorscale="Viridis",
        colorbar=dict(title=dict(text=_(stat)), thickness=12),
        hovertemplate=_("layer") + " %{y}, " + _("head") + " %{x}: %{z:.4f}<extra>" + _(stat)
        + "</extra>"))
    fig.update_xaxes(title=_("head"), dtick=1, side="top")
    fig.update_yaxes(title=_("layer"), dtick=1, autorange="reversed")
    _ticks, top = top_axis([str(h) for h in table.columns])
    return base_layout(fig, title or _("{kind}: {stat} per head").format(kind=kind, stat=stat),
                       margin=dict(t=top))


def alignment_figure(pattern_head: np.ndarray, query_tokens: Sequence[str],
                     key_tokens: Sequence[str], gold=None, title: str | None = None
                     ) -> go.Figure:
    """Cross-attention of one head with its argmax source per target (○) and, if given,
    the gold alignment (+)."""
    fig = matrix_heatmap(pattern_head, query_tokens, key_tokens,
                         title=title or _("alignment: argmax source per target"))
    xl, yl = fig.data[0].x, fig.data[0].y
    if len(xl) != len(key_tokens) or len(yl) != len(query_tokens):
        return fig  # pooled (very long input): per-token markers would not line up
    best = analysis.alignment_argmax(np.asarray(pattern_head)[None])[0]
    rows = [q for q in range(len(best)) if best[q] >= 0]
    fig.add_trace(go.Scatter(
        x=[xl[best[q]] for q in rows], y=[yl[q] for q in rows], mode="markers",
        name=_("argmax"), marker=dict(symbol="circle-open", size=14, color="#d62728",
                                   line=dict(width=2)),
        hovertemplate="%{y} → %{x}: argmax<extra></extra>"))
    if gold is not None:
        pairs = [(q, k) for q, ks in analysis.gold_sets(gold).items() for k in ks]
        fig.add_trace(go.Scatter(
            x=[xl[k] for _, k in pairs], y=[yl[q] for q, _ in pairs], mode="markers",
            name=_("reference"), marker=dict(symbol="cross-thin-open", size=14,
                                          color="#2ca02c", line=dict(width=2)),
            hovertemplate="%{y} → %{x}: " + _("reference") + "<extra></extra>"))
        score = analysis.alignment_score(pattern_head, gold)
        # the text only: the title's placement (above the top axis's title) stays
        fig.update_layout(title_text=_("{text} · score {score:.2f}").format(
                                         text=fig.layout.title.text, score=score))
    fig.update_layout(showlegend=True)
    return fig
