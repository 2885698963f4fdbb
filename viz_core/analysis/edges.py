"""Edge attribution: which connections between components carry the answer (a circuit).

The graph is the residual-stream graph (Elhage et al., 2021; Conmy et al., 2023): in a
pre-norm model the stream a component reads is the sum of what every earlier component wrote,

    input(r) = embed + sum over earlier heads (W_O[h] z_h) + sum over earlier MLPs + biases,

so each (sender, receiver) pair is an edge. Senders: ``embed`` (token + position), every head
(``decoder.0.self.h3``), every MLP (``decoder.0.mlp``). Receivers: every head's q, k and v
input separately (each head reads the stream through the block's norm and its own W_Q, W_K,
W_V), every MLP, and ``logits`` (the final stream). A sender writes into every later
receiver: a head into its own layer's MLP and everything after, an MLP into later layers. In
an encoder-decoder model each stack has its embedding (``encoder.embed``, ``decoder.embed``),
and cross-attention's keys and values read the encoder's final stream (through its final
norm): every encoder component writes into every cross k and v input, and nothing else of the
decoder.

Scores follow the noising convention of Hanna et al. (2024): how much of the clean run's
metric an edge carries, normalised by the gap (clean - corrupted metric):

- ``exact``: the clean run with one edge corrupted, i.e. its receiver reads the sender's
  corrupted-run output instead of its clean one: score = (clean - patched metric) / gap;
- ``eap`` (Syed et al., 2023): the first-order estimate, one backward pass on the clean run:
  score = (clean - corrupted sender output) . d metric / d receiver input / gap;
- ``eap-ig`` (Hanna et al., 2024): the gradient averaged over ``steps`` points on the line
  from the corrupted to the clean input embedding (alpha = 1/steps .. 1; steps=1 is EAP).

A score is a sum over positions; before the first position at which any sender's output
differs between the runs (``first_difference``: in a causal model, the first changed token)
its terms are exactly 0, so EAP and EAP-IG compute the receivers' gradients and the products
from there on (a pair that differs at its last word costs little more than its passes).

``EdgeAttribution.faithfulness(kept)`` runs the clean input with every edge outside ``kept``
carrying its sender's corrupted-run output (the receivers of kept edges read the senders as
they are in that very run): 1 = the clean metric, 0 = the corrupted one.

Every pass is an ordinary forward of the model through the capture path with the running
call's recorder edits (viz_core.analysis.edge_graph): batched, nothing on a module. Post-norm
models renormalise the stream after every sublayer, so it is not a sum of the senders'
outputs: there is no such graph, and the error says so.
"""

from __future__ import annotations

import math
from collections.abc import Iterable
from dataclasses import dataclass, field

import numpy as np
import pandas as pd
import torch

from viz_core.i18n import N_

from ..capture.device import free_memory
from ..errors import InputError
from ..model.choices import EdgeMethod, choose
from .edge_graph import CHUNK_BYTES, Context, Graph, Group, Pass, Plan, prepare
from .patching import gap_warnings

GRADIENT_HEADROOM = 0.5  # the share of the free memory one copy's gradient pass may take


