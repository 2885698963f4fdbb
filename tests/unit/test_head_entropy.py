"""viz_core.analysis.entropy.head_entropy: the mean attention entropy of each head, against
closed forms (uniform rows: log n; one-hot rows: 0) and scipy.stats.entropy on a real trace;
its figure (viz_core.figures.entropy) draws the table's own numbers."""

from __future__ import annotations

import numpy as np
import pytest
from scipy.stats import entropy as scipy_entropy

import viz_core as vc
from viz_core.analysis.entropy import block_entropy, head_entropy, row_entropy
from viz_core.capture.trace import AttentionTrace, BlockTrace
from viz_core.figures.entropy import entropy_matrix, head_entropy_heatmap


def causal(n: int) -> np.ndarray:
    return np.triu(np.ones((n, n), dtype=bool), k=1)  # True = blocked: keys after the query


def eager_trace(pattern: np.ndarray, mask: np.ndarray, name: str = "decoder.0.self"):
    tokens = [f"t{i}" for i in range(pattern.shape[1])]
    block = BlockTrace(name, pattern=pattern.astype(np.float32), mask=mask,
                       query_tokens=tokens, key_tokens=[f"t{i}" for i in range(pattern.shape[2])])
    return AttentionTrace(block_traces={name: block}, positional=None, source_tokens=tokens)


def uniform(mask: np.ndarray, heads: int) -> np.ndarray:
    allowed = (~mask).astype(np.float64)
    rows = allowed / np.maximum(allowed.sum(1, keepdims=True), 1)
    return np.repeat(rows[None], heads, axis=0)


def test_uniform_attention_has_entropy_log_n():
    n = 9
    mask = causal(n)  # query i sees keys 0..i: i + 1 keys
    frame = head_entropy(eager_trace(uniform(mask, 3), mask))
    expected = np.mean(np.log(np.arange(1, n + 1)))  # mean over queries of log(i + 1)
    np.testing.assert_allclose(frame["entropy"], expected, rtol=1e-6)
    np.testing.assert_allclose(frame["normalised"], 1.0, rtol=1e-6)  # rows of >= 2 keys
    assert list(frame["queries"]) == [n] * 3
    assert list(frame["head"]) == [0, 1, 2] and set(frame["block"]) == {"decoder.0.self"}


def test_one_hot_attention_has_entropy_zero_and_blocked_rows_are_left_out():
    n = 6
    mask = causal(n)
    mask[2, :] = True  # a fully blocked row: no distribution, it must not count
    pattern = np.zeros((2, n, n))
    for i in range(n):
        if i != 2:
            pattern[:, i, i] = 1.0  # all weight on one allowed key
    frame = head_entropy(eager_trace(pattern, mask))
    np.testing.assert_array_equal(frame["entropy"], 0.0)
    np.testing.assert_array_equal(frame["normalised"], 0.0)
    assert list(frame["queries"]) == [n - 1] * 2


def test_mixed_rows_match_the_definition_row_by_row():
    rng = np.random.default_rng(0)
    n = 7
    mask = causal(n)
    logits = rng.normal(size=(4, n, n))
    logits[:, mask] = -np.inf
    pattern = np.exp(logits - logits.max(-1, keepdims=True))
    pattern /= pattern.sum(-1, keepdims=True)
    entropy, normalised, queries = block_entropy(eager_trace(pattern, mask)["decoder.0.self"])
    per_row = np.array([[scipy_entropy(pattern[h, i, : i + 1]) for i in range(n)]
                        for h in range(4)])
    np.testing.assert_allclose(entropy, per_row.mean(1), rtol=1e-5)
    log_n = np.log(np.arange(1, n + 1))
    np.testing.assert_allclose(normalised, (per_row[:, 1:] / log_n[1:]).mean(1), rtol=1e-5)
    assert queries == n
    np.testing.assert_allclose(row_entropy([[0.5, 0.5, 0.0]]), [np.log(2)])


def test_a_real_trace_matches_scipy_entropy():
    model = vc.load("dates", "cpu")
    trace = model.trace("9 may 2018")
    frame = head_entropy(trace)
    assert list(dict.fromkeys(frame["block"])) == trace.blocks  # model order
    for row in frame.itertuples():
        block = trace[row.block]
        pattern, mask = block.pattern[row.head], block.mask
        rows = [scipy_entropy(pattern[i][~mask[i]]) for i in range(pattern.shape[0])
                if (~mask[i]).any()]
        # float32 weights summed in float64 here and in scipy: the same computation
        np.testing.assert_allclose(row.entropy, np.mean(rows), rtol=1e-5)
        assert 0.0 <= row.normalised <= 1.0 + 1e-6


def test_the_model_method_the_function_and_a_trace_agree():
    model = vc.load("dates", "cpu")
    trace = model.trace("9 may 2018", capture=("pattern",))
    by_trace = head_entropy(trace)
    assert model.head_entropy(trace).equals(by_trace)
    assert vc.analysis.run(model, "head_entropy", trace).equals(by_trace)
    cross = model.head_entropy("9 may 2018", kind="decoder.cross")
    assert set(cross["kind"]) == {"decoder.cross"}
    with pytest.raises(vc.InputError, match="'kind'"):
        model.head_entropy(trace, kind="decoder")
    with pytest.raises(vc.InputError, match="empty"):
        model.head_entropy("  ")


def test_the_figure_draws_the_table():
    n = 5
    mask = causal(n)
    frame = head_entropy(eager_trace(uniform(mask, 2), mask))
    m, blocks, heads = entropy_matrix(frame, "entropy")
    assert blocks == ["decoder.0.self"] and heads == ["h0", "h1"]
    np.testing.assert_allclose(m[0], frame["entropy"])
    fig = head_entropy_heatmap(frame, "normalised")
    z = np.asarray(fig.data[0].z, dtype=np.float64)
    np.testing.assert_allclose(z, [frame["normalised"]], rtol=1e-6)
    assert fig.data[0].zmax == 1.0
    with pytest.raises(ValueError, match="'measure'"):
        head_entropy_heatmap(frame, "bits")
