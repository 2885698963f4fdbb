"""Positional encodings: curves per dimension, a position x dimension heatmap, wavelengths,
and the PE(p)·PE(q) similarity matrix.

Everything accepts any [pos, d_model] table (trace.positional of sinusoidal or learned
models). `sinusoidal_table` is the closed form of the paper in numpy; the model's own
torch version is viz_core.model.positional.sinusoidal_encoding (the tests check that both
agree), kept separate so that building figures never imports torch.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
import plotly.graph_objects as go

from viz_core.i18n import N_, _

from ..lessons.positions import sin_cos_labels
from .common import SCORE_COLORSCALE, base_layout, f32, plot_text
from .heatmap import MAX_CELLS_SIGNED, matrix_heatmap


def sinusoidal_table(length: int, d_model: int) -> np.ndarray:
    """float32 [length, d_model]: PE[p, 2i] = sin(p / 10000^(2i/d)), PE[p, 2i+1] = cos(same)."""
    pos = np.arange(length, dtype=np.float64)[:, None]
    two_i = (np.arange(d_model) // 2 * 2).astype(np.float64)  # 0, 0, 2, 2, 4, 4, ...
    angle = pos / np.power(10000.0, two_i / d_model)
    pe = np.where(np.arange(d_model) % 2 == 0, np.sin(angle), np.cos(angle))
    return pe.astype(np.float32)


def sinusoidal_wavelengths(d_model: int) -> np.ndarray:
    """Wavelength of each dimension: 2*pi*10000^(2i/d), from 2*pi up to (almost) 10000*2*pi."""
    two_i = np.arange(d_model) // 2 * 2
    return 2 * np.pi * np.power(10000.0, two_i / d_model)


def dominant_wavelengths(table: np.ndarray) -> np.ndarray:
    """Estimated wavelength (in positions) of each dimension of ANY table [pos, d]: the
    period of the strongest non-constant Fourier component. Only periods up to the table
    length can be seen; a dimension with no variation gets NaN."""
    t = np.asarray(table, dtype=np.float64)
    n = t.shape[0]
    spec = np.abs(np.fft.rfft(t - t.mean(axis=0), axis=0))[1:]  # drop the constant term
    if spec.size == 0:
        return np.full(t.shape[1], np.nan)
    freq = np.argmax(spec, axis=0) + 1  # cycles per table length
    out = n / freq.astype(np.float64)
    out[spec.max(axis=0) < 1e-9] = np.nan
    return out


def pe_similarity(table: np.ndarray, normalize: bool = False) -> np.ndarray:
    """PE(p)·PE(q) for all position pairs, float32 [pos, pos] (cosine if normalize).

    For sinusoids the dot product is sum_i cos((p - q) * w_i): it depends only on p - q.
    """
    t = np.asarray(table, dtype=np.float64)
    if normalize:
        t = t / np.maximum(np.linalg.norm(t, axis=1, keepdims=True), 1e-12)
    return (t @ t.T).astype(np.float32)


def positional_curves(table: np.ndarray, dims: Sequence[int], title: str | None = None,
                      sinusoidal: bool = False, start: int = 0,
                      marks: Sequence[str] | None = None) -> go.Figure:
    """One line per chosen dimension over positions start .. start + len(table) - 1.

    sinusoidal=True: the legend says sin or cos per dimension, read from the table itself
    (the paper interleaves sin/cos on even/odd dimensions; Marian puts every sin in the
    first half and every cos in the second), falling back to even/odd when the table
    matches neither closed form. marks: the input's tokens, drawn as points at positions
    0 .. len(marks) - 1 on every curve (the positions this sentence uses).
    """
    t = np.asarray(table)
    pos = f32(np.arange(start, start + t.shape[0]))
    labels = None
    if sinusoidal:
        labels = sin_cos_labels(t) or ["sin" if d % 2 == 0 else "cos" for d in range(t.shape[1])]
    fig = go.Figure()
    shown = [] if marks is None else [p for p in range(len(marks)) if start <= p < start + len(t)]
    for d in dims:
        name = _("dim {d}").format(d=d) + (f" ({labels[d]})" if labels else "")
        fig.add_trace(go.Scatter(
            x=pos, y=f32(t[:, d]), mode="lines", name=name, meta={"dim": int(d)},
            hovertemplate=f"{name}, {_('position')} %{{x}}: %{{y:.4f}}<extra></extra>"))
        if shown:
            fig.add_trace(go.Scatter(
                x=f32(shown), y=f32(t[[p - start for p in shown], d]), mode="markers",
                name=f"{name} · {_('this input')}", showlegend=False, meta={"dim": int(d), "marks": True},
                text=[plot_text(marks[p]) for p in shown], marker=dict(size=7),
                hovertemplate=f"{name}, {_('position')} %{{x}} (%{{text}}): %{{y:.4f}}"
                              "<extra></extra>"))
    if shown:
        fig.add_vrect(x0=shown[0] - 0.5, x1=shown[-1] + 0.5, fillcolor="#fdd835", opacity=0.2,
                      line_width=0, annotation_text=_("this input"), annotation_position="top left")
    fig.update_xaxes(title=_("position"))
    fig.update_yaxes(title=_("PE value"))
    return base_layout(fig, title or _("Positional encoding by dimension"))


def positional_heatmap(table: np.ndarray, title: str | None = None, start: int = 0
                       ) -> go.Figure:
    """Position (rows, top to bottom, from `start`) x dimension (columns) heatmap."""
    t = f32(table)
    lim = float(np.max(np.abs(t))) if t.size else 1.0
    fig = go.Figure(go.Heatmap(
        z=t, colorscale=SCORE_COLORSCALE, zmin=-lim, zmax=lim, y0=start, dy=1,
        hovertemplate=_("position") + " %{y}, " + _("dim {d}").format(d="%{x}")
        + ": %{z:.4f}<extra></extra>",
        colorbar=dict(thickness=12)))
    fig.update_xaxes(title=_("dimension"))
    fig.update_yaxes(title=_("position"), autorange="reversed")
    return base_layout(fig, title or _("Positional encoding: position × dimension"))


def wavelength_figure(table: np.ndarray | None = None, d_model: int | None = None,
                      title: str | None = None) -> go.Figure:
    """Wavelength per dimension on a log axis.

    With d_model (a sinusoidal model): the closed form, 2*pi to 10000*2*pi. With only a
    table: the estimated dominant period of each dimension (labelled as an estimate).
    """
    if d_model is not None:
        wl, name = sinusoidal_wavelengths(d_model), _("wavelength 2π·10000^(2i/d)")
    elif table is not None:
        wl, name = dominant_wavelengths(table), _("estimated dominant period")
    else:
        raise ValueError("give a table or d_model")
    fig = go.Figure(go.Scatter(
        x=f32(np.arange(len(wl))), y=f32(wl), mode="markers+lines", name=name,
        hovertemplate=_("dim {d}").format(d="%{x}") + ": "
        + _("{n} positions").format(n="%{y:.4g}") + "<extra></extra>"))
    fig.update_xaxes(title=_("dimension"))
    fig.update_yaxes(title=_("wavelength (positions)"), type="log", dtick=1)  # decades: 2..9 crowd
    return base_layout(fig, title or name)


POSITION_TICKS = 16  # position numbers on a similarity matrix: a tick every n-th position


def similarity_figure(table: np.ndarray, normalize: bool = False, title: str | None = None,
                      start: int = 0) -> go.Figure:
    """PE(p)·PE(q) heatmap. Constant along diagonals for sinusoids (depends on p - q only)."""
    sim = pe_similarity(table, normalize)
    lim = float(np.max(np.abs(sim))) if sim.size else 1.0
    labels = [str(start + p) for p in range(sim.shape[0])]
    return matrix_heatmap(
        sim, labels, labels, title=title or (_("cos(PE(p), PE(q))") if normalize
                                             else _("PE(p) · PE(q)")),
        value_name=N_("similarity"), colorscale=SCORE_COLORSCALE, zmin=-lim, zmax=lim,
        x_title=N_("position q"), y_title=N_("position p"), max_cells=MAX_CELLS_SIGNED,
        max_ticks=POSITION_TICKS)
