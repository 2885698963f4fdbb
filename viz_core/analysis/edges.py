"""Edge attribution: which connections between components carry the answer (a circuit).

The graph is the residual-stream graph (Elhage et al., 2021; Conmy et al., 2023): in a
pre-norm model the stream a component reads is the sum of what every earlier component wrote,

    input(r) = embed + sum over earlier heads (W_O[h] z_h) + sum over earlier MLPs + biases,

so each (sender, receiver) pair is an edge. Senders: ``embed`` (token + position), every head
(``decoder.0.self.h3``), every MLP (``decoder.0.mlp``). Receivers: every head's q, k and v
input separately (each head reads the stream through the block's norm and its own W_Q, W_K,
W_V), every MLP, and ``logits`` (the final stream). A sender writes into every later
receiver: a head into its own layer's MLP and everything after, an MLP into later layers.

Scores follow the noising convention of Hanna et al. (2024): how much of the clean run's
metric an edge carries, normalised by the gap (clean - corrupted metric):

- ``exact``: the clean run with one edge corrupted, i.e. its receiver reads the sender's
  corrupted-run output instead of its clean one: score = (clean - patched metric) / gap;
- ``eap`` (Syed et al., 2023): the first-order estimate, one backward pass on the clean run:
  score = (clean - corrupted sender output) . d metric / d receiver input / gap;
- ``eap-ig`` (Hanna et al., 2024): the gradient averaged over ``steps`` points on the line
  from the corrupted to the clean input embedding (alpha = 1/steps .. 1; steps=1 is EAP).

``EdgeAttribution.faithfulness(kept)`` runs the clean input with every edge outside ``kept``
carrying its sender's corrupted-run output (the receivers of kept edges read the senders as
they are in that very run): 1 = the clean metric, 0 = the corrupted one.

How it runs: every pass is an ordinary forward of the model through the capture path, with
the running call's recorder edits (viz_core.capture.recorder): ``edit_read`` gives an MLP its
own input, ``edit_qkv`` recomputes each head's q, k, v from its own input (the block's norm,
then the head's rows of W_Q, W_K, W_V and its rotation, from ``model.head_weights``),
``edit_z`` and ``edit_stream`` read the senders' outputs and change the final stream. Patched
copies go through in batches; copies that patch the same layer share the run below it.
Post-norm models renormalise the stream after every sublayer, so it is not a sum of the
senders' outputs: there is no such graph, and the error says so.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from dataclasses import dataclass, field

import numpy as np
import pandas as pd
import torch

from ..capture.recorder import recording
from ..errors import InputError
from ..model.choices import EdgeMethod, choose
from .patching import Metric, PatchSubject, _check_gap, make_metric

QKV = ("q", "k", "v")
CHUNK_BYTES = 256 << 20  # rough activation memory of one batch of patched copies


# ---- the graph -----------------------------------------------------------------------------
@dataclass
class Graph:
    """Senders, receivers and which sender reaches which receiver, in model order.

    A layer's head receivers are every head's q input, then every key/value head's k input,
    then its v input (``H + 2 Hkv`` rows; with grouped-query attention, Hkv < H, the k and
    v receivers are the key/value heads, named ``<block>.kv<g>``)."""

    layers: list[str]  # "decoder.0", ...
    heads: int
    kv_heads: int
    senders: list[str]
    receivers: list[tuple[str, str]]  # (name, input): input q | k | v for a head, else ""
    valid: np.ndarray  # bool (S, R): sender s writes into receiver r's input

    @classmethod
    def build(cls, layers: list[str], heads: int, kv_heads: int) -> Graph:
        senders, receivers, reach = ["embed"], [], []
        kv = "h" if kv_heads == heads else "kv"
        for layer in layers:
            block = f"{layer}.self"
            names = ([(f"{block}.h{h}", "q") for h in range(heads)]
                     + [(f"{block}.{kv}{g}", w) for w in "kv" for g in range(kv_heads)])
            receivers += names
            reach += [len(senders)] * len(names)
            senders += [f"{block}.h{h}" for h in range(heads)]
            receivers.append((f"{layer}.mlp", ""))
            reach.append(len(senders))
            senders.append(f"{layer}.mlp")
        receivers.append(("logits", ""))
        reach.append(len(senders))
        valid = np.arange(len(senders))[:, None] < np.asarray(reach)[None, :]
        return cls(layers, heads, kv_heads, senders, receivers, valid)

    @property
    def attn_width(self) -> int:
        return self.heads + 2 * self.kv_heads

    def attn_senders(self, layer: int) -> int:
        """How many senders the heads of layer ``layer`` read (embed and earlier layers)."""
        return 1 + layer * (self.heads + 1)

    def attn_receivers(self, layer: int) -> slice:
        start = layer * (self.attn_width + 1)
        return slice(start, start + self.attn_width)

    def mlp_receiver(self, layer: int) -> int:
        return layer * (self.attn_width + 1) + self.attn_width

    def layer_of(self, receiver: int) -> int:
        """The layer a receiver sits in (len(layers) for logits)."""
        return receiver // (self.attn_width + 1)


# ---- one forward pass with edits -----------------------------------------------------------
class Plan:
    """What one pass changes (subclasses): the input embedding, where the batch widens, and
    each receiver's input change (None = none)."""

    def embed(self, x: torch.Tensor) -> torch.Tensor:
        return x

    def widen(self, layer: int | None, x: torch.Tensor) -> torch.Tensor:  # None: final stream
        return x

    def delta(self, kind: str, layer: int, run: Pass) -> torch.Tensor | None:
        """kind "attn": (B, H + 2 Hkv, T, d) in receiver order; "mlp", "logits": (B, T, d)."""
        return None


