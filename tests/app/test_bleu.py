"""The n-best BLEU table (attention_lab.ui.bleu) in a page run by AppTest."""

import pytest
from streamlit.testing.v1 import AppTest

from viz_core.lessons.bleu import sentence_bleu


def test_ui_helper_renders_table_and_definition():
    def page():
        from attention_lab.ui.bleu import show_nbest_bleu
        from tests.support.beam_trees import small_beam_tree

        show_nbest_bleu(small_beam_tree(), "le chat")

    at = AppTest.from_function(page, default_timeout=60).run()
    assert not at.exception
    assert at.dataframe[0].value["BLEU"].tolist() == [100.0, pytest.approx(
        sentence_bleu("un chat", "le chat").score, abs=0.01)]
    assert any("brevity" in c.value.lower() or "BP" in c.value for c in at.caption)
