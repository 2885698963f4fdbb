"""The Attention page's "why does this head attend here?" (issue 23, item 7) in AppTest: the
heatmap carries one click target per cell; a click (handed over by the chart's callback)
opens the QK attribution of that cell, sets the pickers and the URL; why_q / why_k from the
URL still work, and hostile URL values are clamped with a notice; a click on a generated
token of a decoder-only model gets one line, not a traceback.

AppTest cannot click inside a Plotly chart: the click itself is tested in Chromium
(tests/browser/test_attention_click_browser.py); here the callback runs on a hand-made selection."""

from __future__ import annotations

import json

import pytest
from streamlit.testing.v1 import AppTest

from attention_lab.ui.cells import CLICKED, chart_key
from tests.support.apptest import open_app
from viz_core.figures.cells import BLOCKED_CELLS, CELLS, SELECTED_CELL

TEXT = "the small black cats"  # lm-rope: <bos> the small black cats, then it continues


def _texts(at) -> list[str]:
    return [e.value for kind in ("error", "warning", "info", "markdown", "caption")
            for e in getattr(at, kind)]


def _qk_line(at) -> str:
    lines = [m.value for m in at.markdown if "(before the softmax)" in m.value]
    assert lines, _texts(at)
    return lines[0]


def _param(at, key):
    value = at.query_params.get(key)
    return value[0] if isinstance(value, list) else value


def _heatmap(at, title: str = "head") -> dict:
    for chart in at.get("plotly_chart"):
        fig = json.loads(chart.proto.spec)
        if fig["data"] and fig["data"][0]["type"] == "heatmap" and title in str(
                fig["layout"].get("title")):
            return fig
    raise AssertionError(f"no heatmap titled {title!r}")


def _framed(fig: dict) -> tuple[str, str] | None:
    """(query label, key label) of the cell the outline frames, read back from the figure's
    JSON: the frame's centre is the cell's index on the category axes."""
    frames = [sh for sh in fig["layout"].get("shapes", []) if sh.get("name") == SELECTED_CELL]
    if not frames:
        return None
    assert len(frames) == 1, frames
    (sh,) = frames
    assert sh["x1"] - sh["x0"] == 1 and sh["y1"] - sh["y0"] == 1  # exactly one cell
    hm = fig["data"][0]
    return hm["y"][round(sh["y0"] + 0.5)], hm["x"][round(sh["x0"] + 0.5)]


def test_the_heatmap_is_clickable_and_a_click_opens_that_cell():
    at = open_app("attention", model="lm-rope", text=TEXT, layer=1, head=2)
    assert not at.exception, [e.message for e in at.exception]
    fig = _heatmap(at)
    names = {t.get("name") for t in fig["data"]}
    assert {CELLS, BLOCKED_CELLS} <= names
    n_q = len(fig["data"][0]["y"])
    assert any("Click a cell of this map" in c.value for c in at.caption)
    assert not at.toggle(key="why").value  # nothing open before a click
    assert _framed(fig) is None  # nothing explained, nothing framed

    at.session_state[CLICKED] = (4, 2)  # what the chart's callback hands over
    at.run()
    assert not at.exception, [e.message for e in at.exception]
    assert at.toggle(key="why").value
    assert (at.selectbox(key="why_q").value, at.selectbox(key="why_k").value) == (4, 2)
    assert "query 4·cats → key 2·small" in _qk_line(at)
    assert (_param(at, "why"), _param(at, "why_q"), _param(at, "why_k")) == ("1", "4", "2")
    # the explained cell is framed in the heatmap, whose chart key now names that cell
    assert _framed(_heatmap(at)) == ("4·cats", "2·small")
    assert chart_key("heatmap", (4, 2)) == "heatmap-4-2"
    assert "heatmap-4-2" in at.session_state and "heatmap" not in at.session_state

    # the pickers move the frame (and the key: the next click starts an empty selection)
    at.selectbox(key="why_k").set_value(1).run()
    assert not at.exception, [e.message for e in at.exception]
    assert _framed(_heatmap(at)) == ("4·cats", "1·the")
    assert "heatmap-4-1" in at.session_state and "heatmap-4-2" not in at.session_state
    assert "query 4·cats → key 1·the" in _qk_line(at)
    at.selectbox(key="why_k").set_value(2).run()

    # a generated token: one line, the pickers keep the last prompt cell
    assert n_q > 5, fig["data"][0]["y"]
    at.session_state[CLICKED] = (n_q - 1, 1)
    at.run()
    assert not at.exception, [e.message for e in at.exception]
    assert any("is a generated token" in t and "positions 0–4" in t for t in _texts(at)), \
        _texts(at)
    assert (_param(at, "why_q"), _param(at, "why_k")) == ("4", "2")
    assert "query 4·cats → key 2·small" in _qk_line(at)
    assert _framed(_heatmap(at)) == ("4·cats", "2·small")

    # the toggle off: no frame, the plain key
    at.toggle(key="why").set_value(False).run()
    assert not at.exception, [e.message for e in at.exception]
    assert _framed(_heatmap(at)) is None and "heatmap" in at.session_state


