"""Figure builders: the data inside each figure equals its inputs (or a closed form).

References are the inputs themselves, closed forms, or torch's own attention.
Size budgets (MiniLM-shaped inputs) live in tests/unit/test_figures_size.py.
"""

from __future__ import annotations

import html
import json
import math

import numpy as np
import pytest

from tests.support.beam_trees import synthetic_tree
from tests.support.language import speaking
from viz_core import i18n
from viz_core.analysis.heads import masked_softmax
from viz_core.capture.trace import BlockTrace
from viz_core.figures import (
    attention_heatmap,
    beam_tree_figure,
    block_heatmap,
    causal_mask,
    head_internals,
    head_view,
    inside_head_figures,
    layer_head_grid,
    mask_union_figure,
    masking_steps_figure,
    padding_batch_figure,
    padding_mask,
    pe_similarity,
    pool2d,
    positional_curves,
    positional_heatmap,
    selected_cell,
    selected_node,
    similarity_figure,
    sinusoidal_table,
    sinusoidal_wavelengths,
    tree_layout,
    wavelength_figure,
)
from viz_core.figures.headview import N_BUCKETS, bucket_of, bucket_opacity

SENT = ["the", "cat", "saw", "the", "dog"]


def rand_pattern(rng, shape, mask=None):
    """Row-stochastic float32 patterns; blocked keys exactly 0."""
    return masked_softmax(rng.normal(size=shape) * 2, mask)


def heat(fig):
    return next(t for t in fig.data if t.type == "heatmap")


# ----------------------------------------------------------------------------- heatmap


def test_heatmaps_leave_no_grey_frame_round_the_cells():
    """Streamlit's theme pads the plot area by 8 px (margin.pad) and the heatmap's grey
    "blocked" background showed through as a frame round the cells: a figure with a grey
    plot background sets the pad to 0 itself, and keeps its own margins."""
    from viz_core.figures.heatmap import pooled_heatmap

    rng = np.random.default_rng(0)
    mask = np.triu(np.ones((5, 5), bool), 1)
    figs = [attention_heatmap(rand_pattern(rng, (5, 5), mask), SENT, SENT, mask=mask),
            pooled_heatmap(rng.random((8, 8)), 4096, 4096, blocked=np.eye(8, dtype=bool))]
    for fig in figs:
        assert fig.layout.margin.pad == 0
    # a white plot shows no frame and keeps the pad (line charts: tick labels apart)
    assert positional_curves(sinusoidal_table(16, 8), [0, 1]).layout.margin.pad is None
    assert figs[0].layout.plot_bgcolor != "white"  # the grey that would show
    assert figs[0].layout.margin.t is not None  # its own top margin is kept beside the pad


def test_heatmap_data_labels_and_orientation_with_repeated_words():
    rng = np.random.default_rng(0)
    p = rand_pattern(rng, (5, 5))
    fig = attention_heatmap(p, SENT, SENT)
    h = heat(fig)
    np.testing.assert_array_equal(np.asarray(h.z), p)
    # both "the" keep their own column and row: 5 distinct categories
    assert len(set(h.x)) == 5 and len(set(h.y)) == 5
    assert list(fig.layout.xaxis.ticktext) == SENT
    assert list(fig.layout.yaxis.ticktext) == SENT
    assert list(fig.layout.xaxis.tickvals) == list(h.x)
    # matrix orientation: first query at the top, keys left to right
    assert fig.layout.yaxis.autorange == "reversed"
    assert h.y[0].endswith("the") and h.y[0] != h.y[3]
    assert (fig.layout.xaxis.autorange in (None, True)) and h.x[1].endswith("cat")
    assert (h.zmin, h.zmax) == (0.0, 1.0)
    assert "→" in h.hovertemplate and "%{z" in h.hovertemplate
    assert np.asarray(h.z).dtype == np.float32


def test_cross_attention_heatmap_is_targets_by_sources():
    rng = np.random.default_rng(1)
    src, tgt = ["9", "may", "2018", "</s>"], ["<bos>", "2018", "-"]
    p = rand_pattern(rng, (3, 4))
    h = heat(attention_heatmap(p, tgt, src))
    assert np.asarray(h.z).shape == (3, 4)
    assert [html.unescape(lab.split("·", 1)[1]) for lab in h.y] == tgt
    assert [html.unescape(lab.split("·", 1)[1]) for lab in h.x] == src
    with pytest.raises(ValueError):
        attention_heatmap(p.T, tgt, src)


