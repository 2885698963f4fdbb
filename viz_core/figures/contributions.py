"""Figures for "which heads matter, and why": logit attribution, logit lens, patching,
composition, QK attribution and head search. Tables (pandas) and numpy arrays in, plotly out.

Every block x head matrix is drawn with blocks as rows in model order and heads as columns
(the Attention page's grid orientation). Signed values use one diverging scale centred on 0.
"""

from __future__ import annotations

import re
from collections.abc import Sequence

import numpy as np
import pandas as pd
import plotly.graph_objects as go

from viz_core.i18n import N_, _

from .common import f32, layout_dict, plot_text, unique_labels
from .heatmap import matrix_heatmap

SIGNED = "RdBu"  # red = negative, blue = positive
_HEAD = re.compile(r"^(.*)\.h(\d+)$")  # "decoder.3.self.h5" -> ("decoder.3.self", 5)
TEXT_MAX_POSITIONS = 40  # the lens grid writes tokens into cells up to this many positions
BAR_MAX = 40  # bars drawn at most (the largest by size)


def _block_order(name: str) -> tuple:
    """Model order: encoder layers, then per decoder layer self before cross."""
    parts = name.split(".")
    stack = 0 if parts[0] == "encoder" else 1
    layer = int(parts[1]) if len(parts) > 1 and parts[1].isdigit() else 0
    sub = {"self": 0, "cross": 1}.get(parts[2] if len(parts) > 2 else "", 2)
    return (stack, layer, sub, name)


def split_head(component: str) -> tuple[str, int] | None:
    """"decoder.3.self.h5" -> ("decoder.3.self", 5); anything else -> None."""
    m = _HEAD.match(str(component))
    return (m.group(1), int(m.group(2))) if m else None


def head_matrix(names: Sequence[str], values: Sequence[float]
                ) -> tuple[np.ndarray, list[str], int]:
    """Values of head components ("<block>.h<N>") as float64 [block, head] (NaN where a block
    has fewer heads), the block names in model order, and the widest head count."""
    cells = {}
    for name, v in zip(names, values):
        bh = split_head(name)
        if bh is not None:
            cells[bh] = float(v)
    blocks = sorted({b for b, _ in cells}, key=_block_order)
    width = max((h for _, h in cells), default=-1) + 1
    m = np.full((len(blocks), width), np.nan)
    row = {b: i for i, b in enumerate(blocks)}
    for (b, h), v in cells.items():
        m[row[b], h] = v
    return m, blocks, width


def _limit(values: np.ndarray) -> float:
    finite = np.abs(values[np.isfinite(values)])
    return float(finite.max()) if finite.size and finite.max() > 0 else 1.0


def signed_heatmap(m: np.ndarray, rows: Sequence[str], columns: Sequence[str], *, title: str,
                   value_name: str, x_title: str = "head", y_title: str = "",
                   limit: float | None = None) -> go.Figure:
    """A block x head (or layer x position) matrix of signed values, centred on 0."""
    lim = limit if limit is not None else _limit(np.asarray(m, dtype=np.float64))
    return _ticks_below(matrix_heatmap(
        f32(m), list(rows), list(columns), title=title, value_name=value_name,
        colorscale=SIGNED, zmin=-lim, zmax=lim, zmid=0.0, x_title=x_title, y_title=y_title,
        max_cells=None))


def _ticks_below(fig: go.Figure) -> go.Figure:
    """Column labels under the map: these are not attention matrices (keys on top), and the
    title needs the room above."""
    fig.update_xaxes(side="bottom", automargin=True)
    fig.update_layout(margin=dict(t=60))  # matrix_heatmap reserved the top for its labels
    return fig


# ---- direct logit attribution -----------------------------------------------------------------
def attribution_heatmap(frame: pd.DataFrame, title: str | None = None) -> go.Figure:
    """Each head's direct contribution to the logit: blocks (rows) x heads (columns)."""
    heads = frame[frame["kind"] == "head"]
    m, blocks, width = head_matrix(list(heads["component"]), list(heads["contribution"]))
    return signed_heatmap(m, blocks, [f"h{h}" for h in range(width)],
                          title=title or _("Direct contribution of each head to the logit"),
                          value_name=N_("contribution"))


def attribution_bars(frame: pd.DataFrame, title: str | None = None) -> go.Figure:
    """Embeddings, MLPs and biases (everything but heads), in model order, plus each layer's
    heads summed, as horizontal bars."""
    rows: list[tuple[str, float]] = []
    for r in frame.itertuples(index=False):
        if r.kind != "head":
            rows.append((str(r.component), float(r.contribution)))
    heads = frame[frame["kind"] == "head"]
    if len(heads):
        sums = {}
        for name, v in zip(heads["component"], heads["contribution"]):
            bh = split_head(name)
            if bh is not None:
                sums[bh[0]] = sums.get(bh[0], 0.0) + float(v)
        rows += [(f"{b} (all heads)", v) for b, v in sorted(sums.items(),
                                                              key=lambda t: _block_order(t[0]))]
    return _bars([n for n, _ in rows], [v for _, v in rows],
                 title or _("Embeddings, MLPs and biases"),
                 _("contribution to the logit"))


