"""Rotary position embeddings (RoPE): frequencies, rotation angles, the 2-D picture of one
query/key pair, q.k by relative position, and the long-range decay bound.

numpy in, plotly figure out; the numbers come from viz_core.lessons.rope (pure functions).
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
import plotly.graph_objects as go

from viz_core.i18n import _

from ..lessons.rope import PairDemo, RopeSpec, rotation_angles, wavelengths
from .common import SCORE_COLORSCALE, base_layout, f32
from .heatmap import MAX_CELLS_SIGNED, matrix_heatmap


def frequency_figure(spec: RopeSpec, title: str | None = None) -> go.Figure:
    """theta_i per pair (log axis): base^(-2i/d), and the scaled frequencies if any."""
    i = f32(np.arange(spec.pairs))
    fig = go.Figure(go.Scatter(
        x=i, y=f32(spec.default_inv_freq), mode="markers+lines",
        name=f"θᵢ = {spec.base:g}^(−2i/{spec.dim})",
        customdata=f32(wavelengths(spec.default_inv_freq)),
        hovertemplate=_("pair {i}: θ = {theta} rad/position, wavelength {wavelength}").format(
            i="%{x}", theta="%{y:.4g}", wavelength="%{customdata:.4g}") + "<extra></extra>"))
    if spec.scaled:
        fig.add_trace(go.Scatter(
            x=i, y=f32(spec.frequencies), mode="markers+lines", name=_("{rope_type} scaling").format(
                                                                         rope_type=spec.rope_type),
            customdata=f32(wavelengths(spec.frequencies)),
            hovertemplate=_("pair {i}: θ' = {theta}, wavelength {wavelength}").format(
                i="%{x}", theta="%{y:.4g}", wavelength="%{customdata:.4g}") + "<extra></extra>"))
    fig.update_xaxes(title=_("dimension pair i"))
    fig.update_yaxes(title=_("θᵢ (radians per position)"), type="log")
    return base_layout(fig, title or _("Rotation speed of each dimension pair"))


def angle_curves(inv_freq: np.ndarray, pairs: Sequence[int], n_pos: int,
                 title: str | None = None) -> go.Figure:
    """The angle pos·θᵢ (mod 2π) of chosen pairs against position: fast pairs wrap often,
    slow ones barely move."""
    pos = np.arange(n_pos)
    angles = np.mod(rotation_angles(inv_freq, pos), 2 * np.pi)
    fig = go.Figure()
    for i in pairs:
        fig.add_trace(go.Scatter(
            x=f32(pos), y=f32(angles[:, i]), mode="lines", name=_("pair {i}").format(i=i),
            hovertemplate=_("pair {i}, position {pos}: {angle} rad").format(
                i=i, pos="%{x}", angle="%{y:.3f}") + "<extra></extra>"))
    fig.update_xaxes(title=_("position"))
    fig.update_yaxes(title=_("rotation angle mod 2π (radians)"), range=[0, 2 * np.pi])
    return base_layout(fig, title or _("Rotation angle pos·θᵢ of each pair"))


def angle_heatmap(inv_freq: np.ndarray, n_pos: int, title: str | None = None) -> go.Figure:
    """cos(pos·θᵢ): position (rows) × pair (columns), the rotary analogue of the sinusoidal
    table."""
    c = np.cos(rotation_angles(inv_freq, np.arange(n_pos)))
    fig = go.Figure(go.Heatmap(
        z=f32(c), colorscale=SCORE_COLORSCALE, zmin=-1, zmax=1,
        hovertemplate=_("position {pos}, pair {i}: cos = {cos}").format(
            pos="%{y}", i="%{x}", cos="%{z:.3f}") + "<extra></extra>",
        colorbar=dict(thickness=12)))
    fig.update_xaxes(title=_("dimension pair i"))
    fig.update_yaxes(title=_("position"), autorange="reversed")
    return base_layout(fig, title or _("cos(pos·θᵢ): position × pair"))


def pair_rotation_figure(demo: PairDemo, title: str | None = None) -> go.Figure:
    """One query pair and one key pair as arrows, rotated at (m, n) and at (m+s, n+s): the
    angle between them, and so their dot product, is the same."""
    fig = go.Figure()
    styles = ("solid", "dot")
    colours = {"q": "#d62728", "k": "#1f77b4"}
    lim = 1.15 * max(float(np.linalg.norm(demo.q)), float(np.linalg.norm(demo.k)), 1e-6)
    tips: list[tuple[np.ndarray, str]] = []  # labelled tips so far and where their label went
    for (a, b), (qa, kb), dash, dot in zip(demo.positions, demo.rotated, styles, demo.dots):
        for label, vec, pos in (("q", qa, a), ("k", kb, b)):
            tip = np.asarray(vec[:2], dtype=float)
            # a tip near an already labelled one with its label above gets its label below
            near = any(np.linalg.norm(tip - t) < 0.25 * lim and where == "top center"
                       for t, where in tips)
            where = "bottom center" if near else "top center"
            tips.append((tip, where))
            fig.add_trace(go.Scatter(
                x=f32([0, vec[0]]), y=f32([0, vec[1]]), mode="lines+markers+text",
                line=dict(color=colours[label], dash=dash, width=3),
                marker=dict(size=[0, 9]), text=["", f"{label}@{pos}"],
                textposition=where,
                name=_("{label} at position {pos} (q·k = {dot:.3f})").format(
                         label=label, pos=pos, dot=dot),
                hovertemplate=_("{label} at position {pos}: ({x}, {y})").format(
                    label=label, pos=pos, x="%{x:.3f}", y="%{y:.3f}") + "<extra></extra>"))
    fig.update_xaxes(range=[-lim, lim], zeroline=True, title=_("dimension") + " 2i")
    fig.update_yaxes(range=[-lim, lim], zeroline=True, scaleanchor="x", scaleratio=1,
                     title=_("dimension") + " 2i+1")
    (m, n), (m2, n2) = demo.positions
    return base_layout(fig, title or (_("q·k at ({m}, {n}) = {value:.4f}; at ({m2}, {n2}) = "
                                        "{value2:.4f}").format(
                                          m=m, n=n, value=demo.dots[0], m2=m2, n2=n2,
                                          value2=demo.dots[1])))


def rotary_score_figure(scores: np.ndarray, title: str | None = None) -> go.Figure:
    """q_m·k_n for one fixed q and k at every pair of positions: constant along diagonals."""
    lim = float(np.max(np.abs(scores))) if scores.size else 1.0
    labels = [str(p) for p in range(scores.shape[0])]
    return matrix_heatmap(
        f32(scores), labels, labels, title=title or _("RoPE: q rotated at m · k rotated at n"),
        value_name="q·k", colorscale=SCORE_COLORSCALE, zmin=-lim, zmax=lim,
        x_title=_("key position n"), y_title=_("query position m"), max_cells=MAX_CELLS_SIGNED,
        max_ticks=16)  # position numbers: every n-th one (64 labels crowd a half-page chart)


def decay_figure(distances: np.ndarray, curves: dict[str, np.ndarray],
                 title: str | None = None) -> go.Figure:
    """RoFormer 3.4.3: the relative upper bound (1/(d/2))·Σⱼ|Sⱼ| against relative distance."""
    fig = go.Figure()
    for name, y in curves.items():
        fig.add_trace(go.Scatter(x=f32(distances), y=f32(y), mode="lines", name=name,
                                 hovertemplate=_("distance {d}: {bound}").format(
                                     d="%{x}", bound="%{y:.3f}") + "<extra></extra>"))
    fig.update_xaxes(title=_("relative distance m − n"))
    fig.update_yaxes(title=_("relative upper bound"))
    return base_layout(fig, title or _("Long-range decay of the q·k bound"))
