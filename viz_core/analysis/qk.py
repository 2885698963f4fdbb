"""Why a head attends where it does: one pre-softmax score split into component pairs.

The score of query i on key j in head h of a self-attention block is

    s = scaling * q_i . k_j  (+ a position bias, T5)

with q_i = R_i q_norm(W_Q norm(x_i) + b_Q) and k_j likewise (R: the rotation of rotary
models). The stream x entering the block is a sum of components (embeddings, position rows,
each earlier head, each earlier MLP, biases: contributions.stream_components). With the
block norm's scale and any q/k norm's scale frozen at the real run's values, every step is
linear, so q_i = sum_c q_c and k_j = sum_c' k_c', and

    s = sum_{c, c'} scaling * q_c . k_c'  (+ bias)

exactly: one term per (query component, key component), plus the bias terms (the norm's
bias through W_Q, W_Q's own bias) as a component named "bias" on each side, and T5's relative
position bias as its own row. For a model that softcaps its attention logits (Gemma 2) the
terms add up to the score before the cap (``QKAttribution.score``); the capped value is
``softcapped_score``.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import pandas as pd
import torch

from viz_core.i18n import N_, Message

from ..errors import InputError
from ..model.choices import Side, choose, whole
from .contributions import (
    check_decomposable,
    check_position,
    decoder_layers,
    recorded,
    run,
    stream_components,
)
from .parts import HeadWeights, NormSpec

POSITION_BIAS = "position bias"
CROSS = N_("QK attribution covers self-attention blocks; the keys of {block!r} come from the "
           "encoder's output, not from this stream.")


@dataclass
class QKAttribution:
    """frame: query_component, key_component, contribution (one row per pair, plus the
    position-bias row where the model has one); score: the model's own score of the cell
    (before any softcap); the contributions add up to it."""

    frame: pd.DataFrame
    score: float
    block: str
    head: int
    query: int
    key: int
    query_token: str
    key_token: str
    softcapped_score: float | None = None
    masked: bool = False  # the mask blocks this cell (its score exists, its weight is 0)
    note: str = ""
    warnings: list[str] = field(default_factory=list)

    def by(self, side: Side = "key") -> pd.Series:
        """Total contribution per key (or query) component, largest first."""
        side = choose(side, Side, "side")
        col = "key_component" if side == "key" else "query_component"
        return self.frame.groupby(col, sort=False)["contribution"].sum().sort_values(
            ascending=False)


# ---- the steps ---------------------------------------------------------------------------
def _check_block(trace, block) -> tuple[str, int]:
    """(stack, layer number) of a self-attention block of this trace; InputError otherwise."""
    if not isinstance(block, str) or block not in trace.blocks:
        raise InputError(N_("{block!r} is not a block of this model; its blocks are {list}."),
                            block=block, list=list(trace.blocks))
    stack, number, kind = block.split(".")
    if kind != "self":
        raise InputError(CROSS, block=block)
    return stack, int(number)


def _check_head(head, n: int) -> int:
    h = whole(head, "head")
    if not 0 <= h < n:
        raise InputError(N_("This block has heads 0..{value}; no head {h}."), value=n - 1, h=h)
    return h


@dataclass(frozen=True)
class _Stream:
    """The stream entering the block at the query and the key position, as components,
    through the block's input norm (its scale frozen at the run's value)."""

    vectors: torch.Tensor  # (C, 2, d): [:, 0] at the query position, [:, 1] at the key
    names: list[str]  # the C components
    norm_bias: torch.Tensor | None  # (d,) the input norm's bias term, or None

    def total(self, col: int) -> torch.Tensor:
        """(d,): the normed stream at one of the two positions (every part, plus the bias)."""
        total = self.vectors[:, col].sum(0)
        return total if self.norm_bias is None else total + self.norm_bias.to(total.device)


def _normed_stream(backend, trace, stack: str, number: int, hw: HeadWeights, i: int,
                   j: int) -> _Stream:
    """The components of the stream entering layer ``stack.number`` at positions i and j
    (contributions.stream_components), through the block's norm with its real scale."""
    layers = decoder_layers(trace, stack)
    layer = f"{stack}.{number}"
    comps = stream_components(backend, trace, layers, layers.index(layer), [i, j])
    vectors = comps.vectors  # (C, 2, d)
    if hw.norm is None:
        return _Stream(vectors, list(comps.names), None)
    where = torch.tensor([i, j], device=vectors.device)
    x_in = trace.stream[layer]["in"].index_select(0, where)  # (2, d): the real input
    normed = hw.norm.linear(vectors, hw.norm.scale(x_in))  # scale frozen per position
    return _Stream(normed, list(comps.names), hw.norm.bias_term())


