"""The machinery of edge attribution (viz_core.analysis.edges): the graph, and forward passes
that give each receiver an input of its own.

A pass is an ordinary forward of the model through the capture path, with the running
call's recorder edits (viz_core.capture.recorder):

- ``edit_stream`` at a layer's ``"in"`` reads the embedding (the first sender of a stack; EAP-IG
  moves it between the corrupted and the clean run; exact patching widens the batch there),
  at ``"ffn"`` an MLP's output, at the last layer's ``"out"`` the final stream (the logits'
  input, or the encoder's output that cross-attention reads);
- ``edit_z`` reads each head's output z, written into the stream as W_O[h] z_h;
- ``edit_read`` keeps the stream a block's norm reads, and gives an MLP its own input;
- ``edit_qkv`` recomputes a block's q, k, v head by head from each head's own input: the
  block's norm (the model's own module; the encoder's final norm for cross-attention keys and
  values), the head's rows of W_Q, W_K, W_V and their biases, a per-head q/k norm where the
  model has one, and the rotation (``model.head_weights(block)``).

A receiver's input is the stream plus a change ``delta`` (B, rows, T, d) a ``Plan`` decides: a
zero that requires grad (EAP, EAP-IG), one sender's corrupted - clean output (exact edge
patching), or for every edge taken out of a circuit its sender's corrupted output minus its
output in this very run (faithfulness). A plan with ``projected`` set (EAP and EAP-IG)
instead adds its zero to each head's q, k, v (``head_zero``): to the model's own tensors
where they are the projection plus its bias (no per-head q/k norm, no rotation: GPT-2, T5,
every model's v), else to a projection of the block's one normed input, finished as the
model does; the gradient at the head's input follows from it by the norm's vjp.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field

import numpy as np
import torch

from viz_core.i18n import N_

from ..capture.recorder import recording
from ..errors import InputError
from .parts import NormSpec
from .patching import Metric, PatchSubject, _check_gap, make_metric

CHUNK_BYTES = 256 << 20  # rough activation memory of one batch of copies
UNKNOWN = {"<unk>", "[UNK]", "<UNK>"}  # how an unknown word is shown


# ---- the graph -----------------------------------------------------------------------------
@dataclass
class Group:
    """Receivers that read one stream at one place: a block's head inputs (``attn``; q only
    for cross-attention), a cross-attention block's k and v inputs (``kv``, reading the
    encoder's output), an MLP (``mlp``) or the logits (``logits``)."""

    kind: str
    block: str  # "decoder.0.self", the layer's MLP "decoder.0.mlp", or "logits"
    layer: str  # the layer it sits in ("" for logits)
    stack: str  # the stream its senders write: "encoder" | "decoder"
    rows: list[int]  # its receivers (graph indices)
    n_senders: int  # it reads the first n senders of its stack


