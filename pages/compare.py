"""Compare: two inputs, or two models on one input, side by side, with their difference."""

import numpy as np
import streamlit as st

from ui import state
from ui.charts import chart
from ui.errors import literal, reported
from ui.page import selection, show_trace_messages
from ui.runs import get_model, get_trace
from ui.sidebar import model_choices
from viz_core.figures.heatmap import block_heatmap, matrix_heatmap

sel = selection()
st.title("Compare")
mode = st.radio("Compare", ["two inputs", "two models"], horizontal=True, key="cmp_mode")
if mode == "two inputs":
    state.widget_default("text_b", state.url_text("text_b", sel.text))
    st.text_input("Second input", key="text_b")
    state.to_url(text_b=st.session_state.text_b)
    runs = [(sel.model_name, sel.text), (sel.model_name, st.session_state.text_b)]
else:
    others = [m for m in model_choices() if m != sel.model_name] or [sel.model_name]
    model_b = st.selectbox("Second model", others, key="model_b")
    runs = [(sel.model_name, sel.text), (model_b, sel.text)]

traces = []
for name, text in runs:
    with st.spinner(f"Running {literal(name)}…"), reported(f"running {name}"):
        get_model(name, sel.device)
        traces.append(get_trace(name, sel.device, text, sel.target if name == sel.model_name
                                else None, ()))
common = [k for k in traces[0].kinds() if k in traces[1].kinds()]
if not common:
    st.warning("These two models share no kind of attention block to compare.")
    st.stop()
c1, c2, c3 = st.columns([2, 1, 1])
kind = c1.selectbox("Block", common, key="cmp_kind")
n_layers = min(len(t.layers(kind)) for t in traces)
n_heads = min(t.layers(kind)[0].n_heads for t in traces)
layer = c2.number_input(f"Layer (0–{n_layers - 1})", 0, n_layers - 1, 0, key="cmp_layer")
head = c3.number_input(f"Head (0–{n_heads - 1})", 0, n_heads - 1, 0, key="cmp_head")
blocks = [t.layers(kind)[int(layer)] for t in traces]

left, right = st.columns(2)
for col, (name, text), t, b, key in zip((left, right), runs, traces, blocks, ("a", "b")):
    with col:
        st.markdown(f"**{literal(name)}**")
        st.code(text, language=None)
        show_trace_messages(t)
        chart(block_heatmap(b, int(head)), key=f"cmp_{key}", name=f"compare-{key}")

a, b = blocks
if a.pattern.shape[1:] == b.pattern.shape[1:]:
    diff = b.pattern[int(head)] - a.pattern[int(head)]
    lim = float(np.abs(diff).max()) or 1.0
    chart(matrix_heatmap(diff, [f"{x}|{y}" if x != y else x for x, y in
                                zip(a.query_tokens, b.query_tokens)],
                         [f"{x}|{y}" if x != y else x for x, y in
                          zip(a.key_tokens, b.key_tokens)],
                         title="Difference (right − left)", value_name="Δ weight",
                         colorscale="RdBu", zmin=-lim, zmax=lim, zmid=0.0),
          key="cmp_diff", name="compare-diff")
else:
    st.info(f"The two runs have different token counts ({a.pattern.shape[1:]} vs "
            f"{b.pattern.shape[1:]}), so a cell-by-cell difference is not defined. Use inputs "
            "with the same number of tokens (e.g. swap one word) to see the difference.")
