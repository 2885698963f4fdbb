"""One capture path for every model: each attention call keeps q, k, v and its real mask.

Every attention block of every model Attention Lab shows computes its output in ``attend``:

- our own Transformer's MultiHeadAttention calls it directly;
- Hugging Face models call ``hf_attention``, registered with transformers' attention interface
  under the name ``"attention_lab"`` (the models are loaded with that implementation). It
  receives q, k and v *after* rotary embeddings, per key/value head (grouped-query attention),
  the model's real mask (padding, causal, sliding window), T5's relative position bias, the
  scaling and any logit softcap, and unpacks them into ``attend``.

``attend`` always computes the output with PyTorch's SDPA kernel (or, where SDPA cannot
express the model's attention, i.e. logit softcapping, with the written-out formula below),
so a traced forward costs about what an untraced one does. When the running call has a
``Recorder`` (a ContextVar: per thread and per call, so concurrent sessions never see each
other's), the call also keeps references to q, k, (v), the mask and the output z. Nothing
N x N is built here: patterns and scores are computed later, on first read, by
``viz_core.capture.trace`` with the functions at the end of this module. Head ablation goes through
the same function: the recorder names heads whose output is zeroed, and activation patching
replaces heads' outputs (``Recorder.edit_z``) there too.

Mask convention (docs/ARCHITECTURE.md): bool, True = this query may NOT attend to this key.
SDPA and Hugging Face use the opposite (True = may attend); ``MaskSpec`` converts once, in
``blocked_rows`` (ours) and ``sdpa_mask`` (theirs).
"""

from __future__ import annotations

import contextlib
from collections.abc import Callable, Iterator, Mapping, Sequence
from contextvars import ContextVar
from dataclasses import dataclass, field

import torch
import torch.nn.functional as F

IMPLEMENTATION = "attention_lab"  # the name registered with transformers
EXPLICIT_CHUNK_BYTES = 64 << 20  # float32 scores of one chunk of the written-out formula


# ---- masks -----------------------------------------------------------------------------
@dataclass
class MaskSpec:
    """Which keys each query of one attention call may not see, in its cheapest form.

    The union of: ``allowed`` (a model's own dense mask, SDPA convention True = may attend,
    shape (B|1, Tq, Tk); a view, shared by the layers that use it), ``key_pad`` (B, Tk) True
    = padding key, and ``causal`` (key j blocked for query i when j > i + Tk - Tq: the queries
    are the last Tq of Tk positions, as in incremental decoding).
    """

    n_queries: int
    n_keys: int
    allowed: torch.Tensor | None = None
    key_pad: torch.Tensor | None = None
    causal: bool = False

    def row(self, b: int) -> MaskSpec:
        """The mask of batch row b (views, no copy)."""
        def pick(t):
            return None if t is None else t[min(b, t.shape[0] - 1):][:1]
        return MaskSpec(self.n_queries, self.n_keys, pick(self.allowed), pick(self.key_pad),
                        self.causal)

    def select(self, index: torch.Tensor) -> MaskSpec:
        def pick(t):
            return t if t is None or t.shape[0] == 1 else t[index]
        return MaskSpec(self.n_queries, self.n_keys, pick(self.allowed), pick(self.key_pad),
                        self.causal)

    def blocked_rows(self, r0: int, r1: int, device=None) -> torch.Tensor | None:
        """bool (B|1, r1 - r0, Tk), True = blocked, for query rows r0..r1; None = nothing."""
        out = None
        if self.allowed is not None:
            out = ~self.allowed[:, r0:r1]  # convert SDPA's convention to ours, here only
        if self.key_pad is not None:
            pad = self.key_pad[:, None, :]
            out = pad if out is None else out | pad
        if self.causal:
            dev = device if out is None else out.device
            offset = self.n_keys - self.n_queries
            q_pos = torch.arange(r0, r1, device=dev)[:, None] + offset
            k_pos = torch.arange(self.n_keys, device=dev)[None, :]
            c = (k_pos > q_pos)[None]
            out = c if out is None else out | c
        if out is not None and out.shape[1] != r1 - r0:
            out = out.expand(out.shape[0], r1 - r0, self.n_keys)
        return out

    def sdpa_mask(self) -> tuple[torch.Tensor | None, bool]:
        """(attn_mask for SDPA, True = may attend, shape (B|1, 1, Tq, Tk), is_causal)."""
        if self.allowed is None and self.key_pad is None:
            # SDPA's is_causal is top-left aligned: right only when Tq == Tk.
            if not self.causal or self.n_queries == 1:
                return None, False
            if self.n_queries == self.n_keys:
                return None, True
        blocked = self.blocked_rows(0, self.n_queries)
        return ~blocked[:, None], False  # ours -> SDPA's convention


