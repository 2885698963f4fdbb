"""16 threads tracing and beam-searching different inputs through one loaded model at once
(as st.cache_resource shares it between sessions): each result equals its serial run exactly.
Native: every shipped checkpoint; Hugging Face: MiniLM (traces) and tiny BART / GPT-2 (traces
and beam search). Also: the GPU-out-of-memory fallback of vc.load's models."""

from __future__ import annotations

import threading
from concurrent.futures import ThreadPoolExecutor

import numpy as np
import pytest
import torch

import viz_core as vc
from tests.support.hf_tiny import make_tiny_bart, make_tiny_gpt2
from viz_core.loading import resilience

N = 16
WORDS = ["the cat sat on the mat", "9 may 2018", "a quick brown fox", "le chat est assis",
         "hello world", "where is the train station", "2018-05-09", "the dog saw a red house"]


def inputs(n: int = N) -> list[str]:
    return [f"{WORDS[i % len(WORDS)]} {' '.join(WORDS[(i * 3) % len(WORDS)].split()[:i % 4])}"
            .strip() for i in range(n)]


@pytest.fixture(scope="module")
def hf_generators(tmp_path_factory):
    root = tmp_path_factory.mktemp("hf")
    return {"bart": vc.load(str(make_tiny_bart(root / "bart", seed=1))),
            "gpt2": vc.load(str(make_tiny_gpt2(root / "gpt2", seed=1)))}


def same_trace(a, b) -> None:
    assert a.blocks == b.blocks
    assert a.source_tokens == b.source_tokens and a.target_tokens == b.target_tokens
    assert a.output_text == b.output_text
    for name in a.blocks:
        np.testing.assert_array_equal(a[name].pattern, b[name].pattern)
        if a[name].scores is not None:
            np.testing.assert_array_equal(a[name].scores, b[name].scores)


def same_tree(a, b) -> None:
    assert [(h.token_ids, h.score) for h in a.hypotheses] == \
        [(h.token_ids, h.score) for h in b.hypotheses]
    assert [(n.id, n.parent, n.token_id, n.score, n.status) for n in a.nodes] == \
        [(n.id, n.parent, n.token_id, n.score, n.status) for n in b.nodes]


def hammer(model, texts: list[str], beam: bool) -> None:
    """Serial runs first, then all at once from N threads released by one barrier."""
    def one(text: str, i: int):
        if beam and i % 2:
            return model.beam_search(text, beam_size=1 + i % 5, max_len=12)
        return model.trace(text)

    serial = [one(t, i) for i, t in enumerate(texts)]
    barrier = threading.Barrier(len(texts))

    def run(args):
        barrier.wait()
        return one(*args)

    with ThreadPoolExecutor(len(texts)) as pool:
        parallel = list(pool.map(run, [(t, i) for i, t in enumerate(texts)]))
    for i, (s, p) in enumerate(zip(serial, parallel, strict=True)):
        (same_tree if beam and i % 2 else same_trace)(s, p)


@pytest.mark.parametrize("name", vc.shipped_models())
def test_shipped_model_threads_equal_serial(name):
    model = vc.load(name)
    hammer(model, inputs(), beam=model.can_generate)


def test_minilm_threads_equal_serial():
    hammer(vc.load("minilm"), inputs(), beam=False)


@pytest.mark.parametrize("family", ["bart", "gpt2"])
def test_hf_generator_threads_equal_serial(hf_generators, family):
    hammer(hf_generators[family], inputs(), beam=True)


# ---- GPU out of memory ------------------------------------------------------------------
def _raise_once(cls, name, monkeypatch):
    original = getattr(cls, name)
    calls = {"n": 0}

    def flaky(self, *args, **kwargs):
        calls["n"] += 1
        if calls["n"] == 1:
            raise torch.cuda.OutOfMemoryError("CUDA out of memory. Tried to allocate 2.00 GiB")
        return original(self, *args, **kwargs)

    monkeypatch.setattr(cls, name, flaky)
    return calls


@pytest.mark.parametrize("method", ["trace", "beam_search"])
def test_gpu_oom_falls_back_to_cpu_with_a_notice(monkeypatch, method):
    device = "cuda" if torch.cuda.is_available() else "cpu"
    model = vc.load(vc.shipped_models()[0], device, dtype="float32")  # the same precision
    reference = getattr(vc.load(vc.shipped_models()[0], "cpu"), method)("9 may 2018")
    calls = _raise_once(type(model.backend), method, monkeypatch)
    result = getattr(model, method)("9 may 2018")
    assert calls["n"] == 2  # failed once, retried once
    assert str(model.device) == "cpu" and next(model.model.parameters()).device.type == "cpu"
    assert resilience.OOM_NOTICE in model.notices
    warnings = result.warnings if method == "trace" else result.settings["warnings"]
    assert resilience.OOM_NOTICE in warnings
    if method == "trace":
        assert result.output_text == reference.output_text
    else:
        assert [h.token_ids for h in result.hypotheses] == \
            [h.token_ids for h in reference.hypotheses]


def test_other_errors_are_not_swallowed(monkeypatch):
    model = vc.load(vc.shipped_models()[0], "cpu")

    def broken(self, *args, **kwargs):
        raise ValueError("not an OOM")

    monkeypatch.setattr(type(model.backend), "trace", broken)
    with pytest.raises(ValueError):
        model.trace("9 may 2018")
    assert not model.notices


def test_surrogates_reach_every_backend_cleaned(hf_generators):
    for model in [vc.load("minilm"), hf_generators["gpt2"], vc.load(vc.shipped_models()[0])]:
        trace = model.trace("the cat \ud800 sat")
        assert resilience.SURROGATE_NOTICE in trace.warnings