@dataclass
class Graph:
    """Senders, receivers, the groups they form and which sender reaches which receiver.

    Senders in model order: each stack's embedding (``embed``; ``encoder.embed`` and
    ``decoder.embed`` in an encoder-decoder model), then per layer its heads and its MLP.
    Receivers: each head's q input, then each key/value head's k and v inputs (named
    ``<block>.kv<g>`` under grouped-query attention), each MLP, and ``logits``.
    """

    senders: list[str]
    stack_of: list[str]  # the stack each sender writes
    receivers: list[tuple[str, str]]  # (name, input): input q | k | v for a head, else ""
    groups: list[Group]
    valid: np.ndarray  # bool (S, R)
    offset: dict[str, int] = field(default_factory=dict)  # stack -> its first sender

    @classmethod
    def build(cls, layers: list[str], blocks: dict[str, int], kv: dict[str, int]) -> Graph:
        stacks = [s for s in ("encoder", "decoder") if any(la.startswith(s + ".")
                                                           for la in layers)]
        senders, stack_of, receivers, groups, offset = [], [], [], [], {}
        count = {}

        def add_receivers(names):
            receivers.extend(names)
            return list(range(len(receivers) - len(names), len(receivers)))

        for stack in stacks:
            offset[stack] = len(senders)
            senders.append("embed" if len(stacks) == 1 else f"{stack}.embed")
            stack_of.append(stack)
            for layer in (la for la in layers if la.startswith(stack + ".")):
                for kind in ("self", "cross"):
                    block = f"{layer}.{kind}"
                    if block not in blocks:
                        continue
                    H, G = blocks[block], kv[block]
                    tag = "h" if G == H else "kv"
                    n = len(senders) - offset[stack]
                    q = add_receivers([(f"{block}.h{h}", "q") for h in range(H)])
                    k_v = add_receivers([(f"{block}.{tag}{g}", w) for w in "kv"
                                         for g in range(G)])
                    if kind == "self":
                        groups.append(Group("attn", block, layer, stack, q + k_v, n))
                    else:
                        groups.append(Group("attn", block, layer, stack, q, n))
                        groups.append(Group("kv", block, layer, "encoder", k_v,
                                            count["encoder"]))
                    senders += [f"{block}.h{h}" for h in range(H)]
                    stack_of += [stack] * H
                rows = add_receivers([(f"{layer}.mlp", "")])
                groups.append(Group("mlp", f"{layer}.mlp", layer, stack, rows,
                                    len(senders) - offset[stack]))
                senders.append(f"{layer}.mlp")
                stack_of.append(stack)
            count[stack] = len(senders) - offset[stack]
        groups.append(Group("logits", "logits", "", "decoder",
                            add_receivers([("logits", "")]), count["decoder"]))
        valid = np.zeros((len(senders), len(receivers)), dtype=bool)
        for g in groups:
            valid[offset[g.stack]:offset[g.stack] + g.n_senders, g.rows] = True
        return cls(senders, stack_of, receivers, groups, valid, offset)

    def group_of(self) -> dict[int, Group]:
        return {r: g for g in self.groups for r in g.rows}

    def senders_of(self, g: Group) -> slice:
        return slice(self.offset[g.stack], self.offset[g.stack] + g.n_senders)


# ---- one forward pass with edits -----------------------------------------------------------
@dataclass(frozen=True)
class Read:
    """What a block's heads read: the stream x (B, T, d), h = norm(x) as the model computed
    it, the norm (the model's own module) and its NormSpec (None where there is none)."""

    x: torch.Tensor
    h: torch.Tensor
    norm: Callable
    spec: NormSpec | None


class Plan:
    """What one pass changes (subclasses): the embeddings, where the batch widens, and each
    group's input change (B, rows, T, d) or None. ``senders``: whether the pass keeps every
    sender's output (else only the embeddings, for their shape)."""

    senders = True
    # True: keep copy 0 of the senders as ``Pass.parts`` (the context's corrupted run and
    # difference); False: every copy's outputs in ``Pass.senders`` (faithfulness)
    keep_parts = True
    # True (EAP, EAP-IG): the plan's ``head_zero`` is added to each head's projection (the
    # model's own q/k/v where ``_plain``); the receivers' gradients follow from it
    # (``input_gradients``) without a normed copy of the stream per head
    projected = False
    # True: the pass ends at the final stream (``Pass.final``), without the model's head
    stop_at_final = False

    def head_zero(self, group: Group, which: int, y: torch.Tensor, bias: torch.Tensor | None,
                  W: torch.Tensor, read: Read) -> torch.Tensor | None:
        """A change for the heads' q (which 0), k (1) or v (2): y (B, heads, T, e) is
        read.h W (+ ``bias`` where not None), W (heads, e, d)."""
        return None

    def embed(self, stack: str, x: torch.Tensor) -> torch.Tensor:
        return x

    def widen(self, layer: str, x: torch.Tensor) -> torch.Tensor:  # "": the final stream
        return x

    def delta(self, group: Group, run: Pass) -> torch.Tensor | None:
        return None


class _Stopped(Exception):
    """A pass with ``Plan.stop_at_final`` has its final stream."""