# ---- what one call keeps ---------------------------------------------------------------
@dataclass
class Record:
    """One attention call of one block, batch-first, on the model's device."""

    q: torch.Tensor  # (B, H, Tq, d)
    k: torch.Tensor  # (B, Hkv, Tk, d): per key/value head, before any GQA repetition
    v: torch.Tensor | None  # (B, Hkv, Tk, d_v)
    z: torch.Tensor | None  # (B, Tq, H, d_v): each head's output (after ablation)
    mask: MaskSpec
    scaling: float
    bias: torch.Tensor | None = None  # (B|1, H|1, Tq, Tk) added to the scores (T5)
    softcap: float | None = None  # logits -> tanh(logits / cap) * cap (Gemma 2)
    window: int | None = None  # sliding window size, for labels (the mask already has it)


@dataclass
class Recorder:
    """What the running call keeps and changes. One per call; never stored on a model."""

    keep: Callable[[str], bool] | None = None  # blocks to record (None: none)
    points: frozenset = frozenset()  # of "v", "z" besides q and k
    ablate: Mapping[str, Sequence[int]] = field(default_factory=dict)  # block -> heads
    # id(HF attention module) -> its block name, or the names of its successive calls in one
    # forward pass (ALBERT calls one shared module in every layer)
    names: Mapping[int, str | list[str]] = field(default_factory=dict)
    # None: the fast path. "explicit": the written-out formula instead of SDPA (the native
    # model's reference run); "transformers": transformers' own attention function
    # untouched (a Hugging Face model's reference run). See Backend.check_faithfulness.
    reference: str | None = None
    records: dict[str, list[Record]] = field(default_factory=dict)
    # False: the running call sees no position information (the order-blindness demo): our
    # models add no positional table and rotate nothing, T5's relative bias is dropped here
    # (Hugging Face models with absolute positions get all-zero position ids instead).
    positions: bool = True
    # The residual stream and the sublayer outputs (see ``note``): kept only when True.
    stream: bool = False
    # (id(HF module), point) -> its layer name, or the names of its successive calls
    stream_names: Mapping[tuple[int, str], str | list[str]] = field(default_factory=dict)
    # layer ("encoder.0") -> point ("in", "self", "self.norm", "ffn", "out", ...) -> tensor
    states: dict[str, dict[str, torch.Tensor]] = field(default_factory=dict)
    # Activation patching (viz_core.analysis.patching): block -> function(z) -> new z, applied
    # after ablation; (layer, point) -> function(stream tensor) -> new tensor, applied where
    # the point is noted (our model) or by the stream hooks (Hugging Face). Per call, like
    # everything here: the functions hold the patch values, never a module.
    edit_z: Mapping[str, Callable[[torch.Tensor], torch.Tensor]] = field(default_factory=dict)
    edit_stream: Mapping[tuple[str, str], Callable[[torch.Tensor], torch.Tensor]] = field(
        default_factory=dict)
    # Edge attribution (viz_core.analysis.edges): (layer, kind) -> function(x, h, norm) -> new
    # h, what a pre-norm sublayer reads (x: the stream entering its norm, h = norm(x), norm:
    # the norm itself); block -> function(q, k, v) -> (q, k, v), applied in ``attend`` before
    # the output is computed (each head's q/k/v from its own input). Per call, like the rest.
    edit_read: Mapping[tuple[str, str], Callable] = field(default_factory=dict)
    edit_qkv: Mapping[str, Callable] = field(default_factory=dict)

    calls: dict = field(default_factory=dict)

    def wants(self, name: str | None) -> bool:
        return name is not None and self.keep is not None and self.keep(name)

    def name_for(self, module) -> str | None:
        """The block an HF attention module's call is (call order if shared)."""
        return self._in_call_order(self.names.get(id(module)), id(module))

    def layer_for(self, module, point: str) -> str | None:
        """The layer a stream hook of this module is running for (call order if shared)."""
        key = (id(module), point)
        return self._in_call_order(self.stream_names.get(key), key)

    def _in_call_order(self, names: str | list[str] | None, key) -> str | None:
        if names is None or isinstance(names, str):
            return names
        i = self.calls.get(key, 0)
        self.calls[key] = i + 1
        return names[i % len(names)]


