"""The circuit figure (viz_core.figures.circuit) on the shipped induction model's edge
attribution: the drawn edges are exactly the kept ones (``EdgeAttribution.circuit``), blue
for a positive score and red for a negative one, widths proportional to |score| with the
largest at MAX_WIDTH; layers are columns (embed left, logits right); the faithfulness
curve plots what it is given; node names stay legible where an edge passes them."""

from __future__ import annotations

import numpy as np
import pytest

import viz_core as vc
from viz_core.figures.circuit import (
    MAX_WIDTH,
    MIN_WIDTH,
    NEGATIVE,
    POSITIVE,
    agreement_figure,
    circuit_figure,
    faithfulness_figure,
    node_positions,
    short_name,
)

CLEAN = "cat sees the red king cat sees the red"
CORRUPTED = "cat sees the blue king cat sees the red"  # "red" first seen before "blue"


@pytest.fixture(scope="module")
def attribution():
    return vc.load("induction", device="cpu").edge_attribution(CLEAN, CORRUPTED, method="eap")


def _edge_traces(fig):
    return [t for t in fig.data if t.name == "edge"]


@pytest.mark.parametrize("top", [1, 8, 20])
def test_drawn_edges_are_the_kept_ones_with_sign_colours_and_widths(attribution, top):
    kept = attribution.circuit(top=top)
    fig = circuit_figure(attribution.edges, kept)
    traces = _edge_traces(fig)
    drawn = {tuple(t.customdata[0][:3]): t for t in traces}
    assert len(traces) == top == len(drawn)
    assert set(drawn) == set(zip(kept["sender"], kept["receiver"], kept["input"]))
    assert (kept["score"] > 0).any() and (top < 8 or (kept["score"] < 0).any())
    biggest = kept["score"].abs().max()
    for _, e in kept.iterrows():
        t = drawn[(e["sender"], e["receiver"], e["input"])]
        assert t.line.color == (POSITIVE if e["score"] > 0 else NEGATIVE)
        want = MIN_WIDTH + (MAX_WIDTH - MIN_WIDTH) * abs(e["score"]) / biggest
        assert t.line.width == pytest.approx(want)
        assert t.customdata[0][3] == pytest.approx(e["score"])
    assert max(t.line.width for t in traces) == pytest.approx(MAX_WIDTH)


def test_layers_are_columns(attribution):
    names = list(dict.fromkeys([*attribution.edges["sender"], *attribution.edges["receiver"]]))
    pos = node_positions(names)
    assert pos["embed"][0] == 0
    assert pos["decoder.0.self.h0"][0] == pos["decoder.0.self.h1"][0] == 1
    assert pos["decoder.1.self.h0"][0] == pos["decoder.1.self.h1"][0] == 2
    assert 1 < pos["decoder.0.mlp"][0] < 2 < pos["decoder.1.mlp"][0] < pos["logits"][0]
    # every edge goes left to right (a sender writes only into later components)
    for s, r in zip(attribution.edges["sender"], attribution.edges["receiver"]):
        assert pos[s][0] < pos[r][0]
    nodes = next(t for t in circuit_figure(attribution.edges, attribution.circuit(top=3)).data
                 if t.name == "nodes")
    assert {c[0] for c in nodes.customdata} == set(names)


def test_no_edges_kept_draws_the_nodes_only(attribution):
    fig = circuit_figure(attribution.edges, attribution.circuit(top=0))
    assert not _edge_traces(fig)
    assert any(t.name == "nodes" for t in fig.data)


def test_faithfulness_curve_plots_its_points():
    fig = faithfulness_figure([0, 5, 46], [0.0, 0.8, 1.0], kept=5, kept_value=0.8)
    line, mark = fig.data
    assert list(line.x) == [0, 5, 46] and np.allclose(line.y, [0.0, 0.8, 1.0])
    assert list(mark.x) == [5] and list(mark.y) == [0.8]