@dataclass(frozen=True)
class _Side:
    """One side of the score: the query (W_Q, column 0) or the key (W_K, column 1)."""

    weight: torch.Tensor  # (heads, d_head, d): W_Q of every query head, or W_K per kv head
    bias: torch.Tensor | None  # (heads, d_head): b_Q / b_K, or None
    head: int  # the query head, or the key/value head it reads
    position: int
    col: int  # its column in _Stream.vectors
    qk_norm: NormSpec | None


def _frozen_qk_norm(norm: NormSpec, parts: torch.Tensor, total: torch.Tensor,
                    sl: slice | None) -> torch.Tensor:
    """parts (C, d_head) through an RMS q/k norm with the scale of ``total`` frozen; total is
    the head's whole pre-norm vector (d_head) or, for a norm over all heads (OLMo 2), all of
    them, with sl this head's slice."""
    if norm.kind != "rms":
        raise NotImplementedError("a centring q/k norm is not supported")
    s = norm.scale(total[None])[0]  # (1,)
    w = norm.weight
    if w is not None and sl is not None:
        w = w.detach().float()[sl]
    out = parts / s
    return out if w is None else out * w.detach().float().to(out.device)


def _constant_row(stream: _Stream, side: _Side, w: torch.Tensor) -> torch.Tensor | None:
    """(d_head,): the side's part that no component carries: the input norm's bias through
    W plus W's own bias; None when there is neither."""
    row = None if stream.norm_bias is None else stream.norm_bias.to(w.device) @ w.T
    if side.bias is not None:
        b = side.bias[side.head].detach().float().to(w.device)
        row = b if row is None else row + b
    return row


def _through_qk_norm(stream: _Stream, hw: HeadWeights, side: _Side,
                     parts: torch.Tensor) -> torch.Tensor:
    """The rows through the side's q/k norm, its scale frozen at the real vector's."""
    if hw.qk_norm_per_head:
        return _frozen_qk_norm(side.qk_norm, parts, parts.sum(0), None)
    # one norm over every head's vector (OLMo 2): its scale needs them all
    every = side.weight.detach().float().to(parts.device)
    full = stream.total(side.col) @ every.flatten(0, 1).T
    if side.bias is not None:
        full = full + side.bias.detach().float().to(parts.device).flatten()
    dh = every.shape[1]
    return _frozen_qk_norm(side.qk_norm, parts, full, slice(side.head * dh, (side.head + 1) * dh))


def _project(stream: _Stream, hw: HeadWeights, side: _Side) -> tuple[torch.Tensor, bool]:
    """(rows (C [+ 1], d_head), whether the last row is the constant "bias" row): q_i or k_j
    of one head split by component, through W, the q/k norm and the rotation of its
    position; the rows add up to the model's own q_i or k_j."""
    w = side.weight[side.head].detach().float().to(stream.vectors.device)  # (d_head, d)
    parts = stream.vectors[:, side.col] @ w.T  # (C, d_head)
    constant = _constant_row(stream, side, w)
    if constant is not None:
        parts = torch.cat([parts, constant[None]])
    if side.qk_norm is not None:
        parts = _through_qk_norm(stream, hw, side, parts)
    if hw.rotate is not None:
        parts = hw.rotate(parts, side.position).float()
    return parts, constant is not None


def _pair_terms(q_parts: torch.Tensor, k_parts: torch.Tensor, q_names: list[str],
                k_names: list[str], scaling: float) -> tuple[list[str], list[str], list[float]]:
    """(query component, key component, scaling * q_c . k_c') of every pair, query-major."""
    terms = (q_parts @ k_parts.T) * scaling  # (Cq, Ck)
    qn = [a for a in q_names for _ in k_names]
    kn = [b for _ in q_names for b in k_names]
    return qn, kn, terms.reshape(-1).double().cpu().tolist()


def _position_bias(src, h: int, i: int, j: int) -> float | None:
    """The model's own position bias of the cell (T5), or None."""
    if src.bias is None:
        return None
    b = src.bias[0]
    return float(b[h if b.shape[0] > 1 else 0, i, j])


