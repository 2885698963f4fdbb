"""The linear pieces of a model that contribution analysis reads (what a backend hands over).

A backend describes its norms as ``NormSpec`` and each attention block as ``HeadWeights``
(viz_core.backends: ``final_norm()``, ``head_weights(block)``); the analysis in
contributions.py and composition.py works on these alone, for every family.

Freezing a norm's scale (the standard linearisation): LayerNorm(x) = (x - mean(x)) / s * g + b
with s = sqrt(var(x) + eps), RMSNorm(x) = x / s * g with s = sqrt(mean(x^2) + eps). With s
taken from the real run (recomputed here, in float32, from the norm's own input as the trace
recorded it: the very value the model divided by), the norm is a linear map of its input plus
the bias b, so a sum of components goes through it term by term and still adds up exactly.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

import torch


@dataclass(frozen=True)
class NormSpec:
    """One LayerNorm or RMSNorm over the last dimension."""

    kind: str  # "layer" (centre, divide by the std) | "rms" (divide by the root mean square)
    weight: torch.Tensor | None  # the gain g as applied (Gemma's RMSNorm: 1 + w), or None
    bias: torch.Tensor | None  # LayerNorm's b, or None
    eps: float

    def scale(self, x: torch.Tensor) -> torch.Tensor:
        """float32 [..., 1]: s of the real run, from the norm's input x."""
        x = x.float()
        if self.kind == "layer":
            return (x.var(-1, unbiased=False, keepdim=True) + self.eps).sqrt()
        return (x.pow(2).mean(-1, keepdim=True) + self.eps).sqrt()

    def linear(self, c: torch.Tensor, s: torch.Tensor) -> torch.Tensor:
        """float32: the norm's linear part applied to one component c, scale s frozen."""
        c = c.float()
        if self.kind == "layer":
            c = c - c.mean(-1, keepdim=True)
        c = c / s
        return c if self.weight is None else c * self.weight.float()

    def bias_term(self) -> torch.Tensor | None:
        return None if self.bias is None else self.bias.float()

    def __call__(self, x: torch.Tensor) -> torch.Tensor:
        """The norm itself (float32), scale from x."""
        y = self.linear(x, self.scale(x))
        b = self.bias_term()
        return y if b is None else y + b


@dataclass(frozen=True)
class HeadWeights:
    """One attention block, per head (float weights as the model holds them).

    q_h = W_Q[h] x + b_Q[h] for the normed input x (then q_norm, then the rotation), k and v
    per key/value head (query head h reads kv head h // (H / Hkv)); the block's output is
    sum_h W_O[h] z_h + b_O.
    """

    W_Q: torch.Tensor  # (H, d_head, d_model)
    W_K: torch.Tensor  # (Hkv, d_head, d_model)
    W_V: torch.Tensor  # (Hkv, d_v, d_model)
    W_O: torch.Tensor  # (H, d_model, d_v)
    b_Q: torch.Tensor | None = None  # (H, d_head)
    b_K: torch.Tensor | None = None  # (Hkv, d_head)
    b_V: torch.Tensor | None = None  # (Hkv, d_v)
    b_O: torch.Tensor | None = None  # (d_model,)
    norm: NormSpec | None = None  # the norm the block reads its input through (pre-norm)
    post_norm: NormSpec | None = None  # a norm on the block's output (Gemma 2/3, OLMo 2)
    q_norm: NormSpec | None = None  # a norm on q and on k (Qwen 3, Gemma 3, OLMo 2)
    k_norm: NormSpec | None = None
    qk_norm_per_head: bool = True  # over each head's d_head (Qwen 3, Gemma 3) or all (OLMo 2)
    # rotate(x (n, d_head), position) -> x turned by that position's rotation (rotary models)
    rotate: Callable[[torch.Tensor, int], torch.Tensor] | None = None

    @property
    def n_heads(self) -> int:
        return self.W_Q.shape[0]

    @property
    def group(self) -> int:
        return self.W_Q.shape[0] // self.W_K.shape[0]
