"""Beam search tree: steps left to right, one marker per node, one edge per parent link.

Layout: a depth-first walk with siblings sorted (kept/finished first, best score first,
pruned candidates last). Only leaves take vertical room, pruned leaves much less than the
others, and a parent sits at the middle of its surviving children. A tree drawn in DFS
order never crosses its own edges, and the best continuations stay on top.

How a page learns which node was clicked: each marker's customdata is the node id (the
marker traces are named "nodes: <status>", in the reader's language: TRACE_NAMES)::

    event = st.plotly_chart(fig, on_select="rerun", selection_mode="points", key="tree")
    node_id = selected_node(event.selection)   # int or None -> tree.node(node_id)

Edges live in traces named "edges ..." (in the reader's language) as NaN-separated segments
(parent -> child), so tests and pages can count them: one segment per non-root node.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

import numpy as np
import plotly.graph_objects as go

from viz_core.i18n import N_, _

from ..decoding.beam_tree import BeamNode, BeamTree
from .common import _short, base_layout, plot_text

STATUS_STYLE = {  # colour, symbol, size: status must read without colour too
    "root": ("#444444", "square", 11),
    "kept": ("#1f77b4", "circle", 9),
    "finished": ("#2ca02c", "star", 14),
    "pruned": ("#c7c7c7", "x-thin-open", 6),
}
# what the legend shows for each trace (its English text is the trace's name in English)
TRACE_NAMES = {"edges": N_("edges"), "edges (pruned)": N_("edges (pruned)"),
               "edges (n-best)": N_("edges (n-best)"), "edges (best)": N_("edges (best)"),
               "root": N_("nodes: root"), "kept": N_("nodes: kept"),
               "finished": N_("nodes: finished"), "pruned": N_("nodes: pruned")}
STATUS_NAMES = {"root": N_("root"), "kept": N_("kept"), "finished": N_("finished"),
                "pruned": N_("pruned")}
LEAF_HEIGHT = {"pruned": 0.3}  # vertical room of a leaf by status; others get 1.0
SLOT_PX = 24  # pixels per vertical slot: a 10 px label above its marker fits in one
TITLE_PX = 44  # the title's room at the top of the figure; the legend goes under it
TOP_PX = 120  # top margin: the title and a legend of up to two lines
RANK_PX = 90  # right margin for the "#1 −1.234" n-best labels right of the last step


def _room(node: BeamNode) -> float:
    return LEAF_HEIGHT.get(node.status, 1.0)


def tree_layout(nodes: Sequence[BeamNode]) -> dict[int, tuple[float, float]]:
    """node id -> (x = step, y = vertical slot, 0 at the top), for tree.nodes or a subset
    closed under parents.

    Two nodes of one step are always at least the mean of their rooms apart (1 slot between
    two labelled nodes): a parent sits at the middle of its surviving children unless the
    node above it at its step is closer than that, and is then moved down. Nodes of a step
    are placed in the walk's order, top to bottom, so moving one down never crosses edges."""
    children: dict[int | None, list] = {}
    for n in nodes:
        children.setdefault(n.parent, []).append(n)
    for sibs in children.values():
        sibs.sort(key=lambda n: (n.status == "pruned", -n.score, n.id))
    pos: dict[int, tuple[float, float]] = {}
    lowest: dict[int, tuple[float, float]] = {}  # step -> (y, room) of the lowest node so far
    cursor = 0.0

    def place(node: BeamNode, y: float) -> None:
        below = lowest.get(node.step)
        if below is not None:
            y = max(y, below[0] + (below[1] + _room(node)) / 2)
        pos[node.id] = (float(node.step), float(y))
        lowest[node.step] = (float(y), _room(node))

    # Iterative post-order DFS (deep trees must not hit the recursion limit).
    stack = [(n, False) for n in reversed(children.get(None, []))]
    while stack:
        node, done = stack.pop()
        kids = children.get(node.id, [])
        if not kids:
            h = _room(node)
            place(node, cursor + h / 2)
            cursor = max(cursor + h, pos[node.id][1] + h / 2)
        elif done:
            main = [k for k in kids if k.status != "pruned"] or kids
            place(node, float(np.mean([pos[k.id][1] for k in main])))
        else:
            stack.append((node, True))
            stack.extend((k, False) for k in reversed(kids))
    return pos


def _segments(pairs, pos) -> tuple[np.ndarray, np.ndarray]:
    """x, y float32 arrays of parent->child segments separated by NaN."""
    x = np.full(3 * len(pairs), np.nan, dtype=np.float32)
    y = np.full(3 * len(pairs), np.nan, dtype=np.float32)
    for i, (a, b) in enumerate(pairs):
        x[3 * i], y[3 * i] = pos[a]
        x[3 * i + 1], y[3 * i + 1] = pos[b]
    return x, y


