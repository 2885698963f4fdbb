"""Per-call hook points: capture and interventions, never left on the shared model.

Every attention block calls ``hooks(name, tensor)`` at its hook points; the Hooks object
belongs to one call of ``trace``/``beam_search`` and is dropped with it. Hook names are
``"{block}.hook_{point}"`` with block like ``"encoder.0.self"`` and point one of

    hook_q       (B, H, Tq, d_k)  queries after W_Q, split into heads
    hook_k       (B, H, Tk, d_k)  keys (incl. cached ones when decoding incrementally)
    hook_v       (B, H, Tk, d_k)  values
    hook_scores  (B, H, Tq, Tk)   QK^T / sqrt(d_k) before masking, float32
    hook_pattern (B, H, Tq, Tk)   softmax weights after masking, float32
    hook_z       (B, H, Tq, d_k)  pattern @ V, the per-head output before W_O
"""

from __future__ import annotations

from collections.abc import Callable, Iterable

import torch

Intervention = Callable[[torch.Tensor], torch.Tensor]
POINTS = ("q", "k", "v", "scores", "pattern", "z")


class Hooks:
    def __init__(
        self,
        capture: Iterable[str] | None = None,
        blocks: Callable[[str], bool] | None = None,
        interventions: dict[str, Intervention] | None = None,
    ):
        """capture: hook points to keep ("pattern", "scores", ...); blocks: which blocks."""
        self.points = set(capture or ())
        self.block_filter = blocks or (lambda name: True)
        self.interventions = dict(interventions or {})
        self.cache: dict[str, torch.Tensor] = {}
        self._touched = {name.rsplit(".", 1)[0] for name in self.interventions}

    def active(self, block: str) -> bool:
        """Whether this block needs the explicit (hookable) attention path."""
        return block in self._touched or (bool(self.points) and self.block_filter(block))

    def keeps(self, block: str, point: str) -> bool:
        """Whether this call stores the tensor of that hook point (so it must not change)."""
        return point in self.points and self.block_filter(block)

    def __call__(self, block: str, point: str, tensor: torch.Tensor) -> torch.Tensor:
        name = f"{block}.hook_{point}"
        fn = self.interventions.get(name)
        if fn is not None:
            tensor = fn(tensor)
        if self.keeps(block, point):
            self.cache[name] = tensor.detach()
        return tensor


def ablate_heads(heads: dict[str, Iterable[int]]) -> dict[str, Intervention]:
    """Interventions that zero the output of chosen heads: {"encoder.0.self": [1, 3]}."""

    def zero(idx: list[int]) -> Intervention:
        def fn(z: torch.Tensor) -> torch.Tensor:  # (B, H, Tq, d_k)
            z = z.clone()
            z[:, idx] = 0
            return z

        return fn

    return {f"{block}.hook_z": zero(sorted(set(int(h) for h in idx)))
            for block, idx in heads.items() if idx}
