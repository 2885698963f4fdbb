"""viz_core.analysis.heads on hand-built patterns whose answers follow from their construction."""

from __future__ import annotations

import math

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from viz_core.analysis import heads as A
from viz_core.capture.trace import AttentionTrace, BlockTrace


def prev_token_head(n):
    """Row q puts all weight on q-1; row 0 (no previous token) on itself."""
    p = np.zeros((n, n), np.float32)
    p[0, 0] = 1
    p[np.arange(1, n), np.arange(n - 1)] = 1
    return p


def uniform_causal(n):
    return np.tril(np.ones((n, n), np.float32)) / np.arange(1, n + 1, dtype=np.float32)[:, None]


def make_trace(layers, kind="encoder.self", tokens=None):
    """Trace with one block per pattern [head, n, n] in `layers`."""
    n = layers[0].shape[-1]
    tokens = tokens or [f"t{i}" for i in range(n)]
    stack, _, sub = kind.partition(".")
    blocks = {}
    for i, p in enumerate(layers):
        name = f"{stack}.{i}.{sub}"
        blocks[name] = BlockTrace(name, np.asarray(p, np.float32), None,
                                  np.zeros(p.shape[-2:], bool), tokens, tokens)
    return AttentionTrace(blocks, None, tokens)


def test_previous_token_head_scores_one():
    n = 7
    p = prev_token_head(n)[None]
    assert A.previous_token_score(p)[0] == pytest.approx(1.0)
    assert A.diagonal_score(p)[0] == pytest.approx(1 / n)  # only row 0 looks at itself
    assert A.mean_distance(p)[0] == pytest.approx((n - 1) / n)
    assert A.entropy(p)[0] == pytest.approx(0.0)


def test_uniform_head_has_maximal_entropy_log_n():
    n = 9
    p = np.full((1, n, n), 1 / n, np.float32)
    assert A.entropy(p)[0] == pytest.approx(math.log(n), rel=1e-6)
    rng = np.random.default_rng(0)
    other = A.masked_softmax(rng.normal(size=(5, n, n)), None)
    assert (A.entropy(other) < math.log(n)).all()
    # over allowed keys only: causal uniform row q has entropy log(q + 1)
    want = np.mean([math.log(q + 1) for q in range(n)])
    assert A.entropy(uniform_causal(n)[None])[0] == pytest.approx(want, rel=1e-6)


def test_sink_diagonal_and_special_share():
    n = 5
    sink = np.zeros((1, n, n), np.float32)
    sink[..., 0] = 1
    tokens = ["[CLS]", "a", "b", "c", "[SEP]"]
    assert A.sink_score(sink)[0] == pytest.approx(1)
    assert A.special_share(sink, tokens)[0] == pytest.approx(1)
    eye = np.eye(n, dtype=np.float32)[None]
    assert A.diagonal_score(eye)[0] == pytest.approx(1)
    assert A.mean_distance(eye)[0] == pytest.approx(0)
    assert A.special_share(eye, tokens)[0] == pytest.approx(2 / n)
    assert A.special_share(eye, tokens, special={"a"})[0] == pytest.approx(1 / n)
    assert A.special_share(eye, tokens, special=lambda t: t.startswith("["))[0] == \
        pytest.approx(2 / n)


def test_fully_blocked_rows_are_skipped_not_nan():
    p = np.eye(4, dtype=np.float32)
    p[3] = 0  # a fully blocked query row
    stats = [f(p[None])[0] for f in (A.entropy, A.mean_distance, A.diagonal_score,
                                     A.sink_score)]
    assert not any(np.isnan(stats))
    assert A.diagonal_score(p[None])[0] == pytest.approx(1)
    m = np.zeros((2, 3), bool)
    m[1] = True
    w = A.masked_softmax(np.ones((2, 3)), m)
    assert (w[1] == 0).all() and np.allclose(w[0], 1 / 3)


def test_head_stats_is_tidy_one_row_per_block_head():
    n = 6
    layer0 = np.stack([prev_token_head(n), np.full((n, n), 1 / n, np.float32)])
    layer1 = np.stack([np.eye(n, dtype=np.float32), uniform_causal(n)])
    df = A.head_stats(make_trace([layer0, layer1]))
    assert list(df.columns) == ["block", "kind", "layer", "head", *A.STAT_COLUMNS]
    assert len(df) == 4
    assert set(zip(df["layer"], df["head"], strict=True)) == {(0, 0), (0, 1), (1, 0), (1, 1)}
    row = df[(df["layer"] == 0) & (df["head"] == 0)].iloc[0]
    assert row.previous == pytest.approx(1) and row.kind == "encoder.self"
    assert df[(df["layer"] == 0) & (df["head"] == 1)].iloc[0].entropy == pytest.approx(math.log(n))
    assert df[(df["layer"] == 1) & (df["head"] == 0)].iloc[0].diagonal == pytest.approx(1)


