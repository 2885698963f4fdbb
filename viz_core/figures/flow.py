"""Figures of how information flows: the information-flow graph (viz_core.analysis.
information_flow) drawn as the LLM Transparency Tool draws it, and raw attention, rollout and
attention flow for one output token side by side (viz_core.analysis.attention_flow).

The graph: node columns left to right in model order (the embeddings, then per layer the
stream after each attention block and after the MLP), positions top to bottom; an edge's
width is its weight; the routes to the chosen prediction are drawn in colour over the rest of
the graph at the threshold (grey). An MLP's edge (same row, from the stream after attention to
the layer's output) is a square on that segment, its size the weight. Each edge has an
invisible marker at its middle carrying its hover and, for attention edges, ``customdata`` =
[block, head, source position, target position] (head: the one carrying most of the edge), so
a page can open that head on a click. An encoder-decoder model's encoder tokens label the
left axis, its decoder tokens the right one.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import TYPE_CHECKING

import numpy as np
import pandas as pd
import plotly.graph_objects as go
from plotly.subplots import make_subplots

from ..i18n import N_, _
from .common import (
    MAX_TICKS,
    f32,
    label_px,
    layout_dict,
    plot_text,
    title_dict,
    unique_labels,
)

if TYPE_CHECKING:  # type hints only
    from ..analysis.information_flow import InformationFlow

ROUTE_COLOR = "#e8590c"  # orange: the routes to the prediction
GRAPH_COLOR = "#c9ccd1"  # light grey: the rest of the graph at the threshold
NODE_COLOR = "#868e96"
WIDTH_BINS = (0.1, 0.2, 0.35, 0.5, 0.75)  # an edge's weight -> one of 6 line widths
EDGE_KINDS = {"attention": N_("attention"), "residual": N_("residual"),
              "cross": N_("cross-attention"), "mlp": N_("MLP")}  # an edge's kind, in a hover
ROW_PX = 22  # height of one position row
NARROW_PLOT_PX = 480  # about the graph's plot width beside the views on a page
MAX_DRAWN = 6000  # grey edges drawn at most (the heaviest), beyond which the graph is noise


def column_label(col: tuple[str, int, str], two_stacks: bool) -> str:
    """"embed", "3 self", "3 out"; "E0 self", "D1 cross" when an encoder and a decoder share
    the axis."""
    stack, layer, point = col
    pre = ("E" if stack == "encoder" else "D") if two_stacks else ""
    if point == "in":
        return f"{pre}{' ' if pre else ''}embed"
    return f"{pre}{layer} {point}"


def _width(w: np.ndarray) -> np.ndarray:
    return 1.0 + 1.5 * np.searchsorted(np.asarray(WIDTH_BINS), w, side="right")


def _segments(x0, y0, x1, y1) -> tuple[list, list]:
    """x and y of line segments separated by None (one trace draws them all; a None gap
    survives every JSON path to the browser, where a NaN in a typed array did not)."""
    xs: list = []
    ys: list = []
    for a, b, c, d in zip(np.round(x0, 3).tolist(), np.round(y0, 3).tolist(),
                          np.round(x1, 3).tolist(), np.round(y1, 3).tolist()):
        xs += [a, c, None]
        ys += [b, d, None]
    return xs, ys


def _node_index(flow: InformationFlow) -> dict:
    return {col: i for i, col in enumerate(flow.columns)}


def _xy(frame: pd.DataFrame, index: dict, end: str) -> tuple[np.ndarray, np.ndarray]:
    cols = zip(frame[f"{end}_stack"], frame[f"{end}_layer"].astype(int), frame[f"{end}_point"])
    x = np.array([index[c] for c in cols], dtype=np.float64)
    return x, frame[f"{end}_position"].to_numpy(np.float64)


def _top_heads(flow: InformationFlow, edges: pd.DataFrame) -> dict:
    """(block, source, target) -> (best head, "h3 62%, h0 30%" hover text), for the attention
    edges of ``edges`` (the routes: only their hover text shows the heads). One pass over the
    heads of those edges: a long input has tens of thousands of edges."""
    if flow.heads.empty or edges.empty:
        return {}
    keys = ["block", "source_position", "target_position"]
    wanted = pd.MultiIndex.from_frame(edges[keys].astype({k: int for k in keys[1:]}))
    ordered = flow.heads.sort_values("share", ascending=False)
    ordered = ordered[pd.MultiIndex.from_frame(
        ordered[keys].astype({k: int for k in keys[1:]})).isin(wanted)]
    out: dict = {}
    shown: dict = {}
    for block, src, tgt, head, share in zip(ordered["block"], ordered["source_position"],
                                            ordered["target_position"], ordered["head"],
                                            ordered["share"]):
        key = (block, int(src), int(tgt))
        if key not in out:
            out[key] = int(head)
            shown[key] = []
        if share >= 0.05 and len(shown[key]) < 4:
            shown[key].append(f"h{int(head)} {share:.0%}")
    return {key: (head, ", ".join(shown[key])) for key, head in out.items()}


def _edge_traces(edges: pd.DataFrame, index: dict, colour: str, name: str, route: bool,
                 heads: dict, tokens: dict) -> list[go.BaseTraceType]:
    traces: list[go.BaseTraceType] = []
    lines = edges[edges.kind != "mlp"]
    x0, y0 = _xy(lines, index, "source")
    x1, y1 = _xy(lines, index, "target")
    widths = _width(lines.weight.to_numpy())
    for w in np.unique(widths):
        sel = widths == w
        xs, ys = _segments(x0[sel], y0[sel], x1[sel], y1[sel])
        traces.append(go.Scatter(x=xs, y=ys, mode="lines", hoverinfo="skip",
                                   line=dict(color=colour, width=float(w)), name=name,
                                   legendgroup=name, showlegend=bool(w == widths.min())))
    mlp = edges[edges.kind == "mlp"]
    if len(mlp):
        mx0, my = _xy(mlp, index, "source")
        mx1, _my = _xy(mlp, index, "target")
        marker = _("MLP {block}<br>position {position}<br>weight {weight}")
        traces.append(go.Scatter(
            x=f32((mx0 + mx1) / 2), y=f32(my), mode="markers", name=f"{name}: MLP",
            legendgroup=name, marker=dict(symbol="square", color=colour,
                                          size=f32(4 + 14 * mlp.weight.to_numpy())),
            hovertemplate="%{text}<extra></extra>",
            text=[marker.format(block=b, position=int(p), weight=f"{w:.3f}") for b, p, w in
                  zip(mlp.block, mlp.target_position, mlp.weight)]))
    if len(lines) and route:
        hover, data = [], []
        kinds = {k: _(v) for k, v in EDGE_KINDS.items()}  # the words once, not per edge
        weight_line, heads_line = _("weight {weight}"), _("heads: {heads}")
        for row in lines.itertuples(index=False):
            src_tok = tokens[row.source_stack][int(row.source_position)]
            tgt_tok = tokens[row.target_stack][int(row.target_position)]
            text = (f"{kinds.get(row.kind, row.kind)} {row.block}<br>{int(row.source_position)}·"
                    f"{plot_text(src_tok)} → {int(row.target_position)}·{plot_text(tgt_tok)}"
                    "<br>" + weight_line.format(weight=f"{row.weight:.3f}"))
            best = heads.get((row.block, int(row.source_position), int(row.target_position)))
            if best is not None and row.kind in ("attention", "cross"):
                text += "<br>" + heads_line.format(heads=best[1])
            hover.append(text)
            data.append([str(row.block), -1 if best is None else best[0],
                         int(row.source_position), int(row.target_position)])
        traces.append(go.Scatter(
            x=f32((x0 + x1) / 2), y=f32((y0 + y1) / 2), mode="markers", name="edges",
            showlegend=False, marker=dict(size=10, color="rgba(0,0,0,0)"), text=hover,
            customdata=data, hovertemplate="%{text}<extra></extra>"))
    return traces


def flow_graph_figure(flow: InformationFlow, *, threshold: float | None = None,
                      title: str | None = None) -> go.Figure:
    """The information-flow graph: the edges at ``threshold`` (default: the flow's) in grey,
    the routes to the prediction at ``flow.position`` in colour."""
    t = flow.threshold if threshold is None else float(threshold)
    index = _node_index(flow)
    two = len(flow.tokens) == 2
    edges = flow.edges[flow.edges.weight >= t]
    route = flow.routes(t, by_head=False)
    if len(edges) > MAX_DRAWN:
        edges = edges.nlargest(MAX_DRAWN, "weight")
    heads = _top_heads(flow, route[route.kind != "mlp"])
    traces = _edge_traces(edges, index, GRAPH_COLOR, "graph", False, heads, flow.tokens)
    traces += _edge_traces(route, index, ROUTE_COLOR, "route", True, heads, flow.tokens)
    on_route = set(zip(route.source_stack, route.source_layer, route.source_point,
                       route.source_position))
    on_route.add(flow.output_node)
    nx_, ny_, colours, hover = [], [], [], []
    for col, x in index.items():
        toks = flow.tokens[col[0]]
        for p, tok in enumerate(toks):
            nx_.append(x)
            ny_.append(p)
            colours.append((*col, p) in on_route)
            hover.append(f"{column_label(col, two)}<br>{p}·{plot_text(tok)}")
    traces.append(go.Scatter(x=f32(nx_), y=f32(ny_), mode="markers", name="nodes",
                               showlegend=False,  # colours 0/1 (not 8,000+ strings)
                               marker=dict(size=6, color=np.asarray(colours, np.uint8),
                                           colorscale=[[0, NODE_COLOR], [1, ROUTE_COLOR]],
                                           cmin=0, cmax=1),
                               text=hover, hovertemplate="%{text}<extra></extra>"))
    n = max(len(v) for v in flow.tokens.values())
    labels = [column_label(c, two) for c in flow.columns]
    # side by side only when every label fits in its column of a ~500 px wide plot
    vertical = len(labels) * (label_px(labels) + 12) > NARROW_PLOT_PX
    first = flow.tokens["encoder" if two else flow.stack]
    yaxis = dict(**_row_ticks(first), range=[n - 0.5, -0.5], showgrid=False,
                 zeroline=False, title=None, automargin=True)
    layout = layout_dict(
        title if title is not None else _title(flow, t),
        xaxis=dict(tickmode="array", tickvals=list(range(len(labels))), ticktext=labels,
                   tickangle=-90 if vertical else 0, showgrid=False, zeroline=False,
                   range=[-0.5, len(labels) - 0.5], automargin=True),
        yaxis=yaxis, height=max(320, ROW_PX * n + 130 + (label_px(labels) if vertical else 0)),
        showlegend=False,
        margin=dict(l=10, r=10, t=60, b=10 + (label_px(labels) if vertical else 0)),
        hovermode="closest", dragmode="pan")
    fig = go.Figure(traces, layout=layout)
    if two:
        dec = flow.tokens["decoder"]
        fig.update_layout(yaxis2=dict(
            **_row_ticks(dec), range=[n - 0.5, -0.5], overlaying="y", side="right", showgrid=False,
            zeroline=False, automargin=True))
        fig.add_trace(go.Scatter(x=[None], y=[None], yaxis="y2", showlegend=False,
                                 hoverinfo="skip"))
    return fig


def _row_ticks(tokens: Sequence[str]) -> dict:
    """A row axis's tick labels ("12·cat"): every row up to MAX_TICKS rows, else every n-th
    (a node's hover names its token). Plotly measures each tick label at every draw: 497
    labels kept Chromium busy ~6 s before the graph showed (Streamlit draws it several
    times), every 8th ~1.5 s."""
    labels = unique_labels(tokens)
    rows = range(0, len(labels), max(1, math.ceil(len(labels) / MAX_TICKS)))
    return dict(tickmode="array", tickvals=list(rows), ticktext=[labels[i] for i in rows])


def _title(flow: InformationFlow, t: float) -> str:
    tok = flow.tokens[flow.stack][flow.position]
    pred = f" → {plot_text(flow.prediction)}" if flow.prediction is not None else ""
    return _("Information flow to {token}{prediction}: routes in orange (threshold {t:g})").format(
        token=f"{flow.position}·{plot_text(tok)}", prediction=pred, t=t)


def attention_views_figure(tokens: Sequence[str], raw: np.ndarray, rollout: np.ndarray,
                           flow: np.ndarray, position: int, *,
                           title: str | None = None) -> go.Figure:
    """Raw attention (the last layer, mean over heads), rollout and attention flow of one
    output token over the input tokens: three bar panels side by side, tokens top to
    bottom. Each input is one row of the matching [output, input] matrix."""
    labels = unique_labels(tokens)
    fig = make_subplots(rows=1, cols=3, shared_yaxes=True, horizontal_spacing=0.04,
                        subplot_titles=(_("raw attention"), _("rollout"), _("attention flow")))
    for c, values in enumerate((raw, rollout, flow), start=1):
        row = f32(np.asarray(values)[position])
        fig.add_trace(go.Bar(x=row, y=labels, orientation="h", marker_color=ROUTE_COLOR,
                             name=("raw", "rollout", "flow")[c - 1], showlegend=False,
                             hovertemplate="%{y}: %{x:.3f}<extra></extra>"), row=1, col=c)
        fig.update_xaxes(range=[0, max(1e-6, float(np.nanmax(row))) * 1.05], row=1, col=c,
                         showgrid=True, zeroline=False)
    fig.update_yaxes(autorange="reversed", type="category", showgrid=False, automargin=True)
    out = unique_labels([tokens[position]], start=position)[0]
    fig.update_layout(**layout_dict(
        title_dict(title if title is not None else _("Where {token} reads from").format(token=out),
                   above=24),
        height=max(300, ROW_PX * len(tokens) + 110), margin=dict(l=10, r=10, t=90, b=30)))
    return fig
