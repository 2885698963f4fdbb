"""Analysis: what a run says about the heads. Free functions, numpy / torch in, tables and
arrays out: head statistics, aggregates, rollout and similarity (``heads``), the whole block
and the residual stream (``block``), cross-attention alignment (``alignment``), and the
analyses that take the model first (``fn(model, ...)``: contributions, qk, composition,
patching, entropy), listed once in ``registry.ANALYSES``, which makes them the model's
methods (``model.patch(...)``) and callable by name (``run(model, name, **kwargs)``). It
never imports a backend or loading (a model is passed in) and never plots."""

from .registry import ANALYSES, run

__all__ = ["ANALYSES", "run"]
