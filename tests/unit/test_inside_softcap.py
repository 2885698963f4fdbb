"""Inside a head with a logit softcap (Gemma 2): the steps by hand, and against the model's own
capture and Hugging Face's eager attention on a tiny random Gemma 2; attribution patching's
gradient through the cap against Hugging Face's eager autograd."""

from __future__ import annotations

import math

import numpy as np
import pytest
import torch

import viz_core as vc
from tests.support.hf_tiny_modern import make_tiny
from viz_core.figures.inside import block_inside_head, head_internals, softcap_figure

TEXT = "the cat sat on the mat because it was tired"


@pytest.fixture(scope="module")
def gemma2(tmp_path_factory):
    path = make_tiny("gemma2", tmp_path_factory.mktemp("gemma2"), seed=1)
    return vc.load(str(path), dtype="float32"), path  # float32 on a GPU too


def test_softcap_steps_by_hand():
    # d_k = 1: q = 2, keys 3 and 1 -> raw 6 and 2, scaled (÷√1) the same; cap 2
    q, k, v = np.array([[2.0]]), np.array([[3.0], [1.0]]), np.array([[10.0], [20.0]])
    s = head_internals(q, k, v, None, 0, softcap=2.0)
    np.testing.assert_allclose(s["scaled"], [6.0, 2.0])
    np.testing.assert_allclose(s["capped"], [2 * math.tanh(3), 2 * math.tanh(1)])
    w0 = 1 / (1 + math.exp(-(2 * math.tanh(3) - 2 * math.tanh(1))))  # two-key softmax
    np.testing.assert_allclose(s["weights"], [w0, 1 - w0], atol=1e-7)
    np.testing.assert_allclose(s["z"], [10 * w0 + 20 * (1 - w0)], atol=1e-6)
    # without the cap the weights are softmax(6, 2): far sharper
    plain = head_internals(q, k, v, None, 0)
    assert "capped" not in plain
    np.testing.assert_allclose(plain["weights"][0], 1 / (1 + math.exp(-4)), atol=1e-7)
    # an explicit scaling replaces 1/sqrt(d_k); a blocked key still gets weight 0
    s = head_internals(q, k, v, np.array([[False, True]]), 0, softcap=2.0, scaling=0.5)
    np.testing.assert_allclose(s["scaled"], [3.0, 1.0])
    np.testing.assert_allclose(s["weights"], [1.0, 0.0])


def test_softcap_figure_draws_each_key_on_the_curve():
    before, after = np.array([6.0, 2.0, -9.0]), 2 * np.tanh(np.array([6.0, 2.0, -9.0]) / 2)
    fig = softcap_figure(before, after, 2.0, ["a", "b", "c"], blocked=np.array([0, 0, 1], bool))
    keys = fig.data[2]
    np.testing.assert_allclose(keys.x, [6.0, 2.0])  # the blocked key is left out
    np.testing.assert_allclose(keys.y, after[:2], rtol=1e-6)
    curve = fig.data[0]
    np.testing.assert_allclose(curve.y, 2 * np.tanh(np.asarray(curve.x, np.float64) / 2),
                               atol=1e-5)


