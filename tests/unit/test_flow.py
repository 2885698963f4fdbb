"""How information flows (issue 29): information-flow routes (Ferrando & Voita, 2024) and
attention flow (Abnar & Zuidema, 2020), against references.

- Every node's incoming weights sum to 1 before the threshold, for our checkpoints, MiniLM
  and a tiny random model of every Hugging Face family; and the edges are the model's own:
  the attention edges' vectors plus the output bias add up to the block's recorded output,
  and the weights equal a float64 reference written out part by part (a loop per head and
  key) on one model of each norm placement.
- A model linear in its parts (built here: every part on its own coordinates) has the
  closed-form weights ||part||_1 / sum ||part||_1, and an MLP that cancels part of its
  input gets max(||y|| - ||y - part||, 0) as worked out by hand.
- Attention flow equals networkx's exact maximum flow to 1e-5 (random graphs, causal and
  not, and a real model's patterns).
- On the shipped induction model and held-out repeated sequences, the routes from a
  repeated-half prediction contain the layer-1 induction head's edge from the position after
  the earlier copy of the current token, and the layer-0 previous-token head's edge into it.
- Bad input is one clear InputError.
"""

from __future__ import annotations

import random

import networkx as nx
import numpy as np
import pytest
import torch

import viz_core as vc
from viz_core.analysis.attention_flow import (
    MAX_TOKENS,
    attention_flow,
    attention_views,
    flow_from_patterns,
    residual_graph,
)
from viz_core.analysis.heads import rollout
from viz_core.analysis.information_flow import COLUMNS, information_flow
from viz_core.analysis.parts import HeadWeights
from viz_core.capture.recorder import MaskSpec
from viz_core.capture.trace import AttentionTrace, BlockTrace, HeadSource
from viz_core.errors import InputError
from viz_core.figures.common import unique_labels

TEXT = "the cat sat on the mat because it was tired"
NATIVE_TEXT = "the small black cats sat on the mat"
TARGET = "the cat sat"
NODE = ["target_stack", "target_layer", "target_point", "target_position"]
HF = ["gpt2", "llama", "mistral", "qwen2", "qwen3", "gemma2", "gemma3_text", "phi3", "olmo2",
      "bert", "distilbert", "roberta", "albert", "electra", "t5", "bart", "marian"]
NATIVE = ["lm", "lm-rope", "induction", "en-fr", "dates"]
NATIVE_TEXTS = {"dates": "9 may 2018", "en-fr": "the cat sees the dog"}


@pytest.fixture(scope="module")
def native():
    cache = {}

    def get(name):
        if name not in cache:
            cache[name] = vc.load(name, device="cpu")
        return cache[name]
    return get


def incoming_sums(flow):
    return flow.edges.groupby(NODE, observed=True).weight.sum()


def check_graph(flow):
    """Every node after the embeddings has incoming edges summing to 1; every edge goes
    forward (to a later column) and has a weight in (0, 1]."""
    assert list(flow.edges.columns) == COLUMNS
    sums = incoming_sums(flow)
    assert np.allclose(sums.to_numpy(), 1.0, atol=1e-5), sums[(sums - 1).abs() > 1e-5]
    n_nodes = sum(len(flow.tokens[stack]) for stack, _, point in flow.columns if point != "in")
    assert len(sums) == n_nodes  # no node left without its parts
    order = {c: i for i, c in enumerate(flow.columns)}
    e = flow.edges
    src = [order[c] for c in zip(e.source_stack, e.source_layer, e.source_point)]
    tgt = [order[c] for c in zip(e.target_stack, e.target_layer, e.target_point)]
    assert (np.asarray(src) < np.asarray(tgt)).all()
    assert ((e.weight > 0) & (e.weight <= 1 + 1e-9)).all()
    check_heads(flow)


