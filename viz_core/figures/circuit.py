"""Figures of a circuit (viz_core.analysis.edges): the kept edges of the residual-stream graph,
and the faithfulness curve (edges kept against faithfulness).

The graph: layers as columns, left to right in model order (an encoder's layers before a
decoder's); ``embed`` on the left, ``logits`` on the right; in each layer's column its heads
(self-attention, then cross-attention) top to bottom, and its MLP a little to the right of
them (a head writes into its own layer's MLP); under a grouped-query model's heads, its
key/value groups (``decoder.1.self.kv0``, a diamond: the k and v inputs its heads share). One
line per kept edge, blue when the edge carries the clean answer (score > 0), red when it works
against it, its width growing with |score| (the largest kept |score| is MAX_WIDTH); a q input
is a solid line, k dashed, v dotted. An edge is straight unless that line would run through
another node (embed, the MLPs and logits share a row), another node's name or a stronger
edge, then the least bent arc clear of every node and, where one is, of the names and the
stronger edges (EdgeRouter). Each edge's line carries ``customdata`` [sender, receiver,
input, score] (no hover, so clicks reach the nodes), as does an invisible marker at its middle
(its hover); each node's marker carries its component name, so a page can open a clicked head.
Each node's short name stands above it as an annotation on a light background, so an edge
that passes it does not cross it out.
"""

from __future__ import annotations

import re
from collections.abc import Sequence

import numpy as np
import pandas as pd
import plotly.graph_objects as go

from viz_core.i18n import _

from .common import layout_dict, plot_text

POSITIVE = "#1c7ed6"  # blue: the edge carries the clean answer
NEGATIVE = "#e03131"  # red: it pushes towards the corrupted one
NODE_COLOR = "#495057"
KEPT_COLOR = "#e8590c"  # the edges kept (the faithfulness curve's mark, the agreement's dots)
LABEL_BACKGROUND = "rgba(255, 255, 255, 0.85)"  # a node's name stays legible over an edge
MIN_WIDTH, MAX_WIDTH = 1.0, 9.0
DASH = {"q": "solid", "k": "dash", "v": "dot", "": "solid"}
MLP_DX = 0.45  # an MLP sits this far right of its layer's heads
# An edge whose straight line would run through another node (embed, the MLPs and logits share
# the middle row: embed -> logits would hide embed -> MLP 1 and MLP 0 -> logits) is drawn as
# an arc clear of every node (EdgeRouter), of CURVE_POINTS points; NEAR: how close (in rows /
# columns) a line may pass a node.
BEND, NEAR, CURVE_POINTS = 0.3, 0.15, 13
PEAKS = np.array([1, -1, 2, -2, 3, -3, 4, -4])  # the arcs tried, in BENDs off the line
# An edge is also bent off a name it would cross and off a stronger edge it would run along
# (embed -> logits hid embed -> MLP 1): APART, END and ALONG as EdgeRouter says; a name's box
# in pixels (LABEL_LIFT_PX: its middle above its node, CHAR_PX a character's width), turned
# into rows with the figure's height and into columns with LABEL_WIDTH_PX (the page sets the
# figure's width: this is about the narrower of its two layouts).
APART, END, ALONG = 0.1, 0.3, 2
NAME_COST, ALONG_COST = 2, 5  # in BENDs: a path's cost is its bend, plus these where it hits
SPACED = 200  # the strongest edges kept apart (past them a graph is a thicket: nodes, names)
LABEL_LIFT_PX, LABEL_HALF_PX, CHAR_PX, LABEL_WIDTH_PX = 17, 7, 6.2, 700
# Past LABEL_ALL nodes (GPT-2-small has 158) the names of all of them crowd out the circuit:
# only the nodes the kept edges join (and embed, logits) are named and drawn full size, the
# rest small and light (their hover still names them, a click still opens a head).
LABEL_ALL = 40
QUIET_COLOR = "#ced4da"
ROW_PX = 40  # the graph's height per row of its tallest column, past the default height
HEAD = re.compile(r"^(?:(encoder|decoder)\.)?(\d+)\.(self|cross)\.h(\d+)$")
MLP = re.compile(r"^(?:(encoder|decoder)\.)?(\d+)\.mlp$")
# a key/value group of grouped-query attention: its heads share the k and v inputs
KV = re.compile(r"^(?:(encoder|decoder)\.)?(\d+)\.(self|cross)\.kv(\d+)$")