# ---- the plans -----------------------------------------------------------------------------
class Gradients(Plan):
    """A zero that requires grad at every receiver; ``alphas`` move each stack's embedding
    from the corrupted (0) to the clean (1) run (EAP-IG), one copy each (None: the clean run
    itself, one copy: EAP).

    A head's receivers get their zero after their projection (``projected``): the gradient at
    head h's input x is then norm'(x)^T W[h]^T g_h, g_h the gradient at its q (k, v) before
    bias, q/k norm and rotation, which ``input_gradients`` computes after the backward pass
    for all of a group's heads at once: in closed form where the norm's NormSpec gives the
    model's normed input (``_norm_vjp_closed``: the copies add up before the projection, so
    EAP-IG's steps cost one product per head, not one per step), else by autograd's vjp of the
    norm module, vectorised over the heads. It equals the gradient at a zero added to a normed
    copy of the stream per head (the forward is the same function of x), without those
    copies in the forward and backward pass: measured faster for EAP and EAP-IG alike
    (README), and ``projected=False`` keeps the copies as the tests' reference."""

    def __init__(self, ctx: Context, alphas: torch.Tensor | None,
                 projected: bool | None = None):
        self.ctx, self.alphas, self.zeros = ctx, alphas, {}
        # False: a normed copy of the stream per head (the reference the tests compare with)
        self.projected = True if projected is None else projected
        self.heads: dict[int, tuple] = {}  # id(group) -> (group, Read, [(W, zero, y, bias)])
        self.senders = ctx.difference is None  # this pass is also the clean run (copy 0)

    def head_zero(self, group, which, y, bias, W, read):
        z = torch.zeros(y.shape, dtype=torch.float32, device=y.device, requires_grad=True)
        self.heads.setdefault(id(group), (group, read, []))[2].append((W, z, y, bias))
        return z

    def leaves(self) -> list[tuple[Group, torch.Tensor]]:
        return [*self.zeros.values(), *((g, z) for g, _, parts in self.heads.values()
                                        for _, z, _, _ in parts)]

    def input_gradients(self, grads: dict[int, torch.Tensor], start: dict[str, int]):
        """(group, (rows, T', d) gradient at each receiver's input, summed over the copies),
        from the gradients at the zeros (``grads``: id(zero) -> gradient), at the positions
        from ``start[group.stack]`` on (T' of them: before it no sender's output differs
        between the runs, so those positions add nothing to a score). A heads' group's
        gradients are written into one buffer that the next such group reuses: use each
        before asking for the next (a fresh tensor of that size per layer cost page faults:
        the allocator returns the memory between calls)."""
        buffer = None
        for group, z in self.zeros.values():
            if id(z) in grads:
                yield group, _copies_summed(grads[id(z)][:, :, start[group.stack]:]
                                            .transpose(0, 1))
        for group, read, parts in self.heads.values():
            if not any(id(z) in grads for _, z, _, _ in parts):
                continue
            t0 = start[group.stack]
            if _spec_holds(read):
                rows = sum(z.shape[1] for _, z, _, _ in parts)
                x = read.x
                size = rows * (x.shape[1] - t0) * x.shape[2]
                if buffer is None or buffer.numel() < size:
                    buffer = torch.empty(size, dtype=torch.float32, device=x.device)
                yield group, _norm_vjp_closed(read, parts, grads, t0, buffer[:size])
                continue
            x = read.x.detach()[:, t0:]
            B, T, d = x.shape
            rows = sum(z.shape[1] for _, z, _, _ in parts)
            at = torch.empty(rows, B * T, d, dtype=torch.float32, device=x.device)
            i = 0
            for W, z, _, _ in parts:  # each head's gradient at its normed input: g_h W[h]
                n, e = z.shape[1], z.shape[3]
                if id(z) in grads:
                    g = grads[id(z)][:, :, t0:].transpose(0, 1).reshape(n, B * T, e)
                    torch.bmm(g, W.detach().float(), out=at[i:i + n])
                else:
                    at[i:i + n] = 0
                i += n
            yield group, _copies_summed(_norm_vjp(read.norm, x, at.view(rows, B, T, d)))

    def embed(self, stack, x):
        if self.alphas is None:
            return x
        corr = self.ctx.corrupted_embed(stack).to(x.dtype)
        a = self.alphas.to(x.device, x.dtype)[:, None, None]
        return torch.where(a == 1, x, corr + a * (x - corr))  # alpha 1: the clean run, exactly

    def delta(self, group, run):
        x = run.senders[group.stack][0]
        B, T, d = x.shape
        z = torch.zeros(B, len(group.rows), T, d, dtype=torch.float32, device=x.device,
                        requires_grad=True)
        self.zeros[id(group)] = (group, z)
        return z


