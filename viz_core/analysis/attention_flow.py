"""Attention flow (Abnar & Zuidema, 2020): how much of each input token can reach each output
token through the layers, as a maximum flow.

The graph is the one rollout multiplies: per layer A = 0.5 * mean_heads(W) + 0.5 * I (the
residual path), rows renormalised; node (l, p) is position p entering layer l, and the edge
from (l, k) to (l + 1, q) has capacity A_l[q, k]. ``flow[i, j]`` is the maximum flow from
input node (0, j) to output node (L, i). Where rollout sums the product of weights over every
path, flow takes the bottleneck of the paths it can use at once, so it spreads less over the
input than rollout does.

Each pair is one maximum flow (scipy.sparse.csgraph.maximum_flow, Dinic's algorithm, on
capacities scaled to integers, 2^30 for 1: rounding moves a flow by far less than 1e-6): n^2
of them on a graph of layers x n^2 edges, so the app offers it up to MAX_TOKENS tokens. The
graph of each output token is built once and cut to the nodes that reach it (a causal model:
positions <= i), which leaves its flows as they are. Rollout stays in
viz_core.analysis.heads.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import scipy.sparse as sp
from scipy.sparse.csgraph import maximum_flow

from viz_core.i18n import N_

from ..errors import InputError, VizError

MAX_TOKENS = 64
SCALE = 1 << 30  # capacities <= 1 become integers <= 2^30 (maximum_flow counts in int32)


def residual_graph(patterns: np.ndarray) -> np.ndarray:
    """float64 [layer, n, n]: per layer 0.5 * mean over heads + 0.5 * I, rows renormalised
    (the graph of rollout and of attention flow). patterns: [layer, head, n, n]."""
    p = np.asarray(patterns, dtype=np.float64)
    if p.ndim != 4 or p.shape[-1] != p.shape[-2]:
        raise ValueError(f"attention flow needs square self-attention [layer, head, n, n], "
                         f"got {p.shape}")
    a = 0.5 * p.mean(axis=1) + 0.5 * np.eye(p.shape[-1])
    return a / a.sum(axis=-1, keepdims=True)


def _behind(layers: np.ndarray, sink: int) -> list[np.ndarray]:
    """Per node layer 0..L, bool [n]: the nodes with a path to (L, sink)."""
    here = np.zeros(layers.shape[-1], bool)
    here[sink] = True
    out = [here]
    for a in layers[::-1]:
        here = (a[here] > 0).any(0)  # keys of layer l feeding a kept query of layer l + 1
        out.append(here)
    return out[::-1]


def sink_graph(layers: np.ndarray, sink: int, scale: int = SCALE):
    """(csr capacity matrix, node id of (0, p) for each input p (-1: no path), sink id):
    the graph cut to the nodes that reach (L, sink) (for a causal model: positions <= sink).
    Cutting away nodes with no path to the sink leaves every flow into it as it is."""
    n_layers = layers.shape[0]
    keep = _behind(layers, sink)
    idx = [np.flatnonzero(k) for k in keep]
    offsets = np.cumsum([0] + [len(i) for i in idx])
    rows, cols, caps = [], [], []
    for lay in range(n_layers):
        sub = layers[lay][np.ix_(idx[lay + 1], idx[lay])]  # [query, key]
        q, k = np.nonzero(sub)
        rows.append(offsets[lay] + k)  # from (lay, key)
        cols.append(offsets[lay + 1] + q)  # to (lay + 1, query)
        caps.append(sub[q, k])
    cap = np.rint(np.concatenate(caps) * scale).astype(np.int32)
    total = int(offsets[-1])
    graph = sp.csr_array((cap, (np.concatenate(rows), np.concatenate(cols))),
                         shape=(total, total))
    graph.sort_indices()
    inputs = np.full(layers.shape[-1], -1)
    inputs[idx[0]] = np.arange(len(idx[0]))
    return graph, inputs, total - 1


def flow_from_patterns(patterns: np.ndarray, outputs=None) -> np.ndarray:
    """float32 [n, n]: attention flow[i, j] from input j to output i of self-attention
    patterns [layer, head, n, n] (any length; see attention_flow for the app's limit). Only
    the rows ``outputs`` (default: all) are computed; the others are NaN."""
    layers = residual_graph(patterns)
    n = layers.shape[-1]
    rows = range(n) if outputs is None else sorted({int(i) for i in outputs})
    out = np.full((n, n), np.nan)
    for i in rows:
        graph, inputs, sink = sink_graph(layers, i)
        out[i] = 0.0
        for j in np.flatnonzero(inputs >= 0):
            flow = maximum_flow(graph, int(inputs[j]), sink, method="dinic").flow_value
            out[i, j] = flow / SCALE
    return out.astype(np.float32)


def self_kind(trace, kind: str | None) -> str:
    """The self-attention block kind to follow: ``kind``, or the stack the model predicts
    from (the decoder's when it has one)."""
    kinds = [k for k in trace.kinds() if k.endswith(".self")]
    if kind is None:
        if not kinds:
            raise VizError(N_("This run has no self-attention blocks."))
        return "decoder.self" if "decoder.self" in kinds else kinds[0]
    if kind not in kinds:
        raise InputError(N_("Attention flow follows one self-attention block kind through its "
                           "layers; this model's are {join}, not {kind!r}."),
                             join=', '.join(kinds), kind=kind)
    return kind


def _check_length(n: int) -> None:
    if n > MAX_TOKENS:
        raise InputError(N_("Attention flow is offered up to {MAX_TOKENS} tokens (one maximum "
                           "flow per token pair); this input has {n}. Shorten it, or use "
                           "rollout, which has no limit."), MAX_TOKENS=MAX_TOKENS, n=n)


def self_patterns(model, text: str, target: str | None, kind: str | None
                  ) -> tuple[list[str], str, np.ndarray]:
    """(tokens, block kind, patterns float32 [layer, head, n, n]) of one self-attention block
    kind, from one run (a decoder-only model reads the text alone); InputError beyond
    MAX_TOKENS tokens."""
    from .information_flow import check_text

    check_text(text)
    options = {}
    if model.architecture == "decoder-only" and not (target and str(target).strip()):
        options["max_new"] = 0
    if model.architecture != "encoder-decoder":  # refuse a long text before running it
        _check_length(int(model.count_tokens(text)))
    trace = model.trace(text, target, capture=("pattern",), **options)
    kind = self_kind(trace, kind)
    blocks = trace.layers(kind)
    tokens = list(blocks[0].query_tokens)
    _check_length(len(tokens))
    return tokens, kind, np.stack([b.pattern for b in blocks])


def attention_flow(model, text: str, target: str | None = None, *, kind: str | None = None,
                   outputs=None) -> np.ndarray:
    """float32 [n, n]: the attention flow of ``text`` through the self-attention layers of
    ``kind`` (default: the decoder's, else the encoder's), flow[i, j] from input token j to
    output token i. Up to MAX_TOKENS tokens; a decoder-only model reads the text alone.
    ``outputs``: compute only these rows (positions; the others are NaN), e.g. the one output
    token a view shows: n maximum flows instead of n^2."""
    from .contributions import check_position

    tokens, _, patterns = self_patterns(model, text, target, kind)
    if outputs is not None:
        outputs = [check_position(o, len(tokens), N_("output position"))
                   for o in np.atleast_1d(outputs)]
    return flow_from_patterns(patterns, outputs)


@dataclass
class AttentionViews:
    """Raw attention, rollout and attention flow of one self-attention block kind, for the
    views that set them side by side: float32 [output, input] each (flow: only the row
    ``position`` is computed, the others are NaN)."""

    tokens: list[str]
    kind: str
    position: int
    raw: np.ndarray  # the last layer's mean over heads
    rollout: np.ndarray
    flow: np.ndarray

    def show(self, title: str | None = None):
        from ..figures.flow import attention_views_figure

        return attention_views_figure(self.tokens, self.raw, self.rollout, self.flow,
                                      self.position, title=title)


def attention_views(model, text: str, target: str | None = None, *, kind: str | None = None,
                    position: int = -1) -> AttentionViews:
    """Raw attention, rollout and attention flow for the output token at ``position``."""
    from .contributions import check_position
    from .heads import rollout

    tokens, kind, patterns = self_patterns(model, text, target, kind)
    p = check_position(position, len(tokens))
    return AttentionViews(tokens=tokens, kind=kind, position=p,
                          raw=patterns[-1].mean(axis=0).astype(np.float32),
                          rollout=rollout(patterns), flow=flow_from_patterns(patterns, [p]))
