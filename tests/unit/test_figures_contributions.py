"""Figure builders of "Which heads matter" (viz_core.figures.contributions) on small
hand-made results: every value lands in its own cell, labels stay unique and literal."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest

from viz_core.figures import contributions as fc


def attribution_frame() -> pd.DataFrame:
    rows = [("embed", "embed", None, None, 1.0), ("position", "position", None, None, -0.5)]
    rows += [(f"decoder.{i}.self.h{h}", "head", i, h, float(10 * i + h)) for i in range(2)
             for h in range(3)]
    rows += [("decoder.0.mlp", "mlp", 0, None, 0.25), ("bias", "bias", None, None, 0.125)]
    return pd.DataFrame(rows, columns=["component", "kind", "layer", "head", "contribution"])


def test_head_matrix_places_every_head_in_its_cell_in_model_order():
    names = ["decoder.1.cross.h0", "decoder.1.self.h1", "encoder.0.self.h0", "decoder.1.self.h0"]
    m, blocks, width = fc.head_matrix(names, [4.0, 3.0, 1.0, 2.0])
    assert blocks == ["encoder.0.self", "decoder.1.self", "decoder.1.cross"]
    assert width == 2
    np.testing.assert_array_equal(m, [[1.0, np.nan], [2.0, 3.0], [4.0, np.nan]])


def test_attribution_figures_carry_the_frame():
    frame = attribution_frame()
    heat = fc.attribution_heatmap(frame)
    z = np.asarray(heat.data[0].z, dtype=float)
    np.testing.assert_array_equal(z, [[0, 1, 2], [10, 11, 12]])
    assert heat.data[0].zmid == 0 and heat.data[0].zmax == -heat.data[0].zmin == 12
    bars = fc.attribution_bars(frame)
    labels = list(bars.layout.yaxis.ticktext)
    assert labels[:4] == ["embed", "position", "decoder.0.mlp", "bias"]
    # each block's heads summed: 0+1+2 and 10+11+12
    assert list(np.asarray(bars.data[0].x, dtype=float)[-2:]) == [3.0, 33.0]


def test_lens_grid_text_colour_and_escaping():
    layers, tokens = ["embed", "decoder.0"], ["<b>", "x"]
    top = [["a", "<i>"], ["c", "d"]]
    prob = np.array([[0.1, 0.2], [0.3, 0.4]])
    fig = fc.logit_lens_grid(layers, tokens, top, prob, prob, ["p", "q"])
    np.testing.assert_allclose(np.asarray(fig.data[0].z, dtype=float), prob, rtol=1e-6)
    assert [list(r) for r in fig.data[0].text] == [["a", "&lt;i>"], ["c", "d"]]
    assert list(fig.layout.xaxis.ticktext) == ["&lt;b>", "x"]


def test_composition_matrix_pivots_sender_by_receiver():
    frame = pd.DataFrame({"kind": ["K", "K", "Q", "K"],
                          "sender": ["decoder.0.self.h1", "decoder.0.self.h0",
                                     "decoder.0.self.h0", "decoder.0.self.h0"],
                          "receiver": ["decoder.1.self.h0", "decoder.1.self.h0",
                                       "decoder.1.self.h0", "decoder.1.self.h1"],
                          "score": [0.5, 0.25, 0.9, 0.75]})
    m, senders, receivers = fc.composition_matrix(frame, "K")
    assert senders == ["decoder.0.self.h0", "decoder.0.self.h1"]
    assert receivers == ["decoder.1.self.h0", "decoder.1.self.h1"]
    np.testing.assert_array_equal(m, [[0.25, 0.75], [0.5, np.nan]])


def test_qk_bars_keep_the_largest_terms_by_size():
    frame = pd.DataFrame({"query_component": ["a", "b", "c", "d"],
                          "key_component": ["w", "x", "y", "z"],
                          "contribution": [0.1, -3.0, 2.0, 0.01]})
    fig = fc.qk_bars(frame, score=-0.89, top=2)
    assert list(fig.layout.yaxis.ticktext) == ["b × x", "c × y"]
    assert list(np.asarray(fig.data[0].x, dtype=float)) == [-3.0, 2.0]


def test_patching_figures():
    effect = np.array([[0.0, 1.0], [np.nan, -0.5]])
    fig = fc.patching_heatmap(effect, ["L0", "L1"], ["h0", "h1"], title="t", limit=2.0)
    assert fig.data[0].zmin == -2.0 and fig.data[0].zmax == 2.0
    assert fc.shared_limit(effect, np.array([3.0])) == 3.0
    sc = fc.patching_scatter(effect, effect * 2, ["a", "b", "c", "d"], pearson=1.0)
    assert len(sc.data[1].x) == 3  # the NaN unit is left out
    assert "r = 1.000" in sc.layout.title.text


@pytest.mark.parametrize("score", [np.nan, 0.5])
def test_head_search_heatmap(score):
    frame = pd.DataFrame({"block": ["decoder.0.self", "decoder.0.self"], "head": [1, 0],
                          "score": [score, 0.25]})
    z = np.asarray(fc.head_search_heatmap(frame, "t").data[0].z, dtype=float)
    np.testing.assert_array_equal(z, [[0.25, score]])
