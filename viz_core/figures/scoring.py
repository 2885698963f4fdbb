"""Scoring-function figures (viz_core.lessons.scoring): dot, scaled dot and additive scores of one query
side by side with their softmax weights, and the saturation experiment over d_k.

Numpy arrays in, plotly figures out; every array goes in as float32 (common.f32).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

import numpy as np
import plotly.graph_objects as go
from plotly.subplots import make_subplots

from viz_core.i18n import N_, _

from ..lessons.scoring import SCORER_LABELS, STATS
from .common import BLOCKED_COLOR, base_layout, f32, token_axis, unique_labels

SCORER_COLORS = {"dot": "#d0542c", "scaled": "#3b6fb6", "additive": "#3a9a5b"}
SCALING_COLORS = {"unscaled": "#d0542c", "scaled": "#3b6fb6"}
SCALING_LABELS = {"unscaled": N_("q·k (unscaled)"), "scaled": N_("q·k / √d_k (scaled)")}


def scoring_comparison_figure(scores: Mapping[str, np.ndarray],
                              weights: Mapping[str, np.ndarray], key_tokens: Sequence[str],
                              blocked: np.ndarray | None = None,
                              title: str | None = None,
                              labels: Mapping[str, str] = SCORER_LABELS) -> go.Figure:
    """One row per scorer (in the order of `scores`): its scores [n_keys] on the left, its
    softmax weights on the right, keys on the x axis (unique labels). Blocked keys get no
    score bar (their score is −∞ after masking) and a grey ✕ on both sides."""
    names = list(scores)
    key_labels = unique_labels(key_tokens)
    n = len(key_labels)
    blocked = np.zeros(n, dtype=bool) if blocked is None else np.asarray(blocked, dtype=bool)
    titles = []
    for name in names:
        titles += [_("{scorer}: score").format(scorer=_(labels.get(name, name))),
                   _("softmax weight")]
    fig = make_subplots(rows=len(names), cols=2, shared_xaxes=True, subplot_titles=titles,
                        horizontal_spacing=0.08, vertical_spacing=0.12)
    idx = np.nonzero(blocked)[0]
    for r, name in enumerate(names, 1):
        s = f32(scores[name]).copy()
        s[blocked] = np.nan  # -inf cannot be drawn as a bar; the ✕ marks it instead
        label = _(labels.get(name, name))
        fig.add_trace(go.Bar(x=key_labels, y=s, name=label, marker_color=SCORER_COLORS.get(
            name), legendgroup=name, showlegend=False,
            hovertemplate="%{x}: %{y:.4f}<extra>" + label + "</extra>"), row=r, col=1)
        fig.add_trace(go.Bar(x=key_labels, y=f32(weights[name]), name=label,
                             marker_color=SCORER_COLORS.get(name), legendgroup=name,
                             showlegend=False,
                             hovertemplate="%{x}: " + _("weight") + " %{y:.4f}<extra>" + label
                                           + "</extra>"),
                      row=r, col=2)
        fig.update_yaxes(range=[0, 1], row=r, col=2)
        if len(idx):
            for c in (1, 2):
                fig.add_trace(go.Scatter(
                    x=[key_labels[i] for i in idx], y=f32(np.zeros(len(idx))), mode="markers",
                    marker=dict(symbol="x", color=BLOCKED_COLOR, size=10),
                    name=_("blocked (weight 0)"), legendgroup="blocked",
                    showlegend=r == 1 and c == 1,
                    hovertemplate="%{x}: " + _("blocked") + "<extra></extra>"), row=r, col=c)
    axis = token_axis(key_labels, key_tokens, "key")
    fig.update_xaxes(**{k: v for k, v in axis.items() if k != "title"})
    for c in (1, 2):
        fig.update_xaxes(title=_("key"), row=len(names), col=c)
    return base_layout(fig, title or _("Three scoring functions, one query"),
                       height=170 * len(names) + 130, showlegend=bool(len(idx)),
                       bargap=0.15, margin=dict(l=60, r=20, t=90, b=50))


def _log2_axis(d_ks: Sequence[int]) -> dict:
    return dict(type="log", tickmode="array", tickvals=[int(d) for d in d_ks],
                ticktext=[str(int(d)) for d in d_ks], title="d_k")


def saturation_figure(d_ks: np.ndarray, stats: Mapping[str, Mapping[str, np.ndarray]],
                      current: int | None = None, n_keys: int | None = None,
                      draws: int | None = None, stat_labels: Mapping[str, str] = STATS,
                      title: str | None = None) -> go.Figure:
    """One panel per statistic (stats[scaling][stat] [len(d_ks)]), unscaled and scaled as two
    lines against d_k on a log axis; a dashed line at the `current` d_k."""
    names = [s for s in stat_labels if all(s in per for per in stats.values())]
    rows = (len(names) + 1) // 2
    fig = make_subplots(rows=rows, cols=2, subplot_titles=[_(stat_labels[s]) for s in names],
                        horizontal_spacing=0.1, vertical_spacing=0.2)
    x = f32(d_ks)
    for i, stat in enumerate(names):
        r, c = i // 2 + 1, i % 2 + 1
        for scaling, per in stats.items():
            label = _(SCALING_LABELS.get(scaling, scaling))
            fig.add_trace(go.Scatter(
                x=x, y=f32(per[stat]), mode="lines+markers", name=label,
                line=dict(color=SCALING_COLORS.get(scaling)), legendgroup=scaling,
                showlegend=i == 0,
                hovertemplate="d_k = %{x}: %{y:.3f}<extra>" + label + "</extra>"), row=r, col=c)
        fig.update_xaxes(**_log2_axis(d_ks), row=r, col=c)
        top = 0.26 if stat == "gradient" else 1.0  # p(1-p) <= 1/4
        fig.update_yaxes(range=[0, top * 1.04], row=r, col=c)
        if current is not None:
            fig.add_vline(x=int(current), line=dict(color="#555555", dash="dash", width=1),
                          row=r, col=c)
    if title is None:
        title = _("Softmax saturation against d_k") if n_keys is None or draws is None else \
            _("Softmax saturation against d_k ({draws} draws of q and {n_keys} keys)").format(
                draws=draws, n_keys=n_keys)
    return base_layout(fig, title, height=260 * rows + 110,
                       legend=dict(orientation="h", y=-0.15),
                       margin=dict(l=60, r=20, t=90, b=60))


def logit_variance_figure(d_ks: np.ndarray, dot_var: np.ndarray, current: int | None = None,
                          title: str | None = None) -> go.Figure:
    """Empirical Var(q·k) (about d_k) and Var(q·k/√d_k) (about 1), with the closed forms."""
    d = np.asarray(d_ks, dtype=np.float64)
    v = np.asarray(dot_var, dtype=np.float64)
    fig = go.Figure()
    for name, y, theory in (("unscaled", v, d), ("scaled", v / d, np.ones_like(d))):
        label = _(SCALING_LABELS[name])
        fig.add_trace(go.Scatter(x=f32(d), y=f32(y), mode="markers", name=_("{label}: measured").format(
                                                                              label=label),
                                 marker=dict(color=SCALING_COLORS[name], size=8),
                                 hovertemplate="d_k = %{x}: %{y:.3f}<extra>" + label
                                               + "</extra>"))
        fig.add_trace(go.Scatter(x=f32(d), y=f32(theory), mode="lines",
                                 name=_("d_k (closed form)") if name == "unscaled" else
                                 _("1 (closed form)"), hoverinfo="skip",
                                 line=dict(color=SCALING_COLORS[name], dash="dot", width=1)))
    if current is not None:
        fig.add_vline(x=int(current), line=dict(color="#555555", dash="dash", width=1))
    fig.update_xaxes(**_log2_axis(d_ks))
    fig.update_yaxes(type="log", title=_("variance of the logit"))
    return base_layout(fig, title or _("Variance of the logits against d_k"), height=320)


def draw_weights_figure(weights: Mapping[str, np.ndarray], d_k: int,
                        title: str | None = None) -> go.Figure:
    """One random query's softmax weights over its keys (k0, k1, ...), unscaled and scaled."""
    fig = go.Figure()
    n = 0
    for scaling, w in weights.items():
        w = f32(w)
        n = len(w)
        label = _(SCALING_LABELS.get(scaling, scaling))
        fig.add_trace(go.Bar(x=[f"k{j}" for j in range(n)], y=w, name=label,
                             marker_color=SCALING_COLORS.get(scaling),
                             hovertemplate="%{x}: %{y:.4f}<extra>" + label + "</extra>"))
    fig.add_hline(y=1.0 / max(n, 1), line=dict(color="#999999", dash="dot", width=1),
                  annotation_text=_("uniform 1/n"), annotation_position="top right")
    fig.update_xaxes(title=_("random key"), type="category")
    fig.update_yaxes(title=_("softmax weight"), range=[0, 1.02])
    return base_layout(fig, title or _("One random query against {n} random keys, d_k = {d_k}").format(
                                         n=n, d_k=d_k),
                       height=300, barmode="group", legend=dict(orientation="h", y=-0.25))