def test_heatmap_mask_is_grey_nan_with_marks_and_scores_view():
    rng = np.random.default_rng(2)
    mask = causal_mask(5)
    scores = rng.normal(size=(5, 5)).astype(np.float32)
    p = masked_softmax(scores, mask)
    block = BlockTrace("decoder.0.self", p[None], scores[None], mask, SENT, SENT)
    fig = block_heatmap(block, 0)
    z = np.asarray(heat(fig).z)
    np.testing.assert_array_equal(np.isnan(z), mask)
    np.testing.assert_array_equal(z[~mask], p[~mask])
    marks = [t for t in fig.data if t.type == "scatter"]
    assert len(marks) == 1 and len(marks[0].x) == mask.sum()
    assert "blocked" in fig.layout.title.text
    fs = block_heatmap(block, 0, view="scores")
    zs = np.asarray(heat(fs).z)
    np.testing.assert_array_equal(np.isnan(zs), mask)
    np.testing.assert_array_equal(zs[~mask], scores[~mask])
    assert heat(fs).zmin == -heat(fs).zmax  # diverging, centred on 0
    with pytest.raises(ValueError):
        attention_heatmap(p, SENT, SENT, view="scores")  # no scores given


def test_long_heatmap_subsamples_ticks_but_keeps_every_row():
    rng = np.random.default_rng(3)
    n = 200
    toks = [f"w{i % 7}" for i in range(n)]
    fig = attention_heatmap(rand_pattern(rng, (n, n)), toks, toks)
    h = heat(fig)
    assert len(set(h.x)) == n and len(set(h.y)) == n
    assert len(fig.layout.xaxis.tickvals) <= 64
    # the key labels on top stand vertically side by side: fewer of them (issue 24)
    from viz_core.figures.common import TOP_AXIS_TICKS

    assert list(fig.layout.xaxis.ticktext) == toks[:: math.ceil(n / TOP_AXIS_TICKS)]
    assert list(fig.layout.yaxis.ticktext) == toks[:: math.ceil(n / 64)]


# ----------------------------------------------------------------------------- grid


def naive_pool(m, fq, fk, how):
    nq, nk = math.ceil(m.shape[0] / fq), math.ceil(m.shape[1] / fk)
    out = np.zeros((nq, nk), np.float32)
    for i in range(nq):
        for j in range(nk):
            block = m[i * fq:(i + 1) * fq, j * fk:(j + 1) * fk]
            out[i, j] = block.max() if how == "max" else block.mean()
    return out


@pytest.mark.parametrize("how", ["max", "mean"])
def test_pool2d_matches_naive_blocks(how):
    m = np.random.default_rng(4).random((37, 50)).astype(np.float32)
    got = pool2d(m, max_size=16, how=how)
    fq, fk = math.ceil(37 / 16), math.ceil(50 / 16)  # each side pooled to <= 16
    assert got.shape == (math.ceil(37 / fq), math.ceil(50 / fk)) and max(got.shape) <= 16
    np.testing.assert_allclose(got, naive_pool(m, fq, fk, how), rtol=1e-6)
    np.testing.assert_allclose(pool2d(m, how=how, factor=5), naive_pool(m, 5, 5, how),
                               rtol=1e-6)
    np.testing.assert_array_equal(pool2d(m, max_size=64, how=how), m)


def test_grid_tiles_equal_patterns_and_clicks_name_their_cell():
    rng = np.random.default_rng(5)
    L, H, n = 3, 4, 6
    p = rand_pattern(rng, (L, H, n, n))
    fig = layer_head_grid(p)
    tiled = np.asarray(heat(fig).z)
    gap = 1
    for lay in range(L):
        for h in range(H):
            r, c = lay * (n + gap), h * (n + gap)
            np.testing.assert_array_equal(tiled[r:r + n, c:c + n], p[lay, h])
    assert fig.layout.yaxis.autorange == "reversed"  # layer 0 on top
    cells = next(t for t in fig.data if t.name == "cells")
    seen = set()
    for x, y, (lay, h) in zip(cells.x, cells.y, cells.customdata, strict=True):
        # each click target lies inside the thumbnail of the (layer, head) it names
        assert h * (n + gap) - 0.5 <= x <= h * (n + gap) + n - 0.5
        assert lay * (n + gap) - 0.5 <= y <= lay * (n + gap) + n - 0.5
        seen.add((lay, h))
    assert seen == {(a, b) for a in range(L) for b in range(H)}
    sel = {"points": [{"curve_number": 1, "customdata": [2, 3], "x": 1.0, "y": 2.0}]}
    assert selected_cell(sel) == (2, 3)
    assert selected_cell({"points": []}) is None


