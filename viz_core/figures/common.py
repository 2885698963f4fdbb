"""Shared helpers for the figure builders: labels, float32 arrays, pooling, layout.

Why these exist:
- Plotly merges duplicate category labels, so "the cat saw the dog" would draw one "the"
  column. Every token axis here uses unique category labels ("3·the") for data and hover,
  and shows the bare token as tick text.
- plotly 7 serialises numpy arrays as base64 typed arrays; float32 halves the payload of
  float64 and Python lists are far larger still, so every array goes in as float32 numpy.
"""

from __future__ import annotations

import base64
import math
import unicodedata
from collections.abc import Sequence

import numpy as np
import plotly.graph_objects as go

from ..i18n import N_, _

BLOCKED_COLOR = "#b8b8b8"  # plot background behind NaN (blocked) cells: neutral grey
BLOCKED_NOTE = N_("grey ✕ = blocked (mask True)")
WEIGHT_COLORSCALE = "Blues"  # white -> dark blue; never grey, so blocked cells stand out
SCORE_COLORSCALE = "RdBu_r"  # diverging for signed pre-softmax scores
MAX_TICKS = 64  # beyond this many tokens, show every n-th tick label only
MAX_MARKED_CELLS = 48 * 48  # draw a ✕ per blocked cell only for matrices up to this size
MARKED_SIDE = 32  # ... and up to this many keys: a 9 px ✕ needs ~12 px of a ~450 px plot

# A tiny template: plotly's default one is ~7 kB per figure, and Streamlit replaces the
# template with its own theme anyway.
_TEMPLATE = go.layout.Template(
    layout=dict(
        font=dict(size=12),
        paper_bgcolor="white",
        plot_bgcolor="white",
        margin=dict(l=60, r=20, t=50, b=50),
        hoverlabel=dict(namelength=-1),
    )
)


def f32(a) -> np.ndarray:
    """Contiguous float32 copy/view: the compact typed-array encoding in the figure JSON."""
    return np.ascontiguousarray(a, dtype=np.float32)


def plot_text(text) -> str:
    """Text exactly as typed in a plotly label. Plotly's labels, ticks and hovers read a
    little HTML (<b>, <i>, <br>, <sup>, <a href>, ...) and entities (&lt;, &#60;), so a token
    "<b>" would turn bold and "&lt;" would show as "<". Escaping "&" and "<" makes every
    token show literally (plotly turns &amp; and &lt; back into & and <)."""
    return str(text).replace("&", "&amp;").replace("<", "&lt;")


def _short(token, limit: int = 12) -> str:
    t = str(token)
    return t if len(t) <= limit else t[: limit - 1] + "…"


def unique_labels(tokens: Sequence[str], start: int = 0) -> list[str]:
    """``["the", "cat", "the"] -> ["0·the", "1·cat", "2·the"]``: position-prefixed, so unique.

    Long tokens are cut to 12 characters: the label only has to be unique and readable.
    ``start``: the position of the first token (a window of a longer input).
    """
    return [f"{i}·{plot_text(_short(t))}" for i, t in enumerate(tokens, start)]


def choice_labels(tokens: Sequence[str]) -> list[str]:
    """Position-prefixed tokens for a Streamlit select box, which shows text as it is (no
    plotly escaping): ``["the", "<b>"] -> ["0·the", "1·<b>"]``."""
    return [f"{i}·{_short(t)}" for i, t in enumerate(tokens)]


