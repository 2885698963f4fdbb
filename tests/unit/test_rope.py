"""viz_core.lessons.rope (issue 14, item 6): RoPE frequencies and scalings against transformers' own
functions and the closed forms, the relative-position property of the 2-D picture, the
RoFormer decay bound, a model's spec from its config, and the figures."""

import copy
import math

import numpy as np
import pytest
import torch

from viz_core.figures.rope import (
    angle_curves,
    angle_heatmap,
    decay_figure,
    frequency_figure,
    pair_rotation_figure,
    rotary_score_figure,
)
from viz_core.lessons.rope import (
    decay_bound,
    pair_demo,
    rope_frequencies,
    rotary_scores,
    rotation_angles,
    scaled_frequencies,
    spec_from_hf_config,
    spec_from_native_config,
)
from viz_core.model.positional import apply_rope

SCALINGS = [
    None,
    {"rope_type": "linear", "factor": 4.0},
    {"rope_type": "dynamic", "factor": 2.0},
    {"rope_type": "yarn", "factor": 4.0, "original_max_position_embeddings": 64},
    {"rope_type": "yarn", "factor": 8.0, "original_max_position_embeddings": 128,
     "beta_fast": 16, "beta_slow": 2},
    {"rope_type": "llama3", "factor": 8.0, "low_freq_factor": 1.0, "high_freq_factor": 4.0,
     "original_max_position_embeddings": 64},
]


def llama_config(scaling=None, base=10000.0, head_dim=64):
    from transformers import LlamaConfig

    kw = dict(hidden_size=4 * head_dim, num_attention_heads=4, max_position_embeddings=256)
    if scaling is not None:
        kw["rope_parameters"] = dict(scaling, rope_theta=base)
    else:
        kw["rope_parameters"] = {"rope_type": "default", "rope_theta": base}
    return LlamaConfig(**kw)


def test_default_frequencies_equal_transformers():
    from transformers.models.llama.modeling_llama import LlamaRotaryEmbedding

    for base in (10000.0, 500000.0):
        cfg = llama_config(base=base)
        theirs, _ = LlamaRotaryEmbedding.compute_default_rope_parameters(cfg)
        np.testing.assert_allclose(rope_frequencies(64, base), theirs.double().numpy(),
                                   rtol=1e-6)
        np.testing.assert_allclose(spec_from_hf_config(cfg)[0].frequencies,
                                   theirs.double().numpy(), rtol=1e-6)
    want = np.array([10000.0 ** (-2 * i / 64) for i in range(32)])  # theta_i = base^(-2i/d)
    np.testing.assert_allclose(rope_frequencies(64), want, rtol=1e-12)


@pytest.mark.parametrize("scaling", SCALINGS[1:], ids=lambda s: s["rope_type"])
@pytest.mark.parametrize("seq_len", [None, 1024])
def test_scaled_frequencies_equal_transformers_rope_init_functions(scaling, seq_len):
    """Our closed forms against transformers' ROPE_INIT_FUNCTIONS, which the page uses."""
    from transformers.modeling_rope_utils import ROPE_INIT_FUNCTIONS

    cfg = llama_config(scaling)
    theirs, their_attention = ROPE_INIT_FUNCTIONS[scaling["rope_type"]](
        copy.deepcopy(cfg), "cpu", seq_len=seq_len)
    spec = spec_from_hf_config(cfg, seq_len=seq_len)[0]
    assert spec.rope_type == scaling["rope_type"] and spec.scaled
    np.testing.assert_allclose(spec.frequencies, theirs.double().numpy(), rtol=1e-6)
    ours, attention = scaled_frequencies(spec.rope_type, spec.dim, spec.base, spec.parameters,
                                         spec.max_positions, seq_len)
    np.testing.assert_allclose(ours, theirs.double().numpy(), rtol=2e-6)
    assert attention == pytest.approx(their_attention)
    assert not np.allclose(ours, rope_frequencies(64)) or (
        scaling["rope_type"] == "dynamic" and seq_len is None)


def test_scalings_by_their_definitions():
    theta = rope_frequencies(64)
    lin, _ = scaled_frequencies("linear", 64, 10000.0, {"factor": 4.0})
    np.testing.assert_allclose(lin, theta / 4)
    # dynamic NTK: nothing changes until the sequence outgrows max_positions
    same, _ = scaled_frequencies("dynamic", 64, 10000.0, {"factor": 2.0}, 256, 100)
    np.testing.assert_allclose(same, theta)
    # llama3: the fastest pairs are kept, the slowest divided by the factor
    l3, _ = scaled_frequencies("llama3", 64, 10000.0, {
        "factor": 8.0, "low_freq_factor": 1.0, "high_freq_factor": 4.0,
        "original_max_position_embeddings": 64})
    assert l3[0] == theta[0] and l3[-1] == pytest.approx(theta[-1] / 8)
    yarn, attention = scaled_frequencies("yarn", 64, 10000.0, {
        "factor": 4.0, "original_max_position_embeddings": 64})
    assert yarn[0] == theta[0] and yarn[-1] == pytest.approx(theta[-1] / 4)
    assert attention == pytest.approx(0.1 * math.log(4.0) + 1)