def _norm_vjp(norm, x: torch.Tensor, g: torch.Tensor) -> torch.Tensor:
    """d norm(x)^T g for every receiver: x (B, T, d), g (rows, B, T, d) -> (rows, B, T, d)."""
    with torch.enable_grad():
        xs = x.requires_grad_()
        out = norm(xs)
        try:  # one vectorised backward over the rows (vmap)
            gr = torch.autograd.grad(out, xs, g.to(out.dtype), is_grads_batched=True)[0]
        except RuntimeError:  # a norm vmap cannot batch: a copy of x per row
            xr = x.detach()[None].expand(g.shape).contiguous().requires_grad_()
            gr = torch.autograd.grad(norm(xr), xr, g.to(out.dtype))[0]
    return gr.detach().float()


def _spec_holds(read) -> bool:
    """Whether the norm's NormSpec gives the model's own normed input (float32), checked on
    the first copy's last position (the formula and its parameters are the same for every
    copy and position: checking them all cost 3 ms of an EAP call at GPT-2-small's shape)."""
    if read.spec is None or read.x.dtype != torch.float32 or read.h.dtype != torch.float32:
        return False
    with torch.no_grad():
        h = read.h.detach()[:1, -1:]
        return bool((read.spec(read.x.detach()[:1, -1:]) - h).abs().max()
                    <= 1e-5 * (1 + h.abs().max()))


def _norm_vjp_closed(read, parts, grads: dict[int, torch.Tensor], t0: int = 0,
                     out: torch.Tensor | None = None) -> torch.Tensor:
    """The gradient at each head's input, summed over the copies b, in closed form: (rows,
    T, d), from g_b at each head's q (k, v) (B, n, T, e); at the positions from t0 on
    (written into ``out``'s storage where given).

    With x^ = (x - mean x) / s (LayerNorm; x / s for RMSNorm) and h = gain * x^ + bias, the
    vjp of u is (gain * u - mean(gain * u) - x^ mean(x^ * gain * u)) / s (RMSNorm: no middle
    term), and u = W^T g_b. Every term is linear in g_b / s_b, so the copies add up before
    the one (heads, T, e) x (e, d) product per head: sum_b gain * W^T g_b / s_b; the middle
    term is G . (W gain) / d with G = sum_b g_b / s_b; the last reads W (gain * x^_b), which
    is the head's y_b (read.h W + bias) less its bias and W (norm bias), already computed.
    With one copy (EAP) both are read off v = gain * W^T G itself, mean(v) and x^ . v / d,
    and taken off together: per position, one (heads, d) x (d, 2) product and one (heads, 2)
    x (2, d), instead of two products with W and two passes over v.
    """
    spec = read.spec
    x = read.x.detach()[:, t0:].float()
    B, T, d = x.shape
    if spec.kind == "layer":  # spec.scale's s, from the centred x that x^ needs anyway
        # (torch.var's one-pass algorithm took twice as long: 1.46 against 0.66 ms on EAP-IG's
        # 5 x 64 x 768, one thread)
        centred = x - x.mean(-1, keepdim=True)
        s = ((centred * centred).mean(-1, keepdim=True) + spec.eps).sqrt()  # (B, T, 1)
        xhat = centred / s
    else:
        s = spec.scale(x)
        xhat = x / s
    gain = None if spec.weight is None else spec.weight.detach().float()
    if B == 1:  # per position: what is taken off v (rows 1 and x^, or x^ alone) ...
        K = xhat[0, :, None] if spec.kind != "layer" else \
            torch.stack([torch.ones_like(xhat[0]), xhat[0]], 1)  # (T, k, d)
        M = K.transpose(1, 2) / d  # ... and how much: v . M (T, d, k)
    rows = sum(z.shape[1] for _, z, _, _ in parts)
    out = torch.empty(rows, T, d, dtype=torch.float32, device=x.device) if out is None \
        else out.view(rows, T, d)
    i = 0
    for W, z, y, bias in parts:
        n = z.shape[1]
        o = out[i:i + n]
        i += n
        if id(z) not in grads:
            o.zero_()
            continue
        W = W.detach().float()  # (n, e, d)
        gs = grads[id(z)][:, :, t0:].float() / s[:, None]  # (B, n, T, e)
        G = gs.sum(0)  # (n, T, e)
        torch.bmm(G, W, out=o)  # W^T G (W as the model's weight lays it out, no copy)
        if gain is not None:
            o.mul_(gain)  # gain * W^T G
        if B == 1:
            oT = o.transpose(0, 1)  # (T, n, d), a view
            oT.baddbmm_(torch.bmm(oT, M), K, alpha=-1)
            continue
        p = y.detach()[:, :, t0:].float()  # W (gain * x^) = y - bias - W (norm bias)
        if bias is not None:
            p = p - bias.detach().float()[None, :, None]
        if spec.bias is not None:
            p = p - torch.einsum("ned,d->ne", W, spec.bias.detach().float())[None, :, None]
        c = (gs * p).sum(-1) / d  # (B, n, T)
        if spec.kind == "layer":
            wg = W.sum(-1) if gain is None else W @ gain  # (n, e)
            o.sub_((G * wg[:, None]).sum(-1, keepdim=True) / d)
        o.sub_(torch.einsum("bnt,btd->ntd", c, xhat))
    return out


