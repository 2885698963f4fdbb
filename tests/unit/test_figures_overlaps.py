"""Figure layouts that keep chart text apart (issue 24, item 3), checked on the figures
themselves; tests/browser/test_overlaps_browser.py reads the same charts as Chromium draws them."""

from __future__ import annotations

import numpy as np
import pytest

import viz_core as vc
from viz_core.decoding.beam_tree import BeamNode, BeamTree, Hypothesis
from viz_core.figures import beam as fb
from viz_core.figures.grid import layer_head_grid
from viz_core.figures.heatmap import matrix_heatmap
from viz_core.figures.masks import batch_masks_figure, mask_parts_figure, masking_steps_figure
from viz_core.figures.pretraining import objective_figure
from viz_core.lessons import pretraining as pt

LABEL_PX = 14  # a 10 px node label (its line box), above its marker
TITLE_PX = 44  # a chart title's line at the top of a figure
CHAR_PX = 7  # a character of a 12 px tick label, about


@pytest.fixture(scope="module")
def en_fr_tree():
    """The issue's crowded tree: en-fr, beam 4 (its "petit/petits/petite" at steps 2-3)."""
    return vc.load("en-fr").beam_search("the small black cats eat the cake", beam_size=4,
                                        max_len=24)


def labelled_gaps(tree: BeamTree, pos) -> list[float]:
    """Vertical distances (in slots) between neighbouring labelled nodes of each step."""
    by_step: dict[int, list[float]] = {}
    for n in tree.nodes:
        if n.status != "pruned":
            by_step.setdefault(n.step, []).append(pos[n.id][1])
    return [b - a for ys in by_step.values() for a, b in zip(sorted(ys), sorted(ys)[1:])]


def slot_px(fig) -> float:
    """Pixels per vertical slot of a beam tree figure (its plot height over its y span)."""
    ys = np.concatenate([np.asarray(t.y, dtype=float) for t in fig.data
                         if t.name.startswith("nodes")])
    plot = fig.layout.height - (fig.layout.margin.t or 50) - (fig.layout.margin.b or 50)
    return plot / (np.nanmax(ys) - np.nanmin(ys) + 1.0)


def test_beam_labels_of_one_step_are_a_label_height_apart(en_fr_tree):
    pos = fb.tree_layout(en_fr_tree.nodes)
    gaps = labelled_gaps(en_fr_tree, pos)
    fig = fb.beam_tree_figure(en_fr_tree)
    assert min(gaps) * slot_px(fig) >= LABEL_PX, (min(gaps), slot_px(fig))


def node(i, parent, step, status, score=0.0):
    return BeamNode(i, parent, step, f"t{i}", i, 0.0, score, score, status)


def test_beam_layout_moves_a_parent_down_rather_than_onto_a_neighbour():
    """A kept leaf followed by a node whose only child was pruned: centred on that child,
    the node would sit 0.65 slot under the leaf (its label on the leaf's); it moves down."""
    nodes = [node(0, None, 0, "root"), node(1, 0, 1, "kept", -1.0), node(2, 0, 1, "kept", -2.0),
             node(3, 1, 2, "finished", -1.0), node(4, 2, 2, "kept", -2.0),
             node(5, 4, 3, "pruned", -3.0)]
    tree = BeamTree(nodes, [Hypothesis(["t1", "t3"], [1, 3], "t1 t3", -1.0, 3)])
    pos = fb.tree_layout(nodes)
    assert min(labelled_gaps(tree, pos)) >= 1.0
    order = sorted((n for n in nodes if n.step == 2), key=lambda n: pos[n.id][1])
    assert [n.id for n in order] == [3, 4]  # the walk's order kept: no edge crosses


def test_beam_x_axis_ends_at_the_last_step(en_fr_tree):
    fig = fb.beam_tree_figure(en_fr_tree)
    last = max(n.step for n in en_fr_tree.nodes)
    assert fig.layout.xaxis.range[1] <= last + 0.5
    assert max(fig.layout.xaxis.tickvals) == last
    ranks = next(t for t in fig.data if t.name == "n-best ranks")
    assert ranks.cliponaxis is False  # the ranks stand in the right margin, not cut off


def test_beam_legend_stays_off_the_step_axis(en_fr_tree):
    legend = fb.beam_tree_figure(en_fr_tree).layout.legend
    assert legend.yref == "container" and legend.y > 0.5 and legend.yanchor == "top"


def test_an_all_false_mask_says_nothing_is_blocked():
    tokens = "the cat sat on the mat".split()
    fig = objective_figure(pt.bert_mlm(tokens, seed=0))  # BERT: bidirectional, no True cell
    assert any("nothing is blocked" in (a.text or "") for a in fig.layout.annotations)
    causal = objective_figure(pt.gpt(tokens))
    assert not any("nothing is blocked" in (a.text or "") for a in causal.layout.annotations)