def test_gemma3_has_one_spec_per_layer_type():
    from transformers import Gemma3TextConfig

    cfg = Gemma3TextConfig(hidden_size=32, num_attention_heads=4, head_dim=8)
    specs = {s.layer_type: s for s in spec_from_hf_config(cfg)}
    assert set(specs) == {"sliding_attention", "full_attention"}
    for spec in specs.values():
        np.testing.assert_allclose(spec.frequencies, rope_frequencies(8, spec.base))
    assert specs["full_attention"].base != specs["sliding_attention"].base


def test_native_spec_matches_the_model_rotation():
    from viz_core.model import TransformerConfig

    cfg = TransformerConfig(kind="decoder-only", tgt_vocab_size=10, d_model=32, n_heads=2,
                            n_layers=0, positional="rope", rope_base=500.0).validate()
    spec = spec_from_native_config(cfg)
    assert (spec.dim, spec.base, spec.pairs) == (16, 500.0, 8)
    # the model turns pair i (dims i, i + 8) of a unit vector by pos * theta_i
    pos = np.array([0, 5, 11])
    for i in (0, 3, 7):
        x = torch.zeros(3, 16, dtype=torch.float64)  # (T, d): one unit vector per position
        x[:, i] = 1.0
        out = apply_rope(x, torch.tensor(pos), 500.0)
        got = np.arctan2(out[:, i + 8].numpy(), out[:, i].numpy())
        want = np.angle(np.exp(1j * rotation_angles(spec.frequencies, pos)[:, i]))
        np.testing.assert_allclose(got, want, atol=1e-5)


@pytest.mark.parametrize("m, n, shift", [(3, 1, 5), (0, 9, 40), (17, 17, 3)])
def test_pair_demo_dot_depends_only_on_distance(m, n, shift):
    q, k, theta = np.array([1.0, 0.25]), np.array([0.55, 0.8]), 0.37
    demo = pair_demo(q, k, theta, m, n, shift)
    # closed form: |q||k| cos(angle(k) - angle(q) + (n - m) theta)
    a = math.atan2(k[1], k[0]) - math.atan2(q[1], q[0]) + (n - m) * theta
    closed = np.linalg.norm(q) * np.linalg.norm(k) * math.cos(a)
    assert demo.dots[0] == pytest.approx(closed) and demo.dots[1] == pytest.approx(closed)
    qa, kb = demo.rotated[1]
    assert np.linalg.norm(qa) == pytest.approx(np.linalg.norm(q))  # a rotation keeps length
    moved = pair_demo(q, k, theta, m, n + 1, shift)
    assert moved.dots[0] != pytest.approx(closed)


def test_rotary_scores_equal_the_model_rotation_and_are_toeplitz():
    rng = np.random.default_rng(0)
    q, k = rng.standard_normal(16), rng.standard_normal(16)
    theta = rope_frequencies(16, 100.0)
    s = rotary_scores(q, k, theta, 12)
    pos = torch.arange(12)
    qr = apply_rope(torch.tensor(q)[None].expand(12, 16), pos, 100.0)
    kr = apply_rope(torch.tensor(k)[None].expand(12, 16), pos, 100.0)
    np.testing.assert_allclose(s, (qr @ kr.T).numpy(), atol=1e-5)
    for off in range(-11, 12):  # constant along every diagonal
        diag = np.diagonal(s, off)
        np.testing.assert_allclose(diag, diag[0], atol=1e-9)


def test_decay_bound_closed_form_and_abel_inequality():
    theta = rope_frequencies(128)
    r = np.arange(0, 300)
    bound = decay_bound(theta, r)
    assert bound[0] == pytest.approx((64 + 1) / 2)  # S_j(0) = j: the mean of 1..64
    assert bound[200:].mean() < 0.5 * bound[0]  # it decays with distance
    rng = np.random.default_rng(1)
    for _ in range(20):  # |sum_i h_i e^{i r theta_i}| <= max|h_{i+1} - h_i| * sum_j |S_j|
        h = rng.standard_normal(64)
        dist = int(rng.integers(0, 300))
        lhs = abs(np.sum(h * np.exp(1j * dist * theta)))
        step = np.max(np.abs(np.diff(np.append(h, 0.0))))
        assert lhs <= step * bound[dist] * 64 + 1e-9


def test_figures_build_from_a_scaled_spec():
    spec = spec_from_hf_config(llama_config(SCALINGS[-1]))[0]
    fig = frequency_figure(spec)
    assert len(fig.data) == 2 and fig.layout.yaxis.type == "log"
    curves = angle_curves(spec.frequencies, [0, 5], 40)
    assert [t.name for t in curves.data] == ["pair 0", "pair 5"]
    assert float(np.max(curves.data[0].y)) < 2 * np.pi
    heat = angle_heatmap(spec.frequencies, 30)
    assert np.asarray(heat.data[0].z).shape == (30, 32)
    demo = pair_demo(np.array([1.0, 0.0]), np.array([0.0, 1.0]), 0.5, 2, 1, 4)
    assert len(pair_rotation_figure(demo).data) == 4
    assert rotary_score_figure(np.eye(5)).data
    d = np.arange(10)
    assert len(decay_figure(d, {"a": decay_bound(spec.frequencies, d)}).data) == 1
