"""Attention: one head of one block as a heatmap (queries top to bottom, keys left to right)."""

import streamlit as st

from ui import state
from ui.page import selection, show_trace_messages
from viz_core.figures.heatmap import block_heatmap

KIND_LABELS = {"encoder.self": "Encoder self-attention", "decoder.self":
               "Decoder self-attention (masked)", "decoder.cross": "Cross-attention"}

sel = selection()
st.title("Attention")
trace = sel.trace()
show_trace_messages(trace)
if trace.output_text:
    st.markdown("**Model output:**")
    st.code(trace.output_text, language=None)

kinds = trace.kinds()
state.widget_default("kind", state.url_choice("kind", kinds, kinds[0]))
if st.session_state.kind not in kinds:
    st.session_state.kind = kinds[0]
col_kind, col_layer, col_head, col_view = st.columns([2, 1, 1, 1])
col_kind.selectbox("Block", kinds, key="kind", format_func=KIND_LABELS.get)
layers = trace.layers(st.session_state.kind)
n_layers, n_heads = len(layers), layers[0].n_heads
state.widget_default("layer", state.url_int("layer", 0, 0, n_layers - 1))
state.widget_default("head", state.url_int("head", 0, 0, n_heads - 1))
st.session_state.layer = min(st.session_state.layer, n_layers - 1)
st.session_state.head = min(st.session_state.head, n_heads - 1)
col_layer.number_input("Layer", 0, n_layers - 1, key="layer", step=1)
col_head.number_input("Head", 0, n_heads - 1, key="head", step=1)
views = ["weights", "scores"] if layers[0].scores is not None else ["weights"]
state.widget_default("view", state.url_choice("view", views, "weights"))
col_view.radio("Show", views, key="view", horizontal=True,
               help="weights: softmax after masking; scores: QK^T/√d_k before masking")
state.to_url(kind=st.session_state.kind, layer=st.session_state.layer,
             head=st.session_state.head, view=st.session_state.view)
state.show_notices()

block = layers[st.session_state.layer]
fig = block_heatmap(block, st.session_state.head, view=st.session_state.view)
st.plotly_chart(fig, key="heatmap", config={"displaylogo": False})
st.caption("Rows are queries, columns are keys. Each row of weights sums to 1 over the keys "
           "it may attend to; blocked cells (mask = True) are exactly 0.")
