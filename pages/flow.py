"""Information flow: which positions and components carried information to a prediction,
layer by layer (Ferrando & Voita, 2024), with raw attention, rollout and attention flow for
the same output token beside it. Every setting is in the address (flow_pos, flow_t)."""

import streamlit as st

from attention_lab.ui import state
from attention_lab.ui.charts import chart, download_csv, table
from attention_lab.ui.contributions import attempt
from attention_lab.ui.controls import url_select
from attention_lab.ui.errors import translated
from attention_lab.ui.flow import (
    flow_request,
    open_clicked_edge,
    show_attention_views,
    shown_routes,
    threshold_slider,
)
from attention_lab.ui.page import selection, show_trace_messages
from attention_lab.ui.runs import run_analysis, run_trace
from attention_lab.ui.tabs.explain import text_request
from viz_core.figures.common import choice_labels
from viz_core.figures.flow import flow_graph_figure
from viz_core.i18n import _

ROUTE_COLUMNS = ["kind", "block", "head", "source_layer", "source_point", "source_position",
                 "target_layer", "target_point", "target_position", "weight", "edge_weight"]

sel = selection()
st.title(_("Information flow"))
st.caption(_("How the prediction at one position got there: the residual stream of every "
           "position after each attention block and each MLP is a sum of parts (the stream "
           "it came from, each earlier position through the attention heads, the MLP). An "
           "edge's weight is how close its part is to that sum, as a share of all the parts "
           "(Ferrando & Voita, 2024). The routes (orange) are the edges above the threshold "
           "that lead back from the prediction."))

trace = run_trace(text_request(sel))
show_trace_messages(trace)
encoder_only = sel.model.architecture == "encoder-only"
positions = list(trace.source_tokens if encoder_only else trace.target_tokens)
if not positions:
    st.info(_("This input has no tokens to follow."))
    state.stop()
labels = choice_labels(positions)
c_pos, c_t = st.columns([2, 3])
position = url_select(_("Output position"), "flow_pos", range(len(positions)), len(positions) - 1,
                      container=c_pos, format_func=lambda i: labels[i],
                      help=_("The position whose prediction (its output vector, for an "
                           "encoder) the routes lead to."))
threshold = threshold_slider(c_t)
state.show_notices()

graph, side = st.columns([3, 2])
with graph, attempt(_("following the information flow")):
    flow = run_analysis(flow_request(sel, position), _("Following the information flow…"))
    for w in flow.warnings:
        if w not in trace.warnings:  # the cut was said above the page's controls
            st.warning(translated(w), icon="✂️")
    fig = flow_graph_figure(flow, threshold=threshold)
    event = chart(fig, key=f"flow_graph_{position}_{threshold:.2f}", on_select="rerun",
                  name="information-flow")
    open_clicked_edge(event, position)
    st.caption(_(flow.note) + _(" Edge width: weight; an MLP is a square on its row. Click the "
               "middle of an orange attention edge to see why its head attends there (Which "
               "heads matter)."))
    route = flow.routes(threshold)
    table(shown_routes(route, ROUTE_COLUMNS), hide_index=True, height=280, width="stretch",
                 key="flow_routes")
    st.caption(_("The routes, one row per head for attention edges (weight: that head's part "
               "of the edge; edge_weight: the whole edge's)."))
    d1, d2 = st.columns(2)
    with d1:
        download_csv(_("Edges (CSV)"), flow.edges, "information_flow_edges.csv", "dl_flow_edges")
    with d2:
        download_csv(_("Routes (CSV)"), route, "information_flow_routes.csv", "dl_flow_routes")

with side, attempt(_("comparing raw attention, rollout and attention flow")):
    show_attention_views(sel, trace, position)