class Pass:
    """The recorder edits of one forward pass; ``senders`` fill up as the model runs."""

    def __init__(self, ctx: Context, plan: Plan):
        self.ctx, self.plan = ctx, plan
        # stack -> (B|1, T, d) each: the embedding, and with ``keep_parts`` False every sender
        self.senders: dict[str, list[torch.Tensor]] = {}
        self.parts: dict[str, list[Part]] = {}  # stack -> copy 0 of its senders, in order
        self.read_in: dict[str, tuple] = {}  # block -> (x, norm(x), norm)
        self.encoder_out: torch.Tensor | None = None
        self.final: torch.Tensor | None = None  # the final stream (B, T, d), the logits' input

    def recorder(self):
        ctx, g = self.ctx, self.ctx.graph
        groups = {(gr.kind, gr.block): gr for gr in g.groups}
        edit_stream, edit_read, edit_z, edit_qkv = {}, {}, {}, {}
        for stack in ("encoder", "decoder"):
            layers = [la for la in ctx.layers if la.startswith(stack + ".")]
            for i, layer in enumerate(layers):
                edit_stream[(layer, "in")] = self._at_in(stack, layer, i == 0)
                edit_stream[(layer, "ffn")] = self._keep(stack)
                edit_read[(layer, "ffn")] = self._mlp_input(groups[("mlp", f"{layer}.mlp")])
                for kind in ("self", "cross"):
                    block = f"{layer}.{kind}"
                    if block in ctx.weights:
                        edit_read[(layer, kind)] = self._keep_input(block)
                        edit_z[block] = self._keep_heads(stack, block)
                        edit_qkv[block] = self._qkv(block, groups[("attn", block)],
                                                    groups.get(("kv", block)))
            if layers:
                edit_stream[(layers[-1], "out")] = (self._final(groups[("logits", "logits")])
                                                    if stack == "decoder" else self._enc_out)
        return ctx.subject.recorder(edit_stream=edit_stream, edit_read=edit_read,
                                    edit_z=edit_z, edit_qkv=edit_qkv)

    def _at_in(self, stack: str, layer: str, first: bool):
        def edit(x):
            if first:
                x = self.plan.embed(stack, x)
            x = self.plan.widen(layer, x)
            if first:
                self.senders.setdefault(stack, []).append(x)
                if self.plan.senders and self.plan.keep_parts:
                    self.parts.setdefault(stack, []).append(x[:1].detach().float())
            return x
        return edit

    def _keep(self, stack: str):
        def edit(out):
            if self.plan.senders:
                if self.plan.keep_parts:
                    self.parts[stack].append(out[:1].detach().float())
                else:
                    self.senders[stack].append(out)
            return out
        return edit

    def _keep_heads(self, stack: str, block: str):
        W_O = self.ctx.weights[block].W_O  # (H, d_model, d_v)

        def edit(z):  # z (B, T, H, d_v) -> each head's write into the stream
            if not self.plan.senders:
                return z
            if self.plan.keep_parts:  # z, not the heads' outputs: see Heads
                self.parts[stack].append(Heads(z[0].detach().to(torch.float32, copy=True), W_O))
                return z
            out = torch.einsum("bthv,hdv->hbtd", z.detach(), W_O.to(z.dtype))
            self.senders[stack].extend(out.unbind(0))
            return z
        return edit

    def _keep_input(self, block: str):
        def edit(x, h, norm):
            self.read_in[block] = (x, h, norm)
            return h
        return edit

    def _enc_out(self, x):
        self.encoder_out = x
        return x

    def _mlp_input(self, group: Group):
        def edit(x, h, norm):
            d = self.plan.delta(group, self)
            return h if d is None else norm(x + d[:, 0].to(x.dtype))
        return edit

    def _final(self, group: Group):
        def edit(x):
            x = self.plan.widen("", x)
            d = self.plan.delta(group, self)
            self.final = x if d is None else x + d[:, 0].to(x.dtype)
            if self.plan.stop_at_final:
                raise _Stopped
            return self.final
        return edit

    def _qkv(self, block: str, group: Group, kv_group: Group | None):
        hw = self.ctx.weights[block]
        H, G = hw.n_heads, hw.W_K.shape[0]

        def projected(which, read, g, W, given):
            bias = (hw.b_Q, hw.b_K, hw.b_V)[which]
            if _plain(hw, which) and _is_projection(given, read.h, W, bias):
                # the model's own q (k, v) is h W + b: the zero goes there
                z = self.plan.head_zero(g, which, given, bias, W, read)
                return given if z is None else given + z.to(given.dtype)
            y = torch.einsum("btd,hed->bhte", read.h, W.to(read.h.dtype))  # (B, heads, T, e)
            z = self.plan.head_zero(g, which, y, None, W, read)
            return _finish(hw, which, y if z is None else y + z.to(y.dtype))

        def edit(q, k, v):
            if self.plan.projected:
                x, h, norm = self.read_in[block]
                read = Read(x, h, norm, hw.norm)
                q = projected(0, read, group, hw.W_Q, q).to(q.dtype)
                if kv_group is None:
                    k = projected(1, read, group, hw.W_K, k).to(k.dtype)
                    v = projected(2, read, group, hw.W_V, v).to(v.dtype)
                else:
                    mem, enorm = self.encoder_out, self.ctx.encoder_norm
                    read = Read(mem, enorm(mem).to(mem.dtype), enorm,
                                enorm if isinstance(enorm, NormSpec) else None)
                    k = projected(1, read, kv_group, hw.W_K, k).to(k.dtype)
                    v = projected(2, read, kv_group, hw.W_V, v).to(v.dtype)
                return q, k, v
            d = self.plan.delta(group, self)
            d_kv = self.plan.delta(kv_group, self) if kv_group is not None else None
            x, _, norm = self.read_in[block]
            if d is not None:
                ins = norm(x[:, None] + d.to(x.dtype))  # (B, rows, T, d), each input normed
                q = _project(hw, 0, ins[:, :H]).to(q.dtype)
                if kv_group is None:  # self-attention: k and v read the same stream
                    k = _project(hw, 1, ins[:, H:H + G]).to(k.dtype)
                    v = _project(hw, 2, ins[:, H + G:]).to(v.dtype)
            if d_kv is not None:  # cross-attention: the encoder's output, its final norm
                mem = self.encoder_out
                ins = self.ctx.encoder_norm(mem[:, None] + d_kv.to(mem.dtype)).to(mem.dtype)
                k = _project(hw, 1, ins[:, :G]).to(k.dtype)
                v = _project(hw, 2, ins[:, G:]).to(v.dtype)
            return q, k, v
        return edit

    def run(self, which: str, n: int) -> torch.Tensor | None:
        """The model's readout of n copies of the clean or corrupted input; None where the
        plan stops at the final stream."""
        try:
            with recording(self.recorder()):
                return self.ctx.subject.run(which, n)
        except _Stopped:
            return None


