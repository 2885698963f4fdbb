"""Figures at any input length: pooled views equal block means of the exact matrix (closed
form, numpy, on inputs small enough to hold it), windows equal slices of it, and at 8,192
tokens every figure of the Attention page stays within its byte budget without reading any
N x N array (pattern or mask) of a block."""

from __future__ import annotations

import math

import numpy as np
import pytest

from viz_core.figures import headview
from viz_core.figures.aggregates import block_aggregate_heatmap, rollout_bytes
from viz_core.figures.common import plot_text
from viz_core.figures.grid import blocks_grid
from viz_core.figures.headview import block_head_view
from viz_core.figures.heatmap import (
    POOLED_SIZE,
    ZOOM_MAX,
    ZOOM_MAX_SIGNED,
    block_heatmap,
    block_pooled_heatmap,
    block_window_heatmap,
    clip_window,
    pooled_blocked,
)
from viz_core.training.toy import toy_model

ONE_FIGURE = 1_500_000  # bytes, as tests/unit/test_figures_size.py
GRID = 3_000_000
N_LONG = 8192


def edges(n: int, bins: int) -> list[int]:
    """Bin b of n positions starts at ceil(b * n / bins) (position i is in bin i*bins//n)."""
    return [math.ceil(b * n / bins) for b in range(bins + 1)]


def block_means(m: np.ndarray, bq: int, bk: int) -> np.ndarray:
    eq, ek = edges(m.shape[0], bq), edges(m.shape[1], bk)
    return np.array([[m[eq[i]:eq[i + 1], ek[j]:ek[j + 1]].mean() for j in range(bk)]
                     for i in range(bq)], dtype=np.float64)


def all_blocked(mask: np.ndarray, bq: int, bk: int) -> np.ndarray:
    eq, ek = edges(mask.shape[0], bq), edges(mask.shape[1], bk)
    return np.array([[mask[eq[i]:eq[i + 1], ek[j]:ek[j + 1]].all() for j in range(bk)]
                     for i in range(bq)])


def z_of(fig) -> np.ndarray:
    return np.asarray(fig.data[0].z, dtype=np.float64)


def size(fig) -> int:
    return len(fig.to_json())


@pytest.fixture(scope="module")
def small():
    """A causal block of 64 tokens (cut to max_len): exact matrices are cheap."""
    model = toy_model("decoder-only", seed=4, max_len=64, n_heads=3, d_model=48,
                       n_decoder_layers=2)
    words = "the cat sat on the mat and the dog saw it".split()
    trace = model.trace(" ".join(words[i % len(words)] for i in range(40)))
    b = trace[trace.blocks[0]]
    assert b.is_lazy and b.shape[1] == b.shape[2] > 32
    return trace, b


# ---- pooled views equal block means of the exact matrix ------------------------------------
@pytest.mark.parametrize("view", ["weights", "scores"])
def test_pooled_head_equals_block_means_of_the_exact_head(small, view):
    _, b = small
    exact = b.head(1, "pattern" if view == "weights" else "scores").astype(np.float64)
    mask = b.mask
    fig = block_pooled_heatmap(b, 1, view, size=16)
    z = z_of(fig)
    assert z.shape == (16, 16)
    blocked = all_blocked(mask, 16, 16)
    assert blocked.any() and not blocked.all()  # the causal upper corner is grey
    np.testing.assert_array_equal(np.isnan(z), blocked)
    # pooled in float32 row chunks by the trace vs numpy's float64 means of the exact head
    np.testing.assert_allclose(z[~blocked], block_means(exact, 16, 16)[~blocked], rtol=1e-5,
                               atol=1e-5)
    n = b.shape[1]
    eq = edges(n, 16)
    assert list(fig.data[0].y) == [f"{a}–{c - 1}" if c - 1 > a else f"{a}"
                                   for a, c in zip(eq[:-1], eq[1:], strict=True)]
    assert fig.layout.yaxis.autorange == "reversed"  # first queries at the top
    assert "block means" in fig.layout.title.text and "blocked" in fig.layout.title.text
    if view == "scores":
        assert fig.data[0].zmin == -fig.data[0].zmax


