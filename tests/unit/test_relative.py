"""Relative positions: T5's buckets and bias against transformers' own T5 code and by hand;
the toy Transformer-XL split against its closed form."""

import numpy as np
import pytest
import torch

from viz_core.lessons import relative as rp


def test_t5_buckets_by_hand_small_config():
    # bidirectional, 8 buckets, max_distance 16: 4 per direction, exact for |d| < 2,
    # then log-spaced: bucket = 2 + int(log(|d|/2) / log(8) * 2)
    d = np.array([-20, -16, -8, -4, -3, -2, -1, 0, 1, 2, 3, 4, 8, 16, 20])
    expected = [3, 3, 3, 2, 2, 2, 1, 0, 5, 6, 6, 6, 7, 7, 7]
    assert rp.t5_bucket(d, True, 8, 16).tolist() == expected
    # causal: only keys before the query (d <= 0) get distinct buckets; 8 buckets, exact
    # below 4, then 4 + int(log(|d|/4) / log(4) * 4): |d| = 8 -> 6, |d| = 20 -> 8 -> capped 7
    assert rp.t5_bucket(np.array([3, 0, -1, -2, -3, -4, -8, -20]), False, 8, 16).tolist() == \
        [0, 0, 1, 2, 3, 4, 6, 7]


@pytest.mark.parametrize("bidirectional", [True, False])
@pytest.mark.parametrize("num_buckets,max_distance", [(32, 128), (8, 16), (16, 40)])
def test_t5_buckets_match_transformers(bidirectional, num_buckets, max_distance):
    from transformers.models.t5.modeling_t5 import T5Attention

    rel = np.arange(-300, 301)
    ref = T5Attention._relative_position_bucket(torch.tensor(rel), bidirectional=bidirectional,
                                                num_buckets=num_buckets,
                                                max_distance=max_distance)
    np.testing.assert_array_equal(rp.t5_bucket(rel, bidirectional, num_buckets, max_distance),
                                  ref.numpy())


def test_t5_bias_equals_the_models_compute_bias(tmp_path):
    from transformers import T5ForConditionalGeneration

    from tests.support.hf_tiny import make_tiny_t5

    model = T5ForConditionalGeneration.from_pretrained(make_tiny_t5(tmp_path / "t5")).eval()
    for stack in ("encoder", "decoder"):
        got = rp.t5_bias_from_model(model, stack)
        assert got.bidirectional == (stack == "encoder") and got.max_distance == 16
        bias = rp.t5_bias(got.weight, 9, 9, got.bidirectional, got.max_distance)
        attn = getattr(model, stack).block[0].layer[0].SelfAttention
        with torch.no_grad():
            ref = attn.compute_bias(9, 9)[0].numpy()  # (heads, q, k)
        np.testing.assert_allclose(bias, ref, atol=1e-6)
    assert rp.t5_bias_from_model(torch.nn.Linear(2, 2)) is None


def test_bias_by_distance_and_bucket_edges():
    w = np.arange(16, dtype=np.float32).reshape(8, 2)  # bias of bucket b, head h = 2b + h
    dist, buckets, bias = rp.bias_by_distance(w, 4, True, 16)
    assert dist.tolist() == [-4, -3, -2, -1, 0, 1, 2, 3, 4]
    assert bias[1].tolist() == [2 * b + 1 for b in buckets]
    assert rp.bucket_boundaries(dist, buckets) == [-1.5, -0.5, 0.5, 1.5]


def test_xl_terms_sum_to_the_closed_form():
    m = rp.toy_xl(5, d=8, d_k=4, seed=3)
    terms = rp.xl_terms(m)
    q, k = m.E @ m.W_q, m.E @ m.W_kE
    for i in range(5):
        for j in range(5):
            r = rp.sinusoid(np.array([i - j]), 8)[0] @ m.W_kR
            expected = (q[i] + m.u) @ k[j] + (q[i] + m.v) @ r
            assert terms["total"][i, j] == pytest.approx(expected, rel=1e-4, abs=1e-4)
    # c depends on the key only; d on the distance only
    c = terms["c · global content bias"]
    assert np.allclose(c, c[0][None, :])
    dd = terms["d · global position bias"]
    assert dd[1, 0] == pytest.approx(dd[4, 3]) and dd[0, 2] == pytest.approx(dd[2, 4])


def test_xl_by_hand_d2():
    # d = 2, d_k = 1: R_0 = [sin 0, cos 0] = [0, 1], R_1 = [sin 1, cos 1]
    m = rp.ToyXL(E=np.array([[1.0, 0.0], [0.0, 1.0]]), W_q=np.array([[1.0], [2.0]]),
                 W_kE=np.array([[3.0], [1.0]]), W_kR=np.array([[1.0], [1.0]]),
                 u=np.array([0.5]), v=np.array([-1.0]))
    t = rp.xl_terms(m)
    # q = [1, 2], k = [3, 1]; r(0) = 1, r(1) = sin 1 + cos 1, r(-1) = -sin 1 + cos 1
    np.testing.assert_allclose(t["a · content–content"], [[3, 1], [6, 2]])
    r1, rm1 = np.sin(1) + np.cos(1), -np.sin(1) + np.cos(1)
    np.testing.assert_allclose(t["b · content–position"], [[1, rm1], [2 * r1, 2]], rtol=1e-6)
    np.testing.assert_allclose(t["c · global content bias"], [[1.5, 0.5], [1.5, 0.5]])
    np.testing.assert_allclose(t["d · global position bias"], [[-1, -rm1], [-r1, -1]],
                               rtol=1e-6)


# ---- the page ---------------------------------------------------------------------------
