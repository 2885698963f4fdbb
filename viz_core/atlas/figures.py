"""Plotly figures of an atlas: the layer x head role map, one score's map, distributions.

Matrix orientation as everywhere in the app: layers are rows (layer 0 on top), heads are
columns; integer axes, so no two labels can merge.
"""

from __future__ import annotations

from urllib.parse import urlencode

import numpy as np
import pandas as pd
import plotly.graph_objects as go

from viz_core.i18n import N_, _

from .roles import ROLE_LABELS, ROLES
from .summary import BINS

DOMINANT = (*ROLES, "mixed")
COLORS = {"previous": "#1f77b4", "duplicate": "#9467bd", "induction": "#d62728",
          "first": "#7f7f7f", "delimiter": "#8c564b", "current": "#2ca02c",
          "local": "#17becf", "broad": "#bcbd22", "mixed": "#e5e5e5"}
LABELS = {**ROLE_LABELS, "mixed": N_("mixed / unclear")}  # msgids: shown through _()


def _grid(summary: pd.DataFrame, kind: str, column: str):
    part = summary[summary["kind"] == kind]
    n_layers, n_heads = int(part["layer"].max()) + 1, int(part["head"].max()) + 1
    grid = np.full((n_layers, n_heads), np.nan, dtype=object if column == "dominant" else
                   np.float32)
    for layer, head, value in part[["layer", "head", column]].itertuples(index=False):
        grid[int(layer), int(head)] = value
    return grid, part


def _hover(part: pd.DataFrame, n_layers: int, n_heads: int) -> np.ndarray:
    text = np.full((n_layers, n_heads), "", dtype=object)
    names = {k: _(v) for k, v in LABELS.items()}  # the words once, not per cell
    where, spread = _("layer {layer}, head {head}"), _("mean distance {distance} tokens · {n} examples")
    for r in part.to_dict("records"):
        scores = "<br>".join(f"{names[k]}: {r[k]:.2f}" if np.isfinite(r[k]) else
                             f"{names[k]}: –" for k in ROLES)
        text[int(r["layer"]), int(r["head"])] = "<br>".join((
            where.format(layer=r["layer"], head=r["head"]), f"<b>{names[r['dominant']]}</b>",
            scores, spread.format(distance=f"{r['distance']:.2f}", n=int(r["n"]))))
    return text


def _clickable(fig: go.Figure, hover: np.ndarray) -> go.Figure:
    """An invisible marker on every cell: Streamlit reports clicks on scatter points, not on
    heatmap cells (streamlit/streamlit#8760), so the markers carry the click and the hover."""
    n_layers, n_heads = hover.shape
    layer, head = np.mgrid[0:n_layers, 0:n_heads]
    fig.update_traces(hoverinfo="skip", hovertemplate=None, selector=dict(type="heatmap"))
    fig.add_scatter(x=head.ravel().tolist(), y=layer.ravel().tolist(), mode="markers",
                    marker=dict(symbol="square", size=22, color="rgba(0,0,0,0)"),
                    text=hover.ravel().tolist(), hovertemplate="%{text}<extra></extra>",
                    showlegend=False, name="heads")
    fig.update_layout(clickmode="event+select")
    return fig


def _layout(fig: go.Figure, n_layers: int, n_heads: int, title: str) -> go.Figure:
    fig.update_layout(title=title, height=max(220, 60 + 34 * n_layers),
                      margin=dict(l=60, r=20, t=50, b=40))
    fig.update_xaxes(title=_("head"), tickmode="array", tickvals=list(range(n_heads)))
    fig.update_yaxes(title=_("layer"), tickmode="array", tickvals=list(range(n_layers)),
                     autorange="reversed")
    return fig


def role_map(summary: pd.DataFrame, kind: str) -> go.Figure:
    """Layer x head map coloured by each head's dominant role (a discrete legend)."""
    dom, part = _grid(summary, kind, "dominant")
    n_layers, n_heads = dom.shape
    present = [r for r in DOMINANT if (dom == r).any()]
    index = {r: i for i, r in enumerate(present)}
    z = np.array([[index.get(v, np.nan) for v in row] for row in dom], dtype=np.float32)
    n = max(len(present), 1)
    scale = []
    for i, r in enumerate(present):  # one flat band per role
        scale += [[i / n, COLORS[r]], [(i + 1) / n, COLORS[r]]]
    fig = go.Figure(go.Heatmap(
        z=z, x=list(range(n_heads)), y=list(range(n_layers)), zmin=-0.5, zmax=n - 0.5,
        colorscale=scale or [[0, "#eee"], [1, "#eee"]], text=_hover(part, n_layers, n_heads),
        hovertemplate="%{text}<extra></extra>", xgap=2, ygap=2,
        colorbar=dict(tickvals=list(range(n)), ticktext=[_(LABELS[r]) for r in present],
                      title=_("dominant role"))))
    fig = _clickable(fig, _hover(part, n_layers, n_heads))
    return _layout(fig, n_layers, n_heads, _("Dominant role of every head"))


