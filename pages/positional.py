"""Positional encoding: the model's own (a table, or rotary), the sinusoidal formula for any
size, and sinusoidal vs rotary side by side."""

import numpy as np
import streamlit as st

from attention_lab.ui import state
from attention_lab.ui.charts import chart, download
from attention_lab.ui.controls import url_number
from attention_lab.ui.errors import translated
from attention_lab.ui.page import selection, show_trace_messages
from attention_lab.ui.rope import show_rope
from viz_core import npz_bytes
from viz_core.figures.positional import (
    positional_curves,
    positional_heatmap,
    similarity_figure,
    sinusoidal_table,
    wavelength_figure,
)
from viz_core.figures.rope import rotary_score_figure
from viz_core.i18n import _
from viz_core.lessons.positions import sinusoid_layout, whole_table
from viz_core.lessons.rope import rope_frequencies, rope_specs, rotary_scores

sel = selection()
st.title(_("Positional encoding"))
st.latex(r"PE_{(pos,\,2i)} = \sin\!\left(\frac{pos}{10000^{2i/d_{model}}}\right),\qquad "
         r"PE_{(pos,\,2i+1)} = \cos\!\left(\frac{pos}{10000^{2i/d_{model}}}\right)")
st.caption(_("The original Transformer's sinusoidal encoding (Vaswani et al., 2017). The "
             "first tab shows this model's own encoding, whether learned, sinusoidal or "
             "rotary."))

tab_model, tab_formula, tab_compare = st.tabs([_("This model's encoding"), _("Formula explorer"),
                                               _("Sinusoidal vs rotary")])
