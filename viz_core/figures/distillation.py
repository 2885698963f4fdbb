"""Teacher and student figures (viz_core.analysis.distillation): the student layer x teacher
layer map of one measure with the chosen mapping drawn on it, and one pair's two attention
maps side by side with their difference."""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
import plotly.graph_objects as go
from plotly.subplots import make_subplots

from viz_core.i18n import _

from .common import (
    SCORE_COLORSCALE,
    WEIGHT_COLORSCALE,
    base_layout,
    colorbar,
    f32,
    label_px,
    plot_text,
    title_dict,
    token_axis,
    unique_labels,
)

MAP_COLORSCALE = "Viridis_r"  # low (close to the teacher) is bright
MAPPING_COLOR = "#d62728"


def layer_map_figure(matrix: np.ndarray, mapping: Sequence[tuple[int, int]], *,
                     measure: str, teacher: str = "teacher", student: str = "student",
                     title: str | None = None) -> go.Figure:
    """Heatmap of one measure, float [student layer, teacher layer]: student layers top to
    bottom, teacher layers left to right; each value written in its cell; NaN (undefined)
    cells grey. The mapping is drawn as a red frame round each of its cells."""
    z = f32(matrix)
    n_s, n_t = z.shape
    finite = z[np.isfinite(z)]
    text = [["–" if not np.isfinite(v) else f"{v:.3g}" for v in row] for row in z]
    fig = go.Figure(go.Heatmap(
        z=z, x=list(range(n_t)), y=list(range(n_s)), colorscale=MAP_COLORSCALE,
        zmin=0.0 if finite.size else None, zmax=float(finite.max()) if finite.size else None,
        text=text, texttemplate="%{text}", textfont=dict(size=11),
        colorbar=colorbar(measure), name=measure,
        hovertemplate=_("student layer {s} ↔ teacher layer {t}").format(s="%{y}", t="%{x}")
        + f"<br>{plot_text(_(measure))}: %{{z:.4g}}<extra></extra>"))
    if mapping:
        s, t = zip(*sorted(mapping), strict=True)
        # a red frame round each mapped cell (its value stays readable inside), and an
        # invisible marker per cell for the hover
        for si, ti in zip(s, t, strict=True):
            fig.add_shape(type="rect", x0=ti - 0.48, x1=ti + 0.48, y0=si - 0.46, y1=si + 0.46,
                          line=dict(color=MAPPING_COLOR, width=3), name=_("mapped pair"))
        fig.add_trace(go.Scatter(
            x=list(t), y=list(s), mode="markers", name=_("mapping"),
            marker=dict(symbol="square", size=24, color=MAPPING_COLOR, opacity=0),
            hovertemplate=_("mapped: student layer {s} learns from teacher layer {t}").format(
                s="%{y}", t="%{x}") + "<extra></extra>"))
    fig.update_xaxes(title=_("teacher layer ({name})").format(name=plot_text(teacher)),
                     tickmode="array",
                     tickvals=list(range(n_t)), ticktext=[str(i) for i in range(n_t)],
                     range=[-0.5, n_t - 0.5], showgrid=False, zeroline=False)
    fig.update_yaxes(title=_("student layer ({name})").format(name=plot_text(student)),
                     tickmode="array",
                     tickvals=list(range(n_s)), ticktext=[str(i) for i in range(n_s)],
                     range=[n_s - 0.5, -0.5], showgrid=False, zeroline=False)
    return base_layout(fig, title or _("{measure}: every student layer against every teacher "
                                       "layer").format(measure=measure), showlegend=False,
                       plot_bgcolor="#b8b8b8", height=max(260, 60 * n_s + 160))


def pair_maps_figure(tokens: Sequence[str], teacher_map: np.ndarray, student_map: np.ndarray,
                     *, teacher_label: str = "teacher", student_label: str = "student",
                     title: str | None = None) -> go.Figure:
    """Three panels over the same tokens (queries top to bottom, keys left to right): the
    teacher's attention map, the student's, and student - teacher (red: the student attends
    more, blue: less), on one shared colour scale for the two maps."""
    t, s = f32(teacher_map), f32(student_map)
    if t.shape != s.shape or t.shape != (len(tokens), len(tokens)):
        raise ValueError(f"maps {t.shape} and {s.shape} do not match {len(tokens)} tokens")
    labels = unique_labels(tokens)
    shown = [plot_text(x) for x in tokens]
    diff = s - t
    top = float(max(t.max(initial=0.0), s.max(initial=0.0))) or 1.0
    span = float(np.abs(diff).max(initial=0.0)) or 1e-6
    fig = make_subplots(rows=1, cols=3, shared_yaxes=True, horizontal_spacing=0.03,
                        subplot_titles=[plot_text(teacher_label), plot_text(student_label),
                                        _("student − teacher")])
    for col, (z, axis, name) in enumerate(((t, "coloraxis", _("teacher")),
                                           (s, "coloraxis", _("student")),
                                           (diff, "coloraxis2", _("difference"))), start=1):
        fig.add_trace(go.Heatmap(
            z=z, x=labels, y=labels, coloraxis=axis, name=name,
            hovertemplate=f"{name}: %{{y}} → %{{x}}: %{{z:.3f}}<extra></extra>"),
            row=1, col=col)
        fig.update_xaxes(**token_axis(labels, tokens, "key"), row=1, col=col)
        fig.update_yaxes(**token_axis(labels, tokens, "query" if col == 1 else "",
                                      reversed_=True), row=1, col=col)
    fig.update_layout(
        coloraxis=dict(colorscale=WEIGHT_COLORSCALE, cmin=0.0, cmax=top,
                       colorbar=colorbar("weight", x=1.0, len=0.9)),
        coloraxis2=dict(colorscale=SCORE_COLORSCALE, cmin=-span, cmax=span,
                        colorbar=colorbar("difference", x=1.09, len=0.9)))
    height = max(340, min(900, 22 * len(tokens) + 160)) + label_px(shown)
    return base_layout(fig, title_dict(title or "Attention maps of the pair", above=24),
                       height=height, margin=dict(r=140))
