"""What every backend offers; pages only ever talk to this interface."""

from __future__ import annotations

from typing import Any

import numpy as np

from ..trace import AttentionTrace, BlockTrace


class Backend:
    """A loaded model. One instance serves every session: methods keep no per-call state."""

    name: str = ""
    kind: str = "encoder-decoder"  # encoder-decoder | decoder-only | encoder-only
    family: str = "native"  # native | bert | gpt2 | bart | t5 | marian | ...
    device: Any = None
    card: dict = {}

    @property
    def can_generate(self) -> bool:
        return self.kind != "encoder-only"

    @property
    def max_tokens(self) -> int:
        """Longest input (in tokens, specials included) the model accepts."""
        raise NotImplementedError

    def examples(self) -> list[str]:
        return list(self.card.get("examples", []))

    def trace(self, source: str, target: str | None = None, **options) -> AttentionTrace:
        raise NotImplementedError

    def beam_search(self, source: str, beam_size: int = 4, max_len: int = 32, **options):
        raise NotImplementedError

    def info(self) -> dict[str, Any]:
        return {"name": self.name, "kind": self.kind, "family": self.family,
                "device": str(self.device)}


def to_numpy(t) -> np.ndarray:
    return t.detach().float().cpu().numpy().astype(np.float32, copy=False)


def blocks_from_cache(cache: dict, names: list[str], masks: dict[str, np.ndarray],
                      tokens: dict[str, tuple[list[str], list[str]]]) -> dict[str, BlockTrace]:
    """Hook cache (batch 1) -> BlockTrace per block name, in the given order."""
    out = {}
    for name in names:
        pattern = cache.get(f"{name}.hook_pattern")
        if pattern is None:
            continue

        def get(point: str, _name=name):
            t = cache.get(f"{_name}.hook_{point}")
            return None if t is None else to_numpy(t[0])

        q_tokens, k_tokens = tokens[name]
        out[name] = BlockTrace(
            name=name, pattern=to_numpy(pattern[0]), scores=get("scores"), mask=masks[name],
            query_tokens=list(q_tokens), key_tokens=list(k_tokens),
            q=get("q"), k=get("k"), v=get("v"), z=get("z"))
    return out


def block_filter(blocks):
    """None -> all; callable -> itself; list of names or kinds ("decoder.cross") -> membership."""
    if blocks is None or callable(blocks):
        return blocks
    wanted = set(blocks)

    def keep(name: str) -> bool:
        stack, _, kind = name.split(".")
        return name in wanted or f"{stack}.{kind}" in wanted

    return keep
