"""Cross-attention alignment helpers (viz_core.analysis.alignment, ui.alignment)."""

import numpy as np

import viz_core as vc
from viz_core.analysis.alignment import fits, head_scores, reference_alignment


def test_dates_reference_points_at_the_year_digits():
    m = vc.load("dates")
    tr = m.trace("9 may 2018")
    block = tr["decoder.0.cross"]
    gold = reference_alignment("dates", "9 may 2018", tr.output_text)
    assert tr.output_text.startswith("2018")
    assert gold and fits(gold, len(block.query_tokens), len(block.key_tokens))
    for q, k in gold:  # predicting convention: row q predicts output token q
        assert block.key_tokens[k] == tr.output_text[q]
    reads = reference_alignment("dates", "9 may 2018", tr.output_text, "input")
    assert [q for q, _ in reads] == [q + 1 for q, _ in gold]
    assert reference_alignment("en-fr", "the cat", "le chien") is None  # not its translation
    assert reference_alignment("lm", "the cat", "le chat") is None  # no reference known
    assert reference_alignment("dates", "no year here", "2018-01-01") is None


def test_head_scores_by_hand():
    pattern = np.zeros((2, 2, 3), np.float32)
    pattern[0, 0, 1] = pattern[0, 1, 2] = 1  # head 0: argmax 1, 2
    pattern[1, :, 0] = 1  # head 1: argmax 0, 0
    assert head_scores(pattern, [(0, 1), (1, 2)]) == [1.0, 0.0]
    assert head_scores(pattern, [(0, 1), (1, 0)]) == [0.5, 0.5]
    assert not fits([(2, 0)], 2, 3)