def test_key_value_groups_sit_in_their_layer_column():
    """Grouped-query attention: a layer's heads share k and v inputs (``.kv0``): those nodes
    go under the heads in the layer's column, each in a row of its own."""
    names = ["embed", "decoder.0.self.h0", "decoder.0.self.h1", "decoder.0.self.kv0",
             "decoder.0.mlp", "decoder.1.self.h0", "decoder.1.self.h1", "decoder.1.self.kv0",
             "decoder.1.mlp", "logits"]
    pos = node_positions(names)
    assert pos["decoder.0.self.kv0"][0] == 1 and pos["decoder.1.self.kv0"][0] == 2
    assert pos["decoder.1.self.kv0"][1] < pos["decoder.1.self.h1"][1]  # under the heads
    assert len(set(pos.values())) == len(names)


def test_node_names_sit_on_a_background_of_their_own_over_the_edges(attribution):
    """A node's name stands above it, so an edge that reaches the node from above (L1 h0 ->
    MLP 1, the MLP sitting lower than the head) runs through the name: every node's name is
    an annotation (plotly draws those over every trace) on a background that hides the line
    behind it (in Chromium "MLP 1" was crossed out); no trace draws text."""
    fig = circuit_figure(attribution.edges, attribution.circuit(top=None))
    pos = node_positions([*attribution.edges["sender"], *attribution.edges["receiver"]])
    from_above = [(s, r) for s, r in zip(attribution.edges["sender"],
                                         attribution.edges["receiver"]) if pos[s][1] > pos[r][1]]
    assert ("decoder.1.self.h0", "decoder.1.mlp") in from_above
    nodes = next(t for t in fig.data if t.name == "nodes")
    labels = {(a.x, a.y): a for a in fig.layout.annotations}
    assert len(labels) == len(nodes.x)
    for (name,), x, y in zip(nodes.customdata, nodes.x, nodes.y):
        a = labels[(x, y)]
        assert a.text == short_name(name) and a.yanchor == "bottom" and a.yshift > 0
        assert not a.showarrow and a.captureevents is False  # clicks reach the node
        assert float(a.bgcolor.rsplit(",", 1)[1].rstrip(")")) >= 0.8, a.bgcolor
    assert not any("text" in (t.mode or "") for t in fig.data)


def test_agreement_plots_each_edge_at_its_two_scores(attribution, monkeypatch):
    """Each edge at (reference score, score), matched by name (the reference's rows
    reversed), the kept ones in their own trace; past AGREEMENT_POINTS edges, those with the
    largest |score| on either side; a name is shown as text in the hover."""
    import viz_core.figures.circuit as C

    ref = attribution.edges.assign(score=np.linspace(-1, 1, len(attribution.edges)))[::-1]
    kept = attribution.circuit(top=4)
    fig = agreement_figure(attribution.edges, ref, kept=kept, label="EAP",
                           reference_label="exact")
    other, chosen = (t for t in fig.data if t.mode == "markers")
    keys = ["sender", "receiver", "input"]
    want = {tuple(map(str, k)): (float(r), float(s)) for k, s, r in zip(
        attribution.edges[keys].itertuples(index=False), attribution.edges["score"],
        ref.sort_index()["score"])}
    kept_keys = {tuple(map(str, k)) for k in kept[keys].itertuples(index=False)}
    got = sorted(zip(other.x + chosen.x, other.y + chosen.y))
    assert got == sorted(want.values())
    assert sorted(zip(chosen.x, chosen.y)) == sorted(want[k] for k in kept_keys)
    monkeypatch.setattr(C, "AGREEMENT_POINTS", 10)
    few = agreement_figure(attribution.edges, ref, kept=kept, label="EAP",
                           reference_label="exact")
    pts = [p for t in few.data if t.mode == "markers" for p in zip(t.x, t.y)]
    size = sorted((max(abs(x), abs(y)) for x, y in want.values()), reverse=True)
    assert len(pts) == 10 and min(max(abs(x), abs(y)) for x, y in pts) == size[9]
    odd = attribution.edges.assign(sender=attribution.edges["sender"].astype(str)
                                   .replace("embed", "<b>embed</b>"))
    hover = agreement_figure(odd, odd, kept=kept.iloc[:0], label="EAP",
                             reference_label="exact")
    assert any("&lt;b>embed&lt;/b> →" in h for t in hover.data if t.mode == "markers"
               for h in t.hovertext)


