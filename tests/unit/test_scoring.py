"""Scoring functions (viz_core.lessons.scoring): dot, scaled dot and additive scores against PyTorch
references and a hand-written loop, masks, seeds, and the saturation experiment against the
closed form Var(q·k) = d_k. Figures (viz_core.figures.scoring) carry exactly these numbers."""

from __future__ import annotations

import math

import numpy as np
import pytest
import torch
import torch.nn.functional as F

from viz_core.errors import InputError
from viz_core.figures.scoring import (
    draw_weights_figure,
    logit_variance_figure,
    saturation_figure,
    scoring_comparison_figure,
)
from viz_core.lessons import scoring


def qk(d_k: int = 8, n: int = 6, seed: int = 3):
    rng = np.random.default_rng(seed)
    return rng.standard_normal(d_k), rng.standard_normal((n, d_k))


# ---- the three scorers -----------------------------------------------------------------------
def test_dot_is_q_times_k_transposed():
    q, keys = qk()
    np.testing.assert_allclose(scoring.dot_scores(q, keys), q @ keys.T, rtol=1e-12)
    # batched: one query per draw against its own keys
    qs, ks = np.stack([q, 2 * q]), np.stack([keys, -keys])
    np.testing.assert_allclose(scoring.dot_scores(qs, ks), [q @ keys.T, -2 * q @ keys.T])


def test_scaled_equals_dot_over_sqrt_dk_and_pytorch_sdpa_weights():
    q, keys = qk(d_k=16, n=7)
    cmp = scoring.compare_scores(q, keys)
    np.testing.assert_allclose(cmp.scores["scaled"], cmp.scores["dot"] / 4.0, rtol=1e-12)
    # PyTorch's attention: SDPA's weights are softmax(q K^T / sqrt(d_k)); with V = identity
    # its output *is* the weight row
    qt = torch.tensor(q, dtype=torch.float64)[None, None, None]  # (B, H, 1, d_k)
    kt = torch.tensor(keys, dtype=torch.float64)[None, None]  # (B, H, n, d_k)
    eye = torch.eye(len(keys), dtype=torch.float64)[None, None]  # (B, H, n, n)
    ref = F.scaled_dot_product_attention(qt, kt, eye)[0, 0, 0].numpy()
    np.testing.assert_allclose(cmp.weights["scaled"], ref, atol=1e-12)
    # and nn.MultiheadAttention's core, written out as torch ops
    explicit = torch.softmax(qt @ kt.transpose(-2, -1) / math.sqrt(16), dim=-1)[0, 0, 0]
    np.testing.assert_allclose(cmp.weights["scaled"], explicit.numpy(), atol=1e-12)
    # the unscaled weights are SDPA's with scale=1
    ref1 = F.scaled_dot_product_attention(qt, kt, eye, scale=1.0)[0, 0, 0].numpy()
    np.testing.assert_allclose(cmp.weights["dot"], ref1, atol=1e-12)


def test_masked_weights_equal_sdpa_with_the_mask_converted():
    q, keys = qk(d_k=8, n=6)
    blocked = np.array([False, True, False, False, True, False])
    cmp = scoring.compare_scores(q, keys, blocked)
    qt = torch.tensor(q)[None, None, None]
    kt = torch.tensor(keys)[None, None]
    eye = torch.eye(6, dtype=torch.float64)[None, None]
    allowed = torch.tensor(~blocked)[None, None, None]  # SDPA's bool mask: True = allowed
    ref = F.scaled_dot_product_attention(qt, kt, eye, attn_mask=allowed)[0, 0, 0].numpy()
    np.testing.assert_allclose(cmp.weights["scaled"], ref, atol=1e-12)


def test_additive_equals_a_loop_over_keys_with_the_same_seeded_weights():
    q, keys = qk(d_k=5, n=4)
    cmp = scoring.compare_scores(q, keys, d_a=7, seed=11)
    p = scoring.additive_params(5, 7, 11)
    assert p.w1.shape == (7, 5) and p.w2.shape == (7, 5) and p.v_a.shape == (7,)
    assert p.width == 7 and cmp.d_a == 7 and cmp.seed == 11
    by_hand = []
    for k_j in keys:
        hidden = [math.tanh(sum(p.w1[a, i] * q[i] + p.w2[a, i] * k_j[i] for i in range(5)))
                  for a in range(7)]
        by_hand.append(sum(p.v_a[a] * hidden[a] for a in range(7)))
    np.testing.assert_allclose(cmp.scores["additive"], by_hand, rtol=1e-12)
    # bounded by the tanh: |s_j| <= sum |v_a|, however long q and k are
    big = scoring.compare_scores(1e6 * q, 1e6 * keys, d_a=7, seed=11)
    assert np.all(np.abs(big.scores["additive"]) <= np.abs(p.v_a).sum() + 1e-12)
    # its weights are the softmax of its scores (PyTorch's)
    np.testing.assert_allclose(cmp.weights["additive"], torch.softmax(
        torch.tensor(cmp.scores["additive"]), -1).numpy(), atol=1e-12)
    # d_a defaults to d_k
    assert scoring.compare_scores(q, keys).d_a == 5