def score_map(summary: pd.DataFrame, kind: str, role: str) -> go.Figure:
    """Layer x head map of one role's mean score (0..1)."""
    grid, part = _grid(summary, kind, role)
    n_layers, n_heads = grid.shape
    fig = go.Figure(go.Heatmap(
        z=grid.astype(np.float32), x=list(range(n_heads)), y=list(range(n_layers)), zmin=0,
        zmax=1, colorscale="Viridis", text=_hover(part, n_layers, n_heads),
        hovertemplate="%{text}<extra></extra>", xgap=2, ygap=2,
        colorbar=dict(title=_("score"))))
    fig = _clickable(fig, _hover(part, n_layers, n_heads))
    return _layout(fig, n_layers, n_heads,
                   _("{value}: mean score per head").format(value=_(LABELS[role])))


def head_distribution(hist: pd.DataFrame, kind: str, layer: int, head: int,
                      roles=ROLES) -> go.Figure:
    """Histogram over examples of one head's score for each role."""
    fig = go.Figure()
    centers = (np.arange(BINS) + 0.5) / BINS
    part = hist[(hist["kind"] == kind) & (hist["layer"] == layer) & (hist["head"] == head)]
    for r in part.to_dict("records"):
        role = r["role"]
        if role not in roles:
            continue
        counts = np.asarray(r["counts"], np.float32)
        share = counts / counts.sum() if counts.sum() else counts
        fig.add_bar(x=centers, y=share, name=_(LABELS[role]), width=1 / BINS,
                    marker_color=COLORS[role], opacity=0.75)
    fig.update_layout(barmode="overlay", height=320, margin=dict(l=50, r=20, t=50, b=40),
                      title=_("Layer {layer}, head {head}: score across examples").format(
                                layer=layer, head=head))
    fig.update_xaxes(title=_("score"), range=[0, 1])
    fig.update_yaxes(title=_("share of examples"))
    return fig


def heads_distribution(summary: pd.DataFrame, kind: str, role: str) -> go.Figure:
    """Histogram over heads of one role's mean score."""
    v = summary.loc[summary["kind"] == kind, role].to_numpy(np.float32)
    v = v[np.isfinite(v)]
    fig = go.Figure(go.Histogram(x=v, xbins=dict(start=0, end=1, size=1 / BINS),
                                 marker_color=COLORS[role]))
    fig.update_layout(height=260, margin=dict(l=50, r=20, t=50, b=40),
                      title=_("{value}: mean score of every head").format(value=_(LABELS[role])))
    fig.update_xaxes(title=_("mean score"), range=[0, 1])
    fig.update_yaxes(title=_("heads"))
    return fig


def attention_link(model: str, text: str, kind: str, layer: int, head: int,
                   target: str | None = None, page: str = "attention") -> str:
    """Relative URL of the Attention page showing this example and head (its URL state)."""
    params = {"model": model, "text": text, "kind": kind, "layer": int(layer),
              "head": int(head)}
    if target:
        params["target"] = target
    return f"{page}?{urlencode(params)}"


def top_table(atlas, kind: str, layer: int, head: int, role: str) -> pd.DataFrame:
    """The head's top examples for one role: rank, score, the query token where it peaks,
    the text, and a link that opens the example and head on the Attention page."""
    top = atlas.top
    rows = top[(top["kind"] == kind) & (top["layer"] == layer) & (top["head"] == head)
               & (top["role"] == role)].sort_values("rank")
    if rows.empty:
        return pd.DataFrame(columns=["rank", "score", "peak", "text", "open"])
    ex = atlas.examples(rows["example"].tolist())
    model = atlas.info.get("model") or ""
    out = []
    for r in rows.to_dict("records"):
        e = ex.loc[r["example"]]
        toks = list(e["tokens"] if kind.startswith("encoder") or not len(e["target_tokens"])
                    else e["target_tokens"])
        peak = int(r["peak"])
        where = f"{peak}·{toks[peak]}" if 0 <= peak < len(toks) else str(peak)
        target = e["target"] if isinstance(e["target"], str) else None
        out.append({"rank": int(r["rank"]) + 1, "score": round(float(r["score"]), 4),
                    "peak": where, "text": e["text"][:200],
                    "open": attention_link(model, e["text"], kind, layer, head, target)})
    return pd.DataFrame(out)


# ---- head patching over a dataset (atlas --task patching) -----------------------------------
def _patching_grid(summary: pd.DataFrame, kind: str, column: str) -> np.ndarray:
    part = summary[summary["kind"] == kind]
    grid = np.full((int(part["layer"].max()) + 1, int(part["head"].max()) + 1), np.nan,
                   dtype=np.float32)
    for layer, head, value in part[["layer", "head", column]].itertuples(index=False):
        grid[int(layer), int(head)] = value
    return grid