def test_block_heatmap_switches_to_pooled_above_the_threshold(small):
    _, b = small
    n = b.shape[1]
    exact = block_heatmap(b, 2)  # below the threshold: one row/column per token
    assert list(exact.data[0].y)[:2] == ["0·&lt;bos>", "1·the"]  # escaped for plotly
    np.testing.assert_array_equal(np.isnan(z_of(exact)), b.mask)
    pooled = block_heatmap(b, 2, exact_max=16)  # "long": pooled, bins of one token here
    assert "block means" in pooled.layout.title.text
    z = z_of(pooled)
    assert z.shape == (n, n) and pooled.data[0].y[1] == "1"
    # pooled (all heads' rows in chunks) vs the head computed alone: two float32 softmax runs
    np.testing.assert_allclose(np.nan_to_num(z), b.head(2), atol=1e-5)


def test_pooled_mask_fraction_matches_the_dense_mask(small):
    _, b = small
    for bq, bk in ((16, 16), (5, 7), (41, 3)):
        np.testing.assert_array_equal(pooled_blocked(b, bq, bk), all_blocked(b.mask, bq, bk))


def test_grid_thumbnails_are_block_means_scaled_to_their_max(small):
    trace, _ = small
    blocks = trace.layers("decoder.self")
    fig = blocks_grid(blocks, size=8)
    tiled = z_of(fig)
    gap = 1  # round(8 / 16) -> at least 1
    for li, blk in enumerate(blocks):
        for h in range(blk.n_heads):
            want = block_means(blk.head(h).astype(np.float64), 8, 8)
            want /= want.max()
            r, c = li * (8 + gap), h * (8 + gap)
            # thumbnails pooled by the trace (float32) vs numpy's float64 means of head(h)
            np.testing.assert_allclose(tiled[r:r + 8, c:c + 8], want, rtol=1e-5, atol=1e-5)
    assert "block means" in fig.layout.title.text
    # at the overview size or below, thumbnails are the exact patterns on a fixed scale
    fig = blocks_grid(blocks, size=64)
    n = blocks[0].shape[1]
    # the grid's overview (all heads, row chunks) vs the head computed alone
    np.testing.assert_allclose(z_of(fig)[:n, :n], blocks[0].head(0), atol=1e-5)
    assert "block means" not in (fig.layout.title.text or "")


def test_pooled_mean_and_max_over_heads(small):
    _, b = small
    p = np.stack([b.head(h) for h in range(b.n_heads)]).astype(np.float64)
    blocked = all_blocked(b.mask, 16, 16)
    mean = z_of(block_aggregate_heatmap(b, "mean", exact_max=16, size=16))
    # pooled by the trace in float32 vs numpy's float64 means (here and below)
    np.testing.assert_allclose(mean[~blocked], block_means(p.mean(0), 16, 16)[~blocked],
                               rtol=1e-5, atol=1e-5)
    mx = block_aggregate_heatmap(b, "max", exact_max=16, size=16)
    per_head = np.stack([block_means(p[h], 16, 16) for h in range(len(p))])
    np.testing.assert_allclose(z_of(mx)[~blocked], per_head.max(0)[~blocked], rtol=1e-5,
                               atol=1e-5)
    assert "block means" in mx.layout.title.text
    assert np.isnan(z_of(mx)[blocked]).all()
    # short: exact, as before
    np.testing.assert_allclose(np.nan_to_num(z_of(block_aggregate_heatmap(b, "mean"))),
                               p.mean(0), atol=1e-5)


# ---- windows are slices ------------------------------------------------------------------
def test_window_heatmap_and_mask_window_are_slices(small):
    _, b = small
    n = b.shape[1]
    rows, cols = clip_window(b, 20, n - 5, 16)
    assert rows == (20, 36) and cols == (n - 16, n)  # moved back inside the block
    np.testing.assert_array_equal(b.mask_window(rows, cols), b.mask[20:36, n - 16:])
    for view, what in (("weights", "pattern"), ("scores", "scores")):
        fig = block_window_heatmap(b, 0, rows, cols, view)
        z = z_of(fig)
        exact = b.head(0, what)[20:36, n - 16:]
        m = b.mask[20:36, n - 16:]
        np.testing.assert_array_equal(np.isnan(z), m)
        np.testing.assert_allclose(z[~m], exact[~m], atol=1e-6)
        assert fig.data[0].y[0] == f"20·{plot_text(b.query_tokens[20])}"
        assert fig.data[0].x[0] == f"{n - 16}·{plot_text(b.key_tokens[n - 16])}"
    assert clip_window(b, 0, 0, 10_000)[0] == (0, n)  # never more than the block