class Pass:
    """The recorder edits of one forward pass; ``senders`` fills up as the model runs."""

    def __init__(self, ctx: Context, plan: Plan):
        self.ctx, self.plan = ctx, plan
        self.senders: list[torch.Tensor] = []  # (B|1, T, d) each, in graph order
        self.read_in: dict[int, tuple[torch.Tensor, Callable]] = {}  # layer -> (x, norm)

    def recorder(self):
        g, last = self.ctx.graph, len(self.ctx.graph.layers) - 1
        edit_stream, edit_read, edit_z, edit_qkv = {}, {}, {}, {}
        for i, layer in enumerate(g.layers):
            block = f"{layer}.self"
            edit_stream[(layer, "in")] = self._at_in(i)
            edit_stream[(layer, "ffn")] = self._keep_mlp
            edit_read[(layer, "self")] = self._keep_input(i)
            edit_read[(layer, "ffn")] = self._mlp_input(i)
            edit_z[block] = self._keep_heads(block)
            edit_qkv[block] = self._qkv(i, block)
        edit_stream[(g.layers[last], "out")] = self._final
        return self.ctx.subject.recorder(edit_stream=edit_stream, edit_read=edit_read,
                                         edit_z=edit_z, edit_qkv=edit_qkv)

    def _at_in(self, i: int):
        def edit(x):
            if i == 0:
                x = self.plan.embed(x)
            x = self.plan.widen(i, x)
            if i == 0:
                self.senders.append(x)
            return x
        return edit

    def _keep_mlp(self, out):
        self.senders.append(out)
        return out

    def _keep_heads(self, block: str):
        W_O = self.ctx.weights[block].W_O  # (H, d_model, d_v)

        def edit(z):  # z (B, T, H, d_v) -> each head's write into the stream
            out = torch.einsum("bthv,hdv->hbtd", z, W_O.to(z.dtype))
            self.senders.extend(out.unbind(0))
            return z
        return edit

    def _keep_input(self, i: int):
        def edit(x, h, norm):
            self.read_in[i] = (x, norm)
            return h
        return edit

    def _mlp_input(self, i: int):
        def edit(x, h, norm):
            d = self.plan.delta("mlp", i, self)
            return h if d is None else norm(x + d.to(x.dtype))
        return edit

    def _final(self, x):
        x = self.plan.widen(None, x)
        d = self.plan.delta("logits", len(self.ctx.graph.layers), self)
        return x if d is None else x + d.to(x.dtype)

    def _qkv(self, i: int, block: str):
        hw = self.ctx.weights[block]
        H, G = hw.n_heads, hw.W_K.shape[0]
        parts = ((hw.W_Q, hw.b_Q, hw.q_norm, 0, H), (hw.W_K, hw.b_K, hw.k_norm, H, H + G),
                 (hw.W_V, hw.b_V, None, H + G, H + 2 * G))

        def edit(q, k, v):
            d = self.plan.delta("attn", i, self)
            if d is None:
                return q, k, v
            x, norm = self.read_in[i]
            B, T = d.shape[0], x.shape[1]
            ins = norm(x[:, None] + d.to(x.dtype))  # (B, H + 2G, T, d): each input normed
            out = []
            for w, (W, b, qk_norm, r0, r1) in enumerate(parts):
                y = torch.einsum("bhtd,hed->bhte", ins[:, r0:r1], W.to(ins.dtype))
                if b is not None:
                    y = y + b.to(y.dtype)[None, :, None]
                if qk_norm is not None:  # Qwen 3: a norm over each head's d_head
                    y = qk_norm(y).to(ins.dtype)
                if w < 2 and hw.rotate is not None:  # q and k turn with their position
                    n = r1 - r0
                    y = torch.stack([hw.rotate(y[:, :, t].reshape(B * n, -1), t).view(B, n, -1)
                                     for t in range(T)], dim=2)
                out.append(y)  # (B, heads, T, d_head)
            return tuple(o.to(ref.dtype) for o, ref in zip(out, (q, k, v)))
        return edit

    def run(self, which: str, n: int) -> torch.Tensor:
        with recording(self.recorder()):
            return self.ctx.subject.run(which, n)


