"""Attention heatmap of one head (or of any [q, k] matrix over tokens).

Orientation is the matrix one: query rows top to bottom, keys left to right, so a causal
pattern is lower-triangular on screen just as on paper. Cross-attention: target queries
(rows) x source keys (columns).

Any input length: a block of up to EXACT_MAX_TOKENS queries and keys is drawn from the exact
``block.head(h)`` (one token per row and column); a longer one from ``block.overview`` (block
means, axes labelled by position ranges), with ``block_window_heatmap`` for a full-resolution
window. Nothing N x N of a long block is ever read here: not the pattern, not the mask.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from typing import TYPE_CHECKING

import numpy as np
import plotly.graph_objects as go

from viz_core.i18n import N_, _

from .common import (
    BLOCKED_COLOR,
    BLOCKED_NOTE,
    MAX_TICKS,
    SCORE_COLORSCALE,
    TOP_AXIS_TICKS,
    WEIGHT_COLORSCALE,
    bin_starts,
    blocked_marks,
    check_matrix,
    colorbar,
    f32,
    json_bytes,
    layout_dict,
    pool2d,
    pool_factor,
    pooled_labels,
    range_labels,
    token_axis,
    top_axis,
)

if TYPE_CHECKING:  # type hints only: figures read traces, they never capture
    from ..capture.trace import BlockTrace

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

# Long inputs. Up to EXACT_MAX_TOKENS queries and keys a head is read exactly (matrix_heatmap
# still mean-pools it past MAX_CELLS_*); beyond, from block.overview at POOLED_SIZE per side
# (smaller for signed scores, and smaller again if the payload guard asks), and a zoom window
# of at most ZOOM_MAX x ZOOM_MAX at full resolution.
# 448: a 512 x 512 float32 z is 1.40 MB of base64 alone, and a causal mask's NaN half adds
# ~0.2 MB of escaped "/" (measured 1.67 MB); 448 x 448 stays near 1.3 MB.
EXACT_MAX_TOKENS = 1024
POOLED_SIZE = 448
POOLED_SIZE_SIGNED = 362  # ~sqrt(MAX_CELLS_SIGNED)
ZOOM_MAX = 448
ZOOM_MAX_SIGNED = 362
MASK_ROWS = 1024  # mask rows read at once when pooling a long mask


def matrix_heatmap(
    z: np.ndarray,
    query_tokens: Sequence[str],
    key_tokens: Sequence[str],
    *,
    mask: np.ndarray | None = None,
    title: str | None = None,
    value_name: str = N_("weight"),
    colorscale: str = WEIGHT_COLORSCALE,
    zmin: float | None = 0.0,
    zmax: float | None = 1.0,
    zmid: float | None = None,
    x_title: str = N_("key"),
    y_title: str = N_("query"),
    max_cells: int | None = MAX_CELLS_WEIGHTS,
    q_start: int = 0,
    k_start: int = 0,
    max_ticks: int = MAX_TICKS,
) -> go.Figure:
    """Heatmap of a [q, k] matrix; blocked cells (mask True) become NaN: grey, no colour.

    Hover reads "query -> key: value". The x/y data are unique labels ("3·the"), tick text
    is the bare token, so repeated words keep their own rows/columns. Beyond max_cells the
    matrix is mean-pooled f x f (labels become ranges, "8–15·the") to bound the payload;
    the title says so. q_start / k_start: positions of the first row / column when z is a
    window of a longer input (labels then read "1030·the").
    """
    value_name, x_title, y_title = _(value_name), _(x_title), _(y_title)  # defaults: msgids
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
        xl, xt = pooled_labels(key_tokens, f, k_start)
        yl, yt = pooled_labels(query_tokens, f, q_start)
        payload = json_bytes(zz) + len(json.dumps(xl)) + len(json.dumps(yl))
        if payload <= MAX_PAYLOAD_BYTES:
            break
        f += 1
    if f > 1:
        title = (title or "") + _(" (mean-pooled {f}×{f})").format(f=f)
    traces = [go.Heatmap(
        z=zz, x=xl, y=yl, colorscale=colorscale, zmin=zmin, zmax=zmax, zmid=zmid,
        hoverongaps=False, colorbar=colorbar(value_name),
        hovertemplate=f"%{{y}} → %{{x}}: %{{z:.4f}}<extra>{value_name}</extra>",
        name=value_name,
    )]
    if mask is not None and f == 1:
        marks = blocked_marks(mask, xl, yl)
        if marks is not None:
            traces.append(marks)
    note = f"   <sup>{_(BLOCKED_NOTE)}</sup>" if mask is not None and mask.any() else ""
    xaxis = {**token_axis(xl, xt, x_title, max_ticks=min(max_ticks, TOP_AXIS_TICKS)),
             "side": "top"}
    yaxis = token_axis(yl, yt, y_title, reversed_=True, max_ticks=max_ticks)
    angle, top = top_axis(xaxis["ticktext"], bool(x_title))
    # 20 px a labelled row: query labels (and ✕ marks) one above the other never touch
    height = min(1600, max(450, top + 70 + 20 * len(yaxis["tickvals"])))
    # one validated layout (each update_* call would re-validate and copy the figure)
    fig = go.Figure(traces, layout=layout_dict(
        (title or "") + note, xaxis={**xaxis, "tickangle": angle},
        yaxis=yaxis, margin=dict(t=top), height=height,
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


def block_has_scores(block: BlockTrace) -> bool:
    """Whether a block can show scores, without computing them (a lazy block always can)."""
    return block.is_lazy or block.scores is not None


def is_long(block: BlockTrace, limit: int = EXACT_MAX_TOKENS) -> bool:
    """More than `limit` queries or keys: read pooled or windowed, never whole."""
    return max(block.shape[1:]) > limit


def head_scores(block: BlockTrace, head: int) -> np.ndarray | None:
    """float32 [q, k] scores of one head, or None when the block has none."""
    if block.is_lazy:
        return block.head(head, "scores")
    return None if block.scores is None else block.scores[head]


def block_heatmap(block: BlockTrace, head: int, view: str = "weights",
                  exact_max: int = EXACT_MAX_TOKENS) -> go.Figure:
    """One head of a BlockTrace: exact up to exact_max tokens, pooled beyond."""
    if is_long(block, exact_max):
        return block_pooled_heatmap(block, head, view)
    scores = head_scores(block, head) if view == "scores" else None
    return attention_heatmap(
        block.head(head), block.query_tokens, block.key_tokens, mask=block.mask,
        scores=scores, view=view, title=_("{name} · head {head} · {view}").format(
                                            name=block.name, head=head, view=_(view)),
    )


def grouped_block_heatmap(block: BlockTrace, head: int, by: str) -> go.Figure:
    """One head's weights over groups of tokens (viz_core.analysis.token_groups: a cut
    character's parts, or a word's tokens): the mean over a group's query rows, the sum over
    its key columns; a cell is blocked when every token pair in it is."""
    from ..analysis.token_groups import group_label, grouped_attention, token_groups

    q_groups = token_groups(block.query_tokens, by)
    k_groups = token_groups(block.key_tokens, by)
    z = grouped_attention(block.head(head), q_groups, k_groups)
    mask = None
    if block.mask is not None:
        blocked = np.asarray(block.mask, bool)
        mask = np.array([[blocked[np.ix_(q, k)].all() for k in k_groups] for q in q_groups])
    labels = [[group_label([tokens[i] for i in g]) for g in groups]
              for tokens, groups in ((block.query_tokens, q_groups),
                                     (block.key_tokens, k_groups))]
    by_name = _("by character") if by == "character" else _("by word")
    return matrix_heatmap(z.astype(np.float32), labels[0], labels[1], mask=mask,
                          title=_("{name} · head {head} · weights {by}").format(
                              name=block.name, head=head, by=by_name))


# ---- long inputs: pooled views and windows -----------------------------------------------
def pooled_blocked(block: BlockTrace, q_bins: int, k_bins: int) -> np.ndarray:
    """bool [q_bins, k_bins]: bins of ``overview`` whose every cell is blocked. Reads the mask
    MASK_ROWS query rows at a time, so the N x N mask never exists."""
    n_q, n_k = block.shape[1:]
    qs, ks = bin_starts(n_q, q_bins), bin_starts(n_k, k_bins)
    per_row = np.empty((n_q, len(ks)), dtype=np.int32)  # blocked keys of each row per key bin
    for r0 in range(0, n_q, MASK_ROWS):
        r1 = min(n_q, r0 + MASK_ROWS)
        per_row[r0:r1] = np.add.reduceat(block.mask_window((r0, r1), (0, n_k)), ks, axis=1,
                                         dtype=np.int32)
    blocked = np.add.reduceat(per_row, qs, axis=0, dtype=np.int64)
    sizes = np.outer(np.diff(np.append(qs, n_q)), np.diff(np.append(ks, n_k)))
    return blocked == sizes


def fitted_pool(block: BlockTrace, heads: list[int] | None, what: str, size: int,
                combine=lambda ov: ov[0]) -> tuple[np.ndarray, np.ndarray]:
    """(z, blocked bins) from block.overview at the largest size <= `size` whose z (blocked
    bins NaN) + labels fit MAX_PAYLOAD_BYTES: signed values and NaN base64-encode into many
    "/", which plotly escapes. `combine` turns the [head, bq, bk] overview into z [bq, bk]."""
    n_q, n_k = block.shape[1:]
    while True:
        z = combine(block.overview(size, heads=heads, what=what))
        blocked = pooled_blocked(block, *z.shape)
        shown = np.where(blocked, np.float32(np.nan), z).astype(np.float32)
        labels = len(json.dumps(range_labels(bin_starts(n_q, z.shape[0]), n_q))) + len(
            json.dumps(range_labels(bin_starts(n_k, z.shape[1]), n_k)))
        if size <= 16 or json_bytes(shown) + labels <= MAX_PAYLOAD_BYTES:
            return z, blocked
        size = size * 7 // 8


def pooled_heatmap(z: np.ndarray, n_q: int, n_k: int, *, blocked: np.ndarray | None = None,
                   title: str | None = None, value_name: str = N_("mean weight"),
                   colorscale: str = WEIGHT_COLORSCALE, zmin: float | None = 0.0,
                   zmax: float | None = None, x_title: str = N_("key positions"),
                   y_title: str = N_("query positions")) -> go.Figure:
    """Heatmap of block means z [bq, bk] of an n_q x n_k matrix pooled into the contiguous
    bins of ``BlockTrace.overview``; axes are position ranges ("0–15"). Bins whose every cell
    is blocked (`blocked`) are NaN: grey. zmax None: the largest value (pooled weights are
    small: a bin of b keys holds at most b / n_k of a row's mass on average)."""
    value_name, x_title, y_title = _(value_name), _(x_title), _(y_title)  # defaults: msgids
    zz = f32(z).copy()
    if zz.ndim != 2:
        raise ValueError(f"pooled z must be [q bins, k bins], got shape {zz.shape}")
    yl = range_labels(bin_starts(n_q, zz.shape[0]), n_q)
    xl = range_labels(bin_starts(n_k, zz.shape[1]), n_k)
    if len(yl) != zz.shape[0] or len(xl) != zz.shape[1]:
        raise ValueError(f"{zz.shape} bins do not pool {n_q} x {n_k} positions")
    has_blocked = blocked is not None and bool(np.asarray(blocked).any())
    if has_blocked:
        zz[np.asarray(blocked, dtype=bool)] = np.nan
    if zmax is None:
        finite = zz[np.isfinite(zz)]
        zmax = float(finite.max()) if finite.size and finite.max() > (zmin or 0) else 1.0
    note = f"   <sup>{_(BLOCKED_NOTE)}</sup>" if has_blocked else ""
    pool_note = " " + _("(block means, {rows}×{cols} bins of {n_q}×{n_k})").format(
        rows=zz.shape[0], cols=zz.shape[1], n_q=n_q, n_k=n_k)
    hover = (_("queries {q} → keys {k}").format(q="%{y}", k="%{x}")
             + f": %{{z:.3g}}<extra>{value_name}</extra>")
    xaxis = {**token_axis(xl, [lab.split("–")[0] for lab in xl], x_title, max_ticks=16),
             "side": "top"}
    angle, top = top_axis(xaxis["ticktext"], bool(x_title))
    fig = go.Figure(go.Heatmap(
        z=zz, x=xl, y=yl, colorscale=colorscale, zmin=zmin, zmax=zmax, hoverongaps=False,
        colorbar=colorbar(value_name), hovertemplate=hover,
        name=value_name), layout=layout_dict(
        (title or "") + pool_note + note, margin=dict(t=top),
        xaxis={**xaxis, "tickangle": angle},
        yaxis=token_axis(yl, [lab.split("–")[0] for lab in yl], y_title, reversed_=True,
                         max_ticks=16),
        plot_bgcolor=BLOCKED_COLOR if has_blocked else "white", showlegend=False))
    return fig


def block_pooled_heatmap(block: BlockTrace, head: int, view: str = "weights",
                         size: int | None = None) -> go.Figure:
    """One head of a long block, pooled by ``block.overview`` (block means)."""
    if view not in ("weights", "scores"):
        raise ValueError(f"view must be 'weights' or 'scores', not {view!r}")
    what = "pattern" if view == "weights" else "scores"
    if size is None:
        size = POOLED_SIZE if view == "weights" else POOLED_SIZE_SIGNED
    z, blocked = fitted_pool(block, [int(head)], what, size)
    n_q, n_k = block.shape[1:]
    title = _("{name} · head {head} · {view}").format(name=block.name, head=head, view=_(view))
    if view == "weights":
        return pooled_heatmap(z, n_q, n_k, blocked=blocked, title=title)
    allowed = z[~blocked]
    lim = float(np.abs(allowed).max()) if allowed.size else 1.0
    return pooled_heatmap(z, n_q, n_k, blocked=blocked, title=title, value_name=_("mean score"),
                          colorscale=SCORE_COLORSCALE, zmin=-lim, zmax=lim)


def clip_window(block: BlockTrace, q0: int, k0: int, size: int, limit: int = ZOOM_MAX
                ) -> tuple[tuple[int, int], tuple[int, int]]:
    """((r0, r1), (c0, c1)): a window of at most size x size (<= limit) inside the block,
    moved back inside when it would run past the last query or key."""
    n_q, n_k = block.shape[1:]
    size = max(1, min(int(size), limit))
    h, w = min(size, n_q), min(size, n_k)
    r0 = max(0, min(int(q0), n_q - h))
    c0 = max(0, min(int(k0), n_k - w))
    return (r0, r0 + h), (c0, c0 + w)


def block_window_heatmap(block: BlockTrace, head: int, rows: tuple[int, int],
                         cols: tuple[int, int], view: str = "weights") -> go.Figure:
    """A full-resolution window of one head (queries r0..r1-1, keys c0..c1-1), labelled with
    the tokens and their absolute positions. Reads only those rows of the head and mask."""
    (r0, r1), (c0, c1) = rows, cols
    if (r1 - r0) * (c1 - c0) > ZOOM_MAX * ZOOM_MAX:
        raise ValueError(f"a window is at most {ZOOM_MAX} x {ZOOM_MAX} cells")
    mask = block.mask_window(rows, cols)
    qt, kt = block.query_tokens[r0:r1], block.key_tokens[c0:c1]
    title = f"{block.name} · head {head} · queries {r0}–{r1 - 1} × keys {c0}–{c1 - 1}"
    pattern = block.window(head, rows, cols)
    if view == "weights":
        return matrix_heatmap(pattern, qt, kt, mask=mask, title=title, q_start=r0, k_start=c0)
    if view != "scores":
        raise ValueError(f"view must be 'weights' or 'scores', not {view!r}")
    scores = block.window(head, rows, cols, what="scores")
    allowed = scores[~mask]
    lim = float(np.abs(allowed).max()) if allowed.size else 1.0
    return matrix_heatmap(scores, qt, kt, mask=mask, title=title, value_name="score",
                          colorscale=SCORE_COLORSCALE, zmin=-lim, zmax=lim,
                          max_cells=MAX_CELLS_SIGNED, q_start=r0, k_start=c0)