def _bars(labels: Sequence[str], values: Sequence[float], title: str, x_title: str,
          hover: Sequence[str] | None = None) -> go.Figure:
    v = np.asarray(values, dtype=np.float64)
    colors = ["#2166ac" if x >= 0 else "#b2182b" for x in v]
    ylab = unique_labels(labels)
    fig = go.Figure(go.Bar(
        x=f32(v), y=ylab, orientation="h", marker_color=colors,
        customdata=[plot_text(h) for h in (hover or labels)],
        hovertemplate="%{customdata}: %{x:.4f}<extra></extra>"),
        layout=layout_dict(title, xaxis=dict(title=x_title, zeroline=True),
                           yaxis=dict(autorange="reversed", type="category",
                                      tickmode="array", tickvals=ylab,
                                      ticktext=[plot_text(t) for t in labels]),
                           height=max(260, 22 * len(labels) + 110), showlegend=False,
                           margin=dict(l=200, r=20, t=50, b=50)))
    return fig


# ---- logit lens -------------------------------------------------------------------------------
def logit_lens_grid(layers: Sequence[str], tokens: Sequence[str],
                    top_tokens: Sequence[Sequence[str]], top_probs: np.ndarray,
                    prob: np.ndarray, predictions: Sequence[str],
                    title: str | None = None) -> go.Figure:
    """Layer (rows, first layer on top) x position (columns): each cell's text is the top
    token of the stream there, its colour the probability of the model's final prediction
    at that position. top_tokens: [layer][position] (top-1); top_probs, prob: [layer, pos]."""
    prob = np.asarray(prob, dtype=np.float32)
    n_layers, n_pos = prob.shape
    xl = unique_labels(tokens)
    yl = [plot_text(name) for name in layers]
    top = [[str(top_tokens[i][t]) for t in range(n_pos)] for i in range(n_layers)]
    hover = np.array([[f"top: {plot_text(top[i][t])} ({float(top_probs[i][t]):.3f})<br>"
                       f"final prediction {plot_text(predictions[t])}: {float(prob[i, t]):.3f}"
                       for t in range(n_pos)] for i in range(n_layers)], dtype=object)
    heat = dict(z=f32(prob), x=xl, y=yl, colorscale="Blues", zmin=0.0, zmax=1.0,
                customdata=hover,
                colorbar=dict(title=dict(text=_("p(final)"), side="right"), thickness=12),
                hovertemplate="%{y} · %{x}<br>%{customdata}<extra></extra>")
    if n_pos <= TEXT_MAX_POSITIONS:
        heat.update(text=[[plot_text(_cut(t)) for t in row] for row in top],
                    texttemplate="%{text}", textfont=dict(size=10))
    ticks = [plot_text(_cut(t)) for t in tokens]
    fig = go.Figure(go.Heatmap(**heat), layout=layout_dict(
        title or _("Logit lens: top token per layer and position (colour: probability of "
                   "the final prediction)"),
        xaxis=dict(type="category", title=_("position (input token)"),
                   tickmode="array", tickvals=xl, ticktext=ticks, tickangle=-45),
        yaxis=dict(type="category", title="", autorange="reversed"),
        height=max(300, 34 * n_layers + 160)))
    return fig


def _cut(token: str, limit: int = 8) -> str:
    t = str(token)
    return t if len(t) <= limit else t[:limit - 1] + "…"


# ---- patching ---------------------------------------------------------------------------------
def patching_heatmap(effect: np.ndarray, rows: Sequence[str], columns: Sequence[str], *,
                     title: str, x_title: str = "head", y_title: str = "",
                     limit: float | None = None) -> go.Figure:
    """Patching effects (0 = corrupted, 1 = clean): rows x columns, centred on 0; colours
    run to ±limit (default: the largest |effect|, so small effects still show)."""
    e = np.asarray(effect, dtype=np.float64)
    return signed_heatmap(e, rows, columns, title=title, value_name="effect",
                          x_title=x_title, y_title=y_title,
                          limit=limit if limit is not None else _limit(e))


def shared_limit(*arrays) -> float:
    """One colour limit for maps shown side by side: the largest |value| of any of them."""
    return max(_limit(np.asarray(a, dtype=np.float64)) for a in arrays)