def _project(hw, which: int, ins: torch.Tensor) -> torch.Tensor:
    """q (which 0), k (1) or v (2) of each head from its own normed input (B, heads, T, d)."""
    W = (hw.W_Q, hw.W_K, hw.W_V)[which]
    y = torch.einsum("bhtd,hed->bhte", ins, W.to(ins.dtype))  # (B, heads, T, d_head)
    return _finish(hw, which, y).to(ins.dtype)


def _plain(hw, which: int) -> bool:
    """Whether q (which 0), k (1) or v (2) is the projection and its bias alone (no per-head
    norm, no rotation): then the model's own tensor is the head's h W + b."""
    return (hw.q_norm, hw.k_norm, None)[which] is None and (which == 2 or hw.rotate is None)


def _is_projection(given: torch.Tensor, h: torch.Tensor, W: torch.Tensor,
                   bias: torch.Tensor | None) -> bool:
    """Whether the model's q (k, v) (B, heads, T, e) is h W + bias, checked for the last head
    at the last position (a 1 / (heads T) share of the projection: checking every head read
    all of W once more, 5 ms of an EAP call at GPT-2-small's shape; a model that scales its
    q does so for every head): else the heads' are recomputed (as exact patching does), so
    the gradients stay those of the graph's function."""
    heads = slice(W.shape[0] - 1, None)  # the last head (a view)
    with torch.no_grad():
        y = torch.einsum("bd,hed->bhe", h[:, -1].float(), W[heads].float())
        if bias is not None:
            y = y + bias[heads].float()
        tol = (1e-4 if given.dtype == torch.float32 else 2e-2) * (1 + float(y.abs().max()))
        return bool((given[:, heads, -1].float() - y).abs().max() <= tol)