def call_names(pairs) -> dict:
    """(key, name) pairs -> {key: name}, or {key: [names in call order]} for a key named
    more than once (one module serving several layers, as in ALBERT)."""
    out: dict = {}
    for key, name in pairs:
        prev = out.get(key)
        out[key] = name if prev is None else [*([prev] if isinstance(prev, str) else prev),
                                              name]
    return out


_RECORDER: ContextVar[Recorder | None] = ContextVar("attention_lab_recorder", default=None)


@contextlib.contextmanager
def recording(recorder: Recorder | None) -> Iterator[Recorder | None]:
    """Run the block's model calls with this recorder (this thread / context only)."""
    token = _RECORDER.set(recorder)
    try:
        yield recorder
    finally:
        _RECORDER.reset(token)


# ---- the residual stream around each attention block -------------------------------------
# Points of one layer, in model order. "in"/"out": the residual stream entering / leaving the
# layer; "self", "cross", "ffn": a sublayer's output (after W_O, after the feed-forward's W_2),
# before dropout and the residual add; "<kind>.norm": the output of the norm that belongs to
# that sublayer (pre-norm: its input; post-norm: the stream after the add);
# "<kind>.post_norm": a norm applied to the sublayer's output before the add (Gemma 2/3,
# OLMo 2). Which of these a model has depends on where it puts its norms (norm_placement).
STREAM_POINTS = ("in", "self.norm", "self", "self.post_norm", "cross.norm", "cross",
                 "cross.post_norm", "ffn.norm", "ffn", "ffn.post_norm", "out")


def positions_on() -> bool:
    """Whether the running call uses positions (see Recorder.positions)."""
    rec = _RECORDER.get()
    return rec is None or rec.positions


def note(layer: str, point: str, x: torch.Tensor) -> torch.Tensor:
    """Keep (a reference to) one stream tensor (B, T, d) when the running call asks for it.
    Returns the tensor the model goes on with: ``x``, or the running call's replacement for
    this point (activation patching; ``Recorder.edit_stream``), which is also what is kept."""
    rec = _RECORDER.get()
    if rec is None:
        return x
    edit = rec.edit_stream.get((layer, point)) if rec.edit_stream else None
    if edit is not None:
        x = edit(x)
    if rec.stream:
        rec.states.setdefault(layer, {})[point] = x.detach()
    return x


def read(layer: str, kind: str, x: torch.Tensor, h: torch.Tensor, norm) -> torch.Tensor:
    """What a pre-norm sublayer reads: ``h = norm(x)``, or the running call's replacement
    (``Recorder.edit_read``: edge attribution gives a sublayer an input of its own)."""
    rec = _RECORDER.get()
    if rec is None or not rec.edit_read:
        return h
    edit = rec.edit_read.get((layer, kind))
    return h if edit is None else edit(x, h, norm)


def install_stream_hooks(points: Sequence[tuple[str, str, torch.nn.Module]]) -> dict:
    """Forward hooks that call ``note`` for Hugging Face modules: (layer, point, module).

    Installed once, when a model is loaded (before it serves anyone); they keep nothing
    themselves and do nothing unless the running call's recorder asks for the stream.
    Returns the recorder's ``stream_names`` map for these modules.
    """
    hooked = set()
    for _, point, module in points:
        if (id(module), point) not in hooked:  # a shared module (ALBERT) is hooked once
            hooked.add((id(module), point))
            _hook(module, point)
    return call_names(((id(module), point), layer) for layer, point, module in points)


def _first(x):
    return x[0] if isinstance(x, (tuple, list)) else x