def test_mask_window_never_builds_the_dense_mask(small):
    trace, _ = small
    b = trace[trace.blocks[1]]
    got = b.mask_window((3, 9), (0, 12))
    assert "mask" not in b._cache
    np.testing.assert_array_equal(got, np.triu(np.ones((b.shape[1],) * 2, bool), 1)[3:9, :12])
    assert b.mask_window((5, 5), (0, 4)).shape == (0, 4)


def test_head_view_window_draws_the_windows_edges(small, monkeypatch):
    _, b = small
    fig = block_head_view(b, heads=[1], rows=(10, 20), cols=(0, 20), threshold=0.0)
    ys = np.concatenate([np.asarray(t.y, dtype=float) for t in fig.data
                         if (t.meta or {}).get("head") == 1])
    q, k = ys[0::3], ys[1::3]
    w = b.window(1, (10, 20), (0, 20))
    assert len(q) == int((w > 0).sum())  # every drawn edge is a positive weight of the window
    assert np.all(w[q.astype(int), k.astype(int)] > 0)
    tokens = next(t for t in fig.data if t.name == "query tokens")
    assert tokens.hovertext[0] == f"query 10: {plot_text(b.query_tokens[10])}"
    monkeypatch.setattr(headview, "HEADVIEW_MAX", 16)
    monkeypatch.setattr(headview, "HEADVIEW_WINDOW", 16)
    with pytest.raises(ValueError, match="window"):
        block_head_view(b, heads=[0])
    with pytest.raises(ValueError, match="at most"):
        block_head_view(b, heads=[0], rows=(0, 40), cols=(0, 16))


# ---- 8,192 tokens: budgets, and nothing N x N read ----------------------------------------
@pytest.fixture(scope="module")
def long_trace():
    model = toy_model("decoder-only", seed=5, max_len=N_LONG, d_model=32, n_heads=2,
                      n_decoder_layers=2, d_ff=64)
    trace = model.trace(" ".join(["a", "i", "the", "cat"][i % 4] for i in range(N_LONG)),
                        capture=("pattern",))
    assert trace[trace.blocks[0]].shape == (2, N_LONG, N_LONG)
    return trace


def test_every_attention_figure_fits_at_8192_tokens(long_trace):
    blocks = long_trace.layers("decoder.self")
    b = blocks[0]
    rows, cols = clip_window(b, 4000, 3900, ZOOM_MAX)
    srows, scols = clip_window(b, 4000, 3900, ZOOM_MAX_SIGNED)
    hrows, hcols = clip_window(b, 8000, 7950, 128, 128)
    figures = {
        "heatmap": block_heatmap(b, 0),
        "scores": block_heatmap(b, 1, view="scores"),
        "zoom": block_window_heatmap(b, 0, rows, cols),
        "zoom scores": block_window_heatmap(b, 0, srows, scols, view="scores"),
        "mean": block_aggregate_heatmap(b, "mean"),
        "max": block_aggregate_heatmap(b, "max"),
        "head view": block_head_view(b, heads=[0, 1], top_k=5, rows=hrows, cols=hcols),
    }
    sizes = {name: size(fig) for name, fig in figures.items()}
    assert all(s <= ONE_FIGURE for s in sizes.values()), sizes
    grid = blocks_grid(blocks, size=64)
    assert size(grid) <= GRID
    assert z_of(grid).shape == (2 * 64 + 4, 2 * 64 + 4)
    for name in ("heatmap", "mean", "max"):
        assert max(z_of(figures[name]).shape) <= POOLED_SIZE, name
    for name in ("zoom", "zoom scores"):  # full resolution, token labels
        assert "pooled" not in figures[name].layout.title.text, name
    assert z_of(figures["zoom"]).shape == (ZOOM_MAX, ZOOM_MAX)
    assert figures["zoom"].data[0].y[0] == f"4000·{plot_text(b.query_tokens[4000])}"
    # the pooled causal head: grey above the diagonal, rows of mass below it
    z = z_of(figures["heatmap"])
    assert np.isnan(z[0, -1]) and np.isfinite(np.diag(z)).all()
    for blk in blocks:  # nothing N x N was read to draw these
        assert not {"pattern", "scores", "mask"} & set(blk._cache), set(blk._cache)
    assert rollout_bytes(blocks) == 2 * 2 * N_LONG * N_LONG * 4
