"""The Transformer of "Attention Is All You Need" (Vaswani et al., 2017), in paper order.

Embeddings (scaled by sqrt(d_model)) + positional encoding -> N encoder layers
(self-attention, feed-forward) -> N decoder layers (masked self-attention, encoder-decoder
attention, feed-forward) -> linear + softmax. Each sublayer is wrapped as
LayerNorm(x + Dropout(Sublayer(x))) (post-LN, the paper) or x + Dropout(Sublayer(LN(x)))
(pre-LN). The same classes build encoder-only and decoder-only models.

Later options, all off by default so older checkpoints load unchanged: RMSNorm instead of
LayerNorm, grouped-query attention (n_kv_heads) and rotary positions (positional="rope": no
table on the embeddings; q and k of each self-attention rotated, see attention.py).

Nothing captured is ever stored on a module: key/value caches are objects passed in by the
caller and returned to it, and capture goes through viz_core.capture.recorder (a per-call recorder).
"""

from __future__ import annotations

import math

import torch
from torch import nn

from ..capture.recorder import note, positions_on, read
from .attention import MultiHeadAttention
from .config import TransformerConfig
from .masks import key_padding
from .positional import make_positions


class FeedForward(nn.Module):
    """FFN(x) = max(0, x W_1 + b_1) W_2 + b_2."""

    def __init__(self, d_model: int, d_ff: int, dropout: float):
        super().__init__()
        self.W_1 = nn.Linear(d_model, d_ff)
        self.W_2 = nn.Linear(d_ff, d_model)
        self.dropout = nn.Dropout(dropout)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.W_2(self.dropout(torch.relu(self.W_1(x))))


class RMSNorm(nn.Module):
    """RMSNorm(x) = x / sqrt(mean(x^2) + eps) * g (Zhang & Sennrich, 2019): LayerNorm without
    the mean subtraction and the bias. Computed in float32 at least, as Llama does."""

    def __init__(self, d_model: int, eps: float = 1e-6):
        super().__init__()
        self.eps = eps
        self.weight = nn.Parameter(torch.ones(d_model))  # g

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        xf = x.to(torch.promote_types(x.dtype, torch.float32))
        xf = xf * torch.rsqrt(xf.pow(2).mean(-1, keepdim=True) + self.eps)
        return (xf * self.weight.to(xf.dtype)).to(x.dtype)


def make_norm(cfg: TransformerConfig) -> nn.Module:
    return RMSNorm(cfg.d_model) if cfg.norm == "rmsnorm" else nn.LayerNorm(cfg.d_model)


def make_attention(cfg: TransformerConfig, self_attention: bool) -> MultiHeadAttention:
    """Self-attention gets RoPE when the model uses it; cross-attention never (its queries
    and keys come from different sequences, whose positions do not compare)."""
    rope = cfg.rope_base if cfg.positional == "rope" and self_attention else None
    return MultiHeadAttention(cfg.d_model, cfg.n_heads, cfg.dropout, cfg.kv_heads, rope)


class SublayerConnection(nn.Module):
    """Residual + normalisation (LayerNorm or RMSNorm) around one sublayer, post or pre."""

    def __init__(self, cfg: TransformerConfig):
        super().__init__()
        self.norm = make_norm(cfg)
        self.dropout = nn.Dropout(cfg.dropout)
        self.norm_first = cfg.norm_first

    def forward(self, x: torch.Tensor, sublayer, layer: str = "", kind: str = ""
                ) -> tuple[torch.Tensor, object]:
        """sublayer(h) returns (output, extra); extra (a kv pair) is passed through.

        layer ("encoder.0") and kind ("self", "cross", "ffn") name the stream points this
        sublayer offers a recording call (viz_core.capture.recorder.note): its output before dropout
        and the residual add, and its norm's output.
        """
        if self.norm_first:
            h = read(layer, kind, x, self.norm(x), self.norm)  # (B, T, d_model)
            note(layer, f"{kind}.norm", h)
            out, extra = sublayer(h)
            note(layer, kind, out)
            return x + self.dropout(out), extra
        out, extra = sublayer(x)
        note(layer, kind, out)
        y = self.norm(x + self.dropout(out))  # (B, T, d_model)
        note(layer, f"{kind}.norm", y)
        return y, extra


class EncoderLayer(nn.Module):
    def __init__(self, cfg: TransformerConfig):
        super().__init__()
        self.self_attn = make_attention(cfg, self_attention=True)
        self.feed_forward = FeedForward(cfg.d_model, cfg.d_ff, cfg.dropout)
        self.sublayer = nn.ModuleList([SublayerConnection(cfg) for _ in range(2)])

    def forward(self, x, key_pad, name):
        layer = name.rsplit(".", 1)[0]  # "encoder.0.self" -> "encoder.0"
        x = note(layer, "in", x)  # a patching call may replace the stream here
        x, _ = self.sublayer[0](x, lambda h: self.self_attn(h, h, key_pad, False, name),
                                layer, "self")
        x, _ = self.sublayer[1](x, lambda h: (self.feed_forward(h), None), layer, "ffn")
        return note(layer, "out", x)


