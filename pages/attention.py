"""Attention: one head as a heatmap, the layer x head grid, head view, aggregates, rollout.

Any input length: every view reads only what it draws from the lazy trace. The grid reads
each block's overview; a head is exact up to EXACT_MAX_TOKENS and pooled beyond, with a zoom
window at full resolution; rollout (which multiplies whole matrices) stops at that length.
"""

import streamlit as st

from attention_lab.ui import faithfulness, state
from attention_lab.ui.alignment import show_alignment
from attention_lab.ui.cells import click_caption, clickable_chart
from attention_lab.ui.charts import chart, download
from attention_lab.ui.contributions import why_cell, why_this_cell
from attention_lab.ui.controls import bounded_int, open_head, pick_head
from attention_lab.ui.page import selection, show_output, show_trace_messages
from attention_lab.ui.runs import (
    TraceRequest,
    attention_capture,
    cached_figure,
    full_trace,
    has_scores,
    run_trace,
)
from viz_core import trace_json, trace_npz
from viz_core.analysis import heads as analysis
from viz_core.figures.aggregates import block_aggregate_heatmap, rollout_bytes, rollout_figure
from viz_core.figures.cells import clickable_cells
from viz_core.figures.grid import blocks_grid, selected_cell
from viz_core.figures.headview import HEADVIEW_MAX, HEADVIEW_WINDOW, block_head_view
from viz_core.figures.heatmap import (
    EXACT_MAX_TOKENS,
    ZOOM_MAX,
    ZOOM_MAX_SIGNED,
    block_has_scores,
    block_heatmap,
    block_window_heatmap,
    clip_window,
    is_long,
)

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
faithfulness.show(sel.model, sel.text, sel.target)

c_kind, c_layer, c_head, c_view = st.columns([2, 1, 1, 1])
kind, layer, head, block = pick_head(trace, (c_kind, c_layer, c_head))
if any(b.window_size for b in trace.layers(kind)):  # local and global layers (Mistral, Gemma)
    c_layer.caption(f"layer {layer}: " + (f"local (window {block.window_size})"
                                          if block.window_size else "global"))
if not block_has_scores(block) and st.session_state.view == "scores":  # e.g. this block kind
    st.session_state.view = "weights"
c_view.radio("Show", views, key="view", horizontal=True,
             help="weights: softmax after masking; scores: QKᵀ/√d_k before masking "
                  "(blocked cells marked)")
state.to_url(view=st.session_state.view)
state.show_notices()

_, n_q, n_k = block.shape
long_block = is_long(block)
if block.kind == "decoder.cross" and not long_block:
    with st.expander("Alignment: argmax source per target", expanded=False):
        show_alignment(sel, trace, block, head)
left, right = st.columns([3, 2])
with left:
    view = st.session_state.view
    # a click on a cell opens its QK attribution (why_this_cell, below); the explained cell
    # is framed in a copy of the cached figure and names the chart (ui.cells.chart_key)
    why = why_cell(sel, block, head)
    heatmap = figure("heatmap", (block.name, head, view),
                     lambda: clickable_cells(block_heatmap(block, head, view=view)))
    clickable = clickable_chart(heatmap, "heatmap", f"{block.name}-head{head}", why.cell)
    st.caption("Rows are queries (top to bottom), columns are keys (left to right). Each row "
               "of weights sums to 1 over the keys it may attend to; blocked cells are 0."
               + ("" if long_block else " " + click_caption(clickable, n_q, n_k)))
    if long_block:
        st.caption(f"{n_q:,} × {n_k:,} tokens: more than {EXACT_MAX_TOKENS:,}, so this is "
                   f"the head pooled into block means (each cell the mean of the {view} in "
                   "its query range × key range; grey where every cell is blocked). Zoom in "
                   "below for full resolution. "
                   + click_caption(clickable, n_q, n_k, pooled=True))
        st.markdown("**Zoom** (full resolution)")
        z1, z2, z3 = st.columns(3)
        size = bounded_int("Window size", "zoom_size", 128, 1, ZOOM_MAX, container=z1,
                           help="Queries and keys shown, at most "
                                f"{ZOOM_MAX} × {ZOOM_MAX}.")
        q0 = bounded_int("First query", "zoom_q", 0, 0, n_q - 1, container=z2)
        k0 = bounded_int("First key", "zoom_k", 0, 0, n_k - 1, container=z3)
        rows, cols = clip_window(block, q0, k0, size,
                                 ZOOM_MAX if view == "weights" else ZOOM_MAX_SIGNED)
        zoom = figure("zoom", (block.name, head, view, rows, cols), lambda: clickable_cells(
            block_window_heatmap(block, head, rows, cols, view=view)))
        zoom_clickable = clickable_chart(zoom, "zoom", f"{block.name}-head{head}-zoom",
                                         why.cell)
        st.caption(click_caption(zoom_clickable, rows[1] - rows[0], cols[1] - cols[0],
                                 window=True))
    why_this_cell(sel, block, head, why)  # "why does this head attend here?" (QK attribution)


