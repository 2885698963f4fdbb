"""Multi-head scaled dot-product attention, written out as in section 3.2 of the paper.

    Attention(Q, K, V) = softmax(Q K^T / sqrt(d_k)) V
    MultiHead(Q, K, V) = Concat(head_1, ..., head_h) W^O,  head_i = Attention(Q W_i^Q, ...)

Two paths give the same outputs: the explicit one (hook points, used whenever a call
captures or intervenes on this block) and a fast one through PyTorch's SDPA kernel.
Softmax always runs in float32, whatever the weights' dtype.
"""

from __future__ import annotations

import math

import torch
import torch.nn.functional as F
from torch import nn

from .hooks import Hooks


class MultiHeadAttention(nn.Module):
    def __init__(self, d_model: int, n_heads: int, dropout: float = 0.0):
        super().__init__()
        assert d_model % n_heads == 0
        self.n_heads = n_heads
        self.d_k = d_model // n_heads
        self.W_Q = nn.Linear(d_model, d_model)
        self.W_K = nn.Linear(d_model, d_model)
        self.W_V = nn.Linear(d_model, d_model)
        self.W_O = nn.Linear(d_model, d_model)
        self.dropout = dropout

    def split_heads(self, x: torch.Tensor) -> torch.Tensor:
        B, T, _ = x.shape
        return x.view(B, T, self.n_heads, self.d_k).transpose(1, 2)  # (B, H, T, d_k)

    def forward(
        self,
        x_q: torch.Tensor,  # (B, Tq, d_model)
        x_kv: torch.Tensor | None,  # (B, Tk, d_model); None when static past_kv is given
        mask: torch.Tensor | None,  # bool (B, Tq, Tk) or (Tq, Tk), True = blocked
        hooks: Hooks | None = None,
        name: str = "",
        past_kv: tuple[torch.Tensor, torch.Tensor] | None = None,
        static_kv: bool = False,
    ) -> tuple[torch.Tensor, tuple[torch.Tensor, torch.Tensor]]:
        """Returns the output (B, Tq, d_model) and the (k, v) to cache, each (B, H, Tk, d_k).

        past_kv with static_kv=True: keys/values computed once (cross-attention over the
        encoder memory); with static_kv=False: earlier positions of a self-attention, to
        which this call's keys/values are appended.
        """
        B, Tq, _ = x_q.shape
        q = self.split_heads(self.W_Q(x_q))  # (B, H, Tq, d_k)
        if static_kv and past_kv is not None:
            k, v = past_kv
        else:
            k = self.split_heads(self.W_K(x_kv))  # (B, H, Tk, d_k)
            v = self.split_heads(self.W_V(x_kv))
            if past_kv is not None:
                k = torch.cat([past_kv[0], k], dim=2)
                v = torch.cat([past_kv[1], v], dim=2)
        if mask is not None:
            mask = mask[None, None] if mask.dim() == 2 else mask[:, None]  # (B|1, 1, Tq, Tk)

        if hooks is not None and hooks.active(name):
            z = self._explicit(q, k, v, mask, hooks, name)
        else:
            z = self._fast(q, k, v, mask)
        out = z.transpose(1, 2).reshape(B, Tq, self.n_heads * self.d_k)  # (B, Tq, d_model)
        return self.W_O(out), (k, v)

    def _explicit(self, q, k, v, mask, hooks: Hooks, name: str) -> torch.Tensor:
        q = hooks(name, "q", q)
        k = hooks(name, "k", k)
        v = hooks(name, "v", v)
        # Each [B, H, Tq, Tk] tensor is a fresh allocation (page faults on the CPU) and a pass
        # over memory, and a trace keeps what it captures alive, so under no_grad /
        # inference_mode we reuse buffers nothing else holds. (Autograd needs softmax's
        # output untouched: training keeps the out-of-place ops.)
        inplace = not torch.is_grad_enabled()
        scores = q @ k.transpose(-2, -1)  # (B, H, Tq, Tk)
        if scores.dtype != torch.float32:
            scores = scores.float()  # softmax in float32 whatever the weights' dtype
        scores = scores.div_(math.sqrt(self.d_k)) if inplace else scores / math.sqrt(self.d_k)
        scores = hooks(name, "scores", scores)
        kept = hooks.keeps(name, "scores")  # then it must stay as it is (unmasked)
        logits = scores
        if mask is not None and _may_block(mask):
            if inplace and not kept:
                logits = scores.masked_fill_(mask, float("-inf"))
            else:
                logits = scores.masked_fill(mask, float("-inf"))
        if inplace and logits.device.type == "cpu" and (logits is not scores or not kept):
            pattern = torch.softmax(logits, dim=-1, out=logits)  # row-wise: safe in place
        else:
            pattern = torch.softmax(logits, dim=-1)
        if mask is not None:
            # exp(-inf) = 0 makes blocked cells exactly 0; a fully blocked row is 0/0 = NaN
            # in every cell, so its first cell tells. We make it an all-zero row (no
            # attention at all, never NaN).
            empty = pattern[..., :1].isnan()  # (B, H, Tq, 1)
            if _may_block(empty):
                pattern = pattern.masked_fill_(empty, 0.0) if inplace else \
                    pattern.masked_fill(empty, 0.0)
        pattern = hooks(name, "pattern", pattern)
        weights = F.dropout(pattern, self.dropout, self.training)
        z = weights.to(v.dtype) @ v  # (B, H, Tq, d_k)
        return hooks(name, "z", z)

    def _fast(self, q, k, v, mask) -> torch.Tensor:
        # SDPA's boolean mask means the opposite of ours: True = may attend. Convert here.
        allowed = None if mask is None else ~mask
        z = F.scaled_dot_product_attention(
            q, k, v, attn_mask=allowed, dropout_p=self.dropout if self.training else 0.0
        )
        if allowed is not None:
            # fully blocked rows: SDPA may return NaN there; ours returns zeros
            z = z.masked_fill(~allowed.any(-1, keepdim=True), 0.0)
        return z


def _may_block(mask: torch.Tensor) -> bool:
    """False when the bool mask blocks nothing, so masking can be skipped. On the CPU the
    check is one cheap pass over bools; elsewhere it would stall the device, so assume True."""
    return mask.device.type != "cpu" or bool(mask.any())