def test_why_q_and_why_k_from_the_url():
    at = open_app("attention", model="lm-rope", text=TEXT, layer=1, head=2, why=1, why_q=3,
                  why_k=1)
    assert not at.exception, [e.message for e in at.exception]
    assert (at.selectbox(key="why_q").value, at.selectbox(key="why_k").value) == (3, 1)
    assert "query 3·black → key 1·the" in _qk_line(at)
    assert _framed(_heatmap(at)) == ("3·black", "1·the")


@pytest.mark.slow
def test_the_zoom_window_frames_the_cell_when_it_lies_inside(tmp_path):
    from viz_core.training.toy import save_toy

    n = 1100  # past EXACT_MAX_TOKENS (1024): a pooled map and a zoom window
    toy = str(save_toy(tmp_path / "long", kind="encoder-only", seed=3, max_len=n,
                       d_model=32, n_heads=2, n_layers=2, d_ff=64))
    text = " ".join("ai"[i % 2] for i in range(n - 1))
    at = open_app("attention", model=toy, text=text, why=1, why_q=1030, why_k=1040,
                  zoom_q=1000, zoom_k=1000, zoom_size=64)
    assert not at.exception, [e.message for e in at.exception]
    zoom = _heatmap(at, "queries 1000–1063 × keys 1000–1063")
    q_label, k_label = _framed(zoom)  # window row 30, column 40: absolute 1030 -> 1040
    assert q_label.startswith("1030·") and k_label.startswith("1040·")
    assert _framed(_heatmap(at, "block means")) is None  # pooled: no single cell to frame
    at.selectbox(key="why_q").set_value(5).run()  # outside the window: no frame there
    assert not at.exception, [e.message for e in at.exception]
    assert _framed(_heatmap(at, "queries 1000–1063")) is None


@pytest.mark.parametrize("raw,expect,notice", [
    ("-5", 0, "out of range"),
    ("99999999999999999999", 4, "out of range"),  # the prompt's last position
    ("abc", 4, "not a number"),  # default: the last query of the prompt
    ("<script>alert(1)</script>", 4, "not a number"),
    ("3.5", 4, "not a number"),
])
def test_hostile_why_q_is_clamped_with_a_notice(raw, expect, notice):
    at = open_app("attention", model="lm-rope", text=TEXT, why=1, why_q=raw, why_k=raw)
    assert not at.exception, [e.message for e in at.exception]
    assert at.selectbox(key="why_q").value == expect
    assert 0 <= at.selectbox(key="why_k").value <= 4
    assert any(notice in i.value and "why_q" in i.value for i in at.info), _texts(at)
    assert not any("<script>" in m.value for m in at.markdown)  # shown as text, never markup
    assert _param(at, "why_q") == str(expect)