def bin_starts(n: int, size: int) -> np.ndarray:
    """First position of each of the <= size contiguous bins of n positions, exactly the bins
    of ``BlockTrace.overview`` (position i of n goes to bin i * nb // n)."""
    nb = max(1, min(n, size))
    return np.searchsorted((np.arange(n) * nb) // n, np.arange(nb)).astype(np.int64)


def range_labels(starts: Sequence[int], n: int) -> list[str]:
    """Unique labels of position bins: ``"0–15"``, ``"16–31"``, ... (``"7"`` for one)."""
    ends = [*list(starts[1:]), n]
    return [f"{a}–{b - 1}" if b - 1 > a else f"{a}" for a, b in zip(starts, ends, strict=True)]


def json_bytes(a: np.ndarray) -> int:
    """Bytes a float32 array takes in fig.to_json(): base64, plus 5 per "/" that plotly
    escapes as "\\u002f"."""
    b64 = base64.b64encode(f32(a).tobytes())
    return len(b64) + 5 * b64.count(b"/")


def tick_subset(labels: Sequence[str], tokens: Sequence[str], max_ticks: int = MAX_TICKS):
    """(tickvals, ticktext) showing every token, or every n-th one for long inputs."""
    step = max(1, math.ceil(len(labels) / max_ticks))
    idx = range(0, len(labels), step)
    return [labels[i] for i in idx], [plot_text(tokens[i]) for i in idx]


def token_axis(labels: Sequence[str], tokens: Sequence[str], title: str, reversed_: bool = False,
               max_ticks: int = MAX_TICKS) -> dict:
    """Layout dict of a categorical token axis (unique labels, bare tokens as tick text)."""
    tickvals, ticktext = tick_subset(labels, tokens, max_ticks)
    # No categoryarray: the first trace's data order already fixes the category order, and
    # repeating 512 labels would cost ~8 kB per axis.
    # autotickangles: horizontal labels, else vertical ones; plotly's default also tries 30°,
    # where neighbouring labels of a crowded axis still touch
    axis = dict(type="category", title=_(title), tickmode="array", tickvals=tickvals,
                ticktext=ticktext, showgrid=False, zeroline=False, autotickangles=[0, 90],
                automargin=True)
    if reversed_:
        axis["autorange"] = "reversed"  # matrix orientation: first query row at the top
    return axis


def title_dict(title: str | None, above: int = 0) -> dict | None:
    """A chart title that never lies over the plot's own text: at the top of the figure
    (yref "container") with automargin, which makes plotly reserve the title's height in the
    top margin and push the plotting area (with a top x axis's tick labels and title) below
    it. above: extra pixels under the title for what plotly does not count (subplot titles,
    which are annotations)."""
    if title is None:
        return None
    return dict(text=title, automargin=True, yref="container", y=1, yanchor="top",
                pad=dict(t=10, b=6 + above))


def colorbar(title: str | None = None, **kw) -> dict:
    """A colour bar whose title reads sideways to the right of its tick labels: on top (plotly's
    default) the title sits right against the highest tick label."""
    bar = dict(thickness=12, **kw)
    if title:
        bar["title"] = dict(text=_(title), side="right")  # a msgid ("weight") or translated
    return bar


def label_px(labels: Sequence[str], px_per_char: float = 7.0) -> int:
    """Rough width in pixels of the longest of labels at the charts' 12 px font: the room a
    tick label column (or a vertical x tick label) takes, for spacing and heights. A wide
    (CJK) character takes a full em, 12 px: "动物没有过马路" is 84 px, not 49."""
    def width(text: str) -> float:
        return sum(WIDE_PX if unicodedata.east_asian_width(ch) in "WF" else px_per_char
                   for ch in text)

    return int(max((width(str(x)) for x in labels), default=0))


WIDE_PX = 12.0  # a full-width character at the charts' 12 px font


TITLE_PX = 44  # a title's room at the top of a figure (17 px bold text and its padding)
TOP_AXIS_WIDTH_PX = 360  # about the narrowest plot of a top token axis on a page (Compare)
TOP_AXIS_TICKS = TOP_AXIS_WIDTH_PX // 20  # vertical labels there: ~20 px each


def top_axis(ticktext: Sequence[str], axis_title: bool = True) -> tuple[int, int]:
    """(tickangle, top margin) for an x axis drawn above the plot, under the chart title.

    Plotly keeps a title's room at the top of the figure but does not stack a top axis's
    labels and title under it, so the margin is counted here: the title, the tick labels
    (horizontal when all of them fit side by side in a narrow chart, else vertical, whose
    height is the longest label) and the axis title."""
    vertical = len(ticktext) * (label_px(ticktext) + 10) > TOP_AXIS_WIDTH_PX
    labels = label_px(ticktext) + 8 if vertical else 20
    return (-90 if vertical else 0), TITLE_PX + labels + (24 if axis_title else 0) + 6


def layout_dict(title: str | None = None, **kw) -> dict:
    """The layout base_layout would set, for go.Figure(traces, layout=...) in one pass."""
    if isinstance(title, str):
        title = title_dict(title)
    if kw.get("plot_bgcolor", "white") != "white" and isinstance(kw.get("margin", {}), dict):
        # Streamlit's theme pads the plot area by 8 px, which a heatmap's grey "blocked"
        # background would show as a frame round the cells (line charts keep the pad: it
        # keeps their x and y tick labels apart at the corner)
        kw["margin"] = {"pad": 0, **kw.get("margin", {})}
    return dict(template=_TEMPLATE, title=title, **kw)


def base_layout(fig: go.Figure, title: str | None = None, **kw) -> go.Figure:
    fig.update_layout(**layout_dict(title, **kw))
    return fig


def pool2d(m: np.ndarray, max_size: int = 64, how: str = "max",
           factor: int | None = None) -> np.ndarray:
    """Block-pool a [q, k] matrix so that each side is <= max_size (or by a given factor).

    Max pooling keeps thin structure (diagonals, a single sink column) visible in a
    thumbnail; mean pooling keeps mass. NaN cells (blocked) are ignored; an all-NaN block
    stays NaN.
    """
    m = np.asarray(m, dtype=np.float32)
    if factor is not None:
        fq = fk = factor
    else:
        fq = max(1, math.ceil(m.shape[0] / max_size))
        fk = max(1, math.ceil(m.shape[1] / max_size))
    if fq == 1 and fk == 1:
        return m.copy()
    nq, nk = math.ceil(m.shape[0] / fq), math.ceil(m.shape[1] / fk)
    padded = np.full((nq * fq, nk * fk), np.nan, dtype=np.float32)
    padded[: m.shape[0], : m.shape[1]] = m
    blocks = padded.reshape(nq, fq, nk, fk)
    all_nan = np.isnan(blocks).all(axis=(1, 3))
    filled = np.where(np.isnan(blocks), -np.inf if how == "max" else 0.0, blocks)
    if how == "max":
        out = filled.max(axis=(1, 3))
    elif how == "mean":
        counts = (~np.isnan(blocks)).sum(axis=(1, 3))
        out = filled.sum(axis=(1, 3)) / np.maximum(counts, 1)
    else:
        raise ValueError(f"how must be 'max' or 'mean', not {how!r}")
    out = out.astype(np.float32)
    out[all_nan] = np.nan
    return out


def pool_factor(n_q: int, n_k: int, max_cells: int | None) -> int:
    """Smallest integer f such that ceil(n_q/f) * ceil(n_k/f) <= max_cells (1 = full size)."""
    f = 1
    while max_cells is not None and math.ceil(n_q / f) * math.ceil(n_k / f) > max_cells:
        f += 1
    return f


def pooled_labels(tokens: Sequence[str], f: int, start: int = 0
                  ) -> tuple[list[str], list[str]]:
    """(unique labels, tick tokens) of positions pooled f at a time: "8–15·the" / "the".
    ``start``: the position of the first token (a window of a longer input)."""
    if f == 1:
        return unique_labels(tokens, start), [str(t) for t in tokens]
    starts = range(0, len(tokens), f)
    labels = [f"{start + a}–{start + min(a + f, len(tokens)) - 1}·{plot_text(_short(tokens[a]))}"
              for a in starts]
    return labels, [str(tokens[a]) for a in starts]


def blocked_marks(mask: np.ndarray, xlabels: Sequence[str], ylabels: Sequence[str],
                  xaxis: str = "x", yaxis: str = "y", showlegend: bool = True,
                  max_side: int = MARKED_SIDE) -> go.Scatter | None:
    """A "✕" per blocked cell, for small matrices only (large ones rely on the grey NaN):
    at most MAX_MARKED_CELLS cells and max_side keys, where neighbouring ✕ would touch.

    Returns None when there is nothing to mark or the matrix is too big to mark cell by cell.
    """
    mask = np.asarray(mask, dtype=bool)
    if not mask.any() or mask.size > MAX_MARKED_CELLS or mask.shape[-1] > max_side:
        return None
    qi, ki = np.nonzero(mask)
    return go.Scatter(
        x=[xlabels[k] for k in ki], y=[ylabels[q] for q in qi], mode="text", text="✕",
        textfont=dict(color="#555555", size=9), name="✕ blocked (mask True)",
        hovertemplate="%{y} → %{x}: " + _("blocked") + "<extra></extra>", xaxis=xaxis, yaxis=yaxis,
        showlegend=showlegend,
    )


def check_matrix(m: np.ndarray, query_tokens: Sequence[str], key_tokens: Sequence[str]) -> None:
    if m.ndim != 2 or m.shape != (len(query_tokens), len(key_tokens)):
        raise ValueError(
            f"matrix shape {m.shape} does not match {len(query_tokens)} query tokens x "
            f"{len(key_tokens)} key tokens"
        )