@dataclass
class Context:
    """One model and one pair, ready for passes: the graph, the weights, the metric and
    the senders' outputs of the clean and the corrupted run (S, T, d)."""

    subject: PatchSubject
    graph: Graph
    weights: dict
    metric: Metric | None = None
    clean: torch.Tensor | None = None
    corrupted: torch.Tensor | None = None
    m_clean: float = 0.0
    m_corrupted: float = 0.0
    token: object = None
    against: object = None
    corrupted_out: torch.Tensor | None = None

    def clean_readout(self, readout: torch.Tensor, senders: list[torch.Tensor]) -> None:
        """The clean run's readout (one copy) and senders: the metric and its gap."""
        readout = readout.detach()
        self.clean = torch.cat([s.detach().float() for s in senders])
        self.metric = make_metric(self.subject, readout, self.token, self.against)
        self.m_clean = float(self.metric.fn(readout)[0])
        self.m_corrupted = float(self.metric.fn(self.corrupted_out)[0])
        _check_gap(self.m_clean, self.m_corrupted, self.metric)

    @property
    def gap(self) -> float:
        return self.m_clean - self.m_corrupted

    def width_per_copy(self) -> int:
        T, d = self.clean.shape[1], self.clean.shape[2]
        return max(self.subject.width_per_copy, 1) + 2 * self.graph.attn_width * T * d


# ---- the plans -----------------------------------------------------------------------------
class Gradients(Plan):
    """Zero changes that require grad at every receiver; ``alphas`` interpolate the input
    embedding from the corrupted (0) to the clean (1) run (EAP-IG), one copy each (None:
    the clean run itself, one copy: EAP)."""

    def __init__(self, ctx: Context, alphas: torch.Tensor | None):
        self.ctx, self.alphas, self.zeros = ctx, alphas, {}

    def embed(self, x):
        if self.alphas is None:
            return x
        corr = self.ctx.corrupted[0].to(x.dtype)
        a = self.alphas.to(x.dtype)[:, None, None]
        return corr + a * (x - corr)

    def delta(self, kind, layer, run):
        x = run.senders[0]
        B, T, d = x.shape
        shape = (B, self.ctx.graph.attn_width, T, d) if kind == "attn" else (B, T, d)
        z = torch.zeros(shape, dtype=torch.float32, device=x.device, requires_grad=True)
        self.zeros[(kind, layer)] = z
        return z


class EdgePatches(Plan):
    """Copy i of the batch reads sender s_i's corrupted output at receiver r_i (all in one
    layer, or all logits); the run below that layer is shared (one copy, widened there)."""

    def __init__(self, ctx: Context, pairs: list[tuple[int, int]], layer: int, share: bool):
        self.ctx, self.pairs, self.layer, self.share = ctx, pairs, layer, share
        self.diff = ctx.corrupted - ctx.clean  # (S, T, d)

    def widen(self, layer, x):
        at = None if self.layer == len(self.ctx.graph.layers) else self.layer
        if self.share and layer == at:
            return x.expand(len(self.pairs), *x.shape[1:]).contiguous()
        return x

    def delta(self, kind, layer, run):
        if layer != self.layer:
            return None
        g, n = self.ctx.graph, len(self.pairs)
        T, d = self.diff.shape[1:]
        if kind == "attn":
            rows = g.attn_receivers(layer)
            picked = [(i, s, r - rows.start) for i, (s, r) in enumerate(self.pairs)
                      if rows.start <= r < rows.stop]
            width = g.attn_width
        else:
            target = g.mlp_receiver(layer) if kind == "mlp" else len(g.receivers) - 1
            picked = [(i, s, 0) for i, (s, r) in enumerate(self.pairs) if r == target]
            width = 1
        if not picked:
            return None
        out = torch.zeros(n, width, T, d, dtype=self.diff.dtype, device=self.diff.device)
        i, s, r = (torch.tensor(c, device=out.device) for c in zip(*picked))
        out[i, r] = self.diff[s]
        return out if kind == "attn" else out[:, 0]


