"""Each layer's real mask (viz_core.figures.masks): the sliding-window mask by hand, local and
global layers of tiny Mistral / Gemma 2 / Gemma 3 / Llama models grouped and labelled from the
trace, the window panel of a block's mask parts, and long inputs read from a window only."""

from __future__ import annotations

import json

import numpy as np
import pytest

from viz_core.figures.masks import (
    causal_mask,
    layer_masks,
    layer_masks_figure,
    mask_parts_figure,
    sliding_window_mask,
    span_label,
)

TEXT = "the cat sat on the mat because it was tired"


@pytest.fixture(scope="module")
def tiny(tiny_models):
    return lambda family: tiny_models.load(family, seed=0, dtype="auto")[0]


def test_sliding_window_mask_by_hand():
    # window 2: query q sees keys q-1 and q; q - k >= 2 is blocked
    expected = np.array([[0, 0, 0, 0],
                         [0, 0, 0, 0],
                         [1, 0, 0, 0],
                         [1, 1, 0, 0]], dtype=bool)
    np.testing.assert_array_equal(sliding_window_mask(4, 2), expected)
    assert sliding_window_mask(3, 1).sum() == 3  # only itself: the 3 cells below the diagonal
    assert sliding_window_mask(2, 4, n_keys=3).shape == (2, 3)
    assert span_label(None) == "global" and span_label(0) == "global"
    assert span_label(4) == "local, window 4"


@pytest.mark.parametrize("family, expected", [
    ("mistral", [(4, [0, 1])]),
    ("gemma2", [(4, [0]), (None, [1])]),
    ("gemma3_text", [(4, [0]), (None, [1])]),
    ("llama", [(None, [0, 1])]),
])
def test_layer_masks_group_local_and_global_layers(tiny, family, expected):
    trace = tiny(family).trace(TEXT, target="the mat on the cat")
    blocks = trace.layers("decoder.self")
    entries, n = layer_masks(blocks)
    assert n == len(trace.target_tokens)
    assert [(w, layers) for _, w, layers in entries] == expected
    causal = causal_mask(n)
    for m, w, layers in entries:
        np.testing.assert_array_equal(m, trace[f"decoder.{layers[0]}.self"].mask)
        want = causal | sliding_window_mask(n, w) if w else causal
        np.testing.assert_array_equal(m, want)
    fig = layer_masks_figure(blocks, blocks[0].query_tokens, blocks[0].key_tokens)
    titles = [a["text"] for a in json.loads(fig.to_json())["layout"]["annotations"]]
    want_titles = {"mistral": ["layers 0, 1: local, window 4"],
                   "gemma2": ["layer 0: local, window 4", "layer 1: global"],
                   "gemma3_text": ["layer 0: local, window 4", "layer 1: global"],
                   "llama": ["layers 0, 1: global"]}[family]
    assert titles == want_titles


def test_layer_masks_of_a_long_input_read_only_the_first_rows(tiny):
    trace = tiny("gemma2").trace(TEXT, target="the mat on the cat")
    blocks = trace.layers("decoder.self")
    full = blocks[0].mask
    entries, n = layer_masks(blocks, max_tokens=5)
    assert n == 5
    np.testing.assert_array_equal(entries[0][0], full[:5, :5])
    fig = layer_masks_figure(blocks, blocks[0].query_tokens, blocks[0].key_tokens, max_tokens=5)
    assert "first 5 tokens" in json.loads(fig.to_json())["layout"]["title"]["text"]


def test_mask_parts_of_a_local_layer_union_to_its_real_mask(tiny):
    b = tiny("mistral").trace(TEXT)["decoder.0.self"]
    fig = json.loads(mask_parts_figure(b.mask, b.query_tokens, b.key_tokens, causal=True,
                                       window=b.window_size).to_json())
    heatmaps = [t for t in fig["data"] if t["type"] == "heatmap"]
    assert len(heatmaps) == 4

    def z(t):
        v = t["z"]
        if isinstance(v, dict):  # plotly's typed array
            import base64
            raw = np.frombuffer(base64.b64decode(v["bdata"]), dtype=v["dtype"])
            return raw.reshape([int(s) for s in v["shape"].split(",")]).astype(bool)
        return np.asarray(v, dtype=bool)

    pad, causal, window, union = (z(t) for t in heatmaps)
    np.testing.assert_array_equal(pad | causal | window, union)
    np.testing.assert_array_equal(union, b.mask)
    assert window.any() and not pad.any()