def _graph_frame(layers: int, heads: int):
    """Every edge of a decoder-only model's residual-stream graph (edge_graph.Graph), with
    made-up scores."""
    import pandas as pd

    from viz_core.analysis.edge_graph import Graph

    names = [f"decoder.{i}" for i in range(layers)]
    g = Graph.build(names, {f"{n}.self": heads for n in names}, {f"{n}.self": heads for n in names})
    s, r = np.nonzero(g.valid)
    return pd.DataFrame({"sender": [g.senders[i] for i in s],
                         "receiver": [g.receivers[i][0] for i in r],
                         "input": [g.receivers[i][1] for i in r],
                         "score": np.linspace(0.1, 1, len(s))})


def _distance(px, py, x, y) -> float:
    """The smallest distance from (x, y) to the polyline (px, py)."""
    a = np.stack([px[:-1], py[:-1]], 1)
    d = np.stack([px[1:], py[1:]], 1) - a
    t = np.clip(((np.array([x, y]) - a) * d).sum(1) / (d * d).sum(1), 0, 1)
    return float(np.hypot(*(a + t[:, None] * d - [x, y]).T).min())


@pytest.mark.parametrize("heads", [2, 4, 12])
def test_no_edge_runs_through_a_node_it_does_not_join(heads):
    """embed, the MLPs and logits share the middle row: drawn straight, embed -> logits ran
    through MLP 0 and MLP 1 and hid embed -> MLP 1 and MLP 0 -> logits under it. With two
    and four heads a layer (the induction model, the tiny Hugging Face models) every edge of
    the whole graph passes every other node at NEAR or more (measured here on the drawn
    points, segment by segment); with twelve, where columns of heads leave no room, no edge
    is drawn nearer a node than its straight line would be, and the middle row's still clear
    every node. Edges whose straight line passes no node stay straight; each edge's hover
    marker lies on its line."""
    from viz_core.figures.circuit import NEAR

    frame = _graph_frame(2, heads)
    fig = circuit_figure(frame, frame)
    pos = node_positions([*frame["sender"], *frame["receiver"]])
    middles = next(t for t in fig.data if t.name == "edge middles")
    edges = _edge_traces(fig)
    assert len(edges) == len(frame) == len(middles.x)
    arcs = 0
    for t in edges:
        s, r = t.customdata[0][:2]
        px, py = np.array(t.x), np.array(t.y)
        assert (px[0], py[0]) == pos[s] and (px[-1], py[-1]) == pos[r]
        line = np.array([pos[s][0], pos[r][0]]), np.array([pos[s][1], pos[r][1]])
        others = [(x, y) for n, (x, y) in pos.items() if n not in (s, r)]
        drawn = min(_distance(px, py, x, y) for x, y in others)
        straight = min(_distance(*line, x, y) for x, y in others)
        assert drawn >= (NEAR if heads < 12 else min(straight, NEAR)) - 1e-9, (s, r)
        middle_row = s in ("embed", "decoder.0.mlp") and r in ("decoder.1.mlp", "logits")
        assert drawn >= NEAR or not middle_row, (s, r)
        arcs += len(px) > 2
        i = next(k for k, c in enumerate(middles.customdata)
                 if list(c[:3]) == list(t.customdata[0][:3]))
        assert _distance(px, py, middles.x[i], middles.y[i]) < 1e-9
    assert 0 < arcs < len(edges)
    if heads < 12:  # an arc only where the line passes a node, a name or another edge
        straight_kept = _straight_where_nothing_is_in_the_way(edges, pos)
        assert straight_kept > 0
    # the middle row's edges that skip a node are arcs
    row = {tuple(t.customdata[0][:2]): t for t in edges}
    for skips in [("embed", "decoder.1.mlp"), ("embed", "logits"), ("decoder.0.mlp", "logits")]:
        assert len(row[skips].x) > 2, skips
    lo, hi = fig.layout.yaxis.range
    assert all(lo < y < hi for t in edges for y in t.y)  # and the axis shows them whole