def _grid_clicked() -> None:
    cell = selected_cell(st.session_state["grid"].selection)
    if cell is not None:
        open_head(st.session_state.kind, *cell)


with right:
    grid = figure("grid", (kind,), lambda: blocks_grid(
        trace.layers(kind), title="All layers × heads — click one to open it"))
    chart(grid, key="grid", on_select=_grid_clicked, name=f"{kind}-grid")

# Lazy tabs: only the open tab's figure is built and sent (switching tabs reruns the page).
tab_hv, tab_agg, tab_roll = st.tabs(["Head view", "Mean / max over heads", "Rollout"],
                                    key="attn_tab", on_change="rerun")
with tab_hv:
    heads = st.multiselect("Heads", list(range(block.n_heads)), default=[head], key="hv_heads",
                           help="Lines join each query (left) to the keys (right) it attends "
                                "to; opacity is the weight. Long inputs keep the strongest.")
    top_k = st.slider("Strongest keys per query", 1, 20, 5, key="hv_topk")
    hv_rows = hv_cols = None
    if max(n_q, n_k) > HEADVIEW_MAX:
        h1, h2 = st.columns(2)
        hq = bounded_int("First query", "hv_q", 0, 0, n_q - 1, container=h1)
        hk = bounded_int("First key", "hv_k", 0, 0, n_k - 1, container=h2)
        hv_rows, hv_cols = clip_window(block, hq, hk, HEADVIEW_WINDOW, HEADVIEW_WINDOW)
        st.caption(f"{n_q:,} × {n_k:,} tokens: the head view draws a window of "
                   f"{HEADVIEW_WINDOW} queries × keys (queries {hv_rows[0]}–{hv_rows[1] - 1}, "
                   f"keys {hv_cols[0]}–{hv_cols[1] - 1}). Weights are those of the whole "
                   "input, so a query's lines may sum to less than 1.")
    if heads and tab_hv.open:
        chart(figure("headview", (block.name, tuple(heads), top_k, hv_rows, hv_cols),
                     lambda: block_head_view(block, heads=heads, top_k=top_k, rows=hv_rows,
                                             cols=hv_cols)),
              key="headview", name=f"{block.name}-headview")
with tab_agg:
    how = st.radio("Aggregate", ["mean", "max"], horizontal=True, key="agg_how")
    if tab_agg.open:
        chart(figure("aggregate", (block.name, how), lambda: block_aggregate_heatmap(
            block, how=how)), key="aggregate", name=f"{block.name}-{how}")
        if long_block:
            st.caption("Pooled: computed from every head's block means.")
with tab_roll:
    self_kinds = [k for k in trace.kinds() if k.endswith(".self")]
    rk = kind if kind in self_kinds else (self_kinds or [None])[0]
    blocks = trace.layers(rk) if rk else []
    if not self_kinds:
        st.info("Rollout needs self-attention blocks.")
    elif any(is_long(b) for b in blocks):
        _, n_r, _ = blocks[0].shape
        st.info(f"Rollout multiplies every layer's whole attention matrix, {n_r:,} × {n_r:,} "
                f"here ({len(blocks)} layers × {blocks[0].n_heads} heads: "
                f"{rollout_bytes(blocks) / 2**30:,.1f} GiB as float32), so it is shown only "
                f"up to {EXACT_MAX_TOKENS:,} tokens. Shorten the input to see it.")
    elif tab_roll.open:
        st.caption("Attention rollout (Abnar & Zuidema, 2020): per layer 0.5·mean over heads "
                   "+ 0.5·I for the residual stream, multiplied from the first layer up.")
        chart(figure("rollout", (rk,), lambda: rollout_figure(
            trace.stack(rk), blocks[0].query_tokens,
            title=f"{rk}: rollout through {len(blocks)} layers")),
            key="rollout", name=f"{rk}-rollout")

st.subheader("Data")
if any(is_long(b) for b in trace.block_traces.values()):
    # each of these reads every head's whole matrix of every block
    st.caption(f"Downloads of whole attention matrices are offered up to {EXACT_MAX_TOKENS:,} "
               f"tokens; this block alone would be {4 * block.n_heads * n_q * n_k / 2**30:,.1f} "
               "GiB as float32.")
    st.stop()
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