class Removed(Plan):
    """Copy b: every edge with removed[b, s, r] reads its sender's corrupted output."""

    def __init__(self, ctx: Context, removed: torch.Tensor):
        self.ctx, self.removed = ctx, removed  # float (B, S, R)

    def delta(self, kind, layer, run):
        g = self.ctx.graph
        if kind == "attn":
            n, cols = g.attn_senders(layer), g.attn_receivers(layer)
        elif kind == "mlp":
            n, cols = g.attn_senders(layer) + g.heads, [g.mlp_receiver(layer)]
        else:
            n, cols = len(g.senders), [len(g.receivers) - 1]
        rm = self.removed[:, :n, cols]  # (B, n, r)
        if not bool(rm.any()):
            return None
        now = torch.stack([s.float() for s in torch.broadcast_tensors(*run.senders[:n])])
        diff = self.ctx.corrupted[:n, None] - now  # (n, B|1, T, d)
        d = torch.einsum("sbtd,bsr->brtd", diff, rm.to(diff.dtype))
        return d if kind == "attn" else d[:, 0]


# ---- running the methods -------------------------------------------------------------------
def prepare(model, clean: str, corrupted: str, target, token, against,
            run_clean: bool = True) -> Context:
    """The context of one pair: checks the model, runs the corrupted input (and the clean
    one unless ``run_clean`` is False: EAP's gradient pass is the clean run)."""
    _check_model(model)
    subject = model.patching_subject(clean, corrupted, target, -1)
    layers = list(subject.layers)
    heads = {subject.blocks.get(f"{layer}.self") for layer in layers}
    if None in heads or len(heads) != 1:
        raise InputError("Edge attribution needs one self-attention block per layer with the "
                         "same number of heads in every layer.")
    weights = {f"{layer}.self": model.head_weights(f"{layer}.self") for layer in layers}
    kv = {hw.W_K.shape[0] for hw in weights.values()}
    for block, hw in weights.items():
        if (hw.q_norm is not None or hw.k_norm is not None) and not hw.qk_norm_per_head:
            raise InputError(f"{block} normalises all its heads' queries and keys together, "
                             "so one head's input changes the others': edge attribution "
                             "needs each head to read on its own.")
    if len(kv) != 1:
        raise InputError("Edge attribution needs the same number of key/value heads in "
                         "every layer.")
    ctx = Context(subject, Graph.build(layers, heads.pop(), kv.pop()), weights)
    ctx.token, ctx.against = token, against
    with torch.no_grad():
        p = Pass(ctx, Plan())
        ctx.corrupted_out = p.run("corrupted", 1)
        ctx.corrupted = torch.cat([s.float() for s in p.senders])
        if run_clean:
            p = Pass(ctx, Plan())
            ctx.clean_readout(p.run("clean", 1), p.senders)
    return ctx


def _check_model(model) -> None:
    name = getattr(model, "name", "") or "This model"
    if model.norm_placement == "post":
        raise InputError(f"{name} is a post-norm model: its residual stream is renormalised "
                         "after every sublayer, so a component's input is not a sum of the "
                         "earlier components' outputs and there are no edges between them; "
                         "use activation patching (model.patch).")
    if model.norm_placement != "pre":
        raise InputError(f"{name} normalises each sublayer's output before the residual add "
                         f"({model.norm_placement}): its heads' outputs are normalised "
                         "together, so no head writes an output of its own into the stream; "
                         "edge attribution supports pre-norm models, use activation patching "
                         "(model.patch).")
    if model.architecture != "decoder-only":
        raise InputError(f"{name} is an {model.architecture} model: edge attribution "
                         "supports decoder-only models so far; use activation patching "
                         "(model.patch).")


