"""The Information flow page's pieces: its runs (the graph, attention flow), the threshold
slider kept in the URL, the raw attention / rollout / attention flow views, and a click on an
edge of the graph opening its head on "Which heads matter".

The graph is computed once per text and output position at BASE_THRESHOLD (each head's share
is known for every edge the slider can show); moving the slider only redraws it."""

from __future__ import annotations

import pandas as pd
import streamlit as st

from viz_core.analysis.attention_flow import MAX_TOKENS, self_kind
from viz_core.analysis.heads import rollout
from viz_core.figures.flow import EDGE_KINDS, attention_views_figure
from viz_core.i18n import N_, _

from . import state
from .cells import points_of
from .cells import position as cell_position
from .charts import chart
from .runs import AnalysisRequest, run_analysis

BASE_THRESHOLD = 0.01  # the slider's lowest value: the flow is computed at it
DEFAULT_THRESHOLD = 0.04  # the paper's
QK_TAB = N_("Why this score?")  # the label of the QK tab of Which heads matter


def flow_request(sel, position: int) -> AnalysisRequest:
    return AnalysisRequest.of(sel, "information_flow", text=sel.text, target=sel.target or None,
                              position=int(position), threshold=BASE_THRESHOLD)


def threshold_slider(container=st) -> float:
    """The threshold (URL ``flow_t``): the smallest weight of an edge on a route."""
    state.widget_default("flow_t", state.url_float("flow_t", DEFAULT_THRESHOLD,
                                                   BASE_THRESHOLD, 1.0))
    container.slider(_("Threshold"), BASE_THRESHOLD, 1.0, key="flow_t", step=0.01,
                     help=_("An edge is on a route when its weight (its share of what reaches "
                          "the node it enters) is at least this. Ferrando & Voita use 0.04."))
    state.to_url(flow_t=round(float(st.session_state["flow_t"]), 4),
                 defaults={"flow_t": round(float(DEFAULT_THRESHOLD), 4)})
    return float(st.session_state["flow_t"])


def shown_routes(route, columns: list[str]):
    """The routes as the page's table shows them: each edge's kind in the reader's language
    and no head as an empty cell (the CSV keeps the data: "residual", no value)."""
    shown = route[columns].round(4)
    kinds = {k: _(v) for k, v in EDGE_KINDS.items()}
    if "kind" in shown:
        shown["kind"] = [kinds.get(k, k) for k in shown["kind"].astype(str)]
    if "head" in shown:
        shown["head"] = ["" if h is None or h is pd.NA else f"h{int(h)}"
                         for h in shown["head"].astype(object)]
    return shown


def open_clicked_edge(event, position: int) -> None:
    """A click on an attention edge's middle (customdata [block, head, source, target])
    opens that head's "why this score?" for the edge's cell on Which heads matter, with the
    position to explain set to this page's output position."""
    for point in points_of(event):
        data = point.get("customdata")
        if not isinstance(data, (list, tuple)) or len(data) != 4 or not isinstance(data[0], str):
            continue
        head, source, target = (cell_position(v, None) for v in data[1:])
        if head is None or source is None or target is None:  # a residual edge: no head
            continue
        st.session_state.update(qk_block=data[0], qk_head=head, qk_q=target, qk_k=source,
                                pos=int(position), tab=_(QK_TAB))
        st.switch_page("pages/heads_matter.py")


def show_attention_views(sel, trace, position: int) -> None:
    """Raw attention (last layer), rollout and attention flow for the output token, side by
    side (attention flow up to MAX_TOKENS tokens; a caption beyond)."""
    kind = self_kind(trace, None)
    patterns = trace.stack(kind)  # [layer, head, n, n]
    tokens = trace.layers(kind)[0].query_tokens
    if len(tokens) > MAX_TOKENS:
        st.caption(_("Attention flow is offered up to {MAX_TOKENS} tokens (one maximum flow per "
                     "token pair); this input has {n_tokens}. Rollout is on the Attention page.").format(
                       MAX_TOKENS=MAX_TOKENS, n_tokens=len(tokens)))
        return
    flow = run_analysis(AnalysisRequest.of(
        sel, "attention_flow", text=sel.text, target=sel.target or None, kind=kind,
        outputs=(int(position),)), _("Computing attention flow…"))
    raw = patterns[-1].mean(axis=0)
    fig = attention_views_figure(tokens, raw, rollout(patterns), flow, int(position))
    chart(fig, key=f"flow_views_{kind}_{position}", name="attention-flow")
    st.caption(_("Raw attention: the last layer's mean over heads. Rollout and attention flow "
               "(Abnar & Zuidema, 2020) follow 0.5·mean over heads + 0.5·I through every "
               "layer: rollout multiplies the matrices (every path), flow is the most that "
               "can pass at once (a maximum flow from each input token)."))