def test_masking_steps_colour_bars_lie_right_of_the_last_panel():
    rng = np.random.default_rng(0)
    n = 8
    tokens = [f"tok{i}" for i in range(n)]
    fig = masking_steps_figure(rng.normal(size=(n, n)).astype(np.float32),
                               np.triu(np.ones((n, n), bool), 1), tokens, tokens)
    last = max(fig.layout[f"xaxis{i}"].domain[1] for i in ("", "2", "3"))
    bars = [t.colorbar for t in fig.data if t.type == "heatmap" and t.showscale is not False]
    assert len(bars) == 2
    for bar in bars:
        assert bar.x >= last and (bar.xanchor or "left") == "left"
    # the three panels share the query labels: only the first panel draws them
    assert fig.layout.yaxis2.showticklabels is False and fig.layout.yaxis3.showticklabels is False


def test_mask_panels_leave_room_for_each_panels_query_labels():
    long = ["<|endoftext|>"] * 3
    a, b = ["the", "cat", *long], ["a", "dog", "ran", *long[:2]]
    masks = [np.zeros((5, 5), bool), np.zeros((5, 5), bool)]
    fig = batch_masks_figure(masks, [a, b], [a, b])
    gap_px = (fig.layout.xaxis2.domain[0] - fig.layout.xaxis.domain[1]) * 1100
    assert gap_px >= CHAR_PX * len(long[0]), gap_px
    parts = mask_parts_figure(np.triu(np.ones((5, 5), bool), 1), a, a, causal=True)
    assert parts.layout.yaxis2.showticklabels is False  # same queries: one label column


@pytest.mark.parametrize("n", [20, 64, 200])
def test_query_labels_are_at_least_a_label_height_apart(n):
    """A decoder teacher-forced to 64 tokens (a tiny random T5 on the Masks page) drew 64
    query labels down a 900 px panel: 12 px a row for a 12 px font, overlapping in Chromium.
    The labelled rows, spread over the plotting area (the height less the title's and the
    key labels' room), are 16 px apart or more; a short input labels every row."""
    tokens = [f"t{i}" for i in range(n)]
    causal = np.triu(np.ones((n, n), bool), 1)
    scores = np.random.default_rng(0).normal(size=(n, n)).astype(np.float32)
    for fig, base in ((mask_parts_figure(causal, tokens, tokens, causal=True), 140),
                      (masking_steps_figure(scores, causal, tokens, tokens), 160)):
        shown = len(fig.layout.yaxis.tickvals)
        area = fig.layout.height - base - CHAR_PX * max(map(len, tokens))  # less the key labels
        assert area / shown >= 16, (n, shown, fig.layout.height)
        if n <= 20:
            assert shown == n


def test_titles_keep_their_own_room_above_a_top_axis():
    tokens = ["[CLS]", "the", "because", "tired", "[SEP]"]
    fig = matrix_heatmap(np.full((5, 5), 0.2, np.float32), tokens, tokens, title="a head")
    title = fig.layout.title
    assert title.yref == "container" and title.automargin
    assert fig.layout.margin.t >= TITLE_PX + 20 + 24  # title, key labels, "key"
    grid = layer_head_grid(np.full((2, 12, 4, 4), 0.25, np.float32), title="All layers")
    assert grid.layout.margin.t >= TITLE_PX + 20
    assert grid.layout.xaxis.constrain == "domain"  # head labels on the thumbnails


def test_faithfulness_says_bit_identical_for_exactly_zero():
    from attention_lab.ui.faithfulness import describe, on_this_input

    assert "bit-identical" in describe(0.0, 13) and "exactly 0" in describe(0.0, 13)
    assert "bit-identical" not in describe(3e-6, 13)
    assert "to 3e-06" in describe(3e-6, 13)
    assert "bit-identical" in on_this_input(0.0)
    assert on_this_input(2e-6).endswith("at most 2e-06.")
    # a model whose weights or outputs are not numbers: said, not "match ... to nan"
    for bad in (float("nan"), float("inf")):
        assert "not numbers" in describe(bad, 13) and "match" not in describe(bad, 13)
        assert "not numbers" in on_this_input(bad)


def test_wide_characters_count_a_full_em_in_label_widths():
    """A CJK character is ~12 px at the charts' 12 px font, a Latin one ~7: a top axis of
    Chinese words keeps room for them under the title (a zh screenshot showed the blocked-cell
    note over the axis title when each character counted 7 px)."""
    from viz_core.figures.common import label_px, top_axis

    assert label_px(["abc"]) == 21 and label_px(["动物没有过马路"]) == 84
    assert label_px(["它¹/₂"]) == 12 + 3 * 7  # the part mark is narrow
    latin, cjk = top_axis(["abcdefg"] * 20), top_axis(["动物没有过马路"] * 20)
    assert cjk[1] - latin[1] == 84 - 49
