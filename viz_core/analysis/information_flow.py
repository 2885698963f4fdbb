"""Information-flow routes (Ferrando & Voita, 2024): which positions and components carried
information to a prediction, layer by layer.

The graph's nodes are residual-stream states, one per (stack, layer, point, position): the
stream entering layer 0 (point "in"), after the layer's self-attention is added ("self"),
after its cross-attention ("cross", encoder-decoder models), and leaving the layer ("out",
which is also what the next layer reads). Each non-input node is a sum of parts:

    after attention:  y_i = x_i + sum_j sum_h A_h[i, j] W_O[h] v_h[j] (+ b_O)
    leaving a layer:  y_i = m_i + MLP(m_i)

An attention edge j -> i is the block's share through key j, sum_h A_h[i, j] W_O[h] v_h[j]
(the heads together, as the paper draws them); a residual edge is x_i (m_i); an MLP edge is
the MLP's output. Cross-attention edges run from the encoder's last layer (its "out" nodes)
into the decoder. The weight of a part is its proximity to the sum,

    max(||y||_1 - ||y - part||_1, 0),

normalised over every part of that sum (the residual included), so the incoming weights of
every node add up to 1 before any threshold. Bias terms (b_O) belong to no source node: they
are in y but are not parts. A node whose parts all have proximity 0 keeps weight 1 on its
residual. ``routes()`` walks back from the chosen position's last node and keeps the edges
whose weight is at least the threshold, and the nodes they come from (the paper's routes).

Heads: a route's attention edge is split among the heads that make it up: head h's term
A_h[i, j] W_O[h] v_h[j] weighs max(||e||_1 - ||e - term||_1, 0) against the edge's own vector
e, normalised over the heads, times the edge's weight. This detail is computed only for the
edges at or above the threshold (those drawn), never for the whole graph.

Norms. Pre-norm models: the stream is a plain sum, as above. Gemma 2/3 and OLMo 2 norm each
sublayer's output: there a part goes through that norm's linear part, its scale frozen at the
run's value (viz_core.analysis.parts). Post-norm models (the paper's Transformer, BERT and the
other encoders, BART, Marian, en-fr, dates): y = Norm(x + f(x)); the weights are measured on
the sum the norm receives, x + f(x), before the LayerNorm, with x the previous node's (normed)
value. The norm acts on each position alone, so it moves nothing between positions and has no
edge. (ALTI, Ferrando et al. 2022, measures after the norm's linear part instead; the two
differ by the norm's centring and per-dimension gain.)

Cost: one recorded run (q, k, v, z and the stream), then per block and per chunk of query rows
the (rows, keys, d_model) tensor of the edges' vectors; the (positions x positions x heads x
d_model) tensor of every head's share is never formed.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field

import numpy as np
import pandas as pd
import torch

from viz_core.i18n import N_

from ..errors import InputError, VizError
from .contributions import check_position

CAPTURE = ("q", "k", "v", "z", "stream")
KINDS = ("attention", "cross", "residual", "mlp")
POINTS = ("in", "self", "cross", "out")
COLUMNS = ["source_stack", "source_layer", "source_point", "source_position", "target_stack",
           "target_layer", "target_point", "target_position", "kind", "block", "head",
           "weight"]
CHUNK_FLOATS = 1 << 21  # float32 elements of one chunk of edge vectors (8 MiB)

Node = tuple[str, int, str, int]  # (stack, layer, point, position)


# ---- checks ------------------------------------------------------------------------------
def check_text(text) -> str:
    if not isinstance(text, str) or not text.strip():
        raise InputError(N_("The text is empty: type a sentence to follow its information flow."))
    return text


def check_threshold(threshold) -> float:
    try:
        if isinstance(threshold, bool):
            raise ValueError
        t = float(threshold)
    except (TypeError, ValueError):
        raise InputError(N_("The threshold must be a number between 0 and 1, not {threshold!r}."),
                            threshold=threshold) from None
    if not (math.isfinite(t) and 0.0 <= t <= 1.0):
        raise InputError(N_("The threshold must be between 0 and 1 (a share of a node's incoming "
                           "weight), not {threshold!r}."), threshold=threshold)
    return t


# ---- the result --------------------------------------------------------------------------
@dataclass
class InformationFlow:
    """The information-flow graph of one run.

    edges: one row per edge with weight > 0 (columns COLUMNS; ``head`` is empty: an attention
    edge is its block's heads together); the incoming weights of every node sum to 1. Read
    that column as ``edges["head"]``: ``edges.head`` is DataFrame's method (first rows), so
    attribute access gives the method, not the column (the issue names the column ``head``).
    heads: the split of each attention / cross edge of weight >= ``threshold`` among its
    heads (block, head, source and target position, share of the edge, weight = share x the
    edge's weight).
    columns: the node columns (stack, layer, point) in model order, left to right.
    tokens: the tokens of each stack's positions ({"encoder": [...], "decoder": [...]}).
    """

    edges: pd.DataFrame
    heads: pd.DataFrame
    columns: list[tuple[str, int, str]]
    tokens: dict[str, list[str]]
    stack: str  # the stack whose positions are predicted from ("decoder" or "encoder")
    position: int
    threshold: float
    prediction: str | None = None  # the model's top next token at ``position`` (decoders)
    note: str = ""
    warnings: list[str] = field(default_factory=list)

    @property
    def output_node(self) -> Node:
        stack, layer, point = self.columns[-1]
        return (stack, layer, point, self.position)

    def routes(self, threshold: float | None = None, *, by_head: bool = True) -> pd.DataFrame:
        """The edges that lead to the prediction at ``position``: walking back from its last
        node, every incoming edge of weight >= threshold (default: the one this flow was
        computed with), then the same for the nodes those edges come from.

        by_head: attention and cross edges come as one row per head that makes them up
        (``head`` set, ``weight`` = that head's part of the edge's weight, ``edge_weight`` =
        the whole edge's); heads are known for edges of weight >= the flow's own threshold.
        """
        t = self.threshold if threshold is None else check_threshold(threshold)
        kept = self.edges[self.edges.weight >= t]
        by_target: dict[Node, list[int]] = {}
        for row, node in zip(range(len(kept)), _nodes(kept, "target")):
            by_target.setdefault(node, []).append(row)
        sources = list(_nodes(kept, "source"))
        seen, todo, rows = {self.output_node}, [self.output_node], []
        while todo:
            node = todo.pop()
            for r in by_target.get(node, ()):
                rows.append(r)
                if sources[r] not in seen:
                    seen.add(sources[r])
                    todo.append(sources[r])
        out = kept.iloc[sorted(rows)].reset_index(drop=True)
        out["edge_weight"] = out["weight"]
        if not by_head:
            return out
        return expand_heads(out, self.heads)

    def show(self, *, threshold: float | None = None, title: str | None = None):
        """The graph (layers left to right, tokens top to bottom, routes highlighted) as a
        plotly figure (notebooks: it displays itself)."""
        from ..figures.flow import flow_graph_figure

        return flow_graph_figure(self, threshold=threshold, title=title)


def _nodes(frame: pd.DataFrame, end: str):
    return zip(frame[f"{end}_stack"], frame[f"{end}_layer"].astype(int),
               frame[f"{end}_point"], frame[f"{end}_position"].astype(int))


def expand_heads(route: pd.DataFrame, heads: pd.DataFrame) -> pd.DataFrame:
    """Attention / cross rows of ``route`` replaced by one row per head (from ``heads``);
    an edge with no head detail stays as it is."""
    att = route.kind.isin(["attention", "cross"])
    if not att.any() or heads.empty:
        return route
    keys = ["block", "source_position", "target_position"]
    joined = route[att].drop(columns=["head"]).merge(
        heads[keys + ["head", "share"]], on=keys, how="left")
    joined["weight"] = np.where(joined["share"].notna(), joined["edge_weight"] * joined["share"],
                                joined["edge_weight"])
    joined = joined[joined["share"].isna() | (joined["share"] > 0)].drop(columns=["share"])
    joined["head"] = joined["head"].astype("Int64")
    out = pd.concat([route[~att], joined[route.columns]], ignore_index=True)
    order = ["target_stack", "target_layer", "target_point", "target_position", "weight"]
    return out.sort_values(order, ascending=[True, False, True, True, False],
                           ignore_index=True)


# ---- the computation ---------------------------------------------------------------------
def run(backend, text: str, target: str | None):
    """One recorded run: the text alone for a decoder-only model without a target (no
    generated continuation), the model's own output as decoder input for an
    encoder-decoder model without one."""
    options = {}
    if backend.architecture == "decoder-only" and not (target and str(target).strip()):
        options["max_new"] = 0
    return backend.trace(text, target, capture=CAPTURE, **options)


def layers_of(trace, stack: str) -> list[str]:
    layers = [k for k in trace.stream if k.split(".")[0] == stack]
    return sorted(layers, key=lambda k: int(k.split(".")[1]))


def proximity(y: torch.Tensor, part: torch.Tensor) -> torch.Tensor:
    """max(||y||_1 - ||y - part||_1, 0) over the last axis (y broadcast against part)."""
    return (y.abs().sum(-1) - (y - part).abs().sum(-1)).clamp_(min=0)


class _Sum:
    """How one sum node is measured: y (T, d), and the map applied to the sublayer's parts
    (identity, or a norm on the sublayer's output: its linear part with the run's scale
    frozen, Gemma 2/3 and OLMo 2). The residual part is never mapped."""

    def __init__(self, y: torch.Tensor, norm=None, scale: torch.Tensor | None = None):
        self.y = y.float()
        self.norm, self.scale = norm, scale  # scale (T, 1)

    def gain(self, c: torch.Tensor) -> torch.Tensor:
        """The position-independent part of the map (centring, gain) on vectors c."""
        c = c.float()
        if self.norm is None:
            return c
        if self.norm.kind == "layer":
            c = c - c.mean(-1, keepdim=True)
        return c if self.norm.weight is None else c * self.norm.weight.float().to(c.device)

    def rows(self, r0: int, r1: int) -> torch.Tensor | None:
        """1 / scale of query rows r0..r1, (r, 1, 1), or None (identity)."""
        return None if self.scale is None else (1.0 / self.scale[r0:r1].float())[:, :, None]


def _point(points: dict, name: str, layer: str) -> torch.Tensor:
    x = points.get(name)
    if x is None:
        raise VizError(N_("The run recorded no {name!r} stream point in {layer}: this model's "
                         "information flow cannot be computed."), name=name, layer=layer)
    return x


def _sublayer(points: dict, kind: str, layer: str, placement: str, post_norm=None):
    """(what sublayer ``kind`` adds to the stream, the norm its parts go through or None,
    that norm's frozen scale (T, 1) or None)."""
    raw = _point(points, kind, layer)
    if placement in ("pre+post", "output") and f"{kind}.post_norm" in points:
        added = points[f"{kind}.post_norm"]
        if post_norm is None:
            return added, None, None
        return added, post_norm, post_norm.scale(raw)
    return raw, None, None


# InformationFlow.heads: its columns and their dtypes
HEAD_COLUMNS = {"block": object, "head": np.int64, "source_position": np.int64,
                "target_position": np.int64, "share": np.float64, "weight": np.float64}


class _Frames:
    """Edge rows collected as column arrays; the name columns as (value, count) runs that
    become categorical codes at the end (no object array of a million strings)."""

    NAMES = ("source_stack", "source_point", "target_stack", "target_point", "kind", "block")

    def __init__(self):
        self.cols: dict[str, list] = {c: [] for c in COLUMNS
                                      if c != "head" and c not in self.NAMES}
        self.runs: dict[str, list] = {c: [] for c in self.NAMES}
        self.counts: list[int] = []

    def add(self, source, target, kind: str, block: str, src_pos, tgt_pos, weight) -> None:
        """The edges of weight > 0 among these (the graph keeps no zero edge)."""
        weight = np.asarray(weight, np.float64)
        keep = weight > 0
        if not keep.all():
            src_pos, tgt_pos, weight = (np.asarray(src_pos)[keep], np.asarray(tgt_pos)[keep],
                                        weight[keep])
        n = len(weight)
        self.counts.append(n)
        for key, value in (("source_stack", source[0]), ("source_point", source[2]),
                           ("target_stack", target[0]), ("target_point", target[2]),
                           ("kind", kind), ("block", block)):
            self.runs[key].append(value)
        self.cols["source_layer"].append(np.full(n, source[1], np.int64))
        self.cols["target_layer"].append(np.full(n, target[1], np.int64))
        self.cols["source_position"].append(np.asarray(src_pos, np.int64))
        self.cols["target_position"].append(np.asarray(tgt_pos, np.int64))
        self.cols["weight"].append(np.asarray(weight, np.float64))

    def frame(self) -> pd.DataFrame:
        data = {k: (np.concatenate(v) if v else np.zeros(0, np.int64 if k != "weight"
                                                          else np.float64))
                for k, v in self.cols.items()}
        counts = np.asarray(self.counts, np.int64)
        for key, values in self.runs.items():
            names = sorted(set(values))  # astype("category")'s order
            code = {name: i for i, name in enumerate(names)}
            codes = np.repeat(np.asarray([code[v] for v in values], np.int32), counts)
            data[key] = pd.Categorical.from_codes(codes, categories=pd.Index(names, dtype="str"))
        frame = pd.DataFrame(data)
        n = len(frame)  # no head (all missing), built as its arrays: a list of n NAs took 0.26 s
        frame.insert(0, "head", pd.arrays.IntegerArray(np.zeros(n, np.int64), np.ones(n, bool)))
        return frame[COLUMNS]


@torch.no_grad()
def _attention_node(backend, trace, block: str, residual: torch.Tensor, node: _Sum,
                    threshold: float):
    """The weights of one attention node: (edges [T, Tk] float64, the residual [T] float64,
    each row summing to 1; each head's share of the edges of weight >= threshold)."""
    src = trace[block].source
    if src is None or src.v is None:
        raise VizError(N_("The trace of {block!r} kept no values (v)."), block=block)
    hw = backend.head_weights(block)
    dev = src.v.device
    v = src.v.float()  # (Hkv, Tk, d_v)
    w_o = hw.W_O.detach().to(dev).float()  # (H, d, d_v)
    heads = w_o.shape[0]
    v = v.repeat_interleave(heads // v.shape[0], dim=0)  # (H, Tk, d_v): per query head
    u = node.gain(torch.bmm(v, w_o.transpose(1, 2)))  # (H, Tk, d): W_O[h] v_h[j]
    u_t = u.transpose(0, 1).contiguous()  # (Tk, H, d)
    y = node.y.to(dev)
    n_q, n_k, d = y.shape[0], u.shape[1], u.shape[2]
    res = proximity(y, residual.to(dev).float()).double().cpu().numpy()
    weights = np.zeros((n_q, n_k))
    res_w = np.zeros(n_q)
    splits = []
    step = max(1, CHUNK_FLOATS // max(1, n_k * d))
    every = list(range(heads))
    for r0 in range(0, n_q, step):
        r1 = min(n_q, r0 + step)
        a = src.pattern_rows(every, r0, r1).float()  # (H, r, Tk)
        inv = node.rows(r0, r1)
        prox = np.zeros((r1 - r0, n_k))
        live = torch.nonzero(a.sum((0, 1)) > 0)
        if live.numel():
            k1 = int(live.max()) + 1  # keys past the last allowed one carry nothing (causal)
            a_t = a[:, :, :k1].permute(2, 1, 0).contiguous()  # (k, r, H)
            e = torch.bmm(a_t, u_t[:k1])  # (k, r, d): edge j -> i = sum_h A u
            if inv is not None:
                e.mul_(inv.to(dev).transpose(0, 1))  # (1, r, 1)
            y_r = y[None, r0:r1]
            dist = e.sub_(y_r).abs_().sum(-1)  # (k, r)
            prox[:, :k1] = (y_r.abs().sum(-1) - dist).clamp_(min=0).T.double().cpu().numpy()
        weights[r0:r1], res_w[r0:r1] = _normalise(prox, res[r0:r1])
        pairs = np.argwhere(weights[r0:r1] >= threshold) if threshold > 0 else \
            np.argwhere(weights[r0:r1] > 0)
        if len(pairs):
            splits.append(_head_split(block, a, u, inv, pairs, r0,
                                      weights[r0 + pairs[:, 0], pairs[:, 1]]))
    return weights, res_w, splits


def _normalise(prox: np.ndarray, res: np.ndarray):
    """Weights: edges (r, Tk) and residual (r,), each row summing to 1 (a row whose parts
    all have proximity 0 keeps weight 1 on its residual)."""
    total = prox.sum(1) + res
    empty = total <= 0
    res = np.where(empty, 1.0, res)
    total = np.where(empty, 1.0, total)
    return prox / total[:, None], res / total


def _head_split(block: str, a: torch.Tensor, u: torch.Tensor, inv: torch.Tensor | None,
                pairs: np.ndarray, r0: int, edge_weight: np.ndarray) -> dict:
    """Each head's share of the edges ``pairs`` ((n, 2): query row in ``a``, key): head h's
    term A_h u_h against the edge's vector e = sum_h A_h u_h, max(||e|| - ||e - term||, 0),
    normalised over the heads (equal shares where all are 0); and its weight, the share of
    the edge's weight ``edge_weight`` (n,). -> the rows of InformationFlow.heads, as columns."""
    heads, d = u.shape[0], u.shape[2]
    step = max(1, CHUNK_FLOATS // (heads * d))
    shares = []
    for c0 in range(0, len(pairs), step):
        qi = torch.as_tensor(pairs[c0:c0 + step, 0], device=a.device)
        kj = torch.as_tensor(pairs[c0:c0 + step, 1], device=a.device)
        terms = a[:, qi, kj, None] * u[:, kj]  # (H, n, d)
        if inv is not None:
            terms = terms * inv[qi, 0].to(a.device)[None]  # (1, n, 1)
        p = proximity(terms.sum(0, keepdim=True), terms)  # (H, n)
        total = p.sum(0, keepdim=True)
        shares.append(torch.where(total > 0, p / total.clamp(min=1e-30), 1.0 / heads))
    share = torch.cat(shares, 1).double().cpu().numpy()  # (H, n)
    n = len(pairs)
    return {"block": np.full(n * heads, block, dtype=object),
            "head": np.repeat(np.arange(heads, dtype=np.int64), n),
            "source_position": np.tile(pairs[:, 1].astype(np.int64), heads),
            "target_position": np.tile(pairs[:, 0].astype(np.int64) + r0, heads),
            "share": share.reshape(-1), "weight": (share * edge_weight[None]).reshape(-1)}


def _prediction(backend, trace, stack: str, p: int) -> str | None:
    if backend.architecture == "encoder-only":
        return None
    try:
        from .contributions import final_logits

        x = trace.stream[layers_of(trace, stack)[-1]]["out"][p:p + 1]
        return backend.token_strings([int(final_logits(backend, x)[0].argmax())])[0]
    except (VizError, NotImplementedError, AttributeError, TypeError, RuntimeError):
        return None


@torch.no_grad()
def information_flow(model, text: str, target: str | None = None, *, position: int = -1,
                     threshold: float = 0.04) -> InformationFlow:
    """The information-flow graph of ``text`` (see the module docstring) and the routes to
    the prediction at ``position`` (of the decoder's input; an encoder's tokens for an
    encoder-only model) at ``threshold`` (0..1)."""
    check_text(text)
    t = check_threshold(threshold)
    trace = run(model, text, target)
    if not trace.stream:
        raise VizError(N_("This run recorded no residual stream."))
    out_stack = "encoder" if model.architecture == "encoder-only" else "decoder"
    tokens = {"encoder": list(trace.source_tokens), "decoder": list(trace.target_tokens)}
    if model.architecture == "decoder-only":
        tokens.pop("encoder")
    elif model.architecture == "encoder-only":
        tokens.pop("decoder")
    p = check_position(position, len(tokens[out_stack]))
    placement = model.norm_placement
    frames, splits, columns = _Frames(), [], []
    memory_node = None  # the encoder's last "out" column, read by cross-attention
    for stack in [s for s in ("encoder", "decoder") if s in tokens]:
        layers = layers_of(trace, stack)
        if not layers:
            raise VizError(N_("This run recorded no residual stream for the {stack}."), stack=stack)
        prev = _point(trace.stream[layers[0]], "in", layers[0]).float()
        prev_col = (stack, 0, "in")
        columns.append(prev_col)
        n = prev.shape[0]
        positions = np.arange(n)
        for layer in layers:
            number = int(layer.split(".")[1])
            pts = trace.stream[layer]
            for kind in ("self", "cross"):
                block = f"{layer}.{kind}"
                if block not in trace.blocks:
                    continue
                post = None
                if placement in ("pre+post", "output"):
                    post = model.head_weights(block).post_norm
                added, norm, scale = _sublayer(pts, kind, layer, placement, post)
                total = prev + added.float()
                node = _Sum(total, norm, scale)
                col = (stack, number, kind)
                w_edge, w_res, split = _attention_node(model, trace, block, prev, node, t)
                splits += split
                q_idx, k_idx = np.nonzero(w_edge > 0)
                source_col = memory_node if kind == "cross" else prev_col
                edge_kind = "cross" if kind == "cross" else "attention"
                frames.add(source_col, col, edge_kind, block, k_idx, q_idx,
                           w_edge[q_idx, k_idx])
                frames.add(prev_col, col, "residual", block, positions, positions, w_res)
                if placement == "post":
                    prev = _point(pts, f"{kind}.norm", layer).float()
                else:
                    prev = total
                prev_col = col
                columns.append(col)
            ffn, _, _ = _sublayer(pts, "ffn", layer, placement)  # its parts: ffn itself
            total = prev + ffn.float()
            w_mlp, w_res = _normalise(proximity(total, ffn.float()).double().cpu().numpy()[:, None],
                                      proximity(total, prev).double().cpu().numpy())
            col = (stack, number, "out")
            frames.add(prev_col, col, "residual", f"{layer}.mlp", positions, positions, w_res)
            frames.add(prev_col, col, "mlp", f"{layer}.mlp", positions, positions, w_mlp[:, 0])
            prev = _point(pts, "out", layer).float() if placement == "post" else total
            prev_col = col
            columns.append(col)
        memory_node = prev_col
    edges = frames.frame()  # (every edge of weight > 0)
    heads = pd.DataFrame({c: pd.Series(np.concatenate([sp[c] for sp in splits]) if splits
                                       else [], dtype=dtype)
                          for c, dtype in HEAD_COLUMNS.items()})
    # an English catalogue msgid: the cached result is shared, the page translates it
    note = N_("Weights: each part's proximity to the sum it is part of, max(‖y‖₁ − ‖y − "
              "part‖₁, 0), normalised over the parts (Ferrando & Voita, 2024).")
    if placement == "post":
        note = N_("Weights: each part's proximity to the sum it is part of, max(‖y‖₁ − ‖y − "
                  "part‖₁, 0), normalised over the parts (Ferrando & Voita, 2024). Post-norm "
                  "model: measured on the sum each LayerNorm receives (residual + sublayer "
                  "output), before the norm.")
    return InformationFlow(edges=edges, heads=heads, columns=columns, tokens=tokens,
                           stack=out_stack, position=p, threshold=t,
                           prediction=_prediction(model, trace, out_stack, p), note=note,
                           warnings=list(trace.warnings))