def test_a_click_on_minilm_and_on_cross_attention_gives_a_clear_message(tiny_models):
    at = open_app("attention", model="minilm", text="The cat sat on the mat.", layer=2)
    at.session_state[CLICKED] = (3, 1)
    at.run()
    assert not at.exception, [e.message for e in at.exception]
    assert (at.selectbox(key="why_q").value, at.selectbox(key="why_k").value) == (3, 1)
    notice = [i.value for i in at.info if "renormalised" in i.value]
    assert notice and "Which heads matter" in notice[0], _texts(at)
    assert not at.error

    t5 = str(tiny_models.path("t5", seed=1))
    at = open_app("attention", model=t5, text="the cat", target="le chat",
                  kind="decoder.cross")
    assert not at.exception, [e.message for e in at.exception]
    at.session_state[CLICKED] = (1, 0)
    at.run()
    assert not at.exception, [e.message for e in at.exception]
    assert any("cross-attention" in i.value for i in at.info), _texts(at)


def test_the_chart_callback_hands_over_only_a_valid_click():
    def script():
        import streamlit as st

        from attention_lab.ui.cells import on_cell_click, take_click

        st.session_state["heatmap"] = st.session_state.get("_event")
        on_cell_click("heatmap")()
        st.write(repr(take_click()))

    at = AppTest.from_function(script)
    for event, expect in [({"selection": {"points": [{"customdata": [3, 1]}]}}, "(3, 1)"),
                          ({"selection": {"points": []}}, "None"),
                          ({"selection": {"points": [{"customdata": ["x", 1]}]}}, "None"),
                          (None, "None")]:
        at.session_state["_event"] = event
        at.run()
        assert not at.exception, [e.message for e in at.exception]
        assert at.markdown[-1].value == expect, event


HOSTILE_EVENTS = [  # what a stale or hostile client may send as a chart's selection
    None, 5, "x", {"selection": None}, {"selection": {"points": "x"}},
    {"selection": {"points": [5, "x", None]}},
    {"selection": {"points": [{"customdata": 5}, {"customdata": "ab"},
                              {"customdata": [None, "x", 1.5, -1]}, {"x": "a", "y": float("nan")},
                              {"x": 10**30, "y": -1}, {"customdata": [{"a": 1}, [1], 2, 3]},
                              {"customdata": ["decoder.0.self", -1, 2, 3]}]}}]


def test_every_click_handler_ignores_what_a_stale_or_hostile_client_sends():
    """The atlas map, the flow graph and the circuit graph read a click's points as the
    browser sent them: a text, NaN or a list where a number was expected raised
    (ValueError, AttributeError: "This app has encountered an error"). Each now ignores
    such a point, and still acts on a valid one."""
    def script():
        import streamlit as st

        from attention_lab.ui import atlas, circuits, flow

        which, event = st.session_state["_case"]
        switched = []
        real, st.switch_page = st.switch_page, switched.append
        try:
            if which == "atlas":
                st.session_state["patch_map"] = event
                atlas.pick_clicked_head("patch_map")
            elif which == "flow":
                flow.open_clicked_edge(event, 4)
            else:
                circuits.open_clicked_head(event)
        finally:
            st.switch_page = real
        st.write(repr((st.session_state.get("atlas_layer"), st.session_state.get("atlas_head"),
                       st.session_state.get("qk_block"), st.session_state.get("qk_head"),
                       st.session_state.get("qk_q"), st.session_state.get("qk_k"), switched)))

    nothing = repr((None, None, None, None, None, None, []))
    valid = {
        "atlas": ({"selection": {"points": [{"x": 2, "y": 1}]}},
                  (1, 2, None, None, None, None, [])),
        "flow": ({"selection": {"points": [{"customdata": ["decoder.0.self", 1, 2, 3]}]}},
                 (None, None, "decoder.0.self", 1, 3, 2, ["pages/heads_matter.py"])),
        "circuits": ({"selection": {"points": [{"customdata": ["decoder.0.self.h1", "logits",
                                                               "", 0.5]}]}},
                     (None, None, "decoder.0.self", 1, None, None, ["pages/heads_matter.py"])),
    }
    for which, (good, expect) in valid.items():
        for event in HOSTILE_EVENTS:
            at = AppTest.from_function(script)
            at.session_state["_case"] = (which, event)
            at.run()
            assert not at.exception, (which, event, [e.message for e in at.exception])
            assert at.markdown[-1].value == nothing, (which, event)
        at = AppTest.from_function(script)
        at.session_state["_case"] = (which, good)
        at.run()
        assert at.markdown[-1].value == repr(expect), which