def _finish(hw, which: int, y: torch.Tensor) -> torch.Tensor:
    """A projection's bias, per-head q/k norm and rotation (y: (B, heads, T, d_head))."""
    b = (hw.b_Q, hw.b_K, hw.b_V)[which]
    if b is not None:
        y = y + b.to(y.dtype)[None, :, None]
    qk_norm = (hw.q_norm, hw.k_norm, None)[which]
    if qk_norm is not None:  # Qwen 3: a norm over each head's d_head
        y = qk_norm(y).to(y.dtype)
    if which < 2 and hw.rotate is not None:  # q and k turn with their position
        B, n, T, _ = y.shape
        y = torch.stack([hw.rotate(y[:, :, t].reshape(B * n, -1), t).view(B, n, -1)
                         for t in range(T)], dim=2)
    return y


# ---- the senders of a run ------------------------------------------------------------------
@dataclass(frozen=True)
class Heads:
    """A block's heads as senders, copy 0 of a run: their z (T, H, d_v) float32 and W_O (H,
    d, d_v); head h writes z[:, h] W_O[h]^T into the stream. Kept as z, the difference of two
    runs' outputs is one product, (z - z') W_O, not two products and a subtraction of their
    (H, T, d) outputs."""

    z: torch.Tensor
    W_O: torch.Tensor


Part = torch.Tensor | Heads  # (1, T, d) float32: an embedding or an MLP's output; or a block


def assemble(parts: list[Part], less: list[Part] | None = None) -> torch.Tensor:
    """The senders' outputs (S, T, d) float32, in order; with ``less`` (the same senders of
    another run) the difference parts - less."""
    T, d = parts[0].shape[1:]
    rows = sum(p.z.shape[1] if isinstance(p, Heads) else len(p) for p in parts)
    out = torch.empty(rows, T, d, dtype=torch.float32, device=parts[0].device)
    i = 0
    for k, p in enumerate(parts):
        n = p.z.shape[1] if isinstance(p, Heads) else len(p)
        if isinstance(p, Heads):
            z = p.z if less is None else p.z - less[k].z
            torch.bmm(z.transpose(0, 1), p.W_O.detach().float().transpose(1, 2),
                      out=out[i:i + n])  # (H, T, d_v) x (H, d_v, d)
        elif less is None:
            out[i:i + n].copy_(p)
        else:
            torch.sub(p, less[k], out=out[i:i + n])
        i += n
    return out


def _agrees(own: torch.Tensor | None, m: torch.Tensor, final: torch.Tensor) -> bool:
    """Whether the metric read off the final stream (``own``, per copy) is the model's own
    ``m`` for every copy: within float32 rounding, or a low-precision model's head's."""
    if own is None or own.shape != m.shape:
        return False
    tol = (1e-4 if final.dtype == torch.float32 else 3e-2) * (1 + float(m.detach().abs().max()))
    return float((own.detach() - m.detach()).abs().max()) <= tol