def _samples(px, py, n: int) -> np.ndarray:
    """n points evenly along the polyline's parameter (its points' index)."""
    pts = np.stack([px, py], 1).astype(float)
    at = np.linspace(0, len(pts) - 1, n)
    i = np.minimum(at.astype(int), len(pts) - 2)
    f = (at - i)[:, None]
    return pts[i] * (1 - f) + pts[i + 1] * f


def _alongside(a: np.ndarray, b: np.ndarray, skip: float = 0.3, near: float = 0.1) -> int:
    """How many of polyline a's points, past ``skip`` of either line's ends (edges of one
    node meet there), lie within ``near`` of polyline b."""
    ends = np.array([a[0], a[-1], b[0], b[-1]])
    far = np.hypot(*(a[:, None] - ends[None]).transpose(2, 0, 1)).min(1) > skip
    return sum(_distance(b[:, 0], b[:, 1], x, y) < near for x, y in a[far])


def _straight_where_nothing_is_in_the_way(edges, pos) -> int:
    """Every edge whose straight line clears every other node by NEAR, stays out of the box
    above every other node where its name stands (0.3 columns either side, 0.45 rows up:
    wider than the name at the figure's size) and runs along no other drawn edge (3 of 13
    points within 0.1) is drawn straight. Returns how many such edges there are."""
    from viz_core.figures.circuit import NEAR

    drawn = [_samples(np.array(t.x), np.array(t.y), 49) for t in edges]
    count = 0
    for k, t in enumerate(edges):
        s, r = t.customdata[0][:2]
        (x0, y0), (x1, y1) = pos[s], pos[r]
        line = _samples(np.array([x0, x1]), np.array([y0, y1]), 13)
        others = [(x, y) for n, (x, y) in pos.items() if n not in (s, r)]
        if min(_distance(line[:, 0], line[:, 1], x, y) for x, y in others) < NEAR:
            continue
        fine = _samples(line[:, 0], line[:, 1], 97)
        if any(((abs(fine[:, 0] - x) <= 0.3) & (fine[:, 1] > y) & (fine[:, 1] < y + 0.45)).any()
               for x, y in others):
            continue
        if any(_alongside(line, d) > 2 for j, d in enumerate(drawn) if j != k):
            continue
        assert len(t.x) == 2, (s, r)
        count += 1
    return count


@pytest.mark.parametrize("heads", [2, 4])
@pytest.mark.parametrize("seed", [0, 1, 2])
def test_the_strongest_edges_do_not_run_along_one_another(heads, seed):
    """Arcs that each clear the nodes still ran together: embed -> logits over MLP 0 and
    embed -> MLP 1 on the same curve near embed (a tiny GPT-2's top 11, in Chromium), and the
    q, k and v edges between two heads on one line. Routed strongest first, each bends away
    from those before it: of the 10 strongest edges of a 2- or 4-head graph (random scores),
    no two run together (a quarter of one's length within 0.1 of the other, away from their
    ends); the q, k and v edges between two heads are three different lines."""
    frame = _graph_frame(2, heads)
    frame["score"] = np.random.default_rng(seed).normal(size=len(frame))
    kept = frame.reindex(frame["score"].abs().sort_values(ascending=False).index).head(10)
    edges = _edge_traces(circuit_figure(frame, kept))
    lines = [_samples(np.array(t.x), np.array(t.y), 49) for t in edges]
    for i in range(len(lines)):
        for j in range(i):
            assert _alongside(lines[i], lines[j]) <= 12, (edges[i].customdata[0][:3],
                                                          edges[j].customdata[0][:3])
    pair = frame[(frame["sender"] == "decoder.0.self.h0")
                 & (frame["receiver"] == "decoder.1.self.h1")].assign(score=[1.0, 0.9, 0.8])
    assert list(pair["input"]) == ["q", "k", "v"]
    three = [_samples(np.array(t.x), np.array(t.y), 49)
             for t in _edge_traces(circuit_figure(frame, pair))]
    for i in range(3):
        for j in range(i):
            assert _alongside(three[i], three[j]) <= 12, (i, j)