# ----------------------------------------------------------------------------- head view


def segments_by_head(fig):
    out = {}
    for t in fig.data:
        if t.meta and "head" in t.meta:
            x, y = np.asarray(t.x), np.asarray(t.y)
            assert np.isnan(x[2::3]).all() and np.isnan(y[2::3]).all()
            assert (x[0::3] == 0).all() and (x[1::3] == 1).all()
            for q, k in zip(y[0::3].astype(int), y[1::3].astype(int), strict=True):
                out.setdefault(t.meta["head"], []).append((q, k, t.meta["bucket"], t.opacity))
    return out


def test_head_view_draws_every_edge_in_its_opacity_bucket():
    rng = np.random.default_rng(6)
    p = rand_pattern(rng, (3, 5, 5))
    fig = head_view(p, SENT, SENT, heads=[0, 2], threshold=0.0)
    segs = segments_by_head(fig)
    assert set(segs) == {0, 2}
    for h, edges in segs.items():
        assert sorted((q, k) for q, k, _, _ in edges) == sorted(zip(*np.nonzero(p[h] > 0)))
        for q, k, b, op in edges:
            assert b == bucket_of(p[h, q, k]) and op == bucket_opacity(b)
    assert len(fig.data) <= 2 * N_BUCKETS + 2  # batched: few traces, not one per edge


def test_head_view_long_input_keeps_top_k_and_threshold():
    rng = np.random.default_rng(7)
    n = 40
    p = rand_pattern(rng, (2, n, n))
    toks = [f"t{i}" for i in range(n)]
    fig = head_view(p, toks, toks, top_k=3, threshold=0.01)
    for h, edges in segments_by_head(fig).items():
        got = {(q, k) for q, k, _, _ in edges}
        want = {(q, k) for q in range(n) for k in np.argsort(-p[h, q])[:3] if p[h, q, k] > 0.01}
        assert got == want
    auto = head_view(p, toks, toks, max_edges=400)  # 2 heads x 40 queries -> top 5
    default = segments_by_head(head_view(p, toks, toks))  # default threshold 0.02, all keys
    assert {(q, k) for q, k, _, _ in default[1]} == set(zip(*np.nonzero(p[1] > 0.02)))
    assert all(len(e) <= 2 * n * 5 for e in segments_by_head(auto).values())
    assert "top 5" in auto.layout.title.text


# ----------------------------------------------------------------------------- inside a head


def torch_reference(q, k, v, mask):
    """Pattern and output of the same head computed by torch (True = blocked converted to
    SDPA's True = allowed)."""
    torch = pytest.importorskip("torch")
    qt, kt, vt = (torch.from_numpy(a.astype(np.float64)) for a in (q, k, v))
    allowed = torch.from_numpy(~mask)
    z = torch.nn.functional.scaled_dot_product_attention(qt, kt, vt, attn_mask=allowed)
    scores = (qt @ kt.T) / math.sqrt(q.shape[-1])
    pattern = torch.softmax(scores.masked_fill(~allowed, float("-inf")), dim=-1)
    return pattern.numpy(), z.numpy()


def test_inside_head_reproduces_pattern_row_and_output_row():
    rng = np.random.default_rng(8)
    nq, nk, d = 4, 6, 8
    q, k, v = (rng.normal(size=s).astype(np.float32) for s in ((nq, d), (nk, d), (nk, d)))
    mask = np.zeros((nq, nk), bool)
    mask[:, 4:] = True  # two padding keys
    mask[0, 1] = True
    pattern, z = torch_reference(q, k, v, mask)
    block = BlockTrace("encoder.0.self", pattern[None].astype(np.float32), None, mask,
                       SENT[:4], SENT + ["<pad>"], q=q[None], k=k[None], v=v[None],
                       z=z[None].astype(np.float32))
    for i in range(nq):
        s = head_internals(q, k, v, mask, i)
        np.testing.assert_allclose(s["products"].sum(-1), s["raw"])
        np.testing.assert_allclose(s["scaled"], q[i].astype(np.float64) @ k.T.astype(np.float64)
                                   / math.sqrt(d), rtol=1e-6)
        assert np.isneginf(s["masked"][mask[i]]).all()
        np.testing.assert_allclose(s["weights"], block.pattern[0, i], atol=1e-6)
        np.testing.assert_allclose(s["z"], block.z[0, i], atol=1e-5)
        figs = inside_head_figures(q, k, v, mask, i, block.query_tokens, block.key_tokens)
        assert list(figs) == ["q", "k", "products", "raw", "scaled", "masked", "weights",
                              "weighted_v", "z"]
        bars = np.asarray(figs["weights"].data[0].y)
        np.testing.assert_allclose(bars[~mask[i]], block.pattern[0, i][~mask[i]], atol=1e-6)
        assert np.isnan(bars[mask[i]]).all()  # blocked: no bar, a ✕ instead
        assert len(figs["masked"].data[1].x) == mask[i].sum()
        np.testing.assert_allclose(np.asarray(figs["z"].data[0].z)[0], block.z[0, i], atol=1e-5)
        np.testing.assert_allclose(np.asarray(figs["q"].data[0].z)[0], q[i])
        np.testing.assert_allclose(np.asarray(figs["k"].data[0].z), k)