with tab_model:
    trace = sel.trace()
    show_trace_messages(trace)
    specs = rope_specs(sel.model) if trace.positional_kind == "rotary" else []
    if specs:
        show_rope(specs)
    elif trace.positional is None:
        st.info(translated(trace.positional_note) if trace.positional_note else
                _("This model adds no absolute positional encoding."))
    else:
        full, source = whole_table(sel.model, trace.positional)
        if full is None:
            st.caption(source)
            full = trace.positional
        layout = sinusoid_layout(full) if trace.positional_kind == "sinusoidal" else None
        if layout == "half":
            st.latex(r"\text{" + _("This model (Marian):") + r"} \ PE_{(pos,\,i)} = \sin\!\left("
                     r"\frac{pos}{10000^{2i/d_{model}}}\right),\ "
                     r"PE_{(pos,\,\lceil d/2\rceil + i)} = \cos\!\left("
                     r"\frac{pos}{10000^{2i/d_{model}}}\right)")
            st.caption(_("sin fills the first half of the dimensions and cos the second half "
                       "(not interleaved even/odd as in the paper)."))
        n_pos, d = full.shape
        n_input = len(trace.positional)
        st.caption(_("{positional_kind} encoding added to the embeddings: the model's table has "
                     "{n_pos} positions × {d} dimensions; this input uses positions 0–{value} "
                     "(marked).").format(
                       positional_kind=_(trace.positional_kind), n_pos=n_pos, d=d,
                       value=n_input - 1))
        c1, c2 = st.columns(2)
        lo = url_number(_("From position"), "pe_from", 0, 0, n_pos - 1, container=c1)
        hi = url_number(_("To position"), "pe_to", min(n_pos, 512) - 1, 0, n_pos - 1,
                        container=c2, help=_("The whole table by default (up to 512 rows)."))
        if hi < lo:
            st.info(_("'To' is before 'From': showing positions {hi}–{lo}.").format(hi=hi, lo=lo))
            lo, hi = hi, lo
        table = full[lo:hi + 1]
        tokens = (trace.source_tokens or trace.target_tokens)[:n_input]
        if layout == "half":
            default_dims = [0, 1, (d + 1) // 2, (d + 1) // 2 + 1]
        else:
            default_dims = [0, 1, 4, 5]
        dims = st.multiselect(_("Dimensions"), list(range(d)),
                              default=sorted({min(x, d - 1) for x in default_dims}),
                              key="pe_model_dims", placeholder=_("Choose"))
        if dims:
            chart(positional_curves(table, dims, sinusoidal=trace.positional_kind ==
                                    "sinusoidal", start=lo, marks=tokens),
                  key="pe_model_curves", name="pe-curves")
        c1, c2 = st.columns(2)
        with c1:
            chart(positional_heatmap(table, title=_("position × dimension"), start=lo),
                  key="pe_model_map", name="pe-heatmap")
        with c2:
            chart(similarity_figure(table, title=_("PE(p) · PE(q)"), start=lo),
                  key="pe_model_sim", name="pe-similarity")
        chart(wavelength_figure(full), key="pe_model_wave", name="pe-wavelengths")
        download(_("This encoding (NPZ)"), lambda: npz_bytes({"positional": full}),
                 "positional.npz", "application/octet-stream", "dl_pe_model")

with tab_formula:
    c1, c2 = st.columns(2)
    d_model = url_number("d_model", "pe_d", 128, 2, 1024, container=c1,
                         help=_("Width of the model (even numbers show sin/cos pairs)."))
    length = url_number(_("Positions"), "pe_len", 100, 1, 2048, container=c2)
    state.show_notices()
    table = sinusoidal_table(length, d_model)
    dims = st.multiselect(_("Dimensions"), list(range(d_model)),
                          default=[i for i in (0, 1, 4, 5, 10) if i < d_model], key="pe_dims",
                          placeholder=_("Choose"))
    if dims:
        chart(positional_curves(table, dims, sinusoidal=True), key="pe_curves",
              name="sinusoid-curves")
    c1, c2 = st.columns(2)
    with c1:
        chart(positional_heatmap(table, title=_("position × dimension")), key="pe_map",
              name="sinusoid-heatmap")
    with c2:
        chart(similarity_figure(table, title=_("PE(p) · PE(q): depends only on p − q")),
              key="pe_sim", name="sinusoid-similarity")
    chart(wavelength_figure(d_model=d_model), key="pe_wave", name="sinusoid-wavelengths")
    download(_("This table (NPZ)"), lambda: npz_bytes({"positional": table}),
             f"sinusoidal_{length}x{d_model}.npz", "application/octet-stream", "dl_pe_formula")
    st.caption(_("Dimension pair i has wavelength 2π·10000^(2i/d_model): from 2π up to "
               "10000·2π. Each PE(p+k) is a fixed rotation of PE(p), which lets attention "
               "pick out relative positions."))

with tab_compare:
    c1, c2, c3 = st.columns(3)
    d_cmp = url_number("d (even)", "cmp_d", 64, 2, 512, container=c1,
                       help=_("d_model of the sinusoidal table; head dimension for RoPE."))
    d_cmp -= d_cmp % 2
    n_cmp = url_number(_("Positions"), "cmp_len", 48, 2, 256, container=c2)
    base = url_number(_("Base"), "cmp_base", 10000, 2, 10_000_000, container=c3)
    theta = rope_frequencies(d_cmp, base)
    pe = sinusoidal_table(n_cmp, d_cmp) if base == 10000 else None
    c1, c2 = st.columns(2)
    with c1:
        st.markdown(_("**Sinusoidal (Vaswani et al.)**: added to the embeddings once"))
        if pe is None:  # the sinusoidal table of the paper has base 10000; same formula
            angle = np.arange(n_cmp)[:, None] * theta[None]
            pe = np.stack([np.sin(angle), np.cos(angle)], -1).reshape(n_cmp, -1)
        chart(similarity_figure(pe, title=_("PE(p) · PE(q)")), key="cmp_sin", name="cmp-sin")
    with c2:
        st.markdown(_("**Rotary (RoFormer)**: q and k turned in every attention"))
        ones = np.ones(d_cmp)
        chart(rotary_score_figure(rotary_scores(ones, ones, theta, n_cmp),
                                  title=_("q_m · k_n for q = k = (1, …, 1)")),
              key="cmp_rope", name="cmp-rope")
    st.markdown(
        _("Both use the same frequencies θᵢ = base^(−2i/d), and both matrices depend only on "
        "the distance between positions (here the rotary one is exactly twice the "
        "sinusoidal one). The difference is where position enters:\n\n"
        "| | sinusoidal | rotary |\n|---|---|---|\n"
        "| where | added to the token embedding, once, before layer 1 | applied to q and k "
        "inside every self-attention |\n"
        "| what attention sees | (x + PE)·W_Q·W_Kᵀ·(x + PE)ᵀ: content and position mixed, "
        "absolute terms included | q_m·k_n = g(q, k, m − n): relative position only |\n"
        "| values | carry the positional signal | untouched |\n"
        "| longer inputs | any length, but unseen absolute positions | rescale θᵢ "
        "(linear, NTK, YaRN, Llama 3) to stretch the context |\n"
        "| used by | the original Transformer, Marian | Llama, Mistral, Qwen, Gemma, Phi-3, "
        "OLMo, our lm-rope |"))
