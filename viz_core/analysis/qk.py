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

from ..errors import InputError
from .contributions import (
    _source,
    check_decomposable,
    check_position,
    decoder_layers,
    run,
    stream_components,
    whole,
)

POSITION_BIAS = "position bias"
CROSS = ("QK attribution covers self-attention blocks; the keys of {block!r} come from the "
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

    def by(self, side: str = "key") -> pd.Series:
        """Total contribution per key (or query) component, largest first."""
        col = "key_component" if side == "key" else "query_component"
        return self.frame.groupby(col, sort=False)["contribution"].sum().sort_values(
            ascending=False)


def _check_block(trace, block) -> tuple[str, int, str]:
    if not isinstance(block, str) or block not in trace.blocks:
        raise InputError(f"{block!r} is not a block of this model; its blocks are "
                         f"{list(trace.blocks)}.")
    stack, number, kind = block.split(".")
    if kind != "self":
        raise InputError(CROSS.format(block=block))
    return stack, int(number), kind


def _check_head(head, n: int) -> int:
    h = whole(head, "head")
    if not 0 <= h < n:
        raise InputError(f"This block has heads 0..{n - 1}; no head {h}.")
    return h


def _frozen_qk_norm(norm, parts: torch.Tensor, total: torch.Tensor, sl: slice | None):
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


@torch.no_grad()
def qk_attribution(backend, text: str, block: str, head: int, query: int, key: int, *,
                   target: str | None = None) -> QKAttribution:
    check_decomposable(backend)
    if isinstance(block, str) and block.endswith(".cross"):
        raise InputError(CROSS.format(block=block))  # before running the model
    trace = run(backend, text, target)
    stack, number, _ = _check_block(trace, block)
    bt = trace[block]
    h = _check_head(head, bt.n_heads)
    n_q, n_k = bt.shape[1], bt.shape[2]
    i = check_position(query, n_q, "query position")
    j = check_position(key, n_k, "key position")
    hw = backend.head_weights(block)
    src = _source(trace, block)
    layers = decoder_layers(trace, stack)
    layer = f"{stack}.{number}"
    upto = layers.index(layer)
    comps = stream_components(backend, trace, layers, upto, [i, j])
    vec = comps.vectors  # (C, 2, d)
    names = list(comps.names)
    dev = vec.device
    x_in = trace.stream[layer]["in"].index_select(0, torch.tensor([i, j], device=dev))
    norm_bias = None
    if hw.norm is not None:
        vec = hw.norm.linear(vec, hw.norm.scale(x_in))  # scale frozen per position
        norm_bias = hw.norm.bias_term()
    kv = h // hw.group

    def side(w_all: torch.Tensor, b_all, idx: int, pos: int, col: int, qk_norm):
        w = w_all[idx].detach().float().to(dev)  # (d_head, d)
        parts = vec[:, col] @ w.T  # (C, d_head)
        bias = None
        if norm_bias is not None:
            bias = norm_bias.to(dev) @ w.T
        if b_all is not None:
            b = b_all[idx].detach().float().to(dev)
            bias = b if bias is None else bias + b
        rows = [parts] + ([bias[None]] if bias is not None else [])
        parts = torch.cat(rows)
        if qk_norm is not None:
            if hw.qk_norm_per_head:
                parts = _frozen_qk_norm(qk_norm, parts, parts.sum(0), None)
            else:  # one norm over every head's vector: its scale needs them all
                full = x_total(col) @ w_all.detach().float().to(dev).flatten(0, 1).T
                if b_all is not None:
                    full = full + b_all.detach().float().to(dev).flatten()
                dh = w.shape[0]
                parts = _frozen_qk_norm(qk_norm, parts, full, slice(idx * dh, (idx + 1) * dh))
        if hw.rotate is not None:
            parts = hw.rotate(parts, pos).float()
        return parts, bias is not None

    def x_total(col):
        total = vec[:, col].sum(0)
        return total if norm_bias is None else total + norm_bias.to(dev)

    q_parts, q_bias = side(hw.W_Q, hw.b_Q, h, i, 0, hw.q_norm)
    k_parts, k_bias = side(hw.W_K, hw.b_K, kv, j, 1, hw.k_norm)
    q_names = names + (["bias"] if q_bias else [])
    k_names = names + (["bias"] if k_bias else [])
    scaling = float(src.scaling)
    terms = (q_parts @ k_parts.T) * scaling  # (Cq, Ck)
    qn = [a for a in q_names for _ in k_names]
    kn = [b for _ in q_names for b in k_names]
    contrib = terms.reshape(-1).double().cpu().tolist()
    model_score = float((src.q[h, i].float() @ src.k[kv, j].float()) * scaling)
    note = ("Each component of the stream through the block's norm (scale frozen at this "
            "run's value), W_Q / W_K")
    note += " and the rotation of each position" if hw.rotate is not None else ""
    note += "; q/k norms' scales frozen too" if hw.q_norm is not None else ""
    note += "."
    if src.bias is not None:
        b = src.bias[0]
        bias = float(b[h if b.shape[0] > 1 else 0, i, j])
        qn.append(POSITION_BIAS)
        kn.append(POSITION_BIAS)
        contrib.append(bias)
        model_score += bias
        note += " The model's position bias for this cell is its own row."
    softcapped = None
    if src.softcap is not None:
        softcapped = float(bt.scores[h, i, j])
        note += (f" This model caps its attention logits (tanh, cap {src.softcap:g}): the "
                 f"terms add up to the score before the cap.")
    blocked = src.mask.blocked_rows(i, i + 1, src.q.device)
    masked = bool(blocked is not None and blocked[0, 0, j])
    warnings = list(trace.warnings)
    if masked:
        warnings.append(f"Query {i} may not attend to key {j} (the mask blocks it): its "
                        f"score is shown before masking; its attention weight is 0.")
    gap = abs(sum(contrib) - model_score)
    if gap > 1e-4 * max(1.0, abs(model_score)):  # low precision: rounded sublayer outputs
        warnings.append(f"The terms add up to the score only to within {gap:.2g}: this model "
                        f"runs in {str(src.q.dtype).removeprefix('torch.')}, and each "
                        f"sublayer's output was rounded before it was added to the stream.")
    frame = pd.DataFrame({"query_component": qn, "key_component": kn,
                          "contribution": contrib})
    return QKAttribution(frame=frame, score=model_score, block=block, head=h, query=i, key=j,
                         query_token=bt.query_tokens[i], key_token=bt.key_tokens[j],
                         softcapped_score=softcapped, masked=masked, note=note,
                         warnings=warnings)