def test_long_inputs_keep_the_weightiest_keys_rows():
    """Beyond MAX_KEY_ROWS keys, the one-row-per-key matrices keep the keys with the largest
    weights, in position order, each row the key's own; the bars keep every key; many blocked
    keys get a ✕ without a "−∞" label each."""
    from viz_core.figures.inside import MAX_KEY_ROWS

    rng = np.random.default_rng(4)
    nk, d, i = 4 * MAX_KEY_ROWS, 8, 2 * MAX_KEY_ROWS
    q, k, v = (rng.normal(size=(nk, d)).astype(np.float32) for _ in range(3))
    mask = np.triu(np.ones((nk, nk), bool), 1)  # causal: keys after i blocked
    toks = [f"w{j}" for j in range(nk)]
    figs = inside_head_figures(q, k, v, mask, i, toks, toks)
    s = head_internals(q, k, v, mask, i)
    top = sorted(np.argsort(-s["weights"])[:MAX_KEY_ROWS])
    assert s["weights"][top].min() >= np.delete(s["weights"], top).max()
    for name, rows in (("k", k), ("products", s["products"]), ("weighted_v", s["weighted_v"])):
        fig = figs[name]
        assert list(fig.data[0].y) == [f"{j}·w{j}" for j in top], name
        assert list(fig.layout.yaxis.ticktext) == [f"{j}·w{j}" for j in top], name
        np.testing.assert_allclose(np.asarray(fig.data[0].z), rows[top], rtol=1e-6)
        assert f"{MAX_KEY_ROWS} of {nk} keys" in fig.layout.title.text
    assert len(figs["weights"].data[0].y) == nk
    marks = figs["masked"].data[1]
    assert len(marks.x) == nk - 1 - i and marks.mode == "markers"


def test_fully_blocked_query_gives_zero_weights_not_nan():
    rng = np.random.default_rng(9)
    q, k, v = (rng.normal(size=(3, 4)) for _ in range(3))
    mask = np.zeros((3, 3), bool)
    mask[1] = True
    s = head_internals(q, k, v, mask, 1)
    assert (s["weights"] == 0).all() and (s["z"] == 0).all()


# ----------------------------------------------------------------------------- positional


