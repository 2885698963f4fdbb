"""The Attention page's views below its heatmap: head view, mean / max over heads, rollout
(lazy tabs), and the downloads. Called from the page's head_views fragment, so a change of
head, layer or view reruns them without the sidebar or the rest of the page."""

from __future__ import annotations

import streamlit as st

from viz_core import trace_json, trace_npz
from viz_core.analysis import heads as analysis
from viz_core.figures.aggregates import block_aggregate_heatmap, rollout_bytes, rollout_figure
from viz_core.figures.headview import HEADVIEW_MAX, HEADVIEW_WINDOW, block_head_view
from viz_core.figures.heatmap import (
    EXACT_MAX_TOKENS,
    clip_window,
    grouped_block_heatmap,
    is_long,
)
from viz_core.i18n import N_, _, bound

from .charts import chart, download
from .controls import bounded_int, url_select
from .runs import full_trace


def head_tabs(trace, figure, kind: str, block, head: int) -> None:
    """Head view, aggregates and rollout of `block`. Lazy tabs: only the open tab's figure is
    built and sent (switching tabs reruns the fragment). `figure(name, params, build)`: the
    page's cached_figure for this trace."""
    _heads, n_q, n_k = block.shape
    tab_hv, tab_agg, tab_roll = st.tabs([_("Head view"), _("Mean / max over heads"), _("Rollout")],
                                        key="attn_tab", on_change="rerun")
    with tab_hv:
        heads = st.multiselect(_("Heads"), list(range(block.n_heads)), default=[head],
                               key="hv_heads", placeholder=_("Choose"),
                               help=_("Lines join each query (left) to the keys (right) it "
                                    "attends to; opacity is the weight. Long inputs keep the "
                                    "strongest."))
        top_k = st.slider(_("Strongest keys per query"), 1, 20, 5, key="hv_topk")
        hv_rows = hv_cols = None
        if max(n_q, n_k) > HEADVIEW_MAX:
            h1, h2 = st.columns(2)
            hq = bounded_int(_("First query"), "hv_q", 0, 0, n_q - 1, container=h1)
            hk = bounded_int(_("First key"), "hv_k", 0, 0, n_k - 1, container=h2)
            hv_rows, hv_cols = clip_window(block, hq, hk, HEADVIEW_WINDOW, HEADVIEW_WINDOW)
            st.caption(_("{n_q:,} × {n_k:,} tokens: the head view draws a window of "
                         "{HEADVIEW_WINDOW} queries × keys (queries {value}–{value2}, keys "
                         "{value3}–{value4}). Weights are those of the whole input, so a query's "
                         "lines may sum to less than 1.").format(
                           n_q=n_q, n_k=n_k, HEADVIEW_WINDOW=HEADVIEW_WINDOW, value=hv_rows[0],
                           value2=hv_rows[1] - 1, value3=hv_cols[0], value4=hv_cols[1] - 1))
        if heads and tab_hv.open:
            chart(figure("headview", (block.name, tuple(heads), top_k, hv_rows, hv_cols),
                         lambda: block_head_view(block, heads=heads, top_k=top_k,
                                                 rows=hv_rows, cols=hv_cols)),
                  key="headview", name=f"{block.name}-headview")
    with tab_agg:
        how = st.radio(_("Aggregate"), [N_("mean"), N_("max")], horizontal=True, key="agg_how",
                       format_func=bound(_))
        if tab_agg.open:
            chart(figure("aggregate", (block.name, how), lambda: block_aggregate_heatmap(
                block, how=how)), key="aggregate", name=f"{block.name}-{how}")
            if is_long(block):
                st.caption(_("Pooled: computed from every head's block means."))
    with tab_roll:
        _rollout(trace, figure, kind, tab_roll.open)