def check_heads(flow):
    """Each head's row is of an attention (or cross) edge of the graph at or above the
    threshold, the heads' shares of an edge sum to 1, and a row's weight is its share of that
    edge's weight: against a join of flow.edges written out here."""
    h, e = flow.heads, flow.edges
    assert list(h.columns) == ["block", "head", "source_position", "target_position", "share",
                               "weight"]
    keys = ["block", "source_position", "target_position"]
    att = e[e.kind.isin(["attention", "cross"])][keys + ["weight"]].astype({"block": object})
    joined = h.merge(att, on=keys, how="left", suffixes=("", "_edge"), validate="many_to_one")
    assert joined["weight_edge"].notna().all() and len(joined) == len(h)
    assert (joined["weight_edge"] >= flow.threshold).all()
    np.testing.assert_allclose(h["weight"], joined["share"] * joined["weight_edge"], rtol=1e-12)
    if len(h):
        sums = h.groupby(keys).share.sum()
        np.testing.assert_allclose(sums.to_numpy(), 1.0, atol=1e-9)


@pytest.mark.parametrize("name", NATIVE)
def test_native_weights_sum_to_one(native, name):
    flow = information_flow(native(name), NATIVE_TEXTS.get(name, NATIVE_TEXT))
    check_graph(flow)
    route = flow.routes()
    assert len(route) and (route.edge_weight >= flow.threshold).all()


def test_minilm_weights_sum_to_one():
    flow = information_flow(vc.load("minilm"), "The quick brown fox jumps over the lazy dog",
                            position=4)
    check_graph(flow)
    assert flow.stack == "encoder" and flow.prediction is None


@pytest.mark.parametrize("family", HF)
def test_hf_weights_sum_to_one(tiny_models, family):
    model = tiny_models.load(family, seed=3)[0]
    target = TARGET if model.architecture == "encoder-decoder" else None
    flow = information_flow(model, TEXT, target)
    check_graph(flow)
    if model.architecture == "encoder-decoder":  # cross edges come from the encoder's end
        cross = flow.edges[flow.edges.kind == "cross"]
        last = max(c[1] for c in flow.columns if c[0] == "encoder")
        assert len(cross) and set(cross.source_stack) == {"encoder"}
        assert set(cross.source_layer) == {last} and set(cross.source_point) == {"out"}


