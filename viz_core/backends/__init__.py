"""One adapter per model family, each turning a run into the same AttentionTrace."""

from .base import Backend

__all__ = ["Backend"]