def test_an_edge_bends_off_a_name_it_would_cross():
    """The router (EdgeRouter) takes the straight line between two nodes where nothing is in
    its way; where a third node sits just below the line (clear of it by more than NEAR),
    its name, drawn above it, would be crossed: with that name given, the edge is an arc
    that clears it, and the arc still clears the node."""
    from viz_core.figures.circuit import NEAR, EdgeRouter

    a, b, c = (0.0, 0.0), (2.0, 0.0), (1.0, -0.2)
    nodes = [a, b, c]
    assert len(EdgeRouter(nodes).route(a, b)[0]) == 2
    name = np.array([(1.0 + dx, -0.04) for dx in np.linspace(-0.1, 0.1, 5)])
    px, py = EdgeRouter(nodes, name, np.array([c] * 5), label_gap=0.06).route(a, b)
    assert len(px) > 2
    assert min(_distance(px, py, x, y) for x, y in name) >= 0.06
    assert _distance(px, py, *c) >= NEAR


def test_a_node_at_one_ends_x_and_the_others_y_is_not_an_end():
    """Nodes are told from an edge's ends by both coordinates: a node at a's x and b's y
    (a head above its receiver's column neighbour) was skipped as an end, so an arc could
    run through it."""
    from viz_core.figures.circuit import NEAR, edge_path

    a, b, corner, middle = (0.0, 0.0), (0.5, 0.5), (0.0, 0.5), (0.25, 0.25)
    px, py = edge_path(a, b, [a, b, corner, middle])
    assert len(px) > 2  # the line runs through the middle node
    assert min(_distance(px, py, *corner), _distance(px, py, *middle)) >= NEAR


def test_a_big_graph_names_only_the_nodes_its_kept_edges_join():
    """GPT-2-small's 158 nodes named at once crowded out the circuit: past LABEL_ALL nodes
    only those the kept edges join (and embed, logits) are named and drawn full size; the
    others stay, small and light, with their names in the hover (a click still opens a
    head). The graph grows taller with its tallest column, and counts its layer columns."""
    from viz_core.figures.circuit import LABEL_ALL, NODE_COLOR, QUIET_COLOR, layer_columns

    frame = _graph_frame(12, 12)
    kept = frame.iloc[[5, 900, 20000, len(frame) - 1]]
    fig = circuit_figure(frame, kept)
    nodes = next(t for t in fig.data if t.name == "nodes")
    names = [c[0] for c in nodes.customdata]
    assert len(names) == 158 > LABEL_ALL  # 12 x (12 heads + MLP), embed, logits
    joined = set(kept["sender"]) | set(kept["receiver"]) | {"embed", "logits"}
    labels = {a.text for a in fig.layout.annotations}
    assert labels == {short_name(n) for n in joined}
    for n, color, size in zip(names, nodes.marker.color, nodes.marker.size):
        assert (color == NODE_COLOR and size >= 14) == (n in joined), n
        assert color in (NODE_COLOR, QUIET_COLOR)
    assert fig.layout.height > 460 and layer_columns(frame) == 12
    small = _graph_frame(2, 2)
    fig = circuit_figure(small, small.iloc[:1])  # 8 nodes: every one named
    assert len(fig.layout.annotations) == 8 and fig.layout.height == 460
    assert layer_columns(small) == 2