def beam_tree_figure(tree: BeamTree, n_best: int | None = None, show_pruned: bool = True,
                     title: str | None = None, height: int | None = None) -> go.Figure:
    """Beam tree figure. n_best: how many hypotheses to highlight (default all of them)."""
    nodes = [n for n in tree.nodes if show_pruned or n.status != "pruned"]
    shown = {n.id for n in nodes}
    pos = tree_layout(nodes)
    hyps = tree.hypotheses if n_best is None else tree.hypotheses[:n_best]
    best_links: dict[int, int] = {}  # child id -> rank of the best hypothesis using the link
    for rank, h in reversed(list(enumerate(hyps))):
        for n in tree.path(h.node_id):
            best_links[n.id] = rank
    groups: dict[str, list] = {"edges": [], "edges (pruned)": [], "edges (n-best)": [],
                               "edges (best)": []}
    for n in nodes:
        if n.parent is None or n.parent not in shown:
            continue
        rank = best_links.get(n.id)
        key = ("edges (best)" if rank == 0 else "edges (n-best)" if rank is not None
               else "edges (pruned)" if n.status == "pruned" else "edges")
        groups[key].append((n.parent, n.id))
    styles = {"edges": dict(color="#9ab", width=1.2),
              "edges (pruned)": dict(color="#ddd", width=0.8, dash="dot"),
              "edges (n-best)": dict(color="#f0a030", width=3),
              "edges (best)": dict(color="#d62728", width=5)}
    fig = go.Figure()
    for name, pairs in groups.items():
        if not pairs:
            continue
        x, y = _segments(pairs, pos)
        fig.add_trace(go.Scatter(x=x, y=y, mode="lines", line=styles[name], name=_(TRACE_NAMES[name]),
                                 hoverinfo="skip"))
    for status, (color, symbol, size) in STATUS_STYLE.items():
        group = [n for n in nodes if n.status == status]
        if not group:
            continue
        xy = np.array([pos[n.id] for n in group], dtype=np.float32)
        step, shown, cum, score = _("step"), _(STATUS_NAMES[status]), _("cum"), _("score")
        hover = [f"<b>{plot_text(n.token)}</b> (id {n.token_id}) · {step} {n.step} · {shown}<br>"
                 f"log p {n.logprob:.3f} · {cum} {n.cum_logprob:.3f} · {score} {n.score:.3f}"
                 for n in group]
        labelled = status != "pruned"
        fig.add_trace(go.Scatter(
            x=xy[:, 0], y=xy[:, 1], mode="markers+text" if labelled else "markers",
            # labels may stand out of the plotting area (the root's, a decoder's prompt cut to
            # 12 characters, half of it left of step 0) into the margins
            text=[plot_text(_short(n.token)) for n in group] if labelled else None,
            textposition="top center", cliponaxis=False,
            textfont=dict(size=10), hovertext=hover, hoverinfo="text",
            customdata=[n.id for n in group], name=_(TRACE_NAMES[status]),
            marker=dict(color=color, symbol=symbol, size=size,
                        line=dict(width=1, color=color)),
        ))
    ends = [(rank, h) for rank, h in enumerate(hyps) if h.node_id in pos]
    if ends:
        xy = np.array([pos[h.node_id] for _, h in ends], dtype=np.float32)
        fig.add_trace(go.Scatter(  # drawn past the last step, in the right margin
            x=xy[:, 0] + np.float32(0.25), y=xy[:, 1], mode="text", name="n-best ranks",
            text=[f"#{r + 1} {h.score:.3f}" for r, h in ends], textposition="middle right",
            hoverinfo="skip", showlegend=False, cliponaxis=False))
    span = max((y + 0.5 for _, y in pos.values()), default=1.0)
    max_step = max((n.step for n in nodes), default=1)
    fig.update_xaxes(title=_("step"), tickmode="array", tickvals=list(range(max_step + 1)),
                     range=[-0.5, max_step + 0.5], zeroline=False)
    fig.update_yaxes(visible=False, autorange="reversed")
    # The legend goes under the title at the top of the figure (under the axis it ran into
    # the step numbers), placed in pixels from the top; the right margin holds the ranks.
    fig_height = height or int(min(2400, max(420, SLOT_PX * span + 210)))
    base_layout(fig, title or _("Beam search tree"), clickmode="event+select", height=fig_height,
                margin=dict(t=TOP_PX, r=RANK_PX, l=70),
                legend=dict(orientation="h", yref="container", y=1 - TITLE_PX / fig_height,
                            yanchor="top", x=0, xanchor="left"))
    return fig


def selected_node(selection) -> int | None:
    """Node id of the first clicked marker of a beam_tree_figure, or None.

    `selection` is ``event.selection`` from st.plotly_chart(..., on_select="rerun"); the
    marker traces carry customdata = node id (a number, or a one-element list).
    """
    points = selection.get("points", []) if isinstance(selection, Mapping) else (
        getattr(selection, "points", None) or [])
    for pt in points:
        cd = pt.get("customdata") if isinstance(pt, Mapping) else None
        if isinstance(cd, (list, tuple)):
            cd = cd[0] if len(cd) == 1 else None
        if isinstance(cd, (int, float)) and not isinstance(cd, bool):
            return int(cd)
    return None