def gradient_scores(ctx: Context, steps: int) -> np.ndarray:
    """(S, R): EAP (steps=1) or EAP-IG scores, normalised by the gap. A context without
    the clean run (EAP) gets it from the gradient pass, which is that run."""
    g = ctx.graph
    total = None
    if ctx.clean is None:
        batches = [None]
    else:
        alphas = torch.arange(1, steps + 1, dtype=torch.float32,
                              device=ctx.clean.device) / steps
        batches = list(alphas.split(max(1, CHUNK_BYTES // (4 * ctx.width_per_copy()))))
    for a in batches:
        plan = Gradients(ctx, a)
        run = Pass(ctx, plan)
        with torch.enable_grad():
            readout = run.run("clean", 1 if a is None else len(a))
            if ctx.clean is None:
                ctx.clean_readout(readout, run.senders)
            m = ctx.metric.fn(readout).sum()
            keys = list(plan.zeros)
            grads = torch.autograd.grad(m, [plan.zeros[k] for k in keys], allow_unused=True)
        if total is None:
            T, d = ctx.clean.shape[1:]
            total = torch.zeros(len(g.receivers), T, d, device=ctx.clean.device)
        for (kind, layer), gr in zip(keys, grads):
            if gr is None:
                continue
            gr = gr.detach().sum(0)
            if kind == "attn":
                total[g.attn_receivers(layer)] += gr
            elif kind == "mlp":
                total[g.mlp_receiver(layer)] += gr
            else:
                total[-1] += gr
    S, T, d = ctx.clean.shape
    diff = (ctx.clean - ctx.corrupted).reshape(S, T * d)
    scores = diff @ (total.reshape(len(g.receivers), T * d) / steps).T  # (S, R)
    return scores.double().cpu().numpy() / ctx.gap


@torch.no_grad()
def exact_scores(ctx: Context, chunk: int | None = None,
                 edges: Iterable[tuple[int, int]] | None = None) -> np.ndarray:
    """(S, R): the clean run with each edge corrupted in turn (NaN off the graph, and for
    edges not asked for)."""
    g = ctx.graph
    pairs = list(zip(*np.nonzero(g.valid))) if edges is None else list(edges)
    out = np.full(g.valid.shape, np.nan)
    step = chunk or max(1, CHUNK_BYTES // (4 * ctx.width_per_copy()))
    by_layer: dict[int, list] = {}
    for s, r in pairs:
        by_layer.setdefault(g.layer_of(int(r)), []).append((int(s), int(r)))
    share = ctx.subject.share_prefix
    for layer in sorted(by_layer):
        todo = by_layer[layer]
        for c in range(0, len(todo), step):
            part = todo[c:c + step]
            plan = EdgePatches(ctx, part, layer, share)
            m = ctx.metric.fn(Pass(ctx, plan).run("clean", 1 if share else len(part)))
            vals = (ctx.m_clean - m.double().cpu().numpy()) / ctx.gap
            for (s, r), v in zip(part, vals):
                out[s, r] = v
    return out


@torch.no_grad()
def faithfulness_of(ctx: Context, kept: np.ndarray, chunk: int | None = None) -> np.ndarray:
    """kept: bool (B, S, R) -> (B,) normalised metric with every other edge corrupted."""
    removed = torch.from_numpy(ctx.graph.valid[None] & ~kept).to(ctx.clean.device)
    step = chunk or max(1, CHUNK_BYTES // (4 * ctx.width_per_copy()))
    out = []
    for b in range(0, len(removed), step):
        rm = removed[b:b + step].float()
        m = ctx.metric.fn(Pass(ctx, Removed(ctx, rm)).run("clean", len(rm)))
        out.append((m.double().cpu().numpy() - ctx.m_corrupted) / ctx.gap)
    return np.concatenate(out)


# ---- the result ----------------------------------------------------------------------------
@dataclass
class EdgeAttribution:
    """Scores of every edge of the residual-stream graph (module docstring).

    edges: DataFrame sender, receiver, input (q | k | v for a head receiver, else ""), score
    (the share of clean - corrupted metric the edge carries), in graph order.
    """

    edges: pd.DataFrame
    method: EdgeMethod
    metric: str
    clean: float
    corrupted: float
    steps: int = 1
    tokens: list[str] = field(default_factory=list)
    corrupted_tokens: list[str] = field(default_factory=list)
    warnings: list[str] = field(default_factory=list)
    context: Context | None = field(default=None, repr=False)

    def circuit(self, top: int | None = None, threshold: float | None = None) -> pd.DataFrame:
        """The kept edges, highest |score| first: the ``top`` ones, and / or those with
        |score| >= ``threshold`` (neither: every edge, ranked)."""
        ranked = self.edges.reindex(self.edges["score"].abs().sort_values(
            ascending=False, kind="stable").index)
        if threshold is not None:
            ranked = ranked[ranked["score"].abs() >= float(threshold)]
        if top is not None:
            if int(top) < 0:
                raise InputError(f"top must be 0 or more, not {top}.")
            ranked = ranked.head(int(top))
        return ranked

    def faithfulness(self, kept) -> float:
        """The metric with every edge outside ``kept`` (a frame like ``circuit()``'s, or
        (sender, receiver, input) triples) carrying its corrupted value: 1 = clean, 0 =
        corrupted. One forward pass."""
        return float(self.faithfulness_curve([kept])[0])

    def faithfulness_curve(self, kept_sets: list) -> np.ndarray:
        """``faithfulness`` of several kept sets, batched: e.g. ``[a.circuit(top=n) for n
        in counts]``."""
        if self.context is None:
            raise InputError("This edge attribution has no model attached (loaded from a "
                             "file?): faithfulness needs the model.")
        masks = np.stack([self._mask(k) for k in kept_sets])
        return faithfulness_of(self.context, masks)

    def _mask(self, kept) -> np.ndarray:
        g = self.context.graph
        s_index = {s: i for i, s in enumerate(g.senders)}
        r_index = {r: i for i, r in enumerate(g.receivers)}
        if isinstance(kept, pd.DataFrame):
            kept = zip(kept["sender"], kept["receiver"], kept["input"])
        mask = np.zeros(g.valid.shape, dtype=bool)
        for s, r, w in kept:
            si, ri = s_index.get(s), r_index.get((r, w or ""))
            if si is None or ri is None or not g.valid[si, ri]:
                raise InputError(f"There is no edge {s} -> {r}{'.' + w if w else ''} in "
                                 "this model's graph.")
            mask[si, ri] = True
        return mask


def _frame(graph: Graph, scores: np.ndarray) -> pd.DataFrame:
    s, r = np.nonzero(graph.valid)
    return pd.DataFrame({"sender": [graph.senders[i] for i in s],
                         "receiver": [graph.receivers[j][0] for j in r],
                         "input": [graph.receivers[j][1] for j in r],
                         "score": scores[s, r].astype(float)})


def edge_attribution(model, clean: str, corrupted: str, *, target: str | None = None,
                     token=None, against=None, method: EdgeMethod = "eap",
                     steps: int = 5) -> EdgeAttribution:
    """Score every edge of ``model``'s residual-stream graph on a (clean, corrupted) pair of
    equal token length: ``method`` "eap" (one backward pass), "eap-ig" (``steps`` gradients
    from the corrupted to the clean input embedding) or "exact" (one patched run per edge,
    batched). The metric is patching's: logit(token) (default: the clean run's top token),
    or logit(token) - logit(against), at the last position (``target`` teacher-forced after
    the prompt). Returns an ``EdgeAttribution``: ``.edges``, ``.circuit(top, threshold)``,
    ``.faithfulness(kept)``. Pre-norm decoder-only models."""
    method = choose(method, EdgeMethod, "method")
    if isinstance(steps, bool) or not isinstance(steps, (int, np.integer)) or not \
            1 <= int(steps) <= 1000:
        raise InputError(f"steps must be a whole number from 1 to 1000, not {steps!r}.")
    ctx = prepare(model, clean, corrupted, target, token, against,
                  run_clean=method != "eap")
    if method == "exact":
        scores = exact_scores(ctx)
    else:
        scores = gradient_scores(ctx, int(steps) if method == "eap-ig" else 1)
    s = ctx.subject
    return EdgeAttribution(edges=_frame(ctx.graph, scores), method=method,
                           metric=ctx.metric.name, clean=ctx.m_clean,
                           corrupted=ctx.m_corrupted,
                           steps=int(steps) if method == "eap-ig" else 1,
                           tokens=list(s.clean_tokens),
                           corrupted_tokens=list(s.corrupted_tokens),
                           warnings=list(s.warnings), context=ctx)
