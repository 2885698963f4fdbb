"""Positional encodings: the paper's sinusoids, or learned embeddings.

PE[pos, 2i]   = sin(pos / 10000^(2i / d_model))
PE[pos, 2i+1] = cos(pos / 10000^(2i / d_model))
so dimension pair i has wavelength 2*pi * 10000^(2i/d_model): from 2*pi up to 10000*2*pi.
"""

from __future__ import annotations

import math

import torch
from torch import nn


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


def make_positions(kind: str, max_len: int, d_model: int) -> nn.Module:
    return SinusoidalPositions(max_len, d_model) if kind == "sinusoidal" else (
        LearnedPositions(max_len, d_model))
