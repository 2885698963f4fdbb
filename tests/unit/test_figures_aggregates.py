"""Figures over many heads carry exactly what viz_core.analysis.heads computes."""

from __future__ import annotations

import numpy as np

from viz_core.analysis import heads as A
from viz_core.capture.trace import AttentionTrace, BlockTrace
from viz_core.figures import (
    aggregate_heatmap,
    alignment_figure,
    head_similarity_figure,
    head_stat_figure,
    rollout_figure,
    trace_grid,
    trace_rollout_figure,
)

TOKS = ["[CLS]", "the", "cat", "the", "mat", "[SEP]"]


def random_trace(rng, layers=2, heads=3):
    n = len(TOKS)
    blocks = {}
    for i in range(layers):
        name = f"encoder.{i}.self"
        blocks[name] = BlockTrace(name, A.masked_softmax(rng.normal(size=(heads, n, n)), None),
                                  None, np.zeros((n, n), bool), TOKS, TOKS)
    return AttentionTrace(blocks, None, TOKS)


def test_mean_max_and_rollout_figures_equal_the_analysis():
    rng = np.random.default_rng(0)
    trace = random_trace(rng)
    p = trace["encoder.0.self"].pattern
    mean = aggregate_heatmap(p, TOKS, TOKS, "mean")
    np.testing.assert_array_equal(np.asarray(mean.data[0].z), A.mean_over_heads(p))
    mx = aggregate_heatmap(p, TOKS, TOKS, "max")
    np.testing.assert_array_equal(np.asarray(mx.data[0].z), A.max_over_heads(p))
    roll = trace_rollout_figure(trace)
    np.testing.assert_array_equal(np.asarray(roll.data[0].z),
                                  A.rollout(trace.stack("encoder.self")))
    np.testing.assert_array_equal(np.asarray(rollout_figure(trace.stack("encoder.self"),
                                                            TOKS).data[0].z),
                                  np.asarray(roll.data[0].z))
    assert roll.layout.yaxis.autorange == "reversed"


def test_similarity_figure_reorders_rows_and_columns_together():
    rng = np.random.default_rng(1)
    trace = random_trace(rng)
    pats, labels = A.trace_head_patterns(trace, "encoder.self")
    assert labels == ["L0H0", "L0H1", "L0H2", "L1H0", "L1H1", "L1H2"]
    m, labels = A.js_divergence_matrix(pats, labels)
    order = A.cluster_order(m)
    fig = head_similarity_figure(m, labels, order)
    np.testing.assert_array_equal(np.asarray(fig.data[0].z), m[np.ix_(order, order)])
    assert list(fig.data[0].x) == [labels[i] for i in order] == list(fig.data[0].y)


def test_head_stat_figure_is_the_layer_by_head_table():
    rng = np.random.default_rng(2)
    trace = random_trace(rng, layers=3, heads=4)
    df = A.head_stats(trace)
    fig = head_stat_figure(df, "entropy", "encoder.self")
    z = np.asarray(fig.data[0].z)
    assert z.shape == (3, 4)
    for _, row in df.iterrows():
        assert z[row["layer"], row["head"]] == np.float32(row["entropy"])


def test_alignment_figure_marks_argmax_and_gold():
    src, tgt = ["9", "may", "2018", "</s>"], ["2018", "-", "05"]
    p = np.array([[0.1, 0.1, 0.7, 0.1], [0.3, 0.3, 0.2, 0.2], [0.1, 0.8, 0.05, 0.05]],
                 np.float32)
    fig = alignment_figure(p, tgt, src, gold=[(0, 2), (2, 1), (1, 3)])
    heat, argmax, gold = fig.data
    np.testing.assert_array_equal(np.asarray(heat.z), p)
    assert [x.split("·")[1] for x in argmax.x] == ["2018", "9", "may"]
    assert len(gold.x) == 3
    assert "score 0.67" in fig.layout.title.text


def test_trace_grid_uses_layer_numbers_of_the_trace():
    rng = np.random.default_rng(3)
    fig = trace_grid(random_trace(rng, layers=2, heads=3), "encoder.self")
    assert list(fig.layout.yaxis.ticktext) == ["L0", "L1"]
    assert list(fig.layout.xaxis.ticktext) == ["H0", "H1", "H2"]