def test_rollout_identity_and_closed_form():
    n = 5
    eye = np.broadcast_to(np.eye(n, dtype=np.float32), (3, 2, n, n))
    np.testing.assert_allclose(A.rollout(eye), np.eye(n), atol=1e-7)
    rng = np.random.default_rng(1)
    p = A.masked_softmax(rng.normal(size=(3, 4, n, n)), None)
    layers = [0.5 * p[i].astype(np.float64).mean(0) + 0.5 * np.eye(n) for i in range(3)]
    # rows already sum to 1, so renormalising changes nothing; first layer applied first
    want = layers[2] @ layers[1] @ layers[0]
    np.testing.assert_allclose(A.rollout(p), want, rtol=1e-5)
    cum = A.rollout(p, cumulative=True)
    np.testing.assert_allclose(cum[0], layers[0], rtol=1e-5)
    np.testing.assert_allclose(cum.sum(-1), 1, rtol=1e-5)  # still row-stochastic
    with pytest.raises(ValueError):
        A.rollout(p[0])


def test_mean_and_max_over_heads():
    rng = np.random.default_rng(2)
    p = A.masked_softmax(rng.normal(size=(3, 4, 4)), None)
    np.testing.assert_allclose(A.mean_over_heads(p), (p[0] + p[1] + p[2]) / 3, rtol=1e-6)
    np.testing.assert_array_equal(A.max_over_heads(p), np.maximum(np.maximum(p[0], p[1]), p[2]))


@settings(max_examples=25, deadline=None)
@given(st.integers(0, 10_000), st.integers(2, 6), st.integers(2, 8))
def test_js_divergence_self_zero_symmetric_bounded(seed, heads, n):
    rng = np.random.default_rng(seed)
    p = A.masked_softmax(rng.normal(size=(heads, n, n)) * 3, None)
    m, labels = A.js_divergence_matrix(p)
    assert len(labels) == heads
    np.testing.assert_allclose(np.diag(m), 0, atol=1e-7)
    np.testing.assert_allclose(m, m.T)
    assert (m >= -1e-7).all() and (m <= math.log(2) + 1e-6).all()


def test_js_divergence_matches_the_kl_definition():
    rng = np.random.default_rng(4)
    p = A.masked_softmax(rng.normal(size=(3, 5, 6)) * 2, None).astype(np.float64)

    def kl(a, b):
        return float(np.sum(a * np.log(a / b)))

    m, _ = A.js_divergence_matrix(p)
    for i in range(3):
        for j in range(3):
            rows = [0.5 * kl(p[i, r], (p[i, r] + p[j, r]) / 2)
                    + 0.5 * kl(p[j, r], (p[i, r] + p[j, r]) / 2) for r in range(5)]
            assert m[i, j] == pytest.approx(np.mean(rows), abs=1e-6)


def test_js_divergence_of_disjoint_heads_is_ln2_and_cluster_order_groups():
    n = 4
    eye, prev = np.eye(n, dtype=np.float32), np.roll(np.eye(n, dtype=np.float32), 1, axis=1)
    p = np.stack([eye, prev, eye, prev])
    m, _ = A.js_divergence_matrix(p, ["a", "b", "c", "d"])
    assert m[0, 1] == pytest.approx(math.log(2), rel=1e-6)
    assert m[0, 2] == pytest.approx(0, abs=1e-7)
    order = A.cluster_order(m)
    assert sorted(order) == [0, 1, 2, 3]
    pos = {h: i for i, h in enumerate(order)}
    assert abs(pos[0] - pos[2]) == 1 and abs(pos[1] - pos[3]) == 1  # twins end up adjacent


def test_alignment_score_and_best_head():
    # 3 targets x 4 sources; head 1 is the monotone alignment q -> q + 1
    n_t, n_s = 3, 4
    rng = np.random.default_rng(3)
    noise = A.masked_softmax(rng.normal(size=(2, n_t, n_s)), None)
    aligned = np.zeros((n_t, n_s), np.float32)
    aligned[np.arange(n_t), np.arange(n_t) + 1] = 1
    gold = [(q, q + 1) for q in range(n_t)]
    assert A.alignment_score(aligned, gold) == pytest.approx(1)
    assert A.alignment_score(aligned, {0: 1, 1: [0, 3], 2: 3}) == pytest.approx(2 / 3)
    np.testing.assert_array_equal(A.alignment_argmax(aligned[None])[0], [1, 2, 3])
    tokens_s, tokens_t = ["a", "b", "c", "d"], ["x", "y", "z"]
    blocks = {}
    for layer, heads in enumerate([noise, np.stack([noise[0], aligned])]):
        name = f"decoder.{layer}.cross"
        blocks[name] = BlockTrace(name, heads, None, np.zeros((n_t, n_s), bool),
                                  tokens_t, tokens_s)
    trace = AttentionTrace(blocks, None, tokens_s, target_tokens=tokens_t)
    assert A.best_alignment_head(trace, gold) == (1, 1, 1.0)
    df = A.alignment_scores(trace, gold)
    assert len(df) == 4 and df.score.is_monotonic_decreasing
    with pytest.raises(ValueError):
        A.alignment_score(aligned, [])