# ---- one model and one pair ----------------------------------------------------------------
@dataclass
class Context:
    """One model and one pair, ready for passes: the graph, the weights, the metric, the
    corrupted run's senders (``corrupted_parts``; ``corrupted``: their outputs per stack,
    (S_stack, T, d), made on first use) and ``difference``, the clean run's sender outputs
    less the corrupted run's (None until the clean run)."""

    subject: PatchSubject
    graph: Graph
    weights: dict
    layers: list[str]
    encoder_norm: Callable | None = None
    token: object = None
    against: object = None
    metric: Metric | None = None
    corrupted_parts: dict[str, list[Part]] = field(default_factory=dict)
    difference: dict[str, torch.Tensor] | None = None
    corrupted_out: torch.Tensor | None = None  # the corrupted run's readout (None: not run)
    corrupted_final: torch.Tensor | None = None  # its final stream (B, T, d)
    # the model's final norm (NormSpec or None) and its ``unembedding`` method, where its
    # logits are final_norm(x) W_U^T + b (no softcap): a logit metric's gradient can then be
    # read off two rows of W_U (``head_metric``)
    head: tuple | None = None
    _corrupted: dict[str, torch.Tensor] | None = field(default=None, repr=False)
    _rows: tuple | None = field(default=None, repr=False)  # (ids, head, W_U rows, b_U rows)
    m_clean: float = 0.0
    m_corrupted: float = 0.0

    @property
    def gap(self) -> float:
        return self.m_clean - self.m_corrupted

    @property
    def corrupted(self) -> dict[str, torch.Tensor]:
        """stack -> the corrupted run's sender outputs (S_stack, T, d) float32."""
        if self._corrupted is None:
            self._corrupted = {s: assemble(parts) for s, parts in self.corrupted_parts.items()}
        return self._corrupted

    @property
    def clean(self) -> dict[str, torch.Tensor] | None:
        """stack -> the clean run's sender outputs (S_stack, T, d) float32 (None before it)."""
        if self.difference is None:
            return None
        return {s: self.corrupted[s] + d for s, d in self.difference.items()}

    def head_values(self, final: torch.Tensor | None) -> torch.Tensor | None:
        """The metric of each copy (B,) float32, read off the final stream ``final`` (B, T,
        d) at the metric's position through the model's final norm and the rows of W_U of
        the metric's tokens (None: no such head, or a metric of no token)."""
        if self.head is None or final is None or not self.metric.ids:
            return None
        norm, unembedding = self.head
        ids = self.metric.ids
        if self._rows is None or self._rows[0] != ids or self._rows[1] is not self.head:
            w_u, b_u = unembedding()  # the metric's rows, once per metric and head
            self._rows = (ids, self.head, w_u[list(ids)].detach().float().to(final.device),
                          None if b_u is None else b_u[list(ids)].detach().float()
                          .to(final.device))
        _, _, rows, bias = self._rows
        x = final[:, self.subject.position]
        h = x.float() if norm is None else norm(x)
        own = h @ rows.T  # (B, tokens)
        if bias is not None:
            own = own + bias
        return own[:, 0] - own[:, 1] if len(ids) == 2 else own[:, 0]

    def head_metric(self, readout: torch.Tensor, final: torch.Tensor | None) -> torch.Tensor:
        """The metric of a pass's copies, summed, to differentiate: ``head_values`` where
        they are the model's own values (its readout) for every copy, else the readout's. A
        logit is linear in its row of W_U: the backward then reads one or two rows, not the
        whole (vocab, d) matrix (GPT-2's is 154 MB: 16 ms of a 470 ms EAP call on one
        core)."""
        m = self.metric.fn(readout)
        own = self.head_values(final)
        # else the head is more than the norm and W_U: through the model's own
        return own.sum() if _agrees(own, m, final) else m.sum()

    def corrupted_embed(self, stack: str) -> torch.Tensor:
        """The corrupted run's embedding (T, d) of one stack."""
        return self.corrupted_parts[stack][0][0]

    def width_per_copy(self) -> int:
        g = self.graph
        extra = sum(len(gr.rows) * t.shape[0] * t.shape[1] for gr in g.groups
                    for t in [self.corrupted_embed(gr.stack)])
        return max(self.subject.width_per_copy, 1) + 2 * extra // max(1, len(self.layers))

    def clean_readout(self, readout: torch.Tensor, parts: dict[str, list[Part]],
                      final: torch.Tensor | None = None) -> None:
        """The clean run's readout (one copy), senders (``Pass.parts``) and final stream:
        the difference, the metric and its gap. The corrupted run's metric is read off its
        final stream where the clean run's ``head_values`` are its own (that run stopped
        there: the head's (vocab, d) product is most of a step at a big vocabulary), else
        from its readout (run here if it was not)."""
        readout = readout.detach()
        self.difference = {s: assemble(p, self.corrupted_parts[s]) for s, p in parts.items()}
        self.metric = make_metric(self.subject, readout, self.token, self.against)
        m = self.metric.fn(readout)
        self.m_clean = float(m[0])
        with torch.no_grad():
            own = self.head_values(final)
            if self.corrupted_out is None and _agrees(own, m, final):
                # both runs' metric read the same way, off their final streams
                self.m_clean = float(own[0])
                self.m_corrupted = float(self.head_values(self.corrupted_final)[0])
            else:
                if self.corrupted_out is None:  # it stopped at its final stream: its logits
                    self.corrupted_out = Pass(self, Plan()).run("corrupted", 1)
                self.m_corrupted = float(self.metric.fn(self.corrupted_out)[0])
        try:
            _check_gap(self.m_clean, self.m_corrupted, self.metric)
        except InputError as err:
            unknown = sum(t in UNKNOWN for t in [*self.subject.clean_tokens,
                                                 *self.subject.corrupted_tokens])
            if not unknown:
                raise
            raise InputError(N_("{err} ({unknown} words are not in this model's vocabulary and "
                               "read as the same unknown token in both texts.)"),
                                 err=err, unknown=unknown) from err