def _copies_summed(g: torch.Tensor) -> torch.Tensor:
    """(rows, B, T, d) -> (rows, T, d): the gradients of the B copies added up."""
    return g[:, 0] if g.shape[1] == 1 else g.sum(1)


class EdgePatches(Plan):
    """Copy i of the batch reads sender s_i's corrupted output at receiver r_i (all in one
    group). Decoder-only models share the run below the group's layer (one copy, widened)."""

    senders = False

    def __init__(self, ctx: Context, pairs: list[tuple[int, int]], group: Group,
                 share: bool):
        self.ctx, self.pairs, self.group, self.share = ctx, pairs, group, share
        local = {r: i for i, r in enumerate(group.rows)}
        off = ctx.graph.offset[group.stack]
        self.index = [(i, s - off, local[r]) for i, (s, r) in enumerate(pairs)]

    def widen(self, layer, x):
        if self.share and layer == self.group.layer:
            return x.expand(len(self.pairs), *x.shape[1:]).contiguous()
        return x

    def delta(self, group, run):
        if group is not self.group:
            return None
        diff = self.ctx.difference[group.stack]  # (S, T, d) clean - corrupted
        out = diff.new_zeros(len(self.pairs), len(group.rows), *diff.shape[1:])
        i, s, r = (torch.tensor(c, device=out.device) for c in zip(*self.index))
        out[i, r] = -diff[s]  # the sender's corrupted output, less its clean one
        return out


class Removed(Plan):
    """Copy b: every edge with removed[b, s, r] reads its sender's corrupted output."""

    keep_parts = False  # reads every copy's sender outputs (run.senders)

    def __init__(self, ctx: Context, removed: torch.Tensor):
        self.ctx, self.removed = ctx, removed  # float (B, S, R)

    def delta(self, group, run):
        rm = self.removed[:, self.ctx.graph.senders_of(group)][:, :, group.rows]  # (B, n, r)
        if not bool(rm.any()):
            return None
        n = group.n_senders
        now = torch.stack([t.float() for t in
                           torch.broadcast_tensors(*run.senders[group.stack][:n])])
        diff = self.ctx.corrupted[group.stack][:n, None] - now  # (n, B|1, T, d)
        return torch.einsum("sbtd,bsr->brtd", diff, rm.to(diff.dtype))


# ---- running the methods -------------------------------------------------------------------
def _check_model(model) -> None:
    name = getattr(model, "name", "") or "This model"
    if model.norm_placement == "post":
        raise InputError(N_("{name} is a post-norm model: its residual stream is renormalised "
                           "after every sublayer, so a component's input is not a sum of the "
                           "earlier components' outputs and there are no edges between them; use "
                           "activation patching (model.patch)."), name=name)
    if model.norm_placement != "pre":
        raise InputError(N_("{name} normalises each sublayer's output before the residual add "
                           "({norm_placement}): its heads' outputs are normalised together, so "
                           "no head writes an output of its own into the stream; edge "
                           "attribution supports pre-norm models, use activation patching "
                           "(model.patch)."), name=name, norm_placement=model.norm_placement)
    if model.architecture == "encoder-only":
        raise InputError(N_("{name} is an encoder-only model: it has no logits for the edges to "
                           "lead to; use activation patching (model.patch)."), name=name)