def _note(hw: HeadWeights, src) -> str:
    """What was frozen and where the extra terms are, in words for the user."""
    steps = [Message(N_("Each component of the stream through the block's norm (scale frozen "
                        "at this run's value), W_Q / W_K"))]
    if hw.rotate is not None:
        steps.append(Message(N_(" and the rotation of each position")))
    if hw.q_norm is not None:
        steps.append(Message(N_("; q/k norms' scales frozen too")))
    sentences = [Message.joined([*steps, "."], sep="")]
    if src.bias is not None:
        sentences.append(Message(N_("The model's position bias for this cell is its own row.")))
    if src.softcap is not None:
        sentences.append(Message(N_("This model caps its attention logits (tanh, cap {cap:g}): "
                                    "the terms add up to the score before the cap."),
                                 cap=src.softcap))
    return Message.joined(sentences)


def _is_masked(src, i: int, j: int) -> bool:
    blocked = src.mask.blocked_rows(i, i + 1, src.q.device)
    return bool(blocked is not None and blocked[0, 0, j])


def _warnings(trace, src, i: int, j: int, masked: bool, gap: float, score: float) -> list[str]:
    """The trace's warnings, plus a blocked cell and a sum that is off (low precision)."""
    warnings = list(trace.warnings)
    if masked:
        warnings.append(Message(N_("Query {i} may not attend to key {j} (the mask blocks it): its score "
                          "is shown before masking; its attention weight is 0."), i=i, j=j))
    if gap > 1e-4 * max(1.0, abs(score)):  # low precision: rounded sublayer outputs
        warnings.append(Message(N_("The terms add up to the score only to within {gap:.2g}: this model "
                          "runs in {removeprefix}, and each sublayer's output was rounded before "
                          "it was added to the stream."),
                            gap=gap, removeprefix=str(src.q.dtype).removeprefix('torch.')))
    return warnings


# ---- the analysis ------------------------------------------------------------------------
@torch.no_grad()
def qk_attribution(model, text: str, block: str, head: int, query: int, key: int, *,
                   target: str | None = None) -> QKAttribution:
    """Why head ``head`` of self-attention ``block`` scores key position ``key`` from query
    position ``query`` on ``text``: the pre-softmax score split into (query component x key
    component) terms that add up to it (module docstring). Pre-norm models only
    (DecompositionError otherwise); ``target`` teacher-forces a decoder's input."""
    check_decomposable(model)
    if isinstance(block, str) and block.endswith(".cross"):
        raise InputError(CROSS, block=block)  # before running the model
    trace = run(model, text, target)
    stack, number = _check_block(trace, block)
    bt = trace[block]
    h = _check_head(head, bt.n_heads)
    i = check_position(query, bt.shape[1], "query position")
    j = check_position(key, bt.shape[2], "key position")
    hw = model.head_weights(block)
    src = recorded(trace, block)
    kv = h // hw.group

    stream = _normed_stream(model, trace, stack, number, hw, i, j)
    q_parts, q_bias = _project(stream, hw, _Side(hw.W_Q, hw.b_Q, h, i, 0, hw.q_norm))
    k_parts, k_bias = _project(stream, hw, _Side(hw.W_K, hw.b_K, kv, j, 1, hw.k_norm))
    scaling = float(src.scaling)
    qn, kn, contrib = _pair_terms(q_parts, k_parts, stream.names + ["bias"] * q_bias,
                                  stream.names + ["bias"] * k_bias, scaling)
    score = float((src.q[h, i].float() @ src.k[kv, j].float()) * scaling)
    bias = _position_bias(src, h, i, j)
    if bias is not None:
        qn, kn, contrib = qn + [POSITION_BIAS], kn + [POSITION_BIAS], contrib + [bias]
        score += bias
    masked = _is_masked(src, i, j)
    frame = pd.DataFrame({"query_component": qn, "key_component": kn,
                          "contribution": contrib})
    return QKAttribution(
        frame=frame, score=score, block=block, head=h, query=i, key=j,
        query_token=bt.query_tokens[i], key_token=bt.key_tokens[j],
        softcapped_score=None if src.softcap is None else float(bt.scores[h, i, j]),
        masked=masked, note=_note(hw, src),
        warnings=_warnings(trace, src, i, j, masked, abs(sum(contrib) - score), score))