def test_blocked_keys_get_exactly_zero_and_a_fully_blocked_row_zeros_not_nan():
    q, keys = qk(d_k=8, n=5)
    blocked = np.array([True, False, False, True, False])
    cmp = scoring.compare_scores(q, keys, blocked)
    for name in scoring.SCORERS:
        w = cmp.weights[name]
        assert np.all(w[blocked] == 0.0), name
        assert math.isclose(w.sum(), 1.0, rel_tol=1e-12)
        # unblocked keys: the softmax over the allowed keys alone
        np.testing.assert_allclose(w[~blocked], torch.softmax(
            torch.tensor(cmp.scores[name][~blocked]), -1).numpy(), atol=1e-12)
    # scores themselves are unmasked (the logits before masking, as the trace's scores)
    np.testing.assert_allclose(cmp.scores["dot"], q @ keys.T)
    full = scoring.compare_scores(q, keys, np.ones(5, dtype=bool))
    for name in scoring.SCORERS:
        assert not np.isnan(full.weights[name]).any()
        assert np.all(full.weights[name] == 0.0)


def test_shapes_are_checked():
    """Bad shapes and sizes are one line in the user's terms (an InputError, which the app
    translates), not numpy's broadcasting error or a plain ValueError."""
    q, keys = qk(d_k=4, n=3)
    for call, says in ((lambda: scoring.compare_scores(q, keys[:, :3]), "[4] and [3, 3]"),
                       (lambda: scoring.compare_scores(keys, keys), "[3, 4] and [3, 4]"),
                       (lambda: scoring.additive_params(0, 4, 0), "not 0 and 4"),
                       (lambda: scoring.random_qk(0), "not 0, 16 and 1")):
        with pytest.raises(InputError) as err:
            call()
        assert says in str(err.value) and "\n" not in str(err.value)
        assert str(err.value) == err.value.msgid.format(**err.value.values)


def test_same_seed_same_results_different_seed_different():
    q, keys = qk()
    a = scoring.compare_scores(q, keys, seed=5)
    b = scoring.compare_scores(q, keys, seed=5)
    c = scoring.compare_scores(q, keys, seed=6)
    np.testing.assert_array_equal(a.scores["additive"], b.scores["additive"])
    assert not np.allclose(a.scores["additive"], c.scores["additive"])
    np.testing.assert_array_equal(a.scores["dot"], c.scores["dot"])  # no randomness there
    for fn in (lambda s: scoring.random_qk(32, 16, 3, s)[1],
               lambda s: scoring.one_draw(32, seed=s).weights["unscaled"],
               lambda s: scoring.saturation_curves((4, 64), draws=50, seed=s).stats[
                   "unscaled"]["max_weight"]):
        np.testing.assert_array_equal(fn(1), fn(1))
        assert not np.array_equal(fn(1), fn(2))


# ---- the saturation experiment -------------------------------------------------------------
@pytest.mark.parametrize("d_k", [1, 16, 256])
def test_variance_of_q_dot_k_is_d_k_and_scaled_is_one(d_k):
    q, keys = scoring.random_qk(d_k, n_keys=16, draws=2000, seed=0)
    dot = scoring.dot_scores(q, keys)
    assert dot.shape == (2000, 16)
    assert abs(dot.var() / d_k - 1.0) < 0.1
    assert abs(scoring.scaled_scores(q, keys).var() - 1.0) < 0.1
    assert abs(dot.mean()) < 0.1 * math.sqrt(d_k)


def test_curves_measure_the_variance_and_unscaled_saturates_while_scaled_stays_flat():
    curves = scoring.saturation_curves(seed=0)
    assert list(curves.d_ks) == list(scoring.DK_CHOICES)
    np.testing.assert_allclose(curves.dot_var / curves.d_ks, 1.0, atol=0.12)
    np.testing.assert_allclose(curves.scaled_var, 1.0, atol=0.12)
    un, sc = curves.stats["unscaled"], curves.stats["scaled"]
    # unscaled: the largest weight and the saturated share grow with d_k, entropy falls
    assert np.all(np.diff(un["max_weight"]) > 0)
    assert np.all(np.diff(un["entropy"]) < 0)
    assert np.all(np.diff(un["saturated"]) >= 0) and un["saturated"][-1] > 0.5
    assert un["max_weight"][-1] > 0.9 and un["gradient"][-1] < 0.05
    # scaled: the same for every width (within the noise of the draws)
    assert np.ptp(sc["max_weight"][2:]) < 0.05 and np.ptp(sc["entropy"][2:]) < 0.05
    assert np.all(sc["saturated"] < 0.01)
    assert np.all(sc["gradient"][2:] > 0.15)
    # at d_k = 1 both are the same softmax
    for stat in scoring.STATS:
        assert math.isclose(un[stat][0], sc[stat][0], rel_tol=1e-12)