def check_gradient_memory(model, ctx: Context) -> None:
    """One copy's gradient pass keeps every layer's activations (the attention weights grow
    with the square of the length): refuse in one line what would not fit in the free memory
    of the model's device, rather than have the process that serves every session killed."""
    need = 4 * ctx.width_per_copy() * max(1, len(ctx.layers))
    device = torch.device(getattr(model, "device", None) or "cpu")
    gpu, host = free_memory(device)
    free = gpu if device.type == "cuda" else host
    if free and need > GRADIENT_HEADROOM * free:
        raise InputError(N_("Edge attribution's gradient pass on this pair needs about "
                            "{need:.1f} GB and this machine has {free:.1f} GB free: shorten "
                            "the pair (the attention weights grow with the square of its "
                            "length)."), need=need / 2**30, free=free / 2**30)


def _chunk(ctx: Context) -> int:
    return max(1, CHUNK_BYTES // (4 * ctx.width_per_copy()))


def gradient_scores(ctx: Context, steps: int, projected: bool | None = None) -> np.ndarray:
    """(S, R): EAP (steps=1) or EAP-IG scores, normalised by the gap. A context without the
    clean run gets it from the first gradient pass's alpha = 1 copy, which is that run.
    ``projected``: the heads' gradients at their projections (``Gradients``; None: yes)."""
    g = ctx.graph
    scores = np.zeros(g.valid.shape)
    if steps == 1:
        batches = [None]
    else:  # alpha = 1 (the clean run, copy 0 of the first batch) first
        alphas = torch.arange(steps, 0, -1, dtype=torch.float32) / steps
        batches = list(alphas.split(_chunk(ctx)))
    start: dict[str, int] = {}
    for a in batches:
        plan = Gradients(ctx, a, projected)
        run = Pass(ctx, plan)
        with torch.enable_grad():
            readout = run.run("clean", 1 if a is None else len(a))
            if ctx.difference is None:
                ctx.clean_readout(readout[:1], run.parts,
                                  None if run.final is None else run.final[:1])
            m = ctx.head_metric(readout, run.final)
            leaves = [z for _, z in plan.leaves()]
            grads = torch.autograd.grad(m, leaves, allow_unused=True)
        found = {id(z): gr.detach() for z, gr in zip(leaves, grads) if gr is not None}
        if not start:
            start = {s: first_difference(d) for s, d in ctx.difference.items()}
            diff = {s: ctx.difference[s][:, t0:].flatten(1)  # (S, T' d), a view
                    for s, t0 in start.items()}
        # a score is linear in the receiver's gradient: each batch's part adds up
        singles: dict[str, list] = {}  # stack -> [(group, its one receiver's (1, T' d))]
        for group, gr in plan.input_gradients(found, start):  # (rows, T', d)
            if len(group.rows) == 1:  # an MLP, the logits: one product per stack (below)
                singles.setdefault(group.stack, []).append((group, gr.reshape(1, -1)))
                continue
            part = diff[group.stack][:group.n_senders] @ gr.flatten(1).T  # (n, rows)
            scores[g.senders_of(group), group.rows] += part.double().cpu().numpy()
        for stack, items in singles.items():  # reads the senders once, not once per MLP
            n = max(group.n_senders for group, _ in items)
            part = (diff[stack][:n] @ torch.cat([t for _, t in items]).T).double().cpu().numpy()
            for j, (group, _) in enumerate(items):
                scores[g.senders_of(group), group.rows[0]] += part[:group.n_senders, j]
    return scores / (steps * ctx.gap)


def first_difference(diff: torch.Tensor) -> int:
    """The first position at which any sender's output differs between the two runs, from
    their difference (S, T, d) (T where none does). A causal model's positions before the
    first changed token compute the same in both runs, so their terms of every score are
    exactly 0.

    No sender differs later than the first (the embedding) does, so that is the bound; the
    positions before it are checked whole, position 0 first (a bidirectional stack differs
    everywhere after its first layer), then by bisection. Checking every position took 16
    ms at GPT-2-small's 157 senders x 64 positions (one thread); this, for a causal model,
    costs in proportion to the positions before the change."""
    T = diff.shape[1]
    row = diff[0].ne(0).any(-1)  # (T,) the first sender's own positions
    bound = int(row.int().argmax()) if bool(row.any()) else T
    if bound == 0 or bool(diff[:, :1].any()):
        return 0
    if not bool(diff[:, :bound].any()):
        return bound
    lo, hi = 1, bound  # positions [0, lo) agree everywhere; [0, hi) do not
    while hi - lo > 1:
        mid = (lo + hi) // 2
        if bool(diff[:, :mid].any()):
            hi = mid
        else:
            lo = mid
    return lo


@torch.no_grad()
def exact_scores(ctx: Context, chunk: int | None = None,
                 edges: Iterable[tuple[int, int]] | None = None) -> np.ndarray:
    """(S, R): the clean run with each edge corrupted in turn (NaN off the graph, and for
    edges not asked for)."""
    g = ctx.graph
    pairs = list(zip(*np.nonzero(g.valid))) if edges is None else list(edges)
    out = np.full(g.valid.shape, np.nan)
    step = chunk or _chunk(ctx)
    group_of = g.group_of()
    by_group: dict[int, list] = {}
    for s, r in pairs:
        by_group.setdefault(id(group_of[int(r)]), []).append((int(s), int(r)))
    share = ctx.subject.share_prefix
    for group in g.groups:
        todo = by_group.get(id(group), [])
        for c in range(0, len(todo), step):
            part = todo[c:c + step]
            plan = EdgePatches(ctx, part, group, share)
            m = ctx.metric.fn(Pass(ctx, plan).run("clean", 1 if share else len(part)))
            vals = (ctx.m_clean - m.double().cpu().numpy()) / ctx.gap
            for (s, r), v in zip(part, vals):
                out[s, r] = v
    return out


@torch.no_grad()
def faithfulness_of(ctx: Context, kept: np.ndarray, chunk: int | None = None) -> np.ndarray:
    """kept: bool (B, S, R) -> (B,) normalised metric with every other edge corrupted."""
    removed = torch.from_numpy(ctx.graph.valid[None] & ~kept)
    step = chunk or _chunk(ctx)
    out = []
    for b in range(0, len(removed), step):
        rm = removed[b:b + step].float().to(ctx.corrupted_embed("decoder").device)
        m = ctx.metric.fn(Pass(ctx, Removed(ctx, rm)).run("clean", len(rm)))
        out.append((m.double().cpu().numpy() - ctx.m_corrupted) / ctx.gap)
    return np.concatenate(out)


# ---- the result ----------------------------------------------------------------------------
@dataclass(frozen=True)
class EdgeAgreement:
    """``EdgeAttribution.agreement``: Spearman's rho over every edge (NaN where either side's
    scores are all equal), and ``shared`` of the ``top`` highest-|score| edges in both."""

    spearman: float
    top: int
    shared: int
    n_edges: int
    method: str
    against: str


@dataclass
class EdgeAttribution:
    """Scores of every edge of the residual-stream graph (module docstring).

    edges: DataFrame sender, receiver, input (q | k | v for a head receiver, else ""), score
    (the share of clean - corrupted metric the edge carries), in graph order; the names are
    categoricals (their categories in graph order).
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
            try:
                t = float(threshold)
            except (TypeError, ValueError):
                raise InputError(N_("threshold must be a number, not {threshold!r:.40}."),
                                    threshold=threshold) from None
            ranked = ranked[ranked["score"].abs() >= t]
        if top is not None:
            if isinstance(top, bool) or not isinstance(top, (int, np.integer)) or top < 0:
                raise InputError(N_("top must be a whole number, 0 or more, not {top!r:.40}."), top=top)
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
            raise InputError(N_("This edge attribution has no model attached (loaded from a "
                             "file?): faithfulness needs the model."))
        if not len(kept_sets):
            return np.zeros(0)
        masks = np.stack([self._mask(k) for k in kept_sets])
        return faithfulness_of(self.context, masks)

    def agreement(self, other: EdgeAttribution, top: int | None = None) -> EdgeAgreement:
        """How far this attribution ranks the edges as ``other`` does (e.g. EAP-IG against
        exact patching on the same pair): Spearman's rho of the scores over every edge, and
        how many of this one's ``top`` edges by |score| (default: 10%) are among other's
        ``top``. Edges are matched by (sender, receiver, input), not by row."""
        from scipy.stats import spearmanr  # (scipy's import is slow: only when asked)

        keys = ["sender", "receiver", "input"]
        mine, theirs = (e.set_index(keys)["score"] for e in (self.edges, other.edges))
        if len(mine) != len(theirs) or set(mine.index) != set(theirs.index):
            raise InputError(N_("These two edge attributions are of different graphs ({a:,} "
                                "and {b:,} edges): compare two runs of one model."),
                             a=len(mine), b=len(theirs))
        theirs = theirs.reindex(mine.index)
        n = len(mine)
        if top is None:
            top = max(1, math.ceil(0.1 * n))
        elif isinstance(top, bool) or not isinstance(top, (int, np.integer)) or top < 1:
            raise InputError(N_("top must be a whole number, 1 or more, not {top!r:.40}."),
                             top=top)
        top = min(int(top), n)
        a, b = mine.to_numpy(float), theirs.to_numpy(float)
        rho = spearmanr(a, b)[0] if n > 1 and np.ptp(a) > 0 and np.ptp(b) > 0 else np.nan
        first = set(np.argsort(-np.abs(a), kind="stable")[:top])
        second = set(np.argsort(-np.abs(b), kind="stable")[:top])
        return EdgeAgreement(spearman=float(rho), top=top, shared=len(first & second),
                             n_edges=n, method=self.method, against=other.method)

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
                raise InputError(N_("There is no edge {s} -> {r}{value} in this model's graph."),
                                    s=s, r=r, value='.' + w if w else '')
            mask[si, ri] = True
        return mask


def _frame(graph: Graph, scores: np.ndarray) -> pd.DataFrame:
    """The edges in graph order; names as categoricals built from codes (a big model has
    tens of thousands of edges and a few hundred names: a string per row cost ~10x more)."""
    s, r = np.nonzero(graph.valid)
    names = list(dict.fromkeys(n for n, _ in graph.receivers))  # graph order
    at = {n: i for i, n in enumerate(names)}
    inputs = ["q", "k", "v", ""]
    r_name = np.array([at[n] for n, _ in graph.receivers])
    r_input = np.array([inputs.index(w) for _, w in graph.receivers])
    return pd.DataFrame({
        "sender": pd.Categorical.from_codes(s, categories=graph.senders),
        "receiver": pd.Categorical.from_codes(r_name[r], categories=names),
        "input": pd.Categorical.from_codes(r_input[r], categories=inputs),
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
    ``.faithfulness(kept)``. Pre-norm models (decoder-only and encoder-decoder)."""
    method = choose(method, EdgeMethod, "method")
    if isinstance(steps, bool) or not isinstance(steps, (int, np.integer)) or not \
            1 <= int(steps) <= 1000:
        raise InputError(N_("steps must be a whole number from 1 to 1000, not {steps!r}."), steps=steps)
    _check_model(model)
    ctx = prepare(model, clean, corrupted, target, token, against,
                  run_clean=method == "exact")  # EAP's and EAP-IG's gradient pass is that run
    if method == "exact":
        scores = exact_scores(ctx)
    else:
        check_gradient_memory(model, ctx)
        scores = gradient_scores(ctx, int(steps) if method == "eap-ig" else 1)
    s = ctx.subject
    return EdgeAttribution(edges=_frame(ctx.graph, scores), method=method,
                           metric=ctx.metric.name, clean=ctx.m_clean,
                           corrupted=ctx.m_corrupted,
                           steps=int(steps) if method == "eap-ig" else 1,
                           tokens=list(s.clean_tokens),
                           corrupted_tokens=list(s.corrupted_tokens),
                           warnings=[*s.warnings, *gap_warnings(ctx.m_clean, ctx.m_corrupted,
                                                                ctx.metric.name)],
                           context=ctx)
