"""AttentionTrace: everything one run of a model shows about its attention, as numpy.

A trace is created fresh by every call of ``model.trace(...)`` and never stored on the
model, so one shared model object can serve many browser sessions at once.

Conventions (see shared/DESIGN.md):
- ``pattern`` and ``scores`` are float32 [head, q_pos, k_pos]; rows are queries.
- ``mask`` is bool [q_pos, k_pos], True = this query may NOT attend to this key.
- Each pattern row sums to 1 over its allowed keys; blocked cells are exactly 0; a fully
  blocked row is all zeros (never NaN).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import numpy as np

BLOCK_KINDS = ("encoder.self", "decoder.self", "decoder.cross")


def block_name(stack: str, layer: int, kind: str) -> str:
    """``block_name("decoder", 0, "cross") -> "decoder.0.cross"``."""
    return f"{stack}.{layer}.{kind}"


def parse_block_name(name: str) -> tuple[str, int, str]:
    """``"decoder.0.cross" -> ("decoder", 0, "cross")``."""
    stack, layer, kind = name.split(".")
    return stack, int(layer), kind


@dataclass
class BlockTrace:
    """One attention block (one layer's self- or cross-attention), all heads."""

    name: str  # "encoder.0.self", "decoder.1.cross", ...
    pattern: np.ndarray  # float32 [head, q, k], softmax weights after masking
    scores: np.ndarray | None  # float32 [head, q, k], QK^T/sqrt(d_k) before masking
    mask: np.ndarray  # bool [q, k], True = blocked
    query_tokens: list[str]
    key_tokens: list[str]
    # Optional per-head internals for the "inside a head" view (None when not captured):
    q: np.ndarray | None = None  # float32 [head, q, d_k]
    k: np.ndarray | None = None  # float32 [head, k, d_k]
    v: np.ndarray | None = None  # float32 [head, k, d_k]
    z: np.ndarray | None = None  # float32 [head, q, d_k], pattern @ v (per-head output)

    @property
    def n_heads(self) -> int:
        return int(self.pattern.shape[0])

    @property
    def layer(self) -> int:
        return parse_block_name(self.name)[1]

    @property
    def kind(self) -> str:
        """"encoder.self", "decoder.self" or "decoder.cross"."""
        stack, _, kind = parse_block_name(self.name)
        return f"{stack}.{kind}"


@dataclass
class AttentionTrace:
    """All blocks of one run, plus the tokens and what the model added as positions."""

    block_traces: dict[str, BlockTrace]
    positional: np.ndarray | None  # float32 [pos, d_model], or None (see positional_note)
    source_tokens: list[str]  # encoder input (or the prompt of a decoder-only model)
    target_tokens: list[str] = field(default_factory=list)  # decoder input (<bos> y1 .. yn)
    output_tokens: list[str] = field(default_factory=list)  # what each decoder position predicts
    output_text: str = ""
    positional_kind: str = "sinusoidal"  # sinusoidal | learned | relative | none
    positional_note: str = ""  # e.g. "relative position bias, no absolute encoding"
    unknown_words: list[str] = field(default_factory=list)
    warnings: list[str] = field(default_factory=list)
    model_info: dict[str, Any] = field(default_factory=dict)

    @property
    def blocks(self) -> list[str]:
        """Block names in model order: encoder self, then per decoder layer self and cross."""
        return list(self.block_traces)

    def __getitem__(self, name: str) -> BlockTrace:
        try:
            return self.block_traces[name]
        except KeyError:
            raise KeyError(f"no block {name!r}; this trace has {self.blocks}") from None

    def __contains__(self, name: object) -> bool:
        return name in self.block_traces

    def kinds(self) -> list[str]:
        """Block kinds present, e.g. ["encoder.self", "decoder.self", "decoder.cross"]."""
        seen: list[str] = []
        for b in self.block_traces.values():
            if b.kind not in seen:
                seen.append(b.kind)
        return seen

    def layers(self, kind: str) -> list[BlockTrace]:
        """Blocks of one kind, in layer order."""
        return [b for b in self.block_traces.values() if b.kind == kind]

    def stack(self, kind: str) -> np.ndarray:
        """Patterns of every layer of one kind: float32 [layer, head, q, k]."""
        return np.stack([b.pattern for b in self.layers(kind)])
