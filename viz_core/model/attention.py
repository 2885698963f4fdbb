"""Multi-head scaled dot-product attention, as in section 3.2 of the paper.

    Attention(Q, K, V) = softmax(Q K^T / sqrt(d_k)) V
    MultiHead(Q, K, V) = Concat(head_1, ..., head_h) W^O,  head_i = Attention(Q W_i^Q, ...)

The projections and the head split live here; the attention itself is
``viz_core.capture.recorder.attend``, the one function every model we show goes through: it runs
PyTorch's SDPA kernel and, when the running call records, keeps q, k, v and the mask so the
views can compute patterns later (the written-out formula is ``capture.scores_of`` /
``capture.softmax_rows``). Nothing is ever stored on the module.

Two modern options: grouped-query attention (n_kv_heads < n_heads: W_K and W_V project to
n_kv_heads heads, query head h reads key/value head h // (n_heads / n_kv_heads), which
``attend`` does itself) and rotary positions (rope_base set: q and k turned by their
positions before ``attend``; the cache keeps rotated keys, so new queries start at its length).
"""

from __future__ import annotations

import torch
from torch import nn

from ..capture.recorder import MaskSpec, attend, positions_on
from .positional import apply_rope


class MultiHeadAttention(nn.Module):
    def __init__(self, d_model: int, n_heads: int, dropout: float = 0.0,
                 n_kv_heads: int | None = None, rope_base: float | None = None):
        super().__init__()
        assert d_model % n_heads == 0
        self.n_heads = n_heads
        self.n_kv_heads = n_kv_heads or n_heads
        assert n_heads % self.n_kv_heads == 0
        self.d_k = d_model // n_heads
        self.rope_base = rope_base  # None: no rotation (table positions, cross-attention)
        self.W_Q = nn.Linear(d_model, d_model)
        self.W_K = nn.Linear(d_model, self.n_kv_heads * self.d_k)
        self.W_V = nn.Linear(d_model, self.n_kv_heads * self.d_k)
        self.W_O = nn.Linear(d_model, d_model)
        self.dropout = dropout

    def split_heads(self, x: torch.Tensor, heads: int | None = None) -> torch.Tensor:
        B, T, _ = x.shape
        return x.view(B, T, heads or self.n_heads, self.d_k).transpose(1, 2)  # (B, H, T, d_k)

    def forward(
        self,
        x_q: torch.Tensor,  # (B, Tq, d_model)
        x_kv: torch.Tensor | None,  # (B, Tk, d_model); None when static past_kv is given
        key_pad: torch.Tensor | None,  # bool (B, Tk) True = padding key; None = no padding
        causal: bool = False,  # block keys after each query (queries = the last Tq keys)
        name: str = "",
        past_kv: tuple[torch.Tensor, torch.Tensor] | None = None,
        static_kv: bool = False,
    ) -> tuple[torch.Tensor, tuple[torch.Tensor, torch.Tensor]]:
        """Returns the output (B, Tq, d_model) and the (k, v) to cache, each (B, Hkv, Tk, d_k).

        past_kv with static_kv=True: keys/values computed once (cross-attention over the
        encoder memory); with static_kv=False: earlier positions of a self-attention, to
        which this call's keys/values are appended.
        """
        B, Tq, _ = x_q.shape
        q = self.split_heads(self.W_Q(x_q))  # (B, H, Tq, d_k)
        if static_kv and past_kv is not None:
            k, v = past_kv
        else:
            k = self.split_heads(self.W_K(x_kv), self.n_kv_heads)  # (B, Hkv, Tk_new, d_k)
            v = self.split_heads(self.W_V(x_kv), self.n_kv_heads)
            if self.rope_base is not None and positions_on():  # self-attention only
                # new queries and keys sit after the cached ones: positions start there
                start = 0 if past_kv is None else past_kv[0].shape[2]
                q = apply_rope(q, torch.arange(start, start + Tq, device=q.device),
                               self.rope_base)  # (B, H, Tq, d_k)
                k = apply_rope(k, torch.arange(start, start + k.shape[2], device=q.device),
                               self.rope_base)  # (B, Hkv, Tk_new, d_k)
            if past_kv is not None:
                k = torch.cat([past_kv[0], k], dim=2)
                v = torch.cat([past_kv[1], v], dim=2)
        mask = MaskSpec(Tq, k.shape[2], key_pad=key_pad, causal=causal)
        z = attend(name or None, q, k, v, mask, self.d_k ** -0.5,
                   dropout=self.dropout if self.training else 0.0)  # (B, Tq, H, d_k)
        return self.W_O(z.reshape(B, Tq, self.n_heads * self.d_k)), (k, v)
