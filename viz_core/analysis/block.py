"""The whole multi-head block, read from one trace captured with "z" and "stream".

    MultiHead(x) = Concat(z_1, ..., z_h) W_O + b_O = sum_h z_h W_O[h]^T + b_O

so each head's share of the block's output is z_h times its own d_v columns of W_O. Around
the attention sit the residual add, the norm (LayerNorm or RMSNorm, before or after the add:
``norm_placement``) and the feed-forward. The residual stream is what every sublayer reads
from and adds to; its size per layer, and how much each sublayer adds, say which sublayers
change the representation most.

Everything here is a pure function of the trace's tensors (torch in, numpy out), so the same
code serves our own models and every Hugging Face family (see viz_core.capture.recorder.STREAM_POINTS
for the points and where each family's come from).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import torch

from ..capture.recorder import STREAM_POINTS
from ..capture.trace import to_numpy
from ..i18n import N_, _
from ..model.choices import NormPlacement, Stack, Sublayer, choose, options

SUBLAYERS = options(Sublayer)
SUBLAYER_LABELS = {"self": N_("self-attention"), "cross": N_("cross-attention"),
                   "ffn": N_("feed-forward")}
# shape_steps' step names (its keys stay English), as a table shows them: step_label
STEP_LABELS = {"input": N_("input"), "norm": N_("norm"), "scores": N_("scores"),
               "concat": N_("concat"), "add & norm": N_("add & norm"), "norm, add": N_("norm, add"),
               "add": N_("add"), "feed-forward": N_("feed-forward"), "output": N_("output")}


def step_label(step: str) -> str:
    """A shape step's name in the reader's language (formulas such as "Q = x W_Q" stay)."""
    return _(STEP_LABELS[step]) if step in STEP_LABELS else step


def added(points: dict[str, torch.Tensor], kind: Sublayer, placement: NormPlacement
          ) -> torch.Tensor | None:
    """What sublayer ``kind`` adds to the residual stream: its output, or (Gemma 2/3, OLMo 2:
    a norm on the sublayer's output) that norm's output. None if the layer has no such
    sublayer."""
    if placement in ("pre+post", "output"):
        return points.get(f"{kind}.post_norm")
    return points.get(kind)


def head_contributions(z, w_o: torch.Tensor) -> torch.Tensor:
    """float32 (H, Tq, d_model): head h's share z_h W_O[h]^T of the block's output.

    z [H, Tq, d_v] (numpy or torch, as ``BlockTrace.z``) is each head's attention output;
    w_o (d_model, H * d_v) the output projection, whose columns h*d_v .. (h+1)*d_v belong to
    head h (the concat order). The sum over heads plus W_O's bias is the block's output.
    """
    z = torch.as_tensor(z, device=w_o.device).float()
    h, tq, dv = z.shape
    w = w_o.detach().float().reshape(w_o.shape[0], h, dv)  # (d_model, H, d_v)
    return torch.einsum("htv,dhv->htd", z, w)


def head_share_norms(z, w_o: torch.Tensor) -> np.ndarray:
    """float32 [H, Tq]: the L2 norm of each head's share z_h W_O[h]^T per query, one head at
    a time (never the whole (H, Tq, d_model) at once)."""
    z = torch.as_tensor(z, device=w_o.device).float()
    h, tq, dv = z.shape
    w = w_o.detach().float().reshape(w_o.shape[0], h, dv)  # (d_model, H, d_v)
    return to_numpy(torch.stack([(z[i] @ w[:, i].T).norm(dim=-1) for i in range(h)]))


def stream_bytes(trace) -> int:
    """About how much a "stream" capture of this trace's input keeps: a float per token,
    d_model, point and layer (its layers counted from its blocks)."""
    layers = {name.rsplit(".", 1)[0] for name in trace.blocks}  # "decoder.0.cross" -> "decoder.0"
    tokens = max(len(trace.source_tokens), len(trace.target_tokens))
    d = int(trace.model_info.get("d_model") or 0)
    return 4 * tokens * d * len(STREAM_POINTS) * max(len(layers), 1)


def _mean_norm(x: torch.Tensor | None) -> float | None:
    return None if x is None else float(x.float().norm(dim=-1).mean())


@dataclass(frozen=True)
class LayerRow:
    """Mean per-token L2 norms in one layer: the stream in and out, and what each adds."""

    layer: str
    stream_in: float
    stream_out: float
    adds: dict  # sublayer kind -> mean norm of what it adds (only the kinds the layer has)

    def ratio(self, kind: Sublayer) -> float | None:
        """What sublayer ``kind`` adds, relative to the stream entering the layer."""
        a = self.adds.get(kind)
        return None if a is None or self.stream_in == 0 else a / self.stream_in


def stacks(trace) -> list[str]:
    """Stacks with recorded stream points, in model order ("encoder", "decoder")."""
    out: list[str] = []
    for layer in trace.stream:
        stack = layer.split(".")[0]
        if stack not in out:
            out.append(stack)
    return out


def layer_rows(trace, stack: Stack, placement: NormPlacement) -> list[LayerRow]:
    """One LayerRow per layer of a stack, in layer order."""
    stack = choose(stack, Stack, "stack")
    placement = choose(placement, NormPlacement, "placement")
    rows = []
    layers = sorted((k for k in trace.stream if k.split(".")[0] == stack),
                    key=lambda k: int(k.split(".")[1]))
    for layer in layers:
        pts = trace.stream[layer]
        if "in" not in pts or "out" not in pts:
            continue
        adds = {kind: _mean_norm(added(pts, kind, placement)) for kind in SUBLAYERS}
        rows.append(LayerRow(layer, _mean_norm(pts["in"]), _mean_norm(pts["out"]),
                             {k: v for k, v in adds.items() if v is not None}))
    return rows


def stream_norms(trace, stack: Stack) -> np.ndarray:
    """float32 [layers + 1, T]: each token's stream norm entering layer 0, then after each
    layer."""
    stack = choose(stack, Stack, "stack")
    layers = sorted((k for k in trace.stream if k.split(".")[0] == stack),
                    key=lambda k: int(k.split(".")[1]))
    if not layers:
        return np.zeros((0, 0), np.float32)
    rows = [trace.stream[layers[0]]["in"]] + [trace.stream[k]["out"] for k in layers]
    return to_numpy(torch.stack([r.float().norm(dim=-1) for r in rows]))


def shape_steps(block, info: dict, trace) -> list[tuple[str, str, str]]:
    """(step, what happens, live shape) from x to the layer's output, for one attention
    block of a trace, with the batch axis B = 1 (one input). Shapes come from the recorded
    tensors where the trace has them."""
    stack, layer, kind = block.name.split(".")
    tq, tk = len(block.query_tokens), len(block.key_tokens)
    h, hkv = block.n_heads, block.kv_heads
    d_k = block.q.shape[-1] if block.q is not None else None
    d = info.get("d_model") or "d"
    d_ff = info.get("d_ff") or "d_ff"
    pts = trace.stream.get(f"{stack}.{layer}", {})
    if "in" in pts:
        d = pts["in"].shape[-1]
    placement = info.get("norm_placement", "post")
    norm = info.get("norm") or "LayerNorm"
    src = "x" if kind != "cross" else _("encoder output")
    steps = [("input", _("the residual stream x entering the block"), f"[1, {tq}, {d}]")]
    if placement in ("pre", "pre+post"):
        steps.append(("norm", _("{norm}(x) before the sublayer (pre-norm)").format(norm=norm),
                      f"[1, {tq}, {d}]"))
    gqa = "" if hkv == h else _(" (grouped-query: {kv} key/value heads)").format(kv=hkv)
    steps += [
        ("Q = x W_Q", _("project, then split into {h} heads of d_k = {d_k}").format(h=h, d_k=d_k),
         f"[1, {tq}, {h}·{d_k}] → [1, {h}, {tq}, {d_k}]"),
        ("K, V", _("from the {src}{gqa}").format(src=src, gqa=gqa), f"[1, {hkv}, {tk}, {d_k}]"),
        ("scores", _("Q Kᵀ / √d_k (+ mask)"), f"[1, {h}, {tq}, {tk}]"),
        ("softmax", _("attention pattern, each row sums to 1"), f"[1, {h}, {tq}, {tk}]"),
        ("z = pattern · V", _("each head's output"), f"[1, {h}, {tq}, {d_k}]"),
        ("concat", _("heads side by side (transpose, reshape)"),
         f"[1, {tq}, {h}, {d_k}] → [1, {tq}, {h * d_k if d_k else 'h·d_k'}]"),
        ("W_O", _("mix the heads back to d_model"), f"[1, {tq}, {d}]"),
    ]
    if placement == "post":
        steps.append(("add & norm", _("{norm}(x + attention)").format(norm=norm),
                      f"[1, {tq}, {d}]"))
    elif placement in ("pre+post", "output"):
        steps.append(("norm, add", _("x + {norm}(attention)").format(norm=norm),
                      f"[1, {tq}, {d}]"))
    else:
        steps.append(("add", _("x + attention (the norm comes before the next sublayer)"),
                      f"[1, {tq}, {d}]"))
    steps += [("feed-forward", _("W_1, activation, W_2"), f"[1, {tq}, {d}] → [1, {tq}, {d_ff}] "
                                                             f"→ [1, {tq}, {d}]"),
              ("output", _("add (and norm) again: the stream leaving the layer"),
               f"[1, {tq}, {d}]")]
    return steps
