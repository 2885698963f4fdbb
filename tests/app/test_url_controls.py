"""url_select / url_number / url_text_box (attention_lab.ui.controls) in a small AppTest
script: the default comes from the address, a value out of range (or not an option) is
clamped with a notice, a value stays valid when the options shrink, and every choice but
the default is written back to the address (a default leaves it: the address without it
shows the same)."""

from __future__ import annotations

import pytest
from streamlit.testing.v1 import AppTest


def _script():
    import streamlit as st

    from attention_lab.ui import state
    from attention_lab.ui.controls import url_number, url_select, url_text_box

    n = st.session_state.get("n_options", 6)
    st.session_state["got"] = {
        "pos": url_select("Position", "pos", range(n), n - 1),
        "mode": url_select("Mode", "mode", ["pair", "induction"], widget="radio"),
        "kind": url_select("Block", "atlas_kind", ["encoder.self", "decoder.self"],
                           url_key="akind"),
        "head": url_number("Head", "head", 0, 0, n - 1),
        "lp": url_number("Length penalty", "lp", 1.0, -2.0, 5.0, step=0.25),
        "tok": url_text_box("Token", "tok", "One token.", limit=10, strip=True),
    }
    state.show_notices()
    state.send_url()  # as app.py does at the end of every run


def _open(**params) -> AppTest:
    at = AppTest.from_function(_script, default_timeout=30)
    for key, value in params.items():
        at.query_params[key] = str(value)
    return at.run()


def _url(at, key: str):
    value = at.query_params.get(key)
    return value[0] if isinstance(value, list) else value


def _notices(at) -> str:
    return " ".join(i.value for i in at.info)


def test_defaults_leave_the_address():
    at = _open()
    assert not at.exception
    assert at.session_state["got"] == {"pos": 5, "mode": "pair", "kind": "encoder.self",
                                       "head": 0, "lp": 1.0, "tok": ""}
    assert not dict(at.query_params)  # nothing but defaults: an empty address shows the same
    assert not at.info
    # a default named in the address is taken, and then left out
    at = _open(pos=5, mode="pair", akind="encoder.self", head=0, lp="1.0", tok="")
    assert at.session_state["got"]["pos"] == 5 and not dict(at.query_params)


def test_a_choice_back_to_its_default_leaves_the_address():
    at = _open(pos=2, head=3, lp=2.5, mode="induction")
    assert [_url(at, k) for k in ("pos", "head", "lp", "mode")] == ["2", "3", "2.5", "induction"]
    at.selectbox(key="pos").set_value(5)
    at.number_input(key="head").set_value(0)
    at.number_input(key="lp").set_value(1.0)
    at.radio(key="mode").set_value("pair").run()
    assert not at.exception and not dict(at.query_params)


@pytest.mark.parametrize("params,expect", [
    ({"pos": 99}, {"pos": 5}),
    ({"pos": -3}, {"pos": 0}),
    ({"head": 99}, {"head": 5}),
    ({"lp": 9}, {"lp": 5.0}),
    ({"lp": -7.5}, {"lp": -2.0}),
])
def test_an_out_of_range_value_is_clamped_with_a_notice_and_written_back(params, expect):
    at = _open(**params)
    assert not at.exception
    for key, value in expect.items():
        assert at.session_state["got"][key] == value
        # the address shows what the page shows (the default is the page without it)
        assert _url(at, key) == (None if key == "pos" and value == 5 else str(value))
    assert "out of range" in _notices(at)


def test_unknown_values_fall_back_to_the_default_with_a_notice():
    at = _open(mode="nope", head="x", lp="y", akind="decoder.cross")
    assert not at.exception
    got = at.session_state["got"]
    assert (got["mode"], got["head"], got["lp"], got["kind"]) == ("pair", 0, 1.0,
                                                                    "encoder.self")
    for key in ("mode", "head", "lp", "akind"):  # the defaults shown: out of the address
        assert _url(at, key) is None
    notices = _notices(at)
    assert "not one of" in notices and "not a number" in notices


def test_the_address_name_and_the_session_key_may_differ():
    at = _open()
    assert at.selectbox(key="atlas_kind").value == "encoder.self"
    at.selectbox(key="atlas_kind").set_value("decoder.self").run()
    assert _url(at, "akind") == "decoder.self"
    assert "atlas_kind" not in at.query_params


def test_a_widget_change_is_written_back():
    at = _open(pos=1, tok="  cat ")
    assert at.session_state["got"]["tok"] == "cat" and _url(at, "tok") == "cat"
    at.selectbox(key="pos").set_value(3)
    at.radio(key="mode").set_value("induction")
    at.number_input(key="head").set_value(4)
    at.number_input(key="lp").set_value(2.5)
    at.text_input(key="tok").set_value("dog").run()
    assert not at.exception
    assert at.session_state["got"] == {"pos": 3, "mode": "induction", "kind": "encoder.self",
                                       "head": 4, "lp": 2.5, "tok": "dog"}
    assert [_url(at, k) for k in ("pos", "mode", "head", "lp", "tok")] == \
        ["3", "induction", "4", "2.5", "dog"]


def test_a_value_stays_valid_when_the_options_shrink():
    """Another input, block or model: fewer positions and heads than the value chosen."""
    at = _open(pos=4, head=4)
    assert at.session_state["got"]["pos"] == 4
    at.session_state["n_options"] = 3
    at.run()
    assert not at.exception
    assert at.selectbox(key="pos").value == 2 and at.number_input(key="head").value == 2
    # head 2 is written; position 2 is now the last, the default, so it leaves the address
    assert (_url(at, "pos"), _url(at, "head")) == (None, "2")


def test_a_long_text_is_cut_with_a_notice():
    at = _open(tok="x" * 30)
    assert at.session_state["got"]["tok"] == "x" * 10
    assert _url(at, "tok") == "x" * 10
    assert "cut to 10" in _notices(at)


def _long_default():
    import streamlit as st

    from attention_lab.ui import state

    st.session_state["got"] = state.url_text("batch", "y" * (state.MAX_TEXT_CHARS + 50))
    state.show_notices()


def test_a_long_default_is_cut_quietly_and_a_long_address_value_with_a_notice():
    """The notice names the address: a page's own default (the Masks page's batch: the
    sidebar's text and two examples) is no address value, and cut without one."""
    from attention_lab.ui.state import MAX_TEXT_CHARS

    at = AppTest.from_function(_long_default, default_timeout=30).run()
    assert at.session_state["got"] == "y" * MAX_TEXT_CHARS
    assert not at.info and not at.warning
    at = AppTest.from_function(_long_default, default_timeout=30)
    at.query_params["batch"] = "z" * (MAX_TEXT_CHARS + 1)
    at.run()
    assert at.session_state["got"] == "z" * MAX_TEXT_CHARS
    assert f"cut to {MAX_TEXT_CHARS:,}" in " ".join(i.value for i in at.info)
