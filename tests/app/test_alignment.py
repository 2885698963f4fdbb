"""The cross-attention alignment panel (attention_lab.ui.alignment) in a page run by AppTest."""

from streamlit.testing.v1 import AppTest


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
    assert [t.get("name") for t in fig["data"]][1:] == ["argmax", "reference"]
    # the score joins the title's text; the title keeps its place above the top axis's
    # title (replacing the whole title once put both on one line)
    title = fig["layout"]["title"]
    assert "score" in title["text"] and title["yref"] == "container" and title["y"] == 1
    assert any("best head" in c.value for c in at.caption)