def edge_color(score: float) -> str:
    return POSITIVE if score > 0 else NEGATIVE


def edge_widths(scores) -> np.ndarray:
    """Line widths of edges: MIN_WIDTH + (MAX_WIDTH - MIN_WIDTH) * |score| / max |score|."""
    s = np.abs(np.asarray(scores, dtype=float))
    top = s.max() if len(s) else 0.0
    if not top > 0:
        return np.full(len(s), MIN_WIDTH)
    return MIN_WIDTH + (MAX_WIDTH - MIN_WIDTH) * s / top


def _order(stack: str | None) -> int:
    return 0 if stack == "encoder" else 1


def node_positions(names: Sequence[str]) -> dict[str, tuple[float, float]]:
    """(x, y) of every component: a column per (stack, layer) in model order, heads top to
    bottom then the MLP to their right; embeddings at x = 0, logits after the last column."""
    layers: dict[tuple[int, int], dict] = {}
    embeds, other = [], []
    for n in dict.fromkeys(names):
        h, m = HEAD.match(n) or KV.match(n), MLP.match(n)
        if h:
            col = layers.setdefault((_order(h[1]), int(h[2])), {"heads": [], "mlp": None})
            kind = (h[3] != "self") + (2 if KV.match(n) else 0)  # heads, then kv groups
            col["heads"].append(((kind, int(h[4])), n))
        elif m:
            layers.setdefault((_order(m[1]), int(m[2])), {"heads": [], "mlp": None})["mlp"] = n
        elif n.endswith("embed"):
            embeds.append(n)
        else:
            other.append(n)  # logits
    pos: dict[str, tuple[float, float]] = {}
    tallest = max([len(c["heads"]) for c in layers.values()] + [1])
    mid = (tallest - 1) / 2
    for x, key in enumerate(sorted(layers), start=1):
        col = layers[key]
        for y, (_h, n) in enumerate(sorted(col["heads"])):
            pos[n] = (float(x), -float(y))
        if col["mlp"]:
            pos[col["mlp"]] = (x + MLP_DX, -mid)
    for i, n in enumerate(sorted(embeds, key=lambda e: _order(e.split(".")[0]))):
        pos[n] = (0.0, -mid - (i - (len(embeds) - 1) / 2))
    for n in other:
        pos[n] = (len(layers) + 1.0, -mid)
    return pos


def _distances(paths: np.ndarray, points: np.ndarray) -> np.ndarray:
    """(m, k, segments): how far each of ``points`` (k, 2) lies from each segment of each
    polyline of ``paths`` (m, points, 2)."""
    a = paths[:, None, :-1]  # (m, 1, segments, 2)
    d = paths[:, None, 1:] - a
    p = points[None, :, None, :]  # (1, k, 1, 2)
    t = np.clip(((p - a) * d).sum(-1) / np.maximum((d * d).sum(-1), 1e-12), 0, 1)
    gap = a + t[..., None] * d - p
    return np.sqrt((gap * gap).sum(-1))


def _clearance(paths: np.ndarray, nodes: np.ndarray) -> np.ndarray:
    """How close each polyline of ``paths`` (m, points, 2) comes to any of ``nodes`` (k, 2):
    (m,) (inf where there are no nodes)."""
    if not len(nodes):
        return np.full(len(paths), np.inf)
    return _distances(paths, nodes).min(axis=(1, 2))


def _inside(points: np.ndarray, path: np.ndarray, margin: float) -> np.ndarray:
    """The ``points`` within ``path``'s bounding box widened by ``margin``."""
    lo, hi = path.min(0) - margin, path.max(0) + margin
    return points[((points >= lo) & (points <= hi)).all(1)]