def test_one_draw_is_the_first_draw_of_the_experiment():
    d = scoring.one_draw(64, seed=4)
    q, keys = scoring.random_qk(64, scoring.N_KEYS, 1, seed=4)
    np.testing.assert_allclose(d.dot, q[0].astype(np.float64) @ keys[0].T.astype(np.float64))
    np.testing.assert_allclose(d.weights["unscaled"], torch.softmax(torch.tensor(d.dot), -1))
    np.testing.assert_allclose(d.weights["scaled"], torch.softmax(torch.tensor(d.dot) / 8, -1))
    np.testing.assert_allclose(d.scaled, d.dot / 8)
    assert d.stats["unscaled"]["max_weight"] == pytest.approx(d.weights["unscaled"].max())
    # the first draws of the curves use the same generator
    many_q, _ = scoring.random_qk(64, scoring.N_KEYS, 5, seed=4)
    np.testing.assert_array_equal(many_q[0], q[0])


def test_row_stats_by_hand():
    uniform = np.full(4, 0.25)
    onehot = np.array([1.0, 0, 0, 0])
    s = scoring.row_stats(np.stack([uniform, onehot]))
    np.testing.assert_allclose(s["max_weight"], [0.25, 1.0])
    np.testing.assert_allclose(s["entropy"], [1.0, 0.0], atol=1e-12)
    np.testing.assert_allclose(s["saturated"], [0.0, 1.0])
    np.testing.assert_allclose(s["gradient"], [0.1875, 0.0])
    # the largest Jacobian entry of the softmax really is max_j p_j (1 - p_j)
    p = torch.softmax(torch.tensor([1.0, 2.0, 0.5, -1.0], dtype=torch.float64), -1)
    jac = torch.autograd.functional.jacobian(lambda x: torch.softmax(x, -1),
                                             torch.log(p)).abs().max()
    assert float(scoring.row_stats(p.numpy())["gradient"]) == pytest.approx(float(jac))


def test_nearest_choice_snaps_to_a_power_of_two_and_clamps():
    assert scoring.nearest_choice(64) == 64
    assert scoring.nearest_choice(100) == 128
    assert scoring.nearest_choice(90) == 64
    assert scoring.nearest_choice(-5) == 1 and scoring.nearest_choice(0) == 1
    assert scoring.nearest_choice(10 ** 30) == 1024


# ---- figures carry exactly these numbers ---------------------------------------------------
def test_comparison_figure_rows_are_the_scores_and_weights_with_unique_key_labels():
    q, keys = qk(d_k=8, n=4)
    blocked = np.array([False, False, True, False])
    cmp = scoring.compare_scores(q, keys, blocked, seed=2)
    tokens = ["the", "cat", "the", "<b>"]
    fig = scoring_comparison_figure(cmp.scores, cmp.weights, tokens, cmp.blocked)
    bars = [t for t in fig.data if t.type == "bar"]
    assert len(bars) == 6  # a score row and a weight row per scorer
    assert list(bars[0].x) == ["0·the", "1·cat", "2·the", "3·&lt;b>"]  # unique and escaped
    for i, name in enumerate(scoring.SCORERS):
        score, weight = bars[2 * i], bars[2 * i + 1]
        assert score.y.dtype == np.float32 and weight.y.dtype == np.float32
        np.testing.assert_allclose(score.y[~blocked], cmp.scores[name][~blocked], rtol=1e-6)
        assert np.isnan(score.y[2])  # blocked: no score bar
        np.testing.assert_allclose(weight.y, cmp.weights[name], rtol=1e-6, atol=1e-7)
    marks = [t for t in fig.data if t.type == "scatter"]
    assert marks and all(list(t.x) == ["2·the"] for t in marks)
    assert "additive" in fig.layout.annotations[4].text


def test_saturation_figures_mark_the_current_d_k():
    curves = scoring.saturation_curves((1, 4, 16), draws=30, seed=1)
    fig = saturation_figure(curves.d_ks, curves.stats, 4, curves.n_keys, curves.draws)
    lines = [t for t in fig.data if t.type == "scatter"]
    assert len(lines) == 2 * len(scoring.STATS)
    np.testing.assert_allclose(lines[0].y, curves.stats["unscaled"]["max_weight"], rtol=1e-6)
    np.testing.assert_allclose(lines[1].y, curves.stats["scaled"]["max_weight"], rtol=1e-6)
    assert [s.x0 for s in fig.layout.shapes] == [4] * len(scoring.STATS)
    assert "30 draws" in fig.layout.title.text
    var = logit_variance_figure(curves.d_ks, curves.dot_var, 16)
    np.testing.assert_allclose(var.data[0].y, curves.dot_var, rtol=1e-6)
    np.testing.assert_allclose(var.data[2].y, curves.scaled_var, rtol=1e-6)
    assert var.layout.shapes[0].x0 == 16
    d = scoring.one_draw(16, seed=1)
    draw = draw_weights_figure(d.weights, 16)
    np.testing.assert_allclose(draw.data[0].y, d.weights["unscaled"], rtol=1e-6)
    assert len(set(draw.data[0].x)) == scoring.N_KEYS


def test_the_saturation_label_names_the_threshold_the_statistic_uses():
    """The label is a catalogue constant with the number written out: it must say the
    threshold row_stats counts with."""
    from viz_core.lessons.scoring import SATURATED, STATS

    assert f"> {SATURATED}" in STATS["saturated"]
