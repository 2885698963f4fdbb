"""The from-scratch Transformer of "Attention Is All You Need"."""

from .config import TransformerConfig
from .transformer import DecoderCache, Transformer

__all__ = ["DecoderCache", "Transformer", "TransformerConfig"]
