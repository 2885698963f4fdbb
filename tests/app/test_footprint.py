"""Model size known before loading (safetensors headers) and where a model is placed."""

from __future__ import annotations

from tests.support.apptest import open_app


def test_sidebar_shows_the_weights_before_loading():
    at = open_app("home", model="dates", text="9 may 2018", dtype="bfloat16")
    assert not at.exception
    shown = [c.value for c in at.sidebar.caption]
    assert any(s.startswith("Weights:") and "bfloat16" in s and "parameters" in s
               for s in shown), shown
