"""A model's whole absolute position table, and which dimensions of a sinusoidal table are
sines or cosines (interleaved as in the paper, or Marian's first-half/second-half split).

The whole table is found by matching: trace.positional holds the rows the model added for
this input's positions; the model's own position table (a weight or buffer of shape
[positions, d_model]) contains those rows at some offset (0 for most models, 2 for BART,
padding_idx + 1 for RoBERTa). Matching needs no per-family list and checks itself: a table
is only returned when its rows equal what the model really added.
"""

from __future__ import annotations

import numpy as np

from ..model.choices import SinusoidLayout, choose

POSITION_NAMES = ("position", "wpe", "embed_positions", "pos_emb")
MAX_OFFSET = 4


def _candidates(module):
    """(name, tensor) of every 2-D parameter or buffer that looks like a position table."""
    if module is None or not hasattr(module, "named_parameters"):
        return
    seen = set()
    for name, t in [*module.named_parameters(), *module.named_buffers()]:
        if t.ndim == 2 and any(k in name for k in POSITION_NAMES) and id(t) not in seen:
            seen.add(id(t))
            yield name, t


def find_offset(table: np.ndarray, rows: np.ndarray, max_offset: int = MAX_OFFSET,
                atol: float = 1e-5) -> int | None:
    """The o with table[o:o + len(rows)] == rows (to atol), or None."""
    n = len(rows)
    for o in range(0, max_offset + 1):
        if o + n <= len(table) and np.allclose(table[o:o + n], rows, atol=atol, rtol=1e-5):
            return o
    return None


def whole_table(model, positional: np.ndarray | None) -> tuple[np.ndarray | None, str]:
    """(float32 [positions, d_model] the model can add, where it came from) or (None, why).

    `positional` is trace.positional (the rows for this input). Row p of the result is what
    the model adds at position p.
    """
    if positional is None or len(positional) == 0:
        return None, "this model adds no absolute position table"
    rows = np.asarray(positional, dtype=np.float32)
    module = getattr(model, "hf_model", None) or getattr(model, "model", None)
    for name, t in _candidates(module):
        if t.shape[1] != rows.shape[1] or t.shape[0] < rows.shape[0]:
            continue
        table = t.detach().float().cpu().numpy()
        o = find_offset(table, rows)
        if o is not None:
            where = f"{name}" + (f" from row {o}" if o else "")
            return np.ascontiguousarray(table[o:], dtype=np.float32), where
    return None, "the model's position table could not be read; showing this input's rows"


def sinusoid_layout(table: np.ndarray, atol: float = 1e-4) -> str | None:
    """"interleaved" (sin on even, cos on odd dimensions, as in the paper), "half" (sin in
    the first ceil(d/2) dimensions, cos in the rest, as Marian), or None (not sinusoidal).

    Read from PE(0): every sine is 0 and every cosine 1 at position 0; then the table must
    equal the closed form of that layout.
    """
    t = np.asarray(table, dtype=np.float64)
    if t.ndim != 2 or t.shape[0] < 2 or t.shape[1] < 2:
        return None
    d = t.shape[1]
    for layout in ("interleaved", "half"):
        if np.allclose(t, sinusoid_closed_form(t.shape[0], d, layout), atol=atol):
            return layout
    return None


def sinusoid_closed_form(length: int, d: int, layout: SinusoidLayout = "interleaved"
                         ) -> np.ndarray:
    """float64 [length, d]. interleaved: PE[p, 2i] = sin(p w_i), PE[p, 2i+1] = cos(p w_i);
    half (Marian): PE[p, j] = sin(p w_j) for j < ceil(d/2), PE[p, ceil(d/2) + j] =
    cos(p w_j); w_i = 10000^(-2i/d)."""
    pos = np.arange(length, dtype=np.float64)[:, None]
    if layout == "interleaved":
        i = np.arange(d) // 2
        angle = pos * np.power(10000.0, -2 * i / d)
        return np.where(np.arange(d) % 2 == 0, np.sin(angle), np.cos(angle))
    if layout == "half":
        half = (d + 1) // 2
        w = np.power(10000.0, -2 * np.arange(half) / d)
        return np.concatenate([np.sin(pos * w), np.cos(pos * w[: d - half])], axis=1)
    choose(layout, SinusoidLayout, "layout")  # raises: the layout is neither
    raise AssertionError(layout)


def sin_cos_labels(table: np.ndarray) -> list[str] | None:
    """"sin" / "cos" per dimension of a sinusoidal table (either layout), else None."""
    layout = sinusoid_layout(table)
    d = np.asarray(table).shape[1]
    if layout == "interleaved":
        return ["sin" if j % 2 == 0 else "cos" for j in range(d)]
    if layout == "half":
        half = (d + 1) // 2
        return ["sin" if j < half else "cos" for j in range(d)]
    return None


def pair_of(dim: int, d: int, layout: SinusoidLayout) -> int:
    """The dimension holding the other half (cos for sin and back) of the same frequency."""
    if layout == "interleaved":
        return dim ^ 1 if (dim ^ 1) < d else dim
    half = (d + 1) // 2
    other = dim + half if dim < half else dim - half
    return other if other < d else dim