def _hook(module: torch.nn.Module, point: str) -> None:
    reads = point.endswith(".norm")  # a pre-norm sublayer's norm: what it reads (``read``)

    def keep(layer_module, value, x=None):
        """None (nothing changes), or the running call's replacement of ``value``."""
        rec = _RECORDER.get()
        if rec is None or not (rec.stream or rec.edit_stream or (reads and rec.edit_read)):
            return None
        layer = rec.layer_for(layer_module, point)
        if layer is None or not isinstance(value, torch.Tensor):
            return None
        new = note(layer, point, value)
        if reads and rec.edit_read and isinstance(x, torch.Tensor):
            # the norm without its hooks (``forward``): calling the module would run this again
            new = read(layer, point[: -len(".norm")], x, new, layer_module.forward)
        return None if new is value else new

    if point == "in":
        def pre(mod, args, kwargs):
            if args:
                new = keep(mod, args[0])
                return None if new is None else ((new, *args[1:]), kwargs)
            new = keep(mod, kwargs.get("hidden_states"))
            return None if new is None else (args, {**kwargs, "hidden_states": new})
        module.register_forward_pre_hook(pre, with_kwargs=True)
    else:
        def post(mod, args, kwargs, out):
            x = args[0] if args else kwargs.get("hidden_states")
            new = keep(mod, _first(out), x)
            if new is None:
                return None
            return (new, *out[1:]) if isinstance(out, tuple) else new
        module.register_forward_hook(post, with_kwargs=True)


# ---- the attention function ------------------------------------------------------------
def attend(name: str | None, q: torch.Tensor, k: torch.Tensor, v: torch.Tensor,
           mask: MaskSpec, scaling: float, *, bias: torch.Tensor | None = None,
           softcap: float | None = None, window: int | None = None,
           dropout: float = 0.0) -> torch.Tensor:
    """Attention(Q, K, V) = softmax(Q K^T * scaling + bias [masked]) V for every head.

    q (B, H, Tq, d); k, v (B, Hkv, Tk, d) with H a multiple of Hkv. Returns z (B, Tq, H, d_v),
    each head's output side by side (the input of the output projection). Fully blocked query
    rows give zeros, never NaN.
    """
    rec = _RECORDER.get()
    if rec is not None and rec.edit_qkv and name is not None:
        edit = rec.edit_qkv.get(name)
        if edit is not None:  # edge attribution: each head's q, k, v from its own input
            q, k, v = edit(q, k, v)
    explicit = softcap is not None or (rec is not None and rec.reference == "explicit")
    z = _output(q, k, v, mask, scaling, bias, softcap, dropout, explicit)  # (B, Tq, H, d_v)
    if rec is None or name is None:
        return z
    heads = rec.ablate.get(name)
    if heads:
        z = z.clone()
        z[:, :, list(heads)] = 0
    edit = rec.edit_z.get(name) if rec.edit_z else None
    if edit is not None:  # activation patching: the clean run's z for some heads
        z = edit(z)
    if rec.wants(name):
        rec.records.setdefault(name, []).append(Record(
            q=q, k=k, v=v if "v" in rec.points or "z" in rec.points else None,
            z=z if "z" in rec.points else None, mask=mask, scaling=float(scaling), bias=bias,
            softcap=softcap, window=window))
    return z


