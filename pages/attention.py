"""Attention: one head as a heatmap, the layer x head grid, head view, aggregates, rollout.

Any input length: every view reads only what it draws from the lazy trace. The grid reads
each block's overview; a head is exact up to EXACT_MAX_TOKENS and pooled beyond, with a zoom
window at full resolution; rollout (which multiplies whole matrices) stops at that length.

Everything from the pickers down is one st.fragment (head_views): a change of block, layer,
head, view, tab or cell reruns only that part, on the cached trace and cached figures; the
sidebar, the output and the faithfulness check run again only when the input changes.
"""

from functools import partial

import streamlit as st

from attention_lab.ui import faithfulness, seed_example, state
from attention_lab.ui.alignment import show_alignment
from attention_lab.ui.attention_views import (
    block_downloads,
    grouped_heatmap,
    head_tabs,
    pick_grouping,
)
from attention_lab.ui.cells import click_caption, clickable_chart
from attention_lab.ui.charts import chart
from attention_lab.ui.contributions import why_cell, why_this_cell
from attention_lab.ui.controls import bounded_int, open_head, pick_head
from attention_lab.ui.lang import fragment
from attention_lab.ui.page import selection, show_output, show_trace_messages
from attention_lab.ui.runs import (
    TraceRequest,
    attention_capture,
    cached_figure,
    has_scores,
    run_trace,
)
from viz_core.figures.cells import clickable_cells
from viz_core.figures.grid import blocks_grid, selected_cell
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
from viz_core.i18n import N_, _, bound

sel = selection()
st.title(_("Attention"))
# The view is known before the run, so the trace captures only what this page draws: the
# patterns, plus the pre-softmax scores in the "scores" view (no q/k/v/z: see ui.runs).
views = [N_("weights"), N_("scores")] if has_scores(sel.model) else [N_("weights")]
state.widget_default("view", state.url_choice("view", views, "weights"))
if st.session_state.view not in views:
    st.session_state.view = "weights"
first = run_trace(TraceRequest.of(sel, capture=attention_capture(st.session_state.view)))
show_trace_messages(first)
show_output(first)
faithfulness.show(sel.model, sel.text, sel.target)
seed_example.show(sel)  # en-fr: "it" follows the adjective (tired / wide)


def _grid_clicked() -> None:
    cell = selected_cell(st.session_state["grid"].selection)
    if cell is not None:
        open_head(st.session_state.kind, *cell)


def zoom_window(block, head: int, view: str, figure, why) -> None:
    """A long input's head is pooled: a window of it at full resolution, clickable."""
    _heads, n_q, n_k = block.shape
    st.markdown(_("**Zoom** (full resolution)"))
    z1, z2, z3 = st.columns(3)
    size = bounded_int(_("Window size"), "zoom_size", 128, 1, ZOOM_MAX, container=z1,
                       help=_("Queries and keys shown, at most {ZOOM_MAX} × {ZOOM_MAX}.").format(
                                ZOOM_MAX=ZOOM_MAX))
    q0 = bounded_int(_("First query"), "zoom_q", 0, 0, n_q - 1, container=z2)
    k0 = bounded_int(_("First key"), "zoom_k", 0, 0, n_k - 1, container=z3)
    rows, cols = clip_window(block, q0, k0, size,
                             ZOOM_MAX if view == "weights" else ZOOM_MAX_SIGNED)
    zoom = figure("zoom", (block.name, head, view, rows, cols), lambda: clickable_cells(
        block_window_heatmap(block, head, rows, cols, view=view)))
    clickable = clickable_chart(zoom, "zoom", f"{block.name}-head{head}-zoom", why.cell)
    st.caption(click_caption(clickable, rows[1] - rows[0], cols[1] - cols[0], window=True))


@fragment
def head_views() -> None:
    """The pickers and every view that follows them: a change of block, layer, head, view,
    tab or cell reruns this function alone (cached trace, cached figures)."""
    request = TraceRequest.of(sel, capture=attention_capture(st.session_state.view))
    trace = run_trace(request)  # cached: the page's own run, or the other view's capture
    figure = partial(cached_figure, request)  # per trace and parameters (ui.runs)
    c_kind, c_layer, c_head, c_view, c_group = st.columns([2, 1, 1, 1, 1])
    kind, layer, head, block = pick_head(trace, (c_kind, c_layer, c_head))
    if any(b.window_size for b in trace.layers(kind)):  # local and global layers (Mistral)
        c_layer.caption(_("layer {layer}: ").format(layer=layer) + (_("local (window {window_size})").format(
                                                  window_size=block.window_size)
                                              if block.window_size else _("global")))
    if not block_has_scores(block) and st.session_state.view == "scores":  # this block kind
        st.session_state.view = "weights"
    c_view.radio(_("Show"), views, key="view", horizontal=True, format_func=bound(_),
                 help=_("weights: softmax after masking; scores: QKᵀ/√d_k before masking "
                      "(blocked cells marked)"))
    view = st.session_state.view
    state.to_url(view=view, defaults={"view": "weights"})
    group = pick_grouping(c_group)
    state.show_notices()

    _heads, n_q, n_k = block.shape
    long_block = is_long(block)
    if block.kind == "decoder.cross" and not long_block:
        with st.expander(_("Alignment: argmax source per target"), expanded=False):
            show_alignment(sel, trace, block, head)
    left, right = st.columns([3, 2])
    with left:
        # a click on a cell opens its QK attribution (why_this_cell, below); the explained
        # cell is framed in a copy of the cached figure and names the chart (ui.cells)
        why = why_cell(sel, block, head)
        if not grouped_heatmap(block, head, group, view, figure):
            heatmap = figure("heatmap", (block.name, head, view),
                             lambda: clickable_cells(block_heatmap(block, head, view=view)))
            clickable = clickable_chart(heatmap, "heatmap", f"{block.name}-head{head}", why.cell)
            st.caption(_("Rows are queries (top to bottom), columns are keys (left to right). Each "
                       "row of weights sums to 1 over the keys it may attend to; blocked cells "
                       "are 0.") + ("" if long_block else " " + click_caption(clickable, n_q, n_k)))
            if long_block:
                st.caption(_("{n_q:,} × {n_k:,} tokens: more than {EXACT_MAX_TOKENS:,}, so this is "
                             "the head pooled into block means (each cell the mean of the {view} in "
                             "its query range × key range; grey where every cell is blocked). Zoom "
                             "in below for full resolution. ").format(
                               n_q=n_q, n_k=n_k, EXACT_MAX_TOKENS=EXACT_MAX_TOKENS, view=view)
                           + click_caption(clickable, n_q, n_k, pooled=True))
                zoom_window(block, head, view, figure, why)
            why_this_cell(sel, block, head, why)  # "why does this head attend here?" (QK)
    with right:
        grid = figure("grid", (kind,), lambda: blocks_grid(
            trace.layers(kind), title=_("All layers × heads — click one to open it")))
        chart(grid, key="grid", on_select=_grid_clicked, name=f"{kind}-grid")
    head_tabs(trace, figure, kind, block, head)
    block_downloads(sel, trace, block)
    state.keep_widget_values()  # app.py does this at the end of a whole run only


head_views()
