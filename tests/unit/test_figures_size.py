"""Payload budgets at MiniLM size (6 layers x 12 heads, 512 tokens), measured as the length
of fig.to_json(), never as time. Synthetic row-stochastic float32 patterns stand in for the
real model so this file does not depend on any backend.
"""

from __future__ import annotations

import numpy as np
import pytest

import viz_core.figures as F
from tests.support.beam_trees import synthetic_tree
from viz_core.analysis import heads as A

N = 512
ONE_FIGURE = 1_500_000  # bytes
TALLEST = 2_000  # px
GRID = 3_000_000


def softmax32(x):
    x -= x.max(-1, keepdims=True)
    np.exp(x, out=x)
    x /= x.sum(-1, keepdims=True)
    return x


@pytest.fixture(scope="module")
def minilm():
    rng = np.random.default_rng(0)
    patterns = softmax32(rng.standard_normal((6, 12, N, N), dtype=np.float32) * 2)
    tokens = ["[CLS]", *[f"word{i % 97}" for i in range(N - 2)], "[SEP]"]
    scores = rng.standard_normal((N, N), dtype=np.float32) * 3
    return patterns, tokens, scores, rng


def size(fig) -> int:
    return len(fig.to_json())


def test_full_resolution_512_heatmap_fits(minilm):
    patterns, tokens, _, _ = minilm
    fig = F.attention_heatmap(patterns[0, 0], tokens, tokens)
    z = np.asarray(fig.data[0].z)
    assert z.shape == (N, N)  # not pooled
    np.testing.assert_array_equal(z, patterns[0, 0])
    assert size(fig) <= ONE_FIGURE
    assert '"dtype":"f4"' in fig.to_json()  # typed array, not a list of numbers


def test_layer_head_grid_fits(minilm):
    patterns, *_ = minilm
    fig = F.layer_head_grid(patterns)
    z = np.asarray(fig.data[0].z)
    assert max(z.shape) <= 12 * 64 + 11 * 4  # thumbnails pooled to <= 64 x 64
    assert size(fig) <= GRID


def test_every_other_figure_fits(minilm):
    patterns, tokens, scores, rng = minilm
    causal = F.causal_mask(N)
    sim, labels = A.js_divergence_matrix(patterns.reshape(72, N, N)[:, :8], max_rows=8)
    table = rng.standard_normal((N, 384), dtype=np.float32) * 0.02  # learned, MiniLM-sized
    q, k, v = (rng.standard_normal((N, 32), dtype=np.float32) for _ in range(3))
    figures = {
        "scores view": F.attention_heatmap(patterns[0, 0], tokens, tokens, scores=scores,
                                           mask=causal, view="scores"),
        "head view": F.head_view(patterns[0], tokens, tokens),
        "mean": F.aggregate_heatmap(patterns[0], tokens, tokens, "mean"),
        "max": F.aggregate_heatmap(patterns[0], tokens, tokens, "max"),
        "rollout": F.rollout_figure(patterns, tokens),
        "similarity": F.head_similarity_figure(sim, labels, A.cluster_order(sim)),
        "pe curves": F.positional_curves(table, [0, 1, 2, 3]),
        "pe heatmap": F.positional_heatmap(table),
        "pe heatmap sin": F.positional_heatmap(F.sinusoidal_table(N, 384)),
        "pe wavelengths": F.wavelength_figure(table),
        "pe similarity": F.similarity_figure(F.sinusoidal_table(N, 384)),
        "mask union": F.mask_union_figure(tokens, 400),
        "masking steps": F.masking_steps_figure(scores, causal, tokens, tokens),
        "padding batch": F.padding_batch_figure([tokens, tokens[:300], tokens[:17]]),
        "beam 5x20": F.beam_tree_figure(synthetic_tree(beam=5, steps=20, seed=1)),
        **{f"inside {name}": fig for name, fig in
           F.inside_head_figures(q, k, v, causal, 100, tokens, tokens).items()},
    }
    sizes = {name: size(fig) for name, fig in figures.items()}
    too_big = {name: s for name, s in sizes.items() if s > ONE_FIGURE}
    assert not too_big, too_big
    # nor pages of scrolling: Inside a head's one-row-per-key panels were 20 px a key
    # (10,350 px at 512 keys) before they kept the weightiest 64
    too_tall = {name: fig.layout.height for name, fig in figures.items()
                if name.startswith("inside") and (fig.layout.height or 0) > TALLEST}
    assert not too_tall, too_tall


def test_payload_guard_pools_rather_than_overflow():
    # Values in [0.5, 1) base64-encode into many escaped "/" characters: the worst case.
    rng = np.random.default_rng(1)
    z = (0.5 + 0.5 * rng.random((N, N))).astype(np.float32)
    toks = [f"t{i}" for i in range(N)]
    fig = F.matrix_heatmap(z, toks, toks)
    assert size(fig) <= ONE_FIGURE
    assert "pooled" in fig.layout.title.text


def test_long_masks_are_pooled_to_the_share_blocked():
    """A 2,000-token batch (the induction model's inputs go to 8,192): each panel's cell is
    the share (in percent) of its f x f block that the mask blocks, computed here with numpy;
    512 tokens stay unpooled (one byte a cell)."""
    n = 2000
    tokens = [f"t{i}" for i in range(n)]
    fig = F.padding_batch_figure([tokens, tokens[:1300], tokens[:17]], causal=True)
    assert size(fig) <= ONE_FIGURE
    padded = F.padding_mask([n, 1300, 17], n) | F.causal_mask(n)[None]
    for panel, mask in zip(fig.data, padded, strict=True):
        z = np.asarray(panel.z, dtype=np.float64)
        f = -(-n // z.shape[0])  # ceil
        assert f > 1 and z.shape == (-(-n // f),) * 2
        share = np.pad(mask.astype(float), (0, z.shape[0] * f - n), constant_values=np.nan)
        share = np.nanmean(share.reshape(z.shape[0], f, z.shape[1], f), axis=(1, 3))
        np.testing.assert_allclose(z, 100 * share, atol=0.5)
        assert panel.y[0].startswith(f"0–{f - 1}·")
    assert f"{f}×{f}" in fig.layout.title.text
    full = F.mask_union_figure([f"t{i}" for i in range(N)], 400)
    assert np.asarray(full.data[0].z).shape == (N, N)
