"""Layer-to-layer and key/value-group similarity (viz_core.analysis.heads) against hand-worked cases.

JS(a, b) = H((a + b) / 2) - (H(a) + H(b)) / 2 in nats; the numbers below are written out by
hand from that definition (ln 2 for disjoint one-hot rows, 0 for equal rows).
"""

from __future__ import annotations

import math

import numpy as np
import pytest

from viz_core.analysis.heads import kv_group_divergence, kv_group_heads, layer_to_layer_divergence

LN2 = math.log(2)
H_3_1 = -(0.75 * math.log(0.75) + 0.25 * math.log(0.25))  # entropy of (3/4, 1/4)
JS_ONEHOT_HALF = H_3_1 - LN2 / 2  # JS([1, 0], [1/2, 1/2]) = 0.2157615...


def test_hand_value_of_js_onehot_vs_uniform():
    assert JS_ONEHOT_HALF == pytest.approx(0.21576155, abs=1e-7)


def test_layer_to_layer_divergence_hand_case():
    stacked = np.zeros((3, 2, 2, 2), dtype=np.float32)  # [layer, head, q, k]
    stacked[0, 0] = [[1, 0], [0.5, 0.5]]
    stacked[1, 0] = [[0, 1], [0.5, 0.5]]   # row 0 disjoint (ln 2), row 1 equal (0)
    stacked[2, 0] = [[0, 1], [0.5, 0.5]]   # same as layer 1: 0
    stacked[0, 1] = [[1, 0], [1, 0]]
    stacked[1, 1] = [[0.5, 0.5], [0, 0]]  # row 1 fully blocked: skipped
    stacked[2, 1] = [[0.5, 0.5], [1, 0]]  # row 1 blocked in layer 1: skipped again
    out = layer_to_layer_divergence(stacked)
    assert out.shape == (2, 2) and out.dtype == np.float32
    np.testing.assert_allclose(out, [[LN2 / 2, JS_ONEHOT_HALF], [0.0, 0.0]], atol=1e-6)


def test_layer_to_layer_divergence_is_zero_for_repeated_layers_and_samples_rows():
    rng = np.random.default_rng(0)
    p = rng.random((1, 3, 200, 7))
    p /= p.sum(-1, keepdims=True)
    stacked = np.concatenate([p, p, p[:, ::-1]])  # layer 2: heads in reverse order
    out = layer_to_layer_divergence(stacked, max_rows=16)
    np.testing.assert_allclose(out[0], 0.0, atol=1e-7)
    assert out[1, 1] == pytest.approx(0.0, abs=1e-7)  # head 1 stays head 1 when reversed
    assert out[1, 0] > 0.01 and out[1, 2] > 0.01
    assert layer_to_layer_divergence(stacked[:1]).shape == (0, 3)
    with pytest.raises(ValueError):
        layer_to_layer_divergence(p[0])


def test_kv_group_divergence_hand_case():
    pattern = np.array([[[1, 0]], [[0.5, 0.5]], [[0, 1]], [[0, 1]]], dtype=np.float32)
    within, across = kv_group_divergence(pattern, [0, 0, 1, 1])
    # within: (0,1) = JS_ONEHOT_HALF, (2,3) = 0
    assert within == pytest.approx(JS_ONEHOT_HALF / 2, abs=1e-6)
    # across: (0,2), (0,3) disjoint = ln 2; (1,2), (1,3) = JS_ONEHOT_HALF
    assert across == pytest.approx((LN2 + JS_ONEHOT_HALF) / 2, abs=1e-6)
    # another grouping of the same heads gives other numbers
    within2, across2 = kv_group_divergence(pattern, [0, 1, 0, 1])
    assert within2 == pytest.approx((LN2 + JS_ONEHOT_HALF) / 2, abs=1e-6)
    assert across2 == pytest.approx((JS_ONEHOT_HALF + 0 + LN2 + JS_ONEHOT_HALF) / 4, abs=1e-6)


def test_kv_group_divergence_edge_cases():
    pattern = np.array([[[1, 0]], [[0, 1]]], dtype=np.float32)
    within, across = kv_group_divergence(pattern, [0, 1])  # plain multi-head: no pair within
    assert math.isnan(within) and across == pytest.approx(LN2, abs=1e-6)
    within, across = kv_group_divergence(pattern, [0, 0])  # multi-query: no pair across
    assert within == pytest.approx(LN2, abs=1e-6) and math.isnan(across)
    with pytest.raises(ValueError, match="3 entries for 2 heads"):
        kv_group_divergence(pattern, [0, 0, 1])


def test_kv_group_heads():
    assert kv_group_heads([0, 0, 1, 1]) == {0: [0, 1], 1: [2, 3]}
    assert kv_group_heads([0, 0, 0]) == {0: [0, 1, 2]}