def test_sinusoidal_table_is_the_closed_form_for_even_and_odd_dims():
    L, d = 30, 16
    pe = sinusoidal_table(L, d)
    assert pe.shape == (L, d) and pe.dtype == np.float32
    for pos in range(L):
        for i in range(d // 2):
            angle = pos / 10000 ** (2 * i / d)
            assert pe[pos, 2 * i] == pytest.approx(math.sin(angle), abs=1e-6)
            assert pe[pos, 2 * i + 1] == pytest.approx(math.cos(angle), abs=1e-6)
    wl = sinusoidal_wavelengths(d)
    assert wl[0] == pytest.approx(2 * math.pi)
    assert wl[-1] < 10000 * 2 * math.pi and wl[-1] == pytest.approx(
        2 * math.pi * 10000 ** ((d - 2) / d))


def test_sinusoidal_table_agrees_with_the_model_if_present():
    try:
        from viz_core.model.positional import sinusoidal_encoding
    except ImportError:
        pytest.skip("viz_core.model.positional not available")
    ref = np.asarray(sinusoidal_encoding(50, 24), dtype=np.float32)
    np.testing.assert_allclose(sinusoidal_table(50, 24), ref, atol=1e-6)


def test_pe_similarity_depends_only_on_offset():
    sim = pe_similarity(sinusoidal_table(40, 32))
    for off in range(-39, 40):
        diag = np.diagonal(sim, offset=off)
        np.testing.assert_allclose(diag, diag[0], atol=1e-4)
    fig = similarity_figure(sinusoidal_table(40, 32))
    np.testing.assert_array_equal(np.asarray(heat(fig).z), sim)


def test_positional_figures_carry_the_table():
    table = np.random.default_rng(10).normal(size=(20, 12)).astype(np.float32)  # "learned"
    curves = positional_curves(table, dims=[0, 5])
    for t, dim in zip(curves.data, [0, 5], strict=True):
        np.testing.assert_array_equal(np.asarray(t.y), table[:, dim])
    sin_curves = positional_curves(sinusoidal_table(8, 4), [0, 1], sinusoidal=True)
    names = [t.name for t in sin_curves.data]
    assert names == ["dim 0 (sin)", "dim 1 (cos)"]
    hm = positional_heatmap(table)
    np.testing.assert_array_equal(np.asarray(heat(hm).z), table)
    assert hm.layout.yaxis.autorange == "reversed"
    wf = wavelength_figure(d_model=12)
    np.testing.assert_allclose(np.asarray(wf.data[0].y), sinusoidal_wavelengths(12), rtol=1e-6)
    assert wf.layout.yaxis.type == "log"
    assert "estimated" in wavelength_figure(table).data[0].name


# ----------------------------------------------------------------------------- masks


def test_padding_and_causal_masks_follow_the_convention():
    m = padding_mask([3, 5], 5)
    assert m.shape == (2, 5, 5)
    for b, length in enumerate([3, 5]):
        for q in range(5):
            for k in range(5):
                assert m[b, q, k] == (k >= length)  # PAD columns blocked for every row
    c = causal_mask(4)
    assert all(c[q, k] == (k > q) for q in range(4) for k in range(4))


def test_mask_figures_show_the_masks():
    sents = [["a", "b", "c"], ["d", "e", "f", "g", "h"]]
    fig = padding_batch_figure(sents, causal=True)
    masks = padding_mask([3, 5], 5) | causal_mask(5)[None]
    heats = [t for t in fig.data if t.type == "heatmap"]
    assert len(heats) == 2
    for h, m in zip(heats, masks, strict=True):
        np.testing.assert_array_equal(np.asarray(h.z).astype(bool), m)
    assert "True = blocked" in fig.layout.title.text
    # shown as typed: "<" is escaped for plotly, which turns &lt; back into "<"
    assert list(fig.layout.xaxis.ticktext) == ["a", "b", "c", "&lt;pad>", "&lt;pad>"]
    assert [html.unescape(t) for t in fig.layout.xaxis.ticktext] == ["a", "b", "c", "<pad>",
                                                                    "<pad>"]
    u = mask_union_figure(SENT + ["<pad>"], length=5)
    zs = [np.asarray(t.z).astype(bool) for t in u.data if t.type == "heatmap"]
    np.testing.assert_array_equal(zs[2], zs[0] | zs[1])
    np.testing.assert_array_equal(zs[1], causal_mask(6))


def test_masking_steps_before_after_softmax():
    rng = np.random.default_rng(11)
    s = rng.normal(size=(5, 5)).astype(np.float32)
    m = causal_mask(5)
    fig = masking_steps_figure(s, m, SENT, SENT)
    before, after, soft = (np.asarray(t.z) for t in fig.data if t.type == "heatmap")
    np.testing.assert_array_equal(before, s)
    np.testing.assert_array_equal(np.isnan(after), m)
    np.testing.assert_array_equal(after[~m], s[~m])
    np.testing.assert_allclose(np.nansum(soft, axis=1), 1.0, rtol=1e-6)
    np.testing.assert_allclose(soft[~m], masked_softmax(s, m)[~m])
    assert sum(t.type == "scatter" for t in fig.data) == 2  # ✕ marks on panels 2 and 3


# ----------------------------------------------------------------------------- beam tree


def edge_segments(fig):
    segs = []
    for t in fig.data:
        if t.name and t.name.startswith("edges"):
            x, y = np.asarray(t.x), np.asarray(t.y)
            assert np.isnan(x[2::3]).all()
            segs += [((x[i], y[i]), (x[i + 1], y[i + 1]), t.name) for i in range(0, len(x), 3)]
    return segs


def test_beam_tree_one_marker_per_node_one_edge_per_link():
    tree = synthetic_tree()
    fig = beam_tree_figure(tree)
    ids = [i for t in fig.data if t.name and t.name.startswith("nodes")
           for i in t.customdata]
    assert sorted(ids) == [n.id for n in tree.nodes]
    pos = {i: (np.float32(x), np.float32(y)) for i, (x, y) in tree_layout(tree.nodes).items()}
    segs = edge_segments(fig)
    links = [(n.parent, n.id) for n in tree.nodes if n.parent is not None]
    assert len(segs) == len(links)
    want = sorted((pos[a], pos[b]) for a, b in links)
    assert sorted((a, b) for a, b, _ in segs) == want
    # markers sit where the layout says, x = step
    for t in fig.data:
        if t.name and t.name.startswith("nodes"):
            for x, y, nid in zip(t.x, t.y, t.customdata, strict=True):
                assert (x, y) == pytest.approx(pos[nid]) and x == tree.nodes[nid].step
    # statuses styled differently
    symbols = {t.name: t.marker.symbol for t in fig.data if t.name.startswith("nodes")}
    assert len(set(symbols.values())) == len(symbols)
    # the best hypothesis' path is the thickest edge group
    best = {(pos[n.parent], pos[n.id]) for n in tree.path(tree.hypotheses[0].node_id)}
    assert {(a, b) for a, b, name in segs if name == "edges (best)"} == best
    assert selected_node({"points": [{"customdata": 7}]}) == 7
    assert selected_node({"points": [{"customdata": [5]}]}) == 5
    assert selected_node({"points": []}) is None


def test_beam_tree_speaks_the_readers_language():
    tree = synthetic_tree()
    english = beam_tree_figure(tree)
    with speaking("zh"):
        zh = beam_tree_figure(tree)
    names = [(e.name, z.name) for e, z in zip(english.data, zh.data, strict=True)
             if e.showlegend is not False]
    assert names and all(z == i18n.translations("zh").gettext(e) != e for e, z in names)
    # the same traces, the same node ids
    assert [t.customdata for t in english.data] == [t.customdata for t in zh.data]
    assert all("step" not in h and "score" not in h for t in zh.data if t.hovertext
               for h in t.hovertext)


def test_beam_tree_layout_has_no_crossing_edges_at_beam5_x20():
    tree = synthetic_tree(beam=5, steps=20, seed=1)
    pos = tree_layout(tree.nodes)
    by_step: dict[int, list] = {}
    for n in tree.nodes:
        if n.parent is not None:
            by_step.setdefault(n.step, []).append((pos[n.parent][1], pos[n.id][1]))
    for edges in by_step.values():
        e = np.array(edges)
        dp = e[:, 0][:, None] - e[:, 0][None, :]
        dc = e[:, 1][:, None] - e[:, 1][None, :]
        assert (dp * dc >= -1e-9).all()  # parents and children in the same vertical order
    fig = beam_tree_figure(tree)
    assert len(fig.to_json()) < 400_000


# ----------------------------------------------------------------------------- markup in tokens
MARKUP = ["<b>bold</b>", "<br>", "a<sup>2</sup>", "&lt;", "&#60;", "<a href='x'>l</a>",
          "x & y", "</s>", "plain"]


def test_markup_tokens_show_literally_in_every_label():
    """Plotly reads a little HTML and entities in labels, ticks and hovers: every token must
    reach it escaped, so that what plotly shows (its own entity decoding) is the token."""
    rng = np.random.default_rng(7)
    n = len(MARKUP)
    p = rand_pattern(rng, (n, n))
    figs = [attention_heatmap(p, MARKUP, MARKUP),
            head_view(p[None], MARKUP, MARKUP)]
    for fig in figs:
        texts = []
        for axis in (fig.layout.xaxis, fig.layout.yaxis):
            texts += list(axis.ticktext or [])
        for trace in fig.data:
            for field in ("x", "y", "text"):
                values = getattr(trace, field, None)
                if values is not None and len(values) and isinstance(values[0], str):
                    texts += list(values)
        assert texts
        for t in texts:
            assert "<" not in t, t  # no tag plotly could read
            assert "&" not in t.replace("&amp;", "").replace("&lt;", ""), t  # nor an entity
    heat_fig, view_fig = figs
    assert [html.unescape(t) for t in heat_fig.layout.xaxis.ticktext] == MARKUP
    token_columns = [t for t in view_fig.data if t.name == "query tokens"]
    assert [html.unescape(t) for t in token_columns[0].text] == MARKUP
    json.loads(heat_fig.to_json())  # still a valid figure
