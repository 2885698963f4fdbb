"""Attention: one head as a heatmap, the layer x head grid, head view, aggregates, rollout."""

import streamlit as st

from ui import state
from ui.charts import chart, download
from ui.controls import open_head, pick_head
from ui.page import selection, show_output, show_trace_messages
from ui.runs import (
    TraceRequest,
    attention_capture,
    cached_figure,
    full_trace,
    has_scores,
    run_trace,
)
from viz_core import analysis
from viz_core.export import trace_json, trace_npz
from viz_core.figures.aggregates import aggregate_heatmap, rollout_figure
from viz_core.figures.grid import layer_head_grid, selected_cell
from viz_core.figures.headview import block_head_view
from viz_core.figures.heatmap import block_heatmap

sel = selection()
st.title("Attention")
# The view is known before the run, so the trace captures only what this page draws: the
# patterns, plus the pre-softmax scores in the "scores" view (no q/k/v/z: see ui.runs).
views = ["weights", "scores"] if has_scores(sel.model) else ["weights"]
state.widget_default("view", state.url_choice("view", views, "weights"))
if st.session_state.view not in views:
    st.session_state.view = "weights"
request = TraceRequest.of(sel, capture=attention_capture(st.session_state.view))
trace = run_trace(request)


def figure(name: str, params: tuple, build):
    """Figures are cached per trace and parameters (see ui.runs.cached_figure)."""
    return cached_figure(request, name, params, build)


show_trace_messages(trace)
show_output(trace)

c_kind, c_layer, c_head, c_view = st.columns([2, 1, 1, 1])
kind, layer, head, block = pick_head(trace, (c_kind, c_layer, c_head))
if block.scores is None and st.session_state.view == "scores":  # e.g. this block kind
    st.session_state.view = "weights"
c_view.radio("Show", views, key="view", horizontal=True,
             help="weights: softmax after masking; scores: QKᵀ/√d_k before masking "
                  "(blocked cells marked)")
state.to_url(view=st.session_state.view)
state.show_notices()

left, right = st.columns([3, 2])
with left:
    view = st.session_state.view
    chart(figure("heatmap", (block.name, head, view),
                 lambda: block_heatmap(block, head, view=view)),
          key="heatmap", name=f"{block.name}-head{head}")
    st.caption("Rows are queries (top to bottom), columns are keys (left to right). Each row "
               "of weights sums to 1 over the keys it may attend to; blocked cells are 0.")


def _grid_clicked() -> None:
    cell = selected_cell(st.session_state["grid"].selection)
    if cell is not None:
        open_head(st.session_state.kind, *cell)


with right:
    grid = figure("grid", (kind,), lambda: layer_head_grid(
        trace.stack(kind), layers=[b.layer for b in trace.layers(kind)],
        title="All layers × heads — click one to open it"))
    chart(grid, key="grid", on_select=_grid_clicked, name=f"{kind}-grid")

# Lazy tabs: only the open tab's figure is built and sent (switching tabs reruns the page).
tab_hv, tab_agg, tab_roll = st.tabs(["Head view", "Mean / max over heads", "Rollout"],
                                    key="attn_tab", on_change="rerun")
with tab_hv:
    heads = st.multiselect("Heads", list(range(block.n_heads)), default=[head], key="hv_heads",
                           help="Lines join each query (left) to the keys (right) it attends "
                                "to; opacity is the weight. Long inputs keep the strongest.")
    top_k = st.slider("Strongest keys per query", 1, 20, 5, key="hv_topk")
    if heads and tab_hv.open:
        chart(figure("headview", (block.name, tuple(heads), top_k),
                     lambda: block_head_view(block, heads=heads, top_k=top_k)),
              key="headview", name=f"{block.name}-headview")
with tab_agg:
    how = st.radio("Aggregate", ["mean", "max"], horizontal=True, key="agg_how")
    if tab_agg.open:
        chart(figure("aggregate", (block.name, how), lambda: aggregate_heatmap(
            block.pattern, block.query_tokens, block.key_tokens, how=how, mask=block.mask,
            title=f"{block.name}: {how} over heads")), key="aggregate",
            name=f"{block.name}-{how}")
with tab_roll:
    self_kinds = [k for k in trace.kinds() if k.endswith(".self")]
    if not self_kinds:
        st.info("Rollout needs self-attention blocks.")
    elif tab_roll.open:
        rk = kind if kind in self_kinds else self_kinds[0]
        blocks = trace.layers(rk)
        st.caption("Attention rollout (Abnar & Zuidema, 2020): per layer 0.5·mean over heads "
                   "+ 0.5·I for the residual stream, multiplied from the first layer up.")
        chart(figure("rollout", (rk,), lambda: rollout_figure(
            trace.stack(rk), blocks[0].query_tokens,
            title=f"{rk}: rollout through {len(blocks)} layers")),
            key="rollout", name=f"{rk}-rollout")

st.subheader("Data")
d1, d2, d3 = st.columns(3)
with d1:
    download("This block (JSON)", lambda: trace_json(trace, [block.name]),
             f"{block.name}.json", "application/json", "dl_block")
with d2:
    # built on click, from a trace with every hook point (q, k, v, z too)
    download("Whole trace (NPZ)", lambda: trace_npz(full_trace(sel)), "trace.npz",
             "application/octet-stream", "dl_npz")
with d3:
    download("Head statistics (CSV)", lambda: analysis.head_stats(trace).to_csv(index=False),
             "head_stats.csv", "text/csv", "dl_stats")
