"""Attention masks. Convention everywhere: bool, True = this query may NOT attend to this key.

- padding mask: blocks PAD *columns* (keys) for every query row; query rows of PAD tokens
  are not blocked themselves (their outputs are simply ignored downstream).
- causal mask: blocks keys after the query (k > q).
- a decoder's self-attention uses their union.

The model itself passes masks to attention in their cheapest form (a key-padding vector and
a causal flag, see viz_core.capture.recorder.MaskSpec, the one place that expands them); these
helpers give the dense [q, k] matrices for views and tests.
"""

from __future__ import annotations

import torch


def key_padding(ids: torch.Tensor, pad_id: int) -> torch.Tensor | None:
    """ids [batch, k] -> bool [batch, k], True where the key is padding; None if none is."""
    is_pad = ids == pad_id
    return is_pad if bool(is_pad.any()) else None


def padding_mask(ids: torch.Tensor, pad_id: int, n_queries: int | None = None) -> torch.Tensor:
    """ids [batch, k] -> bool [batch, q, k]: True where the key is padding."""
    is_pad = ids == pad_id  # (B, K)
    q = ids.shape[1] if n_queries is None else n_queries
    return is_pad[:, None, :].expand(ids.shape[0], q, ids.shape[1])  # (B, Q, K)


def causal_mask(n_queries: int, n_keys: int | None = None, device=None) -> torch.Tensor:
    """bool [q, k]: True where key k lies after query q.

    With more keys than queries (incremental decoding: the queries are the last n_queries
    positions of n_keys), query i sits at absolute position n_keys - n_queries + i.
    """
    k = n_queries if n_keys is None else n_keys
    offset = k - n_queries
    q_pos = torch.arange(n_queries, device=device)[:, None] + offset
    k_pos = torch.arange(k, device=device)[None, :]
    return k_pos > q_pos  # (Q, K)


def decoder_self_mask(ids: torch.Tensor, pad_id: int) -> torch.Tensor:
    """Union of the padding mask and the causal mask: bool [batch, t, t]."""
    t = ids.shape[1]
    return padding_mask(ids, pad_id) | causal_mask(t, device=ids.device)[None]
