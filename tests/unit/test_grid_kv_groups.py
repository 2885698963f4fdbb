"""Grouped-query attention on the layer x head grid: separators between key/value groups and
a "kv g: heads a-b" label under each, from the blocks' own kv_group."""

from __future__ import annotations

import numpy as np
import pytest

import viz_core as vc
from tests.support.hf_tiny_modern import make_tiny
from viz_core.figures.grid import blocks_grid, layer_head_grid, tile_patterns


def patterns(n_layers=2, n_heads=4, n=5):
    rng = np.random.default_rng(0)
    p = rng.random((n_layers, n_heads, n, n)).astype(np.float32)
    return p / p.sum(-1, keepdims=True)


def test_groups_get_separators_and_labels():
    p = patterns()
    _, (tq, tk), gap = tile_patterns(p)
    fig = layer_head_grid(p, kv_group=[0, 0, 1, 1])
    lines = [s for s in fig.layout.shapes if s.type == "line"]
    assert len(lines) == 1  # one boundary, between head 1 and head 2
    x = lines[0].x0
    assert 2 * (tk + gap) - gap - 0.5 < x < 2 * (tk + gap) - 0.5  # in the gutter
    assert [a.text for a in fig.layout.annotations] == ["kv 0: heads 0-1", "kv 1: heads 2-3"]
    # the clickable cells still carry (layer, head)
    assert list(fig.data[1].customdata[0]) == [0, 0]


def test_multi_query_and_single_head_groups():
    p = patterns(n_heads=3)
    fig = layer_head_grid(p, kv_group=[0, 0, 0])  # multi-query: one group, no separator
    assert not fig.layout.shapes
    assert [a.text for a in fig.layout.annotations] == ["kv 0: heads 0-2"]
    fig = layer_head_grid(p, kv_group=[0, 1, 2])  # plain multi-head: nothing shared
    assert not fig.layout.shapes and not fig.layout.annotations
    fig = layer_head_grid(p)
    assert not fig.layout.shapes and not fig.layout.annotations
    with pytest.raises(ValueError, match="2 entries for 3 heads"):
        layer_head_grid(p, kv_group=[0, 1])


def test_blocks_grid_reads_the_models_groups(tmp_path):
    model = vc.load(str(make_tiny("llama", tmp_path / "llama")))
    trace = model.trace("the cat sat on the mat")
    fig = blocks_grid(trace.layers("decoder.self"))
    assert [a.text for a in fig.layout.annotations] == ["kv 0: heads 0-1", "kv 1: heads 2-3"]
    native = vc.load("lm").trace("the cat")
    fig = blocks_grid(native.layers("decoder.self"))
    assert not fig.layout.shapes and not fig.layout.annotations
