"""Multi-head scaled dot-product attention, as in section 3.2 of the paper.

    Attention(Q, K, V) = softmax(Q K^T / sqrt(d_k)) V
    MultiHead(Q, K, V) = Concat(head_1, ..., head_h) W^O,  head_i = Attention(Q W_i^Q, ...)

The projections and the head split live here; the attention itself is
``viz_core.capture.attend``, the one function every model we show goes through: it runs
PyTorch's SDPA kernel and, when the running call records, keeps q, k, v and the mask so the
views can compute patterns later (the written-out formula is ``capture.scores_of`` /
``capture.softmax_rows``). Nothing is ever stored on the module.
"""

from __future__ import annotations

import torch
from torch import nn

from ..capture import MaskSpec, attend


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
        key_pad: torch.Tensor | None,  # bool (B, Tk) True = padding key; None = no padding
        causal: bool = False,  # block keys after each query (queries = the last Tq keys)
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
        mask = MaskSpec(Tq, k.shape[2], key_pad=key_pad, causal=causal)
        z = attend(name or None, q, k, v, mask, self.d_k ** -0.5,
                   dropout=self.dropout if self.training else 0.0)  # (B, Tq, H, d_k)
        return self.W_O(z.reshape(B, Tq, self.n_heads * self.d_k)), (k, v)