def prepare(model, clean: str, corrupted: str, target, token, against,
            run_clean: bool = True) -> Context:
    """The context of one pair: checks the model, runs the corrupted input (and the clean
    one unless ``run_clean`` is False: EAP's gradient pass is the clean run)."""
    subject = model.patching_subject(clean, corrupted, target, -1)
    layers = list(subject.layers)
    weights = {b: model.head_weights(b) for b in subject.blocks}
    for block, hw in weights.items():
        if (hw.q_norm is not None or hw.k_norm is not None) and not hw.qk_norm_per_head:
            raise InputError(N_("{block} normalises all its heads' queries and keys together, so "
                               "one head's input changes the others': edge attribution needs "
                               "each head to read on its own."), block=block)
    for layer in layers:
        if f"{layer}.self" not in weights:
            raise InputError(N_("Edge attribution needs a self-attention block in every layer; "
                               "{layer} has none."), layer=layer)
    kv = {b: hw.W_K.shape[0] for b, hw in weights.items()}
    graph = Graph.build(layers, dict(subject.blocks), kv)
    ctx = Context(subject, graph, weights, layers, token=token, against=against)
    if subject.readout == "logits" and model.logit_softcap() is None:
        ctx.head = (model.final_norm(), model.unembedding)
    if "encoder" in graph.offset:
        norm = model.final_norm("encoder")
        ctx.encoder_norm = norm if norm is not None else (lambda x: x)
    with torch.no_grad():
        plan = Plan()
        # EAP's and EAP-IG's corrupted run ends at its final stream, its metric read there
        # (float32: the same value as the model's head to ~1e-6; exact patching compares
        # every patched run's logits with it, so there it runs to its logits)
        plan.stop_at_final = ctx.head is not None and not run_clean and all(
            hw.W_Q.dtype == torch.float32 for hw in weights.values())
        p = Pass(ctx, plan)
        ctx.corrupted_out = p.run("corrupted", 1)
        ctx.corrupted_parts, ctx.corrupted_final = p.parts, p.final
        if run_clean:
            p = Pass(ctx, Plan())
            ctx.clean_readout(p.run("clean", 1), p.parts, p.final)
    return ctx