class EdgeRouter:
    """Draws edges one at a time, each as the cheapest of its straight line and its arcs (a
    quadratic Bezier curve peaking BEND, -BEND, 2 BEND, ... 4 BEND off the line's middle,
    square to it) that keeps NEAR from every node it does not join. A path costs its bend (0
    for the line, 1..4), plus NAME_COST where it passes within ``label_gap`` of another
    node's name (``labels``: points along each name, ``owners``: the position of the node
    each names), plus ALONG_COST where it runs along an edge drawn before it: more than ALONG
    of its points past END of its own ends (where edges of one node meet anyway) within APART
    of that edge (a crossing is fine). Ties go to the first (the line, then up before down).
    Where no path clears the nodes, whichever keeps farthest from them (the line included).
    Route the strongest edge first: the others bend around it (the first SPACED edges
    routed)."""

    def __init__(self, nodes, labels=None, owners=None, label_gap: float = 0.0):
        self.nodes = np.asarray(nodes, float).reshape(-1, 2)
        self.labels = np.asarray(np.zeros((0, 2)) if labels is None else labels, float)
        self.owners = np.asarray(np.zeros((0, 2)) if owners is None else owners, float)
        self.label_gap = label_gap
        self.drawn: list[np.ndarray] = []  # the edges so far, CURVE_POINTS points each
        self.boxes = np.zeros((0, 2, 2))  # their bounding boxes (lo, hi)

    def _alongside(self, path: np.ndarray, a: np.ndarray, b: np.ndarray) -> int:
        """The most of ``path``'s points (CURVE_POINTS of them) past END of its ends that lie
        within APART of one earlier edge."""
        pts = path[(np.hypot(*(path - a).T) > END) & (np.hypot(*(path - b).T) > END)]
        if not len(pts) or not self.drawn or len(self.drawn) >= SPACED:
            return 0
        lo, hi = pts.min(0) - APART, pts.max(0) + APART
        near = np.nonzero(((self.boxes[:, 0] <= hi) & (self.boxes[:, 1] >= lo)).all(1))[0]
        if not len(near):
            return 0
        close = _distances(np.stack([self.drawn[i] for i in near]), pts).min(-1) < APART
        return int(close.sum(1).max())

    def route(self, a, b) -> tuple[np.ndarray, np.ndarray]:
        """The points (xs, ys) of the edge from node position a to node position b."""
        a, b = np.asarray(a, float), np.asarray(b, float)
        # (a node at a's x and b's y is not an end)
        others = self.nodes[~((self.nodes == a).all(1) | (self.nodes == b).all(1))]
        labels = self.labels[~((self.owners == a).all(1) | (self.owners == b).all(1))]
        t = np.linspace(0, 1, CURVE_POINTS)[:, None]
        dense_line = (1 - t) * a + t * b
        normal = np.array([-(b - a)[1], (b - a)[0]]) / float(np.hypot(*(b - a)))  # upward
        control = (a + b) / 2 + 2 * BEND * PEAKS[:, None] * normal  # twice each peak
        arcs = (1 - t[None]) ** 2 * a + 2 * t[None] * (1 - t[None]) * control[:, None] \
            + t[None] ** 2 * b
        paths = [np.stack([a, b]), *arcs]
        bends = [0, *np.abs(PEAKS)]
        costs, clear = [], []
        for path, bend in zip(paths, bends):
            if costs and bend >= min(costs):
                break  # (the bends only grow: no later path costs less)
            node = float(_clearance(path[None], _inside(others, path, NEAR))[0])
            clear.append(node)
            if node < NEAR:
                costs.append(np.inf)
                continue
            named = float(_clearance(path[None], _inside(labels, path, self.label_gap))[0])
            along = self._alongside(dense_line if len(path) == 2 else path, a, b) > ALONG
            costs.append(bend + NAME_COST * (named < self.label_gap) + ALONG_COST * along)
        # (the loop stops early only once a path clears the nodes: else every one was tried)
        best = int(np.argmin(costs)) if np.isfinite(min(costs)) else int(np.argmax(clear))
        path = paths[best]
        full = dense_line if len(path) == 2 else path
        if len(self.drawn) < SPACED:
            self.drawn.append(full)
            self.boxes = np.concatenate([self.boxes, np.stack([full.min(0), full.max(0)])[None]])
        return path[:, 0], path[:, 1]