def layer_effect_bars(effect: Sequence[float], rows: Sequence[str], title: str) -> go.Figure:
    """One effect per layer (the stream entering it, all positions patched)."""
    return _bars(list(rows), list(effect), title, _("effect (0 = corrupted, 1 = clean)"))


def patching_scatter(real: np.ndarray, approx: np.ndarray, labels: Sequence[str],
                     pearson: float, title: str | None = None) -> go.Figure:
    """Attribution patching (y) against activation patching (x), one point per unit, with
    the diagonal y = x."""
    x = np.asarray(real, dtype=np.float64).ravel()
    y = np.asarray(approx, dtype=np.float64).ravel()
    ok = np.isfinite(x) & np.isfinite(y)
    lo = float(min(x[ok].min(), y[ok].min())) if ok.any() else 0.0
    hi = float(max(x[ok].max(), y[ok].max())) if ok.any() else 1.0
    r = "n/a" if not np.isfinite(pearson) else f"{pearson:.3f}"
    fig = go.Figure([
        go.Scatter(x=[lo, hi], y=[lo, hi], mode="lines", line=dict(color="#999", dash="dot"),
                   hoverinfo="skip", name="y = x"),
        go.Scatter(x=f32(x[ok]), y=f32(y[ok]), mode="markers", name=_("units"),
                   customdata=[plot_text(lab) for lab, k in zip(labels, ok) if k],
                   hovertemplate="%{customdata}<br>" + _("patching") + " %{x:.3f} · "
                                 + _("attribution") + " %{y:.3f}<extra></extra>")],
        layout=layout_dict(title or _("Attribution vs activation patching (Pearson r = {r})"
                                      ).format(r=r),
                           xaxis=dict(title=_("activation patching")),
                           yaxis=dict(title=_("attribution patching")), showlegend=False,
                           height=380))
    return fig


# ---- composition and QK attribution -----------------------------------------------------------
def composition_matrix(frame: pd.DataFrame, kind: str) -> tuple[np.ndarray, list[str],
                                                                  list[str]]:
    """Scores of one composition kind as [sender, receiver], heads in model order."""
    part = frame[frame["kind"] == kind]

    def order(name):
        bh = split_head(name)
        return (*_block_order(bh[0]), bh[1]) if bh else (9, 0, 0, name, 0)

    senders = sorted(set(part["sender"]), key=order)
    receivers = sorted(set(part["receiver"]), key=order)
    m = np.full((len(senders), len(receivers)), np.nan)
    si = {s: i for i, s in enumerate(senders)}
    ri = {r: i for i, r in enumerate(receivers)}
    for s, r, v in zip(part["sender"], part["receiver"], part["score"]):
        m[si[s], ri[r]] = float(v)
    return m, senders, receivers


def composition_heatmap(frame: pd.DataFrame, kind: str, title: str | None = None
                        ) -> go.Figure:
    """Q-, K- or V-composition: sender heads (rows) x receiver heads (columns)."""
    m, senders, receivers = composition_matrix(frame, kind)
    finite = m[np.isfinite(m)]
    top = float(finite.max()) if finite.size else 1.0
    return _ticks_below(matrix_heatmap(
        f32(m), senders, receivers,
        title=title or _("{kind}-composition: sender (rows) → receiver (columns)").format(kind=kind),
        value_name="score", colorscale="Viridis", zmin=0.0, zmax=top or 1.0,
        x_title=_("receiver head"), y_title=_("sender head"), max_cells=None))


def qk_bars(frame: pd.DataFrame, score: float, top: int = 15,
            title: str | None = None) -> go.Figure:
    """The largest (query component x key component) terms of one pre-softmax score."""
    f = frame.reindex(frame["contribution"].abs().sort_values(ascending=False).index)
    f = f.head(min(top, BAR_MAX))
    labels = [f"{q} × {k}" for q, k in zip(f["query_component"], f["key_component"])]
    return _bars(labels, list(f["contribution"]),
                 title or _("Largest terms of the score {score:.4g} (query side × key "
                            "side)").format(score=score),
                 _("contribution to the pre-softmax score"))


# ---- head search ------------------------------------------------------------------------------
def head_search_heatmap(frame: pd.DataFrame, title: str) -> go.Figure:
    """Every head's search score, blocks (rows) x heads (columns), on the weight scale."""
    names = [f"{b}.h{h}" for b, h in zip(frame["block"], frame["head"])]
    m, blocks, width = head_matrix(names, list(frame["score"]))
    return _ticks_below(matrix_heatmap(
        f32(m), blocks, [f"h{h}" for h in range(width)], title=title, value_name="weight",
        zmin=0.0, zmax=1.0, x_title=_("head"), y_title="", max_cells=None))