def test_gemma2_inside_steps_equal_the_models_capture_and_hf_eager(gemma2):
    model, path = gemma2
    trace = model.trace(TEXT, target="the mat")  # teacher-forced: the same ids as below
    from transformers import AutoModelForCausalLM

    ref = AutoModelForCausalLM.from_pretrained(path, attn_implementation="eager").eval()
    ids = torch.tensor([model.tokenizer(TEXT)["input_ids"] + model.tokenizer(
        "the mat", add_special_tokens=False)["input_ids"]])[:, :len(trace.target_tokens)]
    assert ids.shape[1] == len(trace.target_tokens)
    with torch.no_grad():
        eager = ref(input_ids=ids, output_attentions=True).attentions
    for layer in range(2):
        b = trace[f"decoder.{layer}.self"]
        assert b.softcap == 5.0
        for h in range(b.n_heads):
            for i in range(len(b.query_tokens)):
                s = head_internals(b.q[h], b.k[h], b.v[h], b.mask, i, softcap=b.softcap)
                np.testing.assert_allclose(s["scaled"], b.raw_scores[h, i], atol=1e-5)
                np.testing.assert_allclose(s["capped"], b.scores[h, i], atol=1e-5)
                np.testing.assert_allclose(s["weights"], eager[layer][0, h, i].numpy(),
                                           atol=1e-5)
                np.testing.assert_allclose(s["z"], b.z[h, i], atol=1e-5)
    b = trace["decoder.0.self"]
    figs = block_inside_head(b, 1, 5)
    assert list(figs) == ["q", "k", "products", "raw", "scaled", "softcap", "masked",
                          "weights", "weighted_v", "z"]
    assert figs["softcap"].layout.title.text.startswith("6 · softcap")
    keys = figs["softcap"].data[2]
    allowed = ~b.mask[5]
    np.testing.assert_allclose(keys.x, b.raw_scores[1, 5][allowed], atol=1e-6)
    np.testing.assert_allclose(keys.y, b.scores[1, 5][allowed], atol=1e-6)
    assert np.abs(keys.y).max() < 5.0


def test_no_softcap_panel_without_a_cap(tmp_path):
    model = vc.load(str(make_tiny("llama", tmp_path / "llama")))
    b = model.trace(TEXT)["decoder.0.self"]
    assert b.softcap is None
    figs = block_inside_head(b, 0, 3)
    assert "softcap" not in figs and len(figs) == 9
    assert figs["z"].layout.title.text.startswith("9 · ")


def test_attribution_patching_through_a_softcap_equals_hf_eager_autograd(gemma2):
    """Gemma 2 caps its attention logits (s -> cap * tanh(s / cap)), and attribution patching
    differentiates through the cap (an in-place multiply on tanh's output, which tanh's
    backward reads, broke it). Reference: Hugging Face's own eager Gemma 2 on the same
    weights, autograd of the same metric (the clean run's top token's logit at the last
    position) on the corrupted run with respect to each head's z (o_proj's input), times the
    clean - corrupted z, over the clean - corrupted metric. Ours (the capture's scores path)
    against HF eager: float32, a cross-kernel comparison."""
    from transformers import AutoModelForCausalLM

    model, path = gemma2
    clean, corrupted = "the cat sat on the mat", "the dog sat on the mat"
    ours = model.attribution_patch(clean, corrupted, over="heads")
    hf = AutoModelForCausalLM.from_pretrained(str(path), attn_implementation="eager",
                                              torch_dtype=torch.float32).eval()
    n_heads, d_head = hf.config.num_attention_heads, hf.config.head_dim
    ids = {name: torch.tensor([model.tokenizer(text)["input_ids"]])
           for name, text in (("clean", clean), ("corrupted", corrupted))}
    assert ids["clean"].shape == ids["corrupted"].shape and len(ours.tokens) == ids["clean"].shape[1]

    def run(name):
        zs = []
        hooks = [layer.self_attn.o_proj.register_forward_pre_hook(
                     lambda _m, args: zs.append(args[0]))
                 for layer in hf.model.layers]
        try:
            logits = hf(ids[name]).logits[0, -1]
        finally:
            for h in hooks:
                h.remove()
        return logits, zs

    with torch.no_grad():
        logits_clean, z_clean = run("clean")
    token = int(logits_clean.argmax())
    with torch.enable_grad():
        logits_corr, z_corr = run("corrupted")
        grads = torch.autograd.grad(logits_corr[token], z_corr)
    gap = float(logits_clean[token] - logits_corr[token].detach())
    expected = np.array([
        ((zc - zk.detach()) * g)[0].reshape(-1, n_heads, d_head).sum(dim=(0, 2)).numpy()
        for zc, zk, g in zip(z_clean, z_corr, grads)]) / gap
    assert np.isfinite(ours.effect).all() and np.abs(expected).max() > 1e-3
    np.testing.assert_allclose(ours.clean, float(logits_clean[token]), rtol=1e-5)
    np.testing.assert_allclose(ours.effect, expected, atol=1e-5 * np.abs(expected).max() + 1e-6)
