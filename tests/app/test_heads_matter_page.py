"""The "Which heads matter" page (AppTest): every section on our lm, MiniLM, tiny GPT-2 /
Llama / T5 and the shipped induction model (when trained); the hostile corpus in every new
text box; out-of-range URL values; tokens outside the vocabulary, a contrast equal to the
target, clean and corrupted of different lengths; the Attention page's cell action."""

from __future__ import annotations

import json
import re

import pytest

from tests.support.apptest import no_errors, open_app, z_of
from tests.support.hostile_inputs import ONE_OF_EACH, sendable
from viz_core.loading.shipped import CHECKPOINTS

TEXT = "the cat saw the dog and the cat saw the"
PRE_NORM = {"lm", "gpt2", "llama", "t5", "induction"}
_RAW_MARKUP = re.compile(r"(?<!\\)<(script|img|svg|iframe|a |b>)")
_SUM = re.compile(r"= \*\*(-?[\d.]+)\*\*; the \d+ components add up to (-?[\d.]+)\.")


def _model(which: str, tiny_models) -> str:
    if which in ("lm", "minilm"):
        return which
    if which == "induction":
        if not (CHECKPOINTS / "induction" / "config.json").exists():
            pytest.skip("checkpoints/induction is not trained yet (make checkpoints)")
        return "induction"
    return str(tiny_models.path(which, seed=1))


def _tab(at, label: str):
    at.session_state["tab"] = label
    return at.run()


def _texts(at) -> list[str]:
    return [e.value for kind in ("error", "warning", "info", "markdown", "caption")
            for e in getattr(at, kind)]


def _figures(at) -> list[dict]:
    return [json.loads(c.proto.spec) for c in at.get("plotly_chart")]


@pytest.mark.slow
@pytest.mark.parametrize("which", ["lm", "minilm", "gpt2", "llama", "t5", "induction"])
def test_every_section_on_every_kind_of_model(which, tiny_models):
    at = open_app("heads_matter", model=_model(which, tiny_models), text=TEXT,
                  target="le chat" if which == "t5" else "")
    assert not at.exception, [e.message for e in at.exception]
    if which in PRE_NORM:  # the sum check the page prints: components add up to the logit
        no_errors(at)
        sums = [_SUM.search(m.value) for m in at.markdown if _SUM.search(m.value)]
        assert sums, [m.value for m in at.markdown]
        logit, total = (float(g) for g in sums[0].groups())
        assert total == pytest.approx(logit, abs=2e-4)
        assert len(_figures(at)) == 2  # the head heatmap and the bars
    else:  # post-norm / no unembedding: one sentence and a pointer to patching
        assert any("patching" in i.value for i in at.info), [i.value for i in at.info]
        assert not at.error
    for label, charts in (("Patching", 1), ("Head search", 1), ("Logit lens", 1),
                          ("Composition", 1), ("Why this score?", 1)):
        at = _tab(at, label)
        assert not at.exception, (label, [e.message for e in at.exception])
        if which in PRE_NORM or label in ("Patching", "Head search", "Composition"):
            assert not at.error, (label, [e.value for e in at.error])
            assert len(_figures(at)) >= charts, label
    assert at.query_params["tab"] in ("qk", ["qk"])


def test_head_search_pair_and_template_in_the_url():
    at = open_app("heads_matter", model="lm", text=TEXT, tab="search", hs_mode="induction")
    no_errors(at)
    table = at.dataframe[0].value
    assert list(table["score"]) == sorted(table["score"], reverse=True)
    # the sentence names what the template looks at (markdown source: punctuation escaped)
    assert any("the token after an earlier copy of the query\\'s token" in m.value
               for m in at.markdown), [m.value for m in at.markdown]
    at = open_app("heads_matter", model="lm", text=TEXT, tab="search", hs_q=4, hs_k=1)
    no_errors(at)
    assert any("query 4" in m.value and "key 1" in m.value for m in at.markdown)


@pytest.mark.parametrize("label,text", ONE_OF_EACH)
def test_hostile_text_in_every_new_box(label, text):
    """The same hostile value in the token, contrast, clean and corrupted boxes at once, on
    the attribution and the patching tabs: messages, never an exception; markup as text."""
    value = sendable(text)
    at = open_app("heads_matter", model="lm", text="the cat saw the dog", tok=value,
                  against=value, clean=value, corrupt=value)
    assert not at.exception, (label, [e.message for e in at.exception])
    at = _tab(at, "Patching")
    assert not at.exception, (label, [e.message for e in at.exception])
    for shown in _texts(at):  # shown as typed: every "<" of markup escaped for Markdown
        assert not _RAW_MARKUP.search(shown), (label, shown)


def test_out_of_range_url_values_are_clamped_with_a_notice():
    at = open_app("heads_matter", model="lm", text="the cat", pos=99, tab="qk", qk_head=99,
                  qk_q=-4, qk_k="x", qk_block="decoder.9.self")
    assert not at.exception, [e.message for e in at.exception]
    notices = " ".join(i.value for i in at.info)
    assert "out of range" in notices and "not a number" in notices
    assert at.selectbox(key="pos").value == 2  # <bos> the cat: the last position
    assert at.number_input(key="qk_head").value == 3
    at = open_app("heads_matter", model="lm", text="the cat", tab="search", hs_q=50, hs_k=-1,
                  hs_mode="nope")
    assert not at.exception
    assert "out of range" in " ".join(i.value for i in at.info)


