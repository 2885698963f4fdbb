"""The Positional encoding page's view of a rotary model (pages/positional.py): the model's
own RoPE read from its config, the angles, one rotated query / key pair and the long-range
decay bound. URL: rope_len, rope_pair, rope_m, rope_n, rope_shift."""

from __future__ import annotations

import numpy as np
import streamlit as st

from viz_core.figures.rope import (
    angle_curves,
    angle_heatmap,
    decay_figure,
    frequency_figure,
    pair_rotation_figure,
    rotary_score_figure,
)
from viz_core.i18n import _
from viz_core.lessons.rope import decay_bound, pair_demo, rotary_scores

from .charts import chart
from .controls import url_number

ROPE_FORMULA = (r"f(\mathbf{x}, m)_{(i,\,i+d/2)} = \begin{pmatrix}\cos m\theta_i & "
                r"-\sin m\theta_i\\ \sin m\theta_i & \cos m\theta_i\end{pmatrix}"
                r"\begin{pmatrix}x_i\\ x_{i+d/2}\end{pmatrix},\qquad "
                r"\theta_i = \text{base}^{-2i/d},\qquad "
                r"\langle f(\mathbf{q}, m), f(\mathbf{k}, n)\rangle = "
                r"g(\mathbf{q}, \mathbf{k}, m - n)")
EXAMPLE_Q, EXAMPLE_K = np.array([1.0, 0.25]), np.array([0.55, 0.8])  # one query / key pair


def show_rope(specs) -> None:
    """The model's rotary embedding, read from its own config."""
    if len(specs) > 1:
        names = [s.layer_type for s in specs]
        chosen = st.selectbox(_("Layer type"), names, key="rope_layer_type",
                              help=_("This model uses a different RoPE on each kind of layer."))
        spec = specs[names.index(chosen)]
    else:
        spec = specs[0]
    st.latex(ROPE_FORMULA)
    scaling = "none" if not spec.scaled else f"{spec.rope_type} " + ", ".join(
        f"{k} = {v}" for k, v in sorted(spec.parameters.items()) if v is not None)
    st.caption(
        _("Rotary position embeddings: nothing is added to the embeddings; every self-attention "
          "turns q and k by their positions. base = {base:g}, d = {dim} rotated dimensions of "
          "{head_dim} per head ({pairs} pairs, paired (i, i + d/2)), scaling: {scaling}").format(
            base=spec.base, dim=spec.dim, head_dim=spec.head_dim, pairs=spec.pairs,
            scaling=scaling)
        + (_(", cos/sin × {attention_factor:.4g}").format(attention_factor=spec.attention_factor)
           if spec.attention_factor != 1 else "")
        + _(". Read from {source}.").format(source=spec.source))
    chart(frequency_figure(spec), key="rope_freq", name="rope-frequencies")
    longest = spec.max_positions or 4096
    c1, c2 = st.columns(2)
    n_pos = url_number(_("Positions"), "rope_len", min(128, longest), 2, min(longest, 4096),
                       container=c1)
    pairs = c2.multiselect(_("Pairs"), list(range(spec.pairs)), key="rope_pairs",
                           placeholder=_("Choose"),
                           default=sorted({0, 1, spec.pairs // 4, spec.pairs - 1}))
    freqs = spec.frequencies
    if pairs:
        chart(angle_curves(freqs, pairs, n_pos), key="rope_angles", name="rope-angles")
    chart(angle_heatmap(freqs, n_pos), key="rope_angle_map", name="rope-angle-heatmap")

    st.subheader(_("One query and one key pair, rotated"))
    c1, c2, c3, c4 = st.columns(4)
    i = url_number(_("Pair i"), "rope_pair", min(1, spec.pairs - 1), 0, spec.pairs - 1,
                   container=c1)
    m = url_number(_("Query position m"), "rope_m", 3, 0, 100_000, container=c2)
    n = url_number(_("Key position n"), "rope_n", 1, 0, 100_000, container=c3)
    shift = url_number(_("Shift both by"), "rope_shift", 5, 0, 100_000, container=c4)
    demo = pair_demo(EXAMPLE_Q, EXAMPLE_K, float(freqs[i]), m, n, shift)
    chart(pair_rotation_figure(demo), key="rope_pair_fig", name="rope-pair")
    st.caption(_("Pair {i} turns by θ = {value:.4g} rad per position. Shifting both positions by "
                 "{shift} turns q and k by the same angle, so the angle between them, and q·k, "
                 "stay the same: q·k depends only on m − n = {value2}.").format(
                   i=i, value=freqs[i], shift=shift, value2=m - n))
    rng = np.random.default_rng(0)
    q, k = rng.standard_normal(spec.dim), rng.standard_normal(spec.dim)
    chart(rotary_score_figure(rotary_scores(q, k, freqs, min(n_pos, 64)),
                              title=_("q·k for one random q and k at every (m, n): constant "
                                    "along diagonals")),
          key="rope_scores", name="rope-scores")

    st.subheader(_("Long-range decay"))
    st.latex(r"\Big|\sum_{i} h_i e^{\mathrm{i}(m-n)\theta_i}\Big| \le "
             r"\max_i |h_{i+1} - h_i| \sum_{j=1}^{d/2} |S_j|,\qquad "
             r"S_j = \sum_{k=0}^{j-1} e^{\mathrm{i}(m-n)\theta_k}")
    distances = np.arange(0, max(256, n_pos))
    curves = {_("this model") + (f" ({spec.rope_type})" if spec.scaled else ""):
              decay_bound(freqs, distances)}
    if spec.scaled:
        curves["without scaling"] = decay_bound(spec.default_inv_freq, distances)
    chart(decay_figure(distances, curves), key="rope_decay", name="rope-decay")
    st.caption(_("RoFormer, section 3.4.3: the relative upper bound (1/(d/2))·Σⱼ|Sⱼ| of q·k "
               "shrinks, with oscillations, as the distance between query and key grows."))
