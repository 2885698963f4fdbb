"""Positional encodings: the paper's sinusoids, learned embeddings, or rotary (RoPE).

PE[pos, 2i]   = sin(pos / 10000^(2i / d_model))
PE[pos, 2i+1] = cos(pos / 10000^(2i / d_model))
so dimension pair i has wavelength 2*pi * 10000^(2i/d_model): from 2*pi up to 10000*2*pi.

RoPE (Su et al., RoFormer, 2021) adds nothing to the embeddings: inside every self-attention
it turns each 2-D pair of q's and k's dimensions by the angle pos * theta_i, theta_i =
base^(-2i/d_k), so q_m . k_n depends on m and n only through m - n.
"""

from __future__ import annotations

import math

import torch
from torch import nn

from .choices import Positional, choose


def sinusoidal_encoding(length: int, d_model: int) -> torch.Tensor:
    """float32 [length, d_model], computed in float64 then cast (exact to float32 precision)."""
    pos = torch.arange(length, dtype=torch.float64)[:, None]  # (L, 1)
    two_i = torch.arange(0, d_model, 2, dtype=torch.float64)  # (ceil(d/2),)
    angle = pos / torch.pow(torch.tensor(10000.0, dtype=torch.float64), two_i / d_model)
    pe = torch.zeros(length, d_model, dtype=torch.float64)
    pe[:, 0::2] = torch.sin(angle)
    pe[:, 1::2] = torch.cos(angle[:, : d_model // 2])
    return pe.float()


def wavelengths(d_model: int) -> torch.Tensor:
    """Wavelength of each dimension (both members of a sin/cos pair share one)."""
    two_i = torch.arange(d_model) // 2 * 2
    return 2 * math.pi * torch.pow(10000.0, two_i.double() / d_model)


class SinusoidalPositions(nn.Module):
    """Fixed table, stored as a non-persistent buffer (it is not a weight)."""

    def __init__(self, max_len: int, d_model: int):
        super().__init__()
        self.register_buffer("table", sinusoidal_encoding(max_len, d_model), persistent=False)

    def forward(self, positions: torch.Tensor) -> torch.Tensor:
        return self.table[positions]  # (..., d_model)


class LearnedPositions(nn.Module):
    """One trained vector per position, as in BERT and GPT-2."""

    def __init__(self, max_len: int, d_model: int):
        super().__init__()
        self.embedding = nn.Embedding(max_len, d_model)
        nn.init.normal_(self.embedding.weight, std=0.02)

    @property
    def table(self) -> torch.Tensor:
        return self.embedding.weight

    def forward(self, positions: torch.Tensor) -> torch.Tensor:
        return self.embedding(positions)


def make_positions(kind: Positional, max_len: int, d_model: int) -> nn.Module | None:
    """The table added to the embeddings; None for RoPE (positions enter q and k instead)."""
    kind = choose(kind, Positional, "positional")
    if kind == "rope":
        return None
    return SinusoidalPositions(max_len, d_model) if kind == "sinusoidal" else (
        LearnedPositions(max_len, d_model))


# ---- rotary position embeddings ----------------------------------------------------------
def rope_frequencies(d_head: int, base: float = 10000.0) -> torch.Tensor:
    """float64 [d_head / 2]: theta_i = base^(-2i/d_head), the turn of pair i per position."""
    return torch.pow(torch.tensor(float(base), dtype=torch.float64),
                     -torch.arange(0, d_head, 2, dtype=torch.float64) / d_head)


def rotate_half(x: torch.Tensor) -> torch.Tensor:
    """(x1, x2) -> (-x2, x1) on the two halves of the last dimension."""
    half = x.shape[-1] // 2
    return torch.cat([-x[..., half:], x[..., :half]], dim=-1)


def apply_rope(x: torch.Tensor, positions: torch.Tensor, base: float = 10000.0) -> torch.Tensor:
    """Rotate x (..., T, d_head) at positions (T,) by RoPE; same shape and dtype.

    Pairing: the half-split layout (GPT-NeoX, Hugging Face Llama): pair i is dimensions
    (i, i + d/2), not the interleaved (2i, 2i+1) of the RoFormer paper. The two layouts are
    the same rotation up to a fixed permutation of q's and k's dimensions (which W_Q and W_K
    learn), so q.k is unchanged in kind; this one lets a test compare with transformers'
    apply_rotary_pos_emb directly. Angles in float32 as there (float64 is missing on some
    accelerators), the rotation in float32 or wider, then cast back.
    """
    theta = rope_frequencies(x.shape[-1], base).float().to(x.device)  # (d/2,)
    angle = positions.to(x.device, torch.float32)[:, None] * theta[None]  # (T, d/2)
    angle = torch.cat([angle, angle], dim=-1)  # (T, d): pair i at i and i + d/2
    work = torch.promote_types(x.dtype, torch.float32)
    cos, sin = angle.cos().to(work), angle.sin().to(work)
    xw = x.to(work)
    return (xw * cos + rotate_half(xw) * sin).to(x.dtype)
