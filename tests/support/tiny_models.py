"""One cache of tiny random Hugging Face models for the whole test session.

``tiny_models.path(family, seed)`` builds the folder once (tests/support/hf_tiny.py,
tests/support/hf_tiny_modern.py, tests/support/hf_tiny_encoders.py); ``tiny_models.load(family, seed)`` loads
it once, in float32 (the dtype of every reference it is compared with), and returns
``(model, path)``. The fixture ``tiny_models`` in conftest.py hands out the session's cache.
"""

from __future__ import annotations

from pathlib import Path

import viz_core as vc


def build(family: str, path: Path, seed: int) -> Path:
    from tests.support import hf_tiny, hf_tiny_encoders, hf_tiny_modern

    if family in hf_tiny.BUILDERS:
        return hf_tiny.BUILDERS[family](path, seed=seed)
    if family in hf_tiny_encoders.ENCODERS:
        return hf_tiny_encoders.ENCODERS[family](path, seed=seed)
    return hf_tiny_modern.make_tiny(family, path, seed=seed)


class TinyModels:
    def __init__(self, root_factory):
        self._mktemp = root_factory  # tmp_path_factory.mktemp
        self._paths: dict = {}
        self._models: dict = {}

    def path(self, family: str, seed: int = 1) -> Path:
        key = (family, seed)
        if key not in self._paths:
            self._paths[key] = build(family, self._mktemp(f"{family}-{seed}"), seed)
        return self._paths[key]

    def load(self, family: str, seed: int = 1, dtype: str = "float32"):
        key = (family, seed, dtype)
        if key not in self._models:
            path = self.path(family, seed)
            self._models[key] = (vc.load(str(path), dtype=dtype), path)
        return self._models[key]