def edge_path(a, b, nodes) -> tuple[np.ndarray, np.ndarray]:
    """The points of an edge from node a to node b alone (``EdgeRouter`` without names or
    other edges): the straight line, or where that passes within NEAR of another of
    ``nodes`` ((k, 2) positions), the first arc that keeps NEAR from every other node, else
    whichever of them all (the line included) keeps farthest."""
    return EdgeRouter(nodes).route(a, b)


def short_name(name: str) -> str:
    """"decoder.1.self.h0" -> "L1 h0", "encoder.0.cross.h2" -> "E0 cross h2", "decoder.0.mlp"
    -> "MLP 0"."""
    h, m, kv = HEAD.match(name), MLP.match(name), KV.match(name)
    pre = "E" if (h or m or kv) and (h or m or kv)[1] == "encoder" else "L"
    if h or kv:
        g = h or kv
        return f"{pre}{g[2]} {'cross ' if g[3] == 'cross' else ''}{'h' if h else 'kv'}{g[4]}"
    if m:
        return f"MLP {'E' if pre == 'E' else ''}{m[2]}"
    return name


def edge_label(sender, receiver, inp) -> str:
    """"decoder.0.self.h0 → decoder.1.self.h0 (k)" as plot text (a hover's first line)."""
    inp = inp or ""
    return plot_text(f"{sender} → {receiver}{' (' + inp + ')' if inp else ''}")


def layer_columns(all_edges: pd.DataFrame) -> int:
    """How many layer columns the graph of ``all_edges`` has (a page draws a wide one on the
    page's whole width)."""
    names = dict.fromkeys([*all_edges["sender"], *all_edges["receiver"]])
    return len({round(x) for x, _ in node_positions(list(names)).values()}) - 2


def _router(pos: dict, named: list[str], height: int) -> EdgeRouter:
    """An EdgeRouter over the nodes at ``pos``, with the names of ``named`` (short_name, above
    each node) as boxes in the figure's rows and columns: each a row of points across its
    width, kept clear by half its height."""
    xs, ys = zip(*pos.values()) if pos else ((0.0,), (0.0,))
    rows_per_px = (max(ys) - min(ys) + 1.2) / max(1, height - 100)  # less title and legend
    cols_per_px = (max(xs) - min(xs) + 0.8) / LABEL_WIDTH_PX
    labels, owners = [], []
    for n in named:
        x, y = pos[n]
        half = (CHAR_PX * len(short_name(n)) / 2 + 2) * cols_per_px
        for dx in np.linspace(-half, half, 5):
            labels.append((x + dx, y + LABEL_LIFT_PX * rows_per_px))
            owners.append((x, y))
    return EdgeRouter(list(pos.values()), np.array(labels).reshape(-1, 2),
                      np.array(owners).reshape(-1, 2), LABEL_HALF_PX * rows_per_px)