def _rollout(trace, figure, kind: str, is_open: bool) -> None:
    self_kinds = [k for k in trace.kinds() if k.endswith(".self")]
    rk = kind if kind in self_kinds else (self_kinds or [None])[0]
    blocks = trace.layers(rk) if rk else []
    if not self_kinds:
        st.info(_("Rollout needs self-attention blocks."))
    elif any(is_long(b) for b in blocks):
        n_r = blocks[0].shape[1]
        st.info(_("Rollout multiplies every layer's whole attention matrix, {n_r:,} × {n_r:,} "
                  "here ({n_blocks} layers × {n_heads} heads: {value:,.1f} GiB as float32), so "
                  "it is shown only up to {EXACT_MAX_TOKENS:,} tokens. Shorten the input to see "
                  "it.").format(
                    n_r=n_r, n_blocks=len(blocks), n_heads=blocks[0].n_heads,
                    value=rollout_bytes(blocks) / 2**30, EXACT_MAX_TOKENS=EXACT_MAX_TOKENS))
    elif is_open:
        st.caption(_("Attention rollout (Abnar & Zuidema, 2020): per layer 0.5·mean over heads "
                   "+ 0.5·I for the residual stream, multiplied from the first layer up."))
        chart(figure("rollout", (rk,), lambda: rollout_figure(
            trace.stack(rk), blocks[0].query_tokens,
            title=_("{rk}: rollout through {n_blocks} layers").format(rk=rk, n_blocks=len(blocks)))),
            key="rollout", name=f"{rk}-rollout")


def block_downloads(sel, trace, block) -> None:
    """This block (JSON), the whole trace (NPZ) and the head statistics (CSV), each built on
    click; offered up to EXACT_MAX_TOKENS (each reads whole matrices)."""
    st.subheader(_("Data"))
    if any(is_long(b) for b in trace.block_traces.values()):
        _heads, n_q, n_k = block.shape
        st.caption(_("Downloads of whole attention matrices are offered up to "
                     "{EXACT_MAX_TOKENS:,} tokens; this block alone would be {value:,.1f} GiB as "
                     "float32.").format(
                       EXACT_MAX_TOKENS=EXACT_MAX_TOKENS,
                       value=4 * block.n_heads * n_q * n_k / 2**30))
        return
    d1, d2, d3 = st.columns(3)
    with d1:
        download(_("This block (JSON)"), lambda: trace_json(trace, [block.name]),
                 f"{block.name}.json", "application/json", "dl_block")
    with d2:
        # built on click, from a trace with every hook point (q, k, v, z too)
        download(_("Whole trace (NPZ)"), lambda: trace_npz(full_trace(sel)), "trace.npz",
                 "application/octet-stream", "dl_npz")
    with d3:
        download(_("Head statistics (CSV)"),
                 lambda: analysis.head_stats(trace).to_csv(index=False),
                 "head_stats.csv", "text/csv", "dl_stats")


GROUPINGS = {"token": N_("each token"), "character": N_("by character"), "word": N_("by word")}


def pick_grouping(container) -> str:
    """Group tokens (URL ``group``): each token, by character or by word."""
    return url_select(_("Tokens"), "group", list(GROUPINGS), container=container,
                      format_func=lambda g: _(GROUPINGS[g]),
                      help=_("Group the heatmap's tokens: the parts of a character cut into "
                             "byte tokens (累¹/₂ 累²/₂), or the tokens of a word. A group's row "
                             "is the mean of its tokens' rows, its column the sum of their "
                             "columns, so each row still sums to 1."))


def grouped_heatmap(block, head: int, group: str, view: str, figure) -> bool:
    """The head's weights over groups of tokens in place of the token heatmap; False (and
    nothing drawn) when there is nothing to group: each token, the scores view, or a long
    input (pooled already)."""
    if group == "token":
        return False
    if view != "weights" or is_long(block):
        st.caption(_("Tokens are grouped in the weights view of inputs up to {n:,} tokens; "
                     "this is the token view.").format(n=EXACT_MAX_TOKENS))
        return False
    fig = figure("heatmap-grouped", (block.name, head, group),
                 lambda: grouped_block_heatmap(block, head, group))
    chart(fig, key="heatmap_grouped", name=f"{block.name}-head{head}-{group}")
    st.caption(_("Rows are query groups, columns key groups: a row is the mean of its tokens' "
                 "rows and a column the sum of its tokens' columns, so each row sums to 1. "
                 "Choose “each token” to click single cells."))
    return True
