"""Rotary, grouped-query, sliding-window and softcapped decoders through the one capture path.

Each family (tiny random weights, tests/support/hf_tiny_modern.py) against Hugging Face's own eager
attention (``output_attentions``) and ``generate``: patterns, scores, the key/value head
each query head reads, the real sliding-window mask, Gemma 2's softcap, beam search.
"""

from __future__ import annotations

import numpy as np
import pytest
import torch

from tests.support.hf_tiny_modern import MODERN

TEXT = "the cat sat on the mat because it was tired"


@pytest.fixture(scope="module")
def tiny(tiny_models):
    return lambda family: tiny_models.load(family, seed=1)


def eager(path):
    from transformers import AutoModelForCausalLM

    return AutoModelForCausalLM.from_pretrained(path, attn_implementation="eager").eval()


@pytest.mark.parametrize("family", MODERN)
def test_patterns_and_logits_equal_hf_eager(tiny, family):
    model, path = tiny(family)
    info = model.info()
    assert info["heads"] == 4 and info["kv_heads"] == 2 and model.kv_heads == 2
    assert model.positional_kind == "rotary"
    trace = model.trace(TEXT, target="the mat")
    assert trace.positional is None and trace.positional_kind == "rotary"
    ref = eager(path)
    ids = model.tokenizer(TEXT)["input_ids"] + model.tokenizer(
        "the mat", add_special_tokens=False)["input_ids"]
    ids = torch.tensor([ids[:len(trace.target_tokens)]])
    with torch.no_grad():
        out = ref(input_ids=ids, output_attentions=True)
    assert len(out.attentions) == 2
    for i, a in enumerate(out.attentions):
        b = trace[f"decoder.{i}.self"]
        assert b.kv_group == [0, 0, 1, 1]
        np.testing.assert_allclose(b.pattern, a[0].numpy(), atol=2e-5, err_msg=f"layer {i}")
        # heads of one group read the same keys: their k is identical
        np.testing.assert_array_equal(b.k[0], b.k[1])
        assert not np.array_equal(b.k[1], b.k[2])
    traced, reference, _ = model._reference_outputs(TEXT, None)
    assert float((traced - reference).abs().max()) < 1e-4


@pytest.mark.parametrize("family", ["mistral", "gemma2", "gemma3_text"])
def test_sliding_window_layers_show_their_real_mask(tiny, family):
    model, _ = tiny(family)
    trace = model.trace(TEXT, target="the mat on the cat")
    n = len(trace.target_tokens)
    causal = np.triu(np.ones((n, n), bool), k=1)
    window = causal | np.tril(np.ones((n, n), bool), k=-4)  # key j < i - 3: outside 4
    kinds = []
    for i in range(2):
        b = trace[f"decoder.{i}.self"]
        if b.window_size:
            np.testing.assert_array_equal(b.mask, window)
            assert (b.pattern[:, window] == 0).all()
            kinds.append("local")
        else:
            np.testing.assert_array_equal(b.mask, causal)
            kinds.append("global")
    expected = {"mistral": ["local", "local"], "gemma2": ["local", "global"],
                "gemma3_text": ["local", "global"]}[family]
    assert kinds == expected


def test_gemma2_softcap_shown_before_and_after(tiny):
    model, _ = tiny("gemma2")
    b = model.trace(TEXT)["decoder.0.self"]
    assert b.softcap == 5.0
    raw, capped = b.raw_scores, b.scores
    np.testing.assert_allclose(capped, np.tanh(raw / 5.0) * 5.0, atol=1e-5)
    assert np.abs(capped).max() <= 5.0 and not np.allclose(raw, capped)


@pytest.mark.parametrize("family,k,lp", [
    ("llama", 3, 1.0), ("llama", 4, 0.5), ("qwen2", 2, 1.0), ("qwen2", 4, 2.0),
    ("mistral", 3, 1.0), ("gemma2", 3, 1.0)])
def test_beam_search_equals_generate(tiny, family, k, lp):
    model, _ = tiny(family)
    ids = torch.tensor([model.tokenizer(TEXT)["input_ids"]], device=model.device)
    out = model.hf_model.generate(ids, attention_mask=torch.ones_like(ids), num_beams=k,
                                  num_return_sequences=k, max_new_tokens=6, do_sample=False,
                                  length_penalty=lp, output_scores=True,
                                  return_dict_in_generate=True)
    tree = model.beam_search(TEXT, beam_size=k, max_len=6, length_penalty=lp)
    assert len(tree.hypotheses) == k
    for h, seq, score in zip(tree.hypotheses, out.sequences, out.sequences_scores):
        ours = [n.token_id for n in tree.path(h.node_id)]
        assert seq[ids.shape[1]:ids.shape[1] + len(ours)].tolist() == ours
        assert h.score == pytest.approx(float(score), rel=1e-4, abs=1e-5)


def test_ablating_a_whole_kv_group_changes_the_output(tiny):
    model, _ = tiny("llama")
    base = model.trace(TEXT, target="the mat", capture=("z",))
    group = [h for h, g in enumerate(base["decoder.0.self"].kv_group) if g == 1]
    abl = model.trace(TEXT, target="the mat", capture=("z",), ablate={"decoder.0.self": group})
    z = abl["decoder.0.self"].z
    assert (z[group] == 0).all() and not (z[[0, 1]] == 0).all()
    assert abl.output_tokens != base.output_tokens or not np.allclose(
        abl["decoder.1.self"].pattern, base["decoder.1.self"].pattern)