def circuit_figure(all_edges: pd.DataFrame, kept: pd.DataFrame, *, title: str = "",
                   height: int | None = None) -> go.Figure:
    """The graph of every component of ``all_edges`` (the model's graph, for the node layout)
    with the ``kept`` edges drawn (rows of ``EdgeAttribution.circuit``), strongest on top.
    ``height``: by default 460 pixels, more where the tallest column has over 10 rows."""
    names = list(dict.fromkeys([*all_edges["sender"], *all_edges["receiver"]]))
    pos = node_positions(names)
    joined = set(kept["sender"]) | set(kept["receiver"])
    loud = [len(names) <= LABEL_ALL or n in joined or not (HEAD.match(n) or KV.match(n) or
                                                            MLP.match(n)) for n in names]
    fig = go.Figure()
    kept = kept.reindex(kept["score"].abs().sort_values(kind="stable").index)  # strongest last
    widths = edge_widths(kept["score"])
    xs, ys = zip(*(pos[n] for n in names)) if names else ((), ())
    rows = max(ys, default=0) - min(ys, default=0) + 1
    height = height or max(460, int(60 + ROW_PX * rows))
    router = _router(pos, [n for n, on in zip(names, loud) if on], height)
    ends = list(zip(kept["sender"], kept["receiver"]))
    paths = {i: router.route(pos[s], pos[r]) for i, (s, r) in reversed(list(enumerate(ends)))}
    mid_x, mid_y, mid_data, mid_text, reach = [], [], [], [], []
    for i, ((_i, e), w) in enumerate(zip(kept.iterrows(), widths)):
        px, py = paths[i]
        inp = e["input"] or ""
        data = [e["sender"], e["receiver"], inp, float(e["score"])]
        fig.add_trace(go.Scatter(  # the line: no hover, so a click reaches the nodes
            x=px.tolist(), y=py.tolist(), mode="lines", hoverinfo="skip",
            line=dict(color=edge_color(e["score"]), width=float(w), dash=DASH.get(inp, "solid")),
            name="edge", showlegend=False, opacity=0.8, customdata=[data] * len(px)))
        mid_x.append(float(px[len(px) // 2]) if len(px) > 2 else float(px.mean()))
        mid_y.append(float(py[len(py) // 2]) if len(py) > 2 else float(py.mean()))
        reach += [float(py.max()), float(py.min())]
        mid_data.append(data)
        mid_text.append(edge_label(e["sender"], e["receiver"], inp) + "<br>" + _("score {score:+.3f}").format(
            score=float(e["score"])))
    fig.add_trace(go.Scatter(  # invisible markers at the edges' middles: hover and click
        x=mid_x, y=mid_y, mode="markers", name="edge middles", showlegend=False,
        marker=dict(size=12, color="rgba(0,0,0,0)"), customdata=mid_data, hovertext=mid_text,
        hovertemplate="%{hovertext}<extra></extra>"))
    shape = ["circle" if HEAD.match(n) else "diamond" if KV.match(n) else "square"
             for n in names]
    fig.add_trace(go.Scatter(
        x=list(xs), y=list(ys), mode="markers", name="nodes", showlegend=False,
        marker=dict(size=[(18 if k == "square" else 14) if on else 7
                          for k, on in zip(shape, loud)],
                    color=[NODE_COLOR if on else QUIET_COLOR for on in loud], symbol=shape),
        customdata=[[n] for n in names],
        hovertemplate="%{customdata[0]}<extra></extra>"))
    # each node's name above it, on a background of its own over the edges (a line from a
    # head to the logits passes the MLP between them, which crossed out "MLP 1" as text)
    fig.update_layout(annotations=[dict(
        x=x, y=y, text=plot_text(short_name(n)), showarrow=False, yanchor="bottom", yshift=9,
        font=dict(size=11, color=NODE_COLOR), bgcolor=LABEL_BACKGROUND, borderpad=1,
        captureevents=False) for n, x, y, on in zip(names, xs, ys, loud) if on])
    for sign, color in ((_("carries the answer"), POSITIVE), (_("works against it"), NEGATIVE)):
        fig.add_trace(go.Scatter(x=[None], y=[None], mode="lines", name=sign,
                                 line=dict(color=color, width=3)))
    fig.update_layout(**layout_dict(title or _("Circuit: {n} edges").format(n=len(kept)),
                                    height=height,
                                    margin=dict(l=10, r=10, t=50, b=10)),
                      legend=dict(orientation="h", y=-0.02, yanchor="top"),
                      clickmode="event+select", dragmode=False, hovermode="closest")
    fig.update_xaxes(visible=False, range=[-0.4, max(xs, default=1) + 0.4])
    fig.update_yaxes(visible=False, range=[min([*ys, *reach], default=0) - 0.6,
                                           max([*ys, *reach], default=0) + 0.6])
    return fig


def faithfulness_figure(counts: Sequence[int], values: Sequence[float], *,
                        kept: int | None = None, kept_value: float | None = None,
                        height: int = 360) -> go.Figure:
    """Faithfulness (1 = the clean metric, 0 = the corrupted one) against the number of
    highest-|score| edges kept, with the slider's choice marked."""
    fig = go.Figure(go.Scatter(x=list(map(int, counts)), y=[float(v) for v in values],
                               mode="lines+markers", name=_("faithfulness"),
                               hovertemplate=_("{n} edges").format(n="%{x}") + ": %{y:.3f}<extra></extra>"))
    if kept is not None and kept_value is not None:
        fig.add_trace(go.Scatter(x=[int(kept)], y=[float(kept_value)], mode="markers",
                                 name=_("kept"), marker=dict(size=13, color=KEPT_COLOR),
                                 hovertemplate=_("{n} edges kept").format(n="%{x}")
                                 + ": %{y:.3f}<extra></extra>"))
    fig.add_hline(y=1, line=dict(color="#adb5bd", dash="dot"))
    fig.add_hline(y=0, line=dict(color="#adb5bd", dash="dot"))
    fig.update_layout(**layout_dict(_("Faithfulness of the top edges"), height=height,
                                    margin=dict(l=50, r=10, t=50, b=40)), showlegend=False)
    fig.update_xaxes(title=_("edges kept"))
    fig.update_yaxes(title=_("faithfulness (1 = clean, 0 = corrupted)"))
    return fig


AGREEMENT_POINTS = 2000  # the scatter draws at most this many edges (the largest scores)


def agreement_figure(edges: pd.DataFrame, reference: pd.DataFrame, *, kept: pd.DataFrame,
                     label: str, reference_label: str, height: int = 380) -> go.Figure:
    """Each edge's score by one method (``edges``, y) against another's (``reference``, x:
    exact patching), matched by (sender, receiver, input), on the line y = x where they
    agree; the ``kept`` edges (the circuit drawn) in orange. Past AGREEMENT_POINTS edges, the
    ones with the largest |score| on either side."""
    keys = ["sender", "receiver", "input"]
    both = edges.set_index(keys)[["score"]].join(
        reference.set_index(keys)["score"].rename("reference"), how="inner")
    if len(both) > AGREEMENT_POINTS:
        size = np.maximum(both["score"].abs(), both["reference"].abs())
        both = both.loc[size.sort_values(ascending=False, kind="stable").index[:AGREEMENT_POINTS]]
    chosen = set(map(tuple, kept[keys].astype(str).to_numpy())) if len(kept) else set()
    fig = go.Figure()
    lo = float(min(both["score"].min(), both["reference"].min(), 0)) if len(both) else 0.0
    hi = float(max(both["score"].max(), both["reference"].max(), 0)) if len(both) else 1.0
    fig.add_trace(go.Scatter(x=[lo, hi], y=[lo, hi], mode="lines", hoverinfo="skip",
                             line=dict(color="#adb5bd", dash="dot"), name=_("same score")))
    for is_kept, name, color, size in ((False, _("other edges"), POSITIVE, 7),
                                       (True, _("kept edges"), KEPT_COLOR, 10)):
        rows = [(k, r) for k, r in both.iterrows()
                if (tuple(str(v) for v in k) in chosen) == is_kept]
        text = []
        for (s, r, w), row in rows:
            text.append(edge_label(s, r, w) + "<br>" + _(
                "{label} {score:+.4f}, {reference_label} {reference:+.4f}").format(
                label=label, score=float(row["score"]), reference_label=reference_label,
                reference=float(row["reference"])))
        fig.add_trace(go.Scatter(
            x=[float(row["reference"]) for _k, row in rows],
            y=[float(row["score"]) for _k, row in rows], mode="markers", name=name,
            marker=dict(size=size, color=color, opacity=0.75), hovertext=text,
            hovertemplate="%{hovertext}<extra></extra>"))
    fig.update_layout(**layout_dict(_("{label} against {reference_label}").format(
        label=label, reference_label=reference_label), height=height,
        margin=dict(l=60, r=10, t=50, b=40)), legend=dict(orientation="h", y=-0.18),
        hovermode="closest")
    fig.update_xaxes(title=_("score by {reference_label}").format(reference_label=reference_label))
    fig.update_yaxes(title=_("score by {label}").format(label=label))
    return fig
