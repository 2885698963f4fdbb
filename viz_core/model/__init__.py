"""The from-scratch Transformer of "Attention Is All You Need"."""

from .config import TransformerConfig
from .hooks import Hooks, ablate_heads
from .transformer import DecoderCache, Transformer

__all__ = ["DecoderCache", "Hooks", "Transformer", "TransformerConfig", "ablate_heads"]