def _output(q, k, v, mask: MaskSpec, scaling, bias, softcap, dropout, explicit) -> torch.Tensor:
    group = q.shape[1] // k.shape[1]
    if explicit:
        # The written-out formula (the one the views use): for models whose logits SDPA
        # cannot express (softcap) and for reference runs. In query-row chunks, so its
        # float32 scores never take more than EXPLICIT_CHUNK_BYTES at once.
        kk, vv = _repeat(k, group), _repeat(v, group)
        B, H, Tq, Tk = q.shape[0], q.shape[1], q.shape[2], k.shape[2]
        step = max(1, EXPLICIT_CHUNK_BYTES // max(1, 4 * B * H * Tk))
        out = []
        for r0 in range(0, Tq, step):
            r1 = min(Tq, r0 + step)
            blocked = mask.blocked_rows(r0, r1, q.device)  # (B|1, r, Tk)
            b = None if bias is None else bias[..., r0:r1, :]
            p = softmax_rows(scores_of(q[:, :, r0:r1], kk, scaling, b, softcap),
                             None if blocked is None else blocked[:, None])
            out.append(p.to(vv.dtype) @ vv)  # (B, H, r, d_v)
        return torch.cat(out, dim=2).transpose(1, 2)
    attn_mask, is_causal = mask.sdpa_mask()
    if bias is not None:
        add = bias.to(q.dtype)
        if attn_mask is not None:
            add = add.masked_fill(~attn_mask, float("-inf"))
        elif is_causal:
            add = add.masked_fill(~torch.ones(mask.n_queries, mask.n_keys, dtype=torch.bool,
                                              device=q.device).tril(), float("-inf"))
        attn_mask, is_causal = add, False
    extra = {}
    if group > 1:
        extra["enable_gqa"] = True
    z = F.scaled_dot_product_attention(q, k, v, attn_mask=attn_mask, dropout_p=dropout,
                                       is_causal=is_causal, scale=scaling, **extra)
    if attn_mask is not None:
        # fully blocked rows: SDPA returns NaN there; ours are zeros
        if attn_mask.dtype == torch.bool:
            empty = ~attn_mask.any(-1, keepdim=True)
        else:
            empty = torch.isinf(attn_mask).all(-1, keepdim=True)
        z = z.masked_fill(empty, 0.0)
    return z.transpose(1, 2)  # (B, Tq, H, d_v)


def _repeat(x: torch.Tensor, group: int) -> torch.Tensor:
    """(B, Hkv, T, d) -> (B, Hkv * group, T, d): query head h reads key/value head h // group."""
    return x if group == 1 else x.repeat_interleave(group, dim=1)


def hf_attention(module, query, key, value, attention_mask, dropout: float = 0.0,
                 scaling: float | None = None, is_causal: bool | None = None,
                 position_bias: torch.Tensor | None = None, softcap: float | None = None,
                 sliding_window: int | None = None, **kwargs):
    """transformers' attention-interface signature -> ``attend``; returns (output, None).

    The mask arrives as built by transformers' SDPA mask function (bool, True = may attend,
    (B, 1, Tq, Tk), sliding windows included) or None, in which case the call is causal when
    SDPA's would be (more than one query and a causal module), exactly as transformers decides.
    """
    if kwargs.get("s_aux") is not None:
        raise NotImplementedError("attention sinks (s_aux) are not supported")
    rec = _RECORDER.get()
    tq, tk = query.shape[2], key.shape[2]
    if scaling is None:
        scaling = query.shape[-1] ** -0.5
    causal_flag = is_causal if is_causal is not None else getattr(module, "is_causal", True)
    spec = MaskSpec(tq, tk)
    if attention_mask is None:
        spec.causal = bool(tq > 1 and causal_flag)
    elif attention_mask.dtype == torch.bool:
        spec.allowed = attention_mask[:, 0]  # (B, Tq, Tk) view
    else:  # an additive float mask: -inf / finfo.min = blocked, anything else a bias
        allowed = attention_mask > torch.finfo(attention_mask.dtype).min / 2
        spec.allowed = allowed[:, 0]
        extra = attention_mask.masked_fill(~allowed, 0)
        if rec is None or rec.reference != "transformers":
            position_bias = extra if position_bias is None else position_bias + extra
    if rec is not None and not rec.positions:
        position_bias = None  # T5: its relative bias is its only position information
    if rec is not None and rec.reference == "transformers":
        return _transformers_own(module, query, key, value, attention_mask, dropout, scaling,
                                 is_causal, position_bias, softcap, kwargs, spec)
    name = rec.name_for(module) if rec is not None else None
    z = attend(name, query, key, value, spec, float(scaling), bias=position_bias,
               softcap=softcap, window=sliding_window, dropout=dropout)
    return z, None


def _transformers_own(module, query, key, value, attention_mask, dropout, scaling, is_causal,
                      position_bias, softcap, kwargs, spec: MaskSpec):
    """The reference: transformers' SDPA function, or the model's own eager one (softcap)."""
    import sys

    from transformers.integrations.sdpa_attention import sdpa_attention_forward

    if softcap is not None:
        eager = sys.modules[type(module).__module__].eager_attention_forward
        # The eager functions add a float mask and have no causal flag: give them one built
        # from the same MaskSpec (SDPA's mask function may have left the causal mask out).
        blocked = spec.blocked_rows(0, spec.n_queries, query.device)
        if blocked is not None:
            attention_mask = torch.zeros(blocked.shape, dtype=query.dtype,
                                         device=query.device).masked_fill(
                blocked, torch.finfo(query.dtype).min)[:, None]
        return eager(module, query, key, value, attention_mask, dropout=dropout,
                     scaling=scaling, softcap=softcap, **kwargs)
    return sdpa_attention_forward(module, query, key, value, attention_mask, dropout=dropout,
                                  scaling=scaling, is_causal=is_causal,
                                  position_bias=position_bias, **kwargs)


def full_pattern(rec: Record, what: str = "pattern") -> torch.Tensor:
    """float32 (B, H, Tq, Tk): every head's pattern (or scores) of a record, all at once.
    For tests and small inputs; the views use viz_core.capture.trace's lazy, chunked reads."""
    k = _repeat(rec.k, rec.q.shape[1] // rec.k.shape[1])
    s = scores_of(rec.q, k, rec.scaling, rec.bias, rec.softcap)
    if what == "scores":
        return s
    blocked = rec.mask.blocked_rows(0, rec.q.shape[2], rec.q.device)
    return softmax_rows(s, None if blocked is None else blocked[:, None])


def last_query_pattern(rec: Record) -> torch.Tensor:
    """float32 (B, H, Tk): the attention of each example's last query (beam search)."""
    tq = rec.q.shape[2]
    k = _repeat(rec.k, rec.q.shape[1] // rec.k.shape[1])
    bias = None if rec.bias is None else rec.bias[..., -1:, :]
    s = scores_of(rec.q[:, :, -1:], k, rec.scaling, bias, rec.softcap)  # (B, H, 1, Tk)
    blocked = rec.mask.blocked_rows(tq - 1, tq, rec.q.device)  # (B|1, 1, Tk)
    return softmax_rows(s, None if blocked is None else blocked[:, None])[:, :, 0]


_registered = False


def register_with_transformers() -> str:
    """Register ``hf_attention`` (and SDPA's mask builder) as "attention_lab"; idempotent."""
    global _registered
    if not _registered:
        from transformers import AttentionInterface
        from transformers.masking_utils import AttentionMaskInterface, sdpa_mask

        AttentionInterface.register(IMPLEMENTATION, hf_attention)
        AttentionMaskInterface.register(IMPLEMENTATION, sdpa_mask)
        _registered = True
    return IMPLEMENTATION


# ---- the written-out formula, used for every view (lazily, in row chunks) -------------
def scores_of(q: torch.Tensor, k: torch.Tensor, scaling: float, bias: torch.Tensor | None,
              softcap: float | None) -> torch.Tensor:
    """float32 (..., Tq, Tk): q k^T * scaling, softcapped, plus the bias; before masking."""
    s = (q.float() @ k.float().transpose(-1, -2)).mul_(scaling)
    if softcap is not None:
        s = torch.tanh(s / softcap) * softcap  # not in place: tanh's backward reads its output
    if bias is not None:
        s = s + bias.float()
    return s


def softmax_rows(scores: torch.Tensor, blocked: torch.Tensor | None) -> torch.Tensor:
    """float32 softmax over keys; blocked cells exactly 0, fully blocked rows all 0.
    ``scores`` is consumed (masked in place): pass a fresh tensor, as scores_of returns."""
    if blocked is None:
        return torch.softmax(scores, dim=-1)
    p = torch.softmax(scores.masked_fill_(blocked, float("-inf")), dim=-1)  # in place
    empty = blocked.all(-1, keepdim=True)  # a fully blocked row is 0/0: all zeros instead
    if empty.device.type != "cpu" or bool(empty.any()):
        # in place, unless autograd will need softmax's output (its backward reads it)
        p = p.masked_fill(empty, 0.0) if p.requires_grad else p.masked_fill_(empty, 0.0)
    return p
