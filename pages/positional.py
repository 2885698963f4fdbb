"""Positional encoding: the model's own, and the sinusoidal formula for any size."""

import streamlit as st

from ui import state
from ui.charts import chart, download
from ui.controls import bounded_int
from ui.page import selection, show_trace_messages
from viz_core.export import npz_bytes
from viz_core.figures.positional import (
    positional_curves,
    positional_heatmap,
    similarity_figure,
    sinusoidal_table,
    wavelength_figure,
)
from viz_core.positions import sinusoid_layout, whole_table

sel = selection()
st.title("Positional encoding")
st.latex(r"PE_{(pos,\,2i)} = \sin\!\left(\frac{pos}{10000^{2i/d_{model}}}\right),\qquad "
         r"PE_{(pos,\,2i+1)} = \cos\!\left(\frac{pos}{10000^{2i/d_{model}}}\right)")

tab_model, tab_formula = st.tabs(["This model's encoding", "Formula explorer"])
with tab_model:
    trace = sel.trace()
    show_trace_messages(trace)
    if trace.positional is None:
        st.info(trace.positional_note or "This model adds no absolute positional encoding.")
    else:
        full, source = whole_table(sel.model, trace.positional)
        if full is None:
            st.caption(source)
            full = trace.positional
        layout = sinusoid_layout(full) if trace.positional_kind == "sinusoidal" else None
        if layout == "half":
            st.latex(r"\text{This model (Marian): } PE_{(pos,\,i)} = \sin\!\left("
                     r"\frac{pos}{10000^{2i/d_{model}}}\right),\ "
                     r"PE_{(pos,\,\lceil d/2\rceil + i)} = \cos\!\left("
                     r"\frac{pos}{10000^{2i/d_{model}}}\right)")
            st.caption("sin fills the first half of the dimensions and cos the second half "
                       "(not interleaved even/odd as in the paper).")
        n_pos, d = full.shape
        n_input = len(trace.positional)
        st.caption(f"{trace.positional_kind} encoding added to the embeddings: the model's "
                   f"table has {n_pos} positions × {d} dimensions; this input uses positions "
                   f"0–{n_input - 1} (marked).")
        c1, c2 = st.columns(2)
        lo = bounded_int("From position", "pe_from", 0, 0, n_pos - 1, container=c1)
        hi = bounded_int("To position", "pe_to", min(n_pos, 512) - 1, 0, n_pos - 1,
                         container=c2, help="The whole table by default (up to 512 rows).")
        if hi < lo:
            st.info(f"'To' is before 'From': showing positions {hi}–{lo}.")
            lo, hi = hi, lo
        table = full[lo:hi + 1]
        tokens = (trace.source_tokens or trace.target_tokens)[:n_input]
        if layout == "half":
            default_dims = [0, 1, (d + 1) // 2, (d + 1) // 2 + 1]
        else:
            default_dims = [0, 1, 4, 5]
        dims = st.multiselect("Dimensions", list(range(d)),
                              default=sorted({min(x, d - 1) for x in default_dims}),
                              key="pe_model_dims")
        if dims:
            chart(positional_curves(table, dims, sinusoidal=trace.positional_kind ==
                                    "sinusoidal", start=lo, marks=tokens),
                  key="pe_model_curves", name="pe-curves")
        c1, c2 = st.columns(2)
        with c1:
            chart(positional_heatmap(table, title="position × dimension", start=lo),
                  key="pe_model_map", name="pe-heatmap")
        with c2:
            chart(similarity_figure(table, title="PE(p) · PE(q)", start=lo),
                  key="pe_model_sim", name="pe-similarity")
        chart(wavelength_figure(full), key="pe_model_wave", name="pe-wavelengths")
        download("This encoding (NPZ)", lambda: npz_bytes({"positional": full}),
                 "positional.npz", "application/octet-stream", "dl_pe_model")

with tab_formula:
    c1, c2 = st.columns(2)
    d_model = bounded_int("d_model", "pe_d", 128, 2, 1024, container=c1,
                          help="Width of the model (even numbers show sin/cos pairs).")
    length = bounded_int("Positions", "pe_len", 100, 1, 2048, container=c2)
    state.show_notices()
    table = sinusoidal_table(length, d_model)
    dims = st.multiselect("Dimensions", list(range(d_model)),
                          default=[i for i in (0, 1, 4, 5, 10) if i < d_model], key="pe_dims")
    if dims:
        chart(positional_curves(table, dims, sinusoidal=True), key="pe_curves",
              name="sinusoid-curves")
    c1, c2 = st.columns(2)
    with c1:
        chart(positional_heatmap(table, title="position × dimension"), key="pe_map",
              name="sinusoid-heatmap")
    with c2:
        chart(similarity_figure(table, title="PE(p) · PE(q): depends only on p − q"),
              key="pe_sim", name="sinusoid-similarity")
    chart(wavelength_figure(d_model=d_model), key="pe_wave", name="sinusoid-wavelengths")
    download("This table (NPZ)", lambda: npz_bytes({"positional": table}),
             f"sinusoidal_{length}x{d_model}.npz", "application/octet-stream", "dl_pe_formula")
    st.caption("Dimension pair i has wavelength 2π·10000^(2i/d_model): from 2π up to "
               "10000·2π. Each PE(p+k) is a fixed rotation of PE(p), which lets attention "
               "pick out relative positions.")
