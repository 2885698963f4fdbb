"""Sentence BLEU per hypothesis (viz_core.lessons.bleu) against BLEU worked out by hand."""

import math

import pytest

from tests.support.beam_trees import small_beam_tree
from viz_core.figures.bleu import token_logprob_figure
from viz_core.lessons.bleu import nbest_bleu_rows, sentence_bleu, token_logprobs


def test_bleu_by_hand_no_smoothing_needed():
    # hyp: the cat sat on the mat / ref: the cat sat on a mat
    # p1 = 5/6 ("the" clipped to 1), p2 = 3/5, p3 = 2/4, p4 = 1/3; equal lengths: BP = 1
    b = sentence_bleu("the cat sat on the mat", "the cat sat on a mat")
    assert b.counts == [5, 3, 2, 1] and b.totals == [6, 5, 4, 3]
    assert b.precisions == pytest.approx([500 / 6, 60.0, 50.0, 100 / 3])
    assert b.bp == 1.0
    expected = 100 * (5 / 6 * 3 / 5 * 1 / 2 * 1 / 3) ** 0.25
    assert b.score == pytest.approx(expected, abs=1e-6)  # 53.73


def test_brevity_penalty_by_hand():
    # c = 4 hypothesis tokens, r = 6: BP = exp(1 - 6/4) = exp(-0.5)
    b = sentence_bleu("the cat sat on", "the cat sat on the mat")
    assert (b.hyp_len, b.ref_len) == (4, 6)
    assert b.bp == pytest.approx(math.exp(-0.5))
    assert b.precisions == pytest.approx([100.0] * 4)
    assert b.score == pytest.approx(100 * math.exp(-0.5), abs=1e-6)
    assert sentence_bleu("le chat", "le chat").score == pytest.approx(100.0)


def test_nbest_rows_score_each_hypothesis_and_list_token_logprobs():
    tree = small_beam_tree()
    assert token_logprobs(tree, tree.hypotheses[1]) == [("un", -1.0), ("chat", -0.5)]
    rows = nbest_bleu_rows(tree, "le chat")
    assert rows[0]["BLEU"] == pytest.approx(100.0)
    assert rows[1]["p1"] == 50.0 and rows[1]["BP"] == 1.0
    assert rows[0]["token log-probs"] == "le:-0.10 chat:-0.20"
    assert "BLEU" not in nbest_bleu_rows(tree, None)[0]
    fig = token_logprob_figure(tree)
    assert list(fig.data[0].y) == pytest.approx([-0.1, -0.2])
    assert list(fig.data[1].y) == pytest.approx([-1.0, -0.5])


def test_on_a_real_search_the_token_logprobs_add_up_to_the_path():
    import viz_core as vc

    m = vc.load("en-fr")
    tree = m.beam_search("the cat", beam_size=3, max_len=8)
    reference = tree.hypotheses[0].text
    rows = nbest_bleu_rows(tree, reference)
    assert rows[0]["BLEU"] == pytest.approx(100.0)
    for h in tree.hypotheses:
        total = sum(lp for _, lp in token_logprobs(tree, h))
        assert total == pytest.approx(tree.node(h.node_id).cum_logprob, abs=1e-4)
