"""Cross-attention alignment helpers (viz_core.analysis.alignment, ui.alignment)."""

import numpy as np
from streamlit.testing.v1 import AppTest

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


def test_ui_helper_draws_reference_and_scores():
    def page():
        from types import SimpleNamespace

        import viz_core as vc
        from attention_lab.ui.alignment import show_alignment

        m = vc.load("dates")
        tr = m.trace("9 may 2018")
        sel = SimpleNamespace(model_name="dates", text="9 may 2018")
        show_alignment(sel, tr, tr["decoder.1.cross"], 0)

    at = AppTest.from_function(page, default_timeout=60).run()
    assert not at.exception
    import json

    fig = json.loads(at.get("plotly_chart")[0].proto.spec)
    assert [t.get("name") for t in fig["data"]][1:] == ["argmax", "gold"]
    assert any("best head" in c.value for c in at.caption)