def test_bad_tokens_and_mismatched_lengths_give_clear_messages():
    at = open_app("heads_matter", model="lm", text="the cat saw the dog", tok="qzxwvj")
    assert not at.exception and at.error
    assert "qzxwvj" in " ".join(e.value for e in at.error)
    at = open_app("heads_matter", model="lm", text="the cat saw the dog", tok="cat",
                  against="cat")
    assert not at.exception
    assert any("contrast token is the target" in e.value for e in at.error)
    at = open_app("heads_matter", model="lm", text="the cat saw the dog", tab="patching",
                  clean="the cat saw the dog", corrupt="the dog")
    assert not at.exception
    errors = " ".join(e.value for e in at.error)
    assert errors and "5" in errors and "2" in errors  # both token counts


@pytest.mark.parametrize("model,expect", [("lm", "terms add up to"), ("minilm", "renormalised")])
def test_attention_page_why_this_cell(model, expect):
    at = open_app("attention", model=model, text="the cat saw the dog", why=1, layer=1)
    assert not at.exception, [e.message for e in at.exception]
    assert any(expect in t for t in _texts(at)), _texts(at)
    assert at.query_params["why"] in ("1", ["1"])


@pytest.mark.slow
@pytest.mark.parametrize("model,tabs", [("lm", ("Patching", "Logit attribution")),
                                        ("minilm", ("Patching",))])
def test_hostile_sidebar_text(model, tabs):
    """One entry of each hostile category and every length typed into the sidebar's text box
    (one AppTest reused, as in tests/app/test_hostile.py, whose Attention page takes the
    whole corpus): the page answers each with its view or a message."""
    at = open_app("heads_matter", model=model, text="the cat sat on the mat")
    for tab in tabs:
        at = _tab(at, tab)
        for label, text in ONE_OF_EACH:
            at = at.text_area(key="text").set_value(sendable(text)).run()
            where = (model, tab, label, text[:40])
            assert not at.exception, (where, [e.message for e in at.exception][:1])
            messages = [m.value for m in (*at.error, *at.warning, *at.info)]
            assert not any("Something went wrong" in m for m in messages), (where, messages)
            assert at.title, where


def test_suggest_button_corrupts_the_clean_text_keeping_its_length():
    import viz_core as vc

    at = open_app("heads_matter", model="lm", text="the cat saw the dog", tab="patching")
    no_errors(at)
    at.text_area(key="clean").set_value("the big dog saw a red house").run()
    at.button(key="hm_suggest").click().run()
    no_errors(at)
    corrupted = at.text_area(key="corrupt").value
    lm = vc.load("lm")
    assert corrupted != "the big dog saw a red house"
    assert lm.count_tokens(corrupted) == lm.count_tokens("the big dog saw a red house")
    assert any("Suggested corruption" in c.value for c in at.caption)


@pytest.mark.parametrize("model, text, word", [("zh-en", "两只黑色的猫", "cats"),
                                                ("lm", "the cat", "cat")])
def test_the_default_position_explains_the_last_word(model, text, word):
    """A decoder-only model's last position predicts the next word; an encoder-decoder's
    predicts the end of its output, so it starts one before: where "cats" is predicted, which
    the suggested corruption (猫 -> 狗) moves, without the small-difference warning."""
    at = open_app("heads_matter", model=model, text=text, tab="patching")
    no_errors(at)
    options = at.selectbox(key="pos").options
    pos = at.selectbox(key="pos").value
    assert pos == len(options) - (2 if model == "zh-en" else 1)
    if model == "zh-en":
        assert at.session_state["corrupt"] == "两只黑色的狗"
        assert not [w for w in at.warning if "barely moves" in w.value]
        assert any(word in m.value for m in at.markdown if "Metric" in m.value)


@pytest.mark.parametrize("model, text", [("lm", "the cat saw the dog"),
                                         ("zh-en", "两只黑色的猫")])
def test_patching_layers_of_one_stack_says_why_every_layer_is_one(model, text):
    """Patching the whole stream entering a layer restores a one-stack model's clean run
    whole (effect 1 at every layer, by construction), and the tab says so; an
    encoder-decoder's decoder layers still read the corrupted encoder, so its bars vary and
    there is no such note."""
    import json

    at = open_app("heads_matter", model=model, text=text, tab="patching", over="layers")
    no_errors(at)
    bars = [t for c in at.get("plotly_chart") for t in json.loads(c.proto.spec)["data"]
            if t.get("type") == "bar"]
    effects = [float(v) for t in bars
               for v in z_of(t, "x" if t.get("orientation") == "h" else "y")]
    note = any("by construction" in c.value for c in at.caption)
    if model == "lm":
        assert effects and all(abs(e - 1) < 1e-5 for e in effects) and note, effects
    else:
        assert effects and not all(abs(e - 1) < 1e-5 for e in effects) and not note, effects