class DecoderLayer(nn.Module):
    def __init__(self, cfg: TransformerConfig, cross: bool):
        super().__init__()
        self.self_attn = make_attention(cfg, self_attention=True)
        self.cross_attn = make_attention(cfg, self_attention=False) if cross else None
        self.feed_forward = FeedForward(cfg.d_model, cfg.d_ff, cfg.dropout)
        n = 3 if cross else 2
        self.sublayer = nn.ModuleList([SublayerConnection(cfg) for _ in range(n)])

    def forward(self, x, memory, self_pad, cross_pad, layer: int, cache: dict | None):
        past = cache.get(layer) if cache is not None else None
        name = f"decoder.{layer}"
        x = note(name, "in", x)  # a patching call may replace the stream here
        x, self_kv = self.sublayer[0](x, lambda h: self.self_attn(
            h, h, self_pad, True, f"{name}.self",
            past_kv=past["self"] if past else None), name, "self")
        cross_kv = None
        if self.cross_attn is not None:
            x, cross_kv = self.sublayer[1](x, lambda h: self.cross_attn(
                h, memory, cross_pad, False, f"{name}.cross",
                past_kv=past["cross"] if past else None, static_kv=True), name, "cross")
        x, _ = self.sublayer[-1](x, lambda h: (self.feed_forward(h), None), name, "ffn")
        x = note(name, "out", x)  # edge attribution may change what the next reader gets
        if cache is not None:
            cache[layer] = {"self": self_kv, "cross": cross_kv}
        return x


class DecoderCache(dict):
    """Key/value cache of one incremental decoding call: {layer: {"self": (k, v), "cross": ..}}.

    Owned by the caller (a beam search), never by the model.
    """

    @property
    def length(self) -> int:
        return 0 if not self else self[0]["self"][0].shape[2]

    def reorder(self, index: torch.Tensor) -> DecoderCache:
        """Select batch rows (beam reordering): every cached tensor indexed along dim 0."""
        out = DecoderCache()
        for layer, entry in self.items():
            out[layer] = {key: None if kv is None else (kv[0][index], kv[1][index])
                          for key, kv in entry.items()}
        return out


class Transformer(nn.Module):
    def __init__(self, cfg: TransformerConfig):
        super().__init__()
        self.cfg = cfg
        d = cfg.d_model
        self.positions = make_positions(cfg.positional, cfg.max_len, d)  # None for RoPE
        self.embed_dropout = nn.Dropout(cfg.dropout)
        if cfg.has_encoder:
            self.src_embed = nn.Embedding(cfg.src_vocab_size, d)
            self.encoder = nn.ModuleList([EncoderLayer(cfg) for _ in range(cfg.n_layers)])
            self.encoder_norm = make_norm(cfg) if cfg.norm_first else nn.Identity()
        if cfg.has_decoder:
            self.tgt_embed = nn.Embedding(cfg.tgt_vocab_size, d)
            cross = cfg.kind == "encoder-decoder"
            self.decoder = nn.ModuleList(
                [DecoderLayer(cfg, cross) for _ in range(cfg.n_decoder_layers)])
            self.decoder_norm = make_norm(cfg) if cfg.norm_first else nn.Identity()
            self.generator = nn.Linear(d, cfg.tgt_vocab_size)
            if cfg.share_embeddings:
                self.generator.weight = self.tgt_embed.weight
        self._init_weights()

    def positional_table(self, n: int) -> torch.Tensor | None:
        """The first n rows of what the embeddings get added ([n, d_model]); None for RoPE."""
        return None if self.positions is None else self.positions.table[:n]

    def _init_weights(self) -> None:
        for p in self.parameters():
            if p.dim() > 1:
                nn.init.xavier_uniform_(p)

    def embed(self, table: nn.Embedding, ids: torch.Tensor, start: int = 0) -> torch.Tensor:
        if start + ids.shape[1] > self.cfg.max_len:
            raise ValueError(f"sequence of {start + ids.shape[1]} positions exceeds max_len "
                             f"{self.cfg.max_len}")
        x = table(ids) * math.sqrt(self.cfg.d_model)  # (B, T, d)
        if self.positions is not None and positions_on():  # RoPE adds nothing here
            pos = torch.arange(start, start + ids.shape[1], device=ids.device)
            x = x + self.positions(pos)
        return self.embed_dropout(x)

    def encode(self, src: torch.Tensor) -> torch.Tensor:
        """src (B, S) -> memory (B, S, d_model)."""
        key_pad = key_padding(src, self.cfg.pad_id)  # (B, S) or None
        x = self.embed(self.src_embed, src)
        for i, layer in enumerate(self.encoder):
            x = layer(x, key_pad, f"encoder.{i}.self")
        return self.encoder_norm(x)

    def decode(
        self,
        tgt: torch.Tensor,  # (B, T) decoder input ids (only the new ones when cache is given)
        memory: torch.Tensor | None = None,  # (B, S, d_model); None for decoder-only
        src: torch.Tensor | None = None,  # (B, S) source ids, for the cross padding mask
        cache: DecoderCache | None = None,
    ) -> torch.Tensor:
        """Returns logits (B, T, tgt_vocab). With a cache, appends to it in place.

        Self-attention is causal (queries = the last T of start + T positions) and, on a
        fresh pass, blocks padding keys; cross-attention blocks the source's padding keys.
        """
        start = cache.length if cache is not None else 0
        self_pad = None
        if cache is None or start == 0:
            self_pad = key_padding(tgt, self.cfg.pad_id)  # (B, T) or None
        cross_pad = None
        if memory is not None and src is not None:
            cross_pad = key_padding(src, self.cfg.pad_id)  # (B, S) or None
        x = self.embed(self.tgt_embed, tgt, start)
        for i, layer in enumerate(self.decoder):
            x = layer(x, memory, self_pad, cross_pad, i, cache)
        return self.generator(self.decoder_norm(x))

    def forward(self, src: torch.Tensor | None, tgt: torch.Tensor | None) -> torch.Tensor:
        """Teacher-forced logits (encoder-decoder, decoder-only), or encoder states."""
        memory = self.encode(src) if self.cfg.has_encoder else None
        if not self.cfg.has_decoder:
            return memory
        return self.decode(tgt, memory, src)