# ---- the edges are the model's own: a written-out float64 reference ------------------------
def reference_block(model, trace, block, prev):
    """float64 (edge weights [T, Tk], residual weights [T]) of one attention node, part by
    part, and the sum of the edge vectors plus b_O (what the block wrote)."""
    b = trace[block]
    pattern = b.pattern.astype(np.float64)  # [H, T, Tk]
    v = b.v.astype(np.float64)  # [Hkv, Tk, d_v]
    hw = model.head_weights(block)
    w_o = hw.W_O.detach().double().cpu().numpy()  # (H, d, d_v)
    group = w_o.shape[0] // v.shape[0]
    n_q, n_k = pattern.shape[1:]
    layer, kind = block.rsplit(".", 1)
    pts = {k: x.double().cpu().numpy() for k, x in trace.stream[layer].items()}
    post = hw.post_norm if model.norm_placement in ("pre+post", "output") else None
    edges = np.zeros((n_q, n_k, w_o.shape[1]))
    for h in range(w_o.shape[0]):
        for i in range(n_q):
            for j in range(n_k):
                edges[i, j] += pattern[h, i, j] * (w_o[h] @ v[h // group, j])
    written = edges.sum(1) + (0 if hw.b_O is None else hw.b_O.detach().double().cpu().numpy())
    if post is not None:  # Gemma 2/3, OLMo 2: each part through the norm, scale frozen
        raw = torch.from_numpy(pts[kind])
        s = post.scale(raw).double().cpu().numpy()[:, None, :]
        g = 1.0 if post.weight is None else post.weight.detach().double().cpu().numpy()
        edges = edges / s * g
        added = pts[f"{kind}.post_norm"]
    else:
        added = pts[kind]
    y = prev + added
    norm_y = np.abs(y).sum(-1)
    prox = np.maximum(norm_y[:, None] - np.abs(y[:, None, :] - edges).sum(-1), 0)
    res = np.maximum(norm_y - np.abs(y - prev).sum(-1), 0)
    total = prox.sum(1) + res
    return prox / total[:, None], res / total, written, pts


@pytest.mark.parametrize("name", ["lm", "en-fr", "gemma2", "t5"])
def test_weights_equal_a_written_out_reference(native, tiny_models, name):
    model = native(name) if name in NATIVE else tiny_models.load(name, seed=3)[0]
    text = NATIVE_TEXTS.get(name, NATIVE_TEXT if name in NATIVE else TEXT)
    target = TARGET if name == "t5" else None
    flow = information_flow(model, text, target, threshold=0.0)
    options = {"max_new": 0} if model.architecture == "decoder-only" else {}
    trace = model.trace(text, target, capture=("q", "k", "v", "z", "stream"), **options)
    e = flow.edges
    checked = 0
    for stack in ("encoder", "decoder"):
        layers = sorted((k for k in trace.stream if k.startswith(stack)),
                        key=lambda k: int(k.split(".")[1]))
        if not layers:
            continue
        prev = trace.stream[layers[0]]["in"].double().cpu().numpy()
        for layer in layers:
            for kind in ("self", "cross"):
                block = f"{layer}.{kind}"
                if block not in trace.blocks:
                    continue
                w, r, written, pts = reference_block(model, trace, block, prev)
                # the edges decompose what the block really wrote (its recorded output)
                assert np.allclose(written, pts[kind], atol=1e-4 * np.abs(pts[kind]).max())
                ours = np.zeros_like(w)
                sel = e[(e.block == block) & e.kind.isin(["attention", "cross"])]
                ours[sel.target_position, sel.source_position] = sel.weight
                assert np.allclose(ours, w, atol=1e-5)
                res = e[(e.block == block) & (e.kind == "residual")]
                ours_r = np.zeros_like(r)
                ours_r[res.target_position] = res.weight  # rows of weight 0 are left out
                assert np.allclose(ours_r, r, atol=1e-5)
                checked += 1
                added = pts[f"{kind}.post_norm"] if model.norm_placement in (
                    "pre+post", "output") else pts[kind]
                prev = pts[f"{kind}.norm"] if model.norm_placement == "post" else prev + added
            prev = pts["out"]
    assert checked == len(trace.blocks)


# ---- a model linear in its parts: closed forms ---------------------------------------------
class LinearModel:
    """One decoder layer whose parts all live on their own coordinates.

    T positions; x_i = a_i e_i; every query attends uniformly to keys <= i (q = 0, causal),
    so A[h, i, j] = 1 / (i + 1); v_h[j] = c[h, j] e_j and W_O[h] e_j = e_(T + h T + j), so
    the edge j -> i is (sum_h c[h, j] e_(T + hT + j)) / (i + 1); b_O on its own coordinate.
    The MLP writes -mid / 4 + q_i e_(mlp, i).
    """

    architecture, norm_placement, name = "decoder-only", "pre", "linear"

    def __init__(self, n=4, heads=2, seed=0):
        g = torch.Generator().manual_seed(seed)
        self.n, self.heads = n, heads
        self.d = n + heads * n + 1 + n
        self.a = torch.rand(n, generator=g, dtype=torch.float64) + 0.5
        self.c = torch.rand(heads, n, generator=g, dtype=torch.float64) + 0.1
        self.q = torch.tensor([0.01, 2.0, 0.05, 3.0], dtype=torch.float64)[:n]
        self.bias = 0.7
        w_o = torch.zeros(heads, self.d, n, dtype=torch.float64)
        for h in range(heads):
            for j in range(n):
                w_o[h, n + h * n + j, j] = 1.0
        self.w_o = w_o
        b_o = torch.zeros(self.d, dtype=torch.float64)
        b_o[n + heads * n] = self.bias
        self.b_o = b_o

    def head_weights(self, block):
        z = torch.zeros(self.heads, 1, self.d)
        return HeadWeights(W_Q=z, W_K=z, W_V=z, W_O=self.w_o.float(), b_O=self.b_o.float())

    def parts(self):
        """float64: x [T, d], edges [T, T, d], mid [T, d], ffn [T, d]."""
        n, d = self.n, self.d
        x = torch.zeros(n, d, dtype=torch.float64)
        x[range(n), range(n)] = self.a
        edges = torch.zeros(n, n, d, dtype=torch.float64)
        for i in range(n):
            for j in range(i + 1):
                for h in range(self.heads):
                    edges[i, j, n + h * n + j] = self.c[h, j] / (i + 1)
        mid = x + edges.sum(1) + self.b_o
        ffn = -mid / 4
        ffn[range(n), n + self.heads * n + 1 + torch.arange(n)] = self.q
        return x, edges, mid, ffn

    def trace(self, text, target=None, **options):
        n, heads = self.n, self.heads
        x, edges, mid, ffn = self.parts()
        v = torch.zeros(heads, n, n)
        for h in range(heads):
            v[h, range(n), range(n)] = self.c[h].float()
        q = torch.zeros(heads, n, 1)
        pattern = torch.tril(torch.ones(n, n)) / torch.arange(1, n + 1)[:, None]
        z = torch.einsum("ij,hjv->ihv", pattern, v)  # (T, H, d_v)
        src = HeadSource(q=q, k=q.clone(), v=v, z=z, mask=MaskSpec(n, n, causal=True),
                         scaling=1.0)
        tokens = [f"t{i}" for i in range(n)]
        block = BlockTrace.lazy("decoder.0.self", src, tokens, tokens)
        stream = {"decoder.0": {"in": x.float(), "self": (mid - x).float(), "ffn": ffn.float(),
                                "out": (mid + ffn).float()}}
        return AttentionTrace({"decoder.0.self": block}, None, tokens, tokens, stream=stream)


def test_linear_model_closed_form():
    model = LinearModel()
    flow = information_flow(model, "t0 t1 t2 t3", threshold=0.0)
    check_graph(flow)
    x, edges, mid, ffn = model.parts()
    e = flow.edges
    for i in range(model.n):
        # disjoint supports: each part's proximity is its own L1 norm; b_O is no part
        norms = torch.cat([x[i].abs().sum()[None], edges[i, :i + 1].abs().sum(-1)])
        expected = (norms / norms.sum()).numpy()
        node = e[(e.target_point == "self") & (e.target_position == i)]
        res = node[node.kind == "residual"].weight.to_numpy()
        att = node[node.kind == "attention"].sort_values("source_position").weight.to_numpy()
        assert np.allclose(np.concatenate([res, att]), expected, atol=1e-6)
        # MLP: y = 3/4 mid + q e;  prox(mid) = ||mid|| / 2, prox(ffn) = max(q - ||mid|| / 4, 0)
        m, q = float(mid[i].abs().sum()), float(model.q[i])
        prox = np.array([m / 2, max(q - m / 4, 0.0)])
        node = e[(e.target_point == "out") & (e.target_position == i)]
        got = [node[node.kind == k].weight.sum() for k in ("residual", "mlp")]
        assert np.allclose(got, prox / prox.sum(), atol=1e-6)
    mlp = e[e.kind == "mlp"]
    assert set(mlp.target_position) == {1, 3}  # the two small q are clamped to weight 0


# ---- attention flow against networkx ------------------------------------------------------
def networkx_flow(patterns):
    layers = residual_graph(patterns)
    n_layers, n, _ = layers.shape
    graph = nx.DiGraph()
    for lay in range(n_layers):
        for q in range(n):
            for k in range(n):
                if layers[lay, q, k] > 0:
                    graph.add_edge((lay, k), (lay + 1, q), capacity=float(layers[lay, q, k]))
    out = np.zeros((n, n))
    for i in range(n):
        for j in range(n):
            if (0, j) in graph and (n_layers, i) in graph:
                out[i, j] = nx.maximum_flow_value(graph, (0, j), (n_layers, i))
    return out


@pytest.mark.parametrize("causal", [False, True])
@pytest.mark.parametrize("seed", [0, 1])
def test_attention_flow_equals_networkx(causal, seed):
    rng = np.random.default_rng(seed)
    n = 6
    p = rng.random((3, 2, n, n)) ** 3
    if causal:
        p = p * np.tril(np.ones((n, n)))
    p /= p.sum(-1, keepdims=True)
    assert np.allclose(flow_from_patterns(p), networkx_flow(p), atol=1e-5)
    rows = flow_from_patterns(p, outputs=[2, 5])
    assert np.allclose(rows[[2, 5]], networkx_flow(p)[[2, 5]], atol=1e-5)
    assert np.isnan(rows[[0, 1, 3, 4]]).all()


def test_attention_flow_of_a_model_equals_networkx(native):
    model = native("lm")
    trace = model.trace(NATIVE_TEXT, max_new=0)
    patterns = trace.stack("decoder.self")
    flow = attention_flow(model, NATIVE_TEXT)
    assert flow.shape == patterns.shape[-2:]
    assert np.allclose(flow, networkx_flow(patterns), atol=1e-5)
    views = attention_views(model, NATIVE_TEXT, position=-1)  # rollout as it always was
    assert np.allclose(views.rollout, rollout(patterns))
    assert np.allclose(views.flow[-1], flow[-1], atol=1e-6)
    assert np.allclose(views.raw, patterns[-1].mean(0))


# ---- the induction circuit in the routes ----------------------------------------------------
def held_out_sequences(n, seed=2929):
    from viz_core.tasks import induction
    from viz_core.tasks.common import is_held_out

    rng = random.Random(seed)  # training drew with other seeds; held-out by the split's hash
    pool = induction.words()
    out = []
    while len(out) < n:
        half = rng.randint(10, 16)  # within the training lengths (8..24 words a half)
        words = induction.repeated(rng, half, pool)
        if len(set(words[:half])) == half and is_held_out(" ".join(words)):
            out.append((words, half))
    return out


def test_induction_routes(native):
    """L0 h0 is the previous-token head and L1 h0 the induction head (the model card)."""
    model = native("induction")
    rng = random.Random(7)
    for words, half in held_out_sequences(6):
        p = half + 1 + rng.randint(1, half - 2)  # position of a repeated-half word (<bos> = 0)
        after_copy = p - half + 1  # the position after the earlier copy of that word
        flow = information_flow(model, " ".join(words), position=p)
        assert flow.prediction == words[p - half]  # the word after the earlier copy
        r = flow.routes()
        induction_edge = r[(r.block == "decoder.1.self") & (r["head"] == 0)
                           & (r.source_position == after_copy) & (r.target_position == p)]
        previous_edge = r[(r.block == "decoder.0.self") & (r["head"] == 0)
                          & (r.source_position == after_copy - 1)
                          & (r.target_position == after_copy)]
        assert len(induction_edge) == 1 and len(previous_edge) == 1, r.to_string()
        # the induction edge is the heaviest edge into p at layer 1, and h0 a large part of
        # it (this model's two layer-1 heads both attend there, 0.86-1.0 on these inputs);
        # the previous-token head carries nearly all of its edge (the other L0 head: < 0.01)
        into_p = flow.edges[(flow.edges.target_layer == 1) & (flow.edges.target_point == "self")
                            & (flow.edges.target_position == p)]
        assert into_p.weight.idxmax() == into_p[into_p.kind == "attention"].weight.idxmax()
        assert int(into_p.loc[into_p.weight.idxmax(), "source_position"]) == after_copy
        row = induction_edge.iloc[0]
        assert row.weight >= 0.25 * row.edge_weight
        row = previous_edge.iloc[0]
        assert row.weight >= 0.9 * row.edge_weight


# ---- bad input ------------------------------------------------------------------------------
@pytest.mark.parametrize("call, message", [
    (lambda m: information_flow(m, ""), "empty"),
    (lambda m: information_flow(m, "   "), "empty"),
    (lambda m: information_flow(m, NATIVE_TEXT, position=99), "out of range"),
    (lambda m: information_flow(m, NATIVE_TEXT, position=2.5), "whole number"),
    (lambda m: information_flow(m, NATIVE_TEXT, threshold=1.5), "between 0 and 1"),
    (lambda m: information_flow(m, NATIVE_TEXT, threshold=-0.1), "between 0 and 1"),
    (lambda m: information_flow(m, NATIVE_TEXT, threshold="x"), "between 0 and 1"),
    (lambda m: information_flow(m, NATIVE_TEXT, threshold=float("nan")), "between 0 and 1"),
    (lambda m: attention_flow(m, ""), "empty"),
    (lambda m: attention_flow(m, " ".join(["the cat"] * (MAX_TOKENS // 2 + 1))),
     f"up to {MAX_TOKENS} tokens"),
    (lambda m: attention_flow(m, NATIVE_TEXT, kind="encoder.self"), "self-attention"),
    (lambda m: attention_views(m, NATIVE_TEXT, position=-40), "out of range"),
])
def test_bad_input_is_one_clear_line(native, call, message):
    with pytest.raises(InputError, match=message) as err:
        call(native("induction"))  # its inputs are not cut at 64 tokens (max_len 8192)
    assert "\n" not in str(err.value)


def test_long_input_refused_before_it_runs(native, monkeypatch):
    model = native("induction")
    monkeypatch.setattr(type(model.backend), "trace", lambda *a, **k: pytest.fail("ran"))
    with pytest.raises(InputError, match="up to 64 tokens"):
        attention_flow(model, " ".join(["cat"] * 80))


def test_show_draws_the_graph(native):
    import viz_core.figures.flow as flow_figures

    flow = information_flow(native("en-fr"), NATIVE_TEXTS["en-fr"])
    fig = flow.show()
    route = [t for t in fig.data if t.name == "edges"]
    assert route and all(len(row) == 4 for row in route[0].customdata)
    assert fig.layout.yaxis2.ticktext  # decoder tokens on the right axis
    enc = unique_labels(flow.tokens["encoder"])
    assert list(fig.layout.yaxis.ticktext) == enc  # a short input: every row labelled
    # the nodes on a route (and the prediction's) in the route colour, the rest grey
    nodes = next(t for t in fig.data if t.name == "nodes")
    r = flow.routes()
    on = set(zip(r.source_stack, r.source_layer, r.source_point, r.source_position))
    on.add(flow.output_node)
    names = [(*col, p) for col in flow.columns for p in range(len(flow.tokens[col[0]]))]
    assert len(names) == len(nodes.marker.color)
    assert [bool(c) for c in nodes.marker.color] == [n in on for n in names]
    assert list(nodes.marker.colorscale[-1]) == [1, flow_figures.ROUTE_COLOR]


def test_long_graph_labels_every_nth_row(native, monkeypatch):
    """Beyond MAX_TICKS rows the row axis labels evenly spaced rows, each with its own
    token (plotly measures every label at each draw: seconds at hundreds of rows). The
    bound is lowered to 8 here: this model reads at most 32 tokens."""
    import viz_core.figures.flow as flow_figures

    monkeypatch.setattr(flow_figures, "MAX_TICKS", 8)
    flow = information_flow(native("lm"), " ".join(["the cat sat on the mat"] * 30))
    labels = unique_labels(flow.tokens[flow.stack])
    assert len(labels) > 2 * 8
    y = flow.show().layout.yaxis
    vals = list(y.tickvals)
    assert 0 < len(vals) <= 8 and vals[0] == 0
    assert len(set(np.diff(vals))) == 1  # evenly spaced
    assert list(y.ticktext) == [labels[i] for i in vals]


def test_route_hover_names_each_edges_heads(native):
    """The hover text of every route edge names its heads as flow.heads has them (the share
    >= 5%, at most 4, largest first), and its click data the largest head: against a groupby
    of flow.heads written out here."""
    flow = information_flow(native("lm"), NATIVE_TEXT, threshold=0.01)
    route = flow.routes(0.01, by_head=False)
    route = route[route.kind != "mlp"]
    fig = flow.show(threshold=0.01)
    edges = next(t for t in fig.data if t.name == "edges")
    assert len(edges.customdata) == len(route) > 5
    assert {"attention", "residual"} <= set(route.kind)
    for kind, text, (block, head, src, tgt) in zip(route.kind, edges.text, edges.customdata):
        rows = flow.heads[(flow.heads.block == block) & (flow.heads.source_position == src)
                          & (flow.heads.target_position == tgt)]
        rows = rows.sort_values("share", ascending=False)
        assert head == (int(rows["head"].iloc[0]) if len(rows) else -1)
        if kind == "residual":  # drawn under the attention edge p -> p: the same click data
            assert "heads:" not in text
            continue
        top = rows[rows.share >= 0.05].head(4)
        want = ", ".join(f"h{int(h)} {s:.0%}" for h, s in zip(top["head"], top["share"]))
        assert text.endswith(f"<br>heads: {want}"), (text, want)


def test_model_methods(native):
    """Both are analyses of the registry: methods of every loaded model (guarded)."""
    model = native("lm")
    flow = model.information_flow(NATIVE_TEXT, position=-2, threshold=0.1)
    assert flow.position == len(flow.tokens["decoder"]) - 2 and flow.threshold == 0.1
    assert np.allclose(model.attention_flow(NATIVE_TEXT), attention_flow(model, NATIVE_TEXT))