def _patching_hover(summary: pd.DataFrame, kind: str, shape: tuple[int, int]) -> np.ndarray:
    text = np.full(shape, "", dtype=object)
    for r in summary[summary["kind"] == kind].to_dict("records"):
        std = f"{r['std']:.3f}" if np.isfinite(r["std"]) else "–"
        sem = f"{r['sem']:.3f}" if np.isfinite(r["sem"]) else "–"
        text[int(r["layer"]), int(r["head"])] = "<br>".join((
            _("layer {layer}, head {head}").format(layer=r["layer"], head=r["head"]),
            "<b>" + _("mean effect {value}").format(value=f"{r['mean']:.3f}") + "</b>",
            _("spread (std) {std} · standard error {sem}").format(std=std, sem=sem),
            _("min {low} · max {high} · {n} pairs").format(
                low=f"{r['min']:.3f}", high=f"{r['max']:.3f}", n=int(r["n"]))))
    return text


def patching_map(summary: pd.DataFrame, kind: str) -> go.Figure:
    """Layer x head map of the mean patching effect over all pairs (0 = the corrupted run's
    metric, 1 = the clean run's), each cell labelled mean ± std where there is room."""
    mean = _patching_grid(summary, kind, "mean")
    std = _patching_grid(summary, kind, "std")
    n_layers, n_heads = mean.shape
    hover = _patching_hover(summary, kind, mean.shape)
    reach = float(np.nanmax(np.abs(mean))) if np.isfinite(mean).any() else 1.0
    reach = max(reach, 1e-6)
    labels = np.where(np.isfinite(mean), np.char.add(
        np.char.mod("%.2f", np.nan_to_num(mean)),
        np.where(np.isfinite(std), np.char.add("<br>±", np.char.mod("%.2f",
                                                                   np.nan_to_num(std))), "")),
        "")
    heat = go.Heatmap(z=mean, x=list(range(n_heads)), y=list(range(n_layers)),
                      zmin=-reach, zmax=reach, zmid=0, colorscale="RdBu_r", xgap=2, ygap=2,
                      colorbar=dict(title=_("mean effect")))
    if n_heads <= 12:  # room for two short lines per cell
        heat.update(text=labels.tolist(), texttemplate="%{text}", textfont=dict(size=10))
    fig = _clickable(go.Figure(heat), hover)
    fig = _layout(fig, n_layers, n_heads, _("Head patching: mean effect over all pairs"))
    if n_heads <= 12:
        fig.update_layout(height=max(240, 60 + 46 * n_layers))
    return fig


def patching_ranking(summary: pd.DataFrame, kind: str, k: int = 15) -> go.Figure:
    """The k heads with the largest mean effect, with their spread (± std) as error bars."""
    part = summary[summary["kind"] == kind].sort_values("mean", ascending=False).head(k)
    recs = part.to_dict("records")
    fig = go.Figure(go.Bar(
        x=part["mean"].to_numpy(np.float32), y=[f"L{r['layer']}.H{r['head']}" for r in recs],
        orientation="h", marker_color="#d6604d",
        error_x=dict(type="data", array=part["std"].fillna(0).to_numpy(np.float32)),
        hovertext=[_("layer {layer}, head {head}: mean {mean}, std {std}, {n} pairs").format(
                       layer=r["layer"], head=r["head"], mean=f"{r['mean']:.3f}",
                       std=f"{r['std']:.3f}", n=int(r["n"])) for r in recs],
        hoverinfo="text"))
    fig.update_layout(title=_("Largest mean effects (bars: ± one standard deviation over pairs)"),
                      height=max(220, 70 + 22 * len(part)), margin=dict(l=80, r=20, t=50, b=40))
    fig.update_yaxes(autorange="reversed", title=None)
    fig.update_xaxes(title=_("effect (0 = corrupted, 1 = clean)"))
    return fig


def patching_pairs_table(atlas, kind: str, layer: int, head: int) -> pd.DataFrame:
    """The pairs where one head's patching effect is largest: rank, effect, texts, metric."""
    top = atlas.top
    rows = top[(top["kind"] == kind) & (top["layer"] == layer) & (top["head"] == head)]
    rows = rows.sort_values("rank")
    if rows.empty:
        return pd.DataFrame(columns=["rank", "effect", "clean", "corrupted", "metric"])
    pairs = atlas.pairs(rows["example"].tolist())
    out = []
    for r in rows.to_dict("records"):
        p = pairs.loc[r["example"]]
        out.append({"rank": int(r["rank"]) + 1, "effect": round(float(r["effect"]), 4),
                    "clean": str(p["clean"])[:200], "corrupted": str(p["corrupted"])[:200],
                    "metric": p["metric"]})
    return pd.DataFrame(out)
