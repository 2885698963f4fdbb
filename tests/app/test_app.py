"""The Streamlit app, headless (AppTest): pages run, interactions change what is shown."""


import pytest

from tests.support.apptest import PAGES, heatmap_z, no_errors, open_app
from viz_core.training.toy import save_toy


@pytest.fixture(scope="module")
def toy_path(tmp_path_factory):
    return str(save_toy(tmp_path_factory.mktemp("ckpt") / "toy", seed=2))


def test_attention_page_on_a_checkpoint_path(toy_path):
    at = open_app("attention", model=toy_path, text="the cat sat on the mat")
    no_errors(at)
    assert at.get("plotly_chart")
    before, _ = heatmap_z(at)
    at.number_input(key="head").set_value(2).run()
    no_errors(at)
    after, _ = heatmap_z(at)
    assert before != after
    assert at.query_params["head"] == ["2"] or at.query_params["head"] == "2"


def test_typing_text_changes_the_trace(toy_path):
    at = open_app("attention", model=toy_path, text="the cat")
    before, _ = heatmap_z(at)
    at.text_area(key="text").input("the big red dog saw the cat").run()
    no_errors(at)
    after, _ = heatmap_z(at)
    assert before != after


def test_url_restores_view_and_clamps(toy_path):
    at = open_app("attention", model=toy_path, text="the cat saw the dog",
                  kind="decoder.cross", layer=1, head=99)
    assert not at.exception
    assert at.selectbox(key="kind").value == "decoder.cross"
    assert at.number_input(key="layer").value == 1
    assert at.number_input(key="head").value == 3  # clamped to the last head
    assert any("out of range" in i.value for i in at.info)


def test_empty_text_and_missing_model_give_messages(toy_path, tmp_path):
    at = open_app("attention", model=toy_path, text="   ")
    assert not at.exception
    assert any("empty" in e.value for e in at.error)
    at = open_app("attention", model=str(tmp_path / "nope"))
    assert not at.exception
    assert at.error


def test_home_page(toy_path):
    at = open_app("home", model=toy_path, text="the cat")
    no_errors(at)
    assert any("Attention Lab" in t.value for t in at.title)


@pytest.mark.parametrize("page", PAGES)
def test_every_page_runs_on_a_native_model(toy_path, page):
    at = open_app(page, model=toy_path, text="the cat saw the dog")
    no_errors(at)


def test_choices_survive_a_run_that_did_not_draw_them(toy_path):
    """Streamlit drops a widget's state after a completed run that did not draw it (here:
    the model box emptied, so the sidebar stops before the text box); the session's text
    must survive that, and a page switch."""
    at = open_app("attention", model=toy_path, text="the big dog saw the cat")
    no_errors(at)
    at.text_input(key="model_custom").input("").run()
    assert not at.exception and not at.text_area
    at.text_input(key="model_custom").input(toy_path).run()
    no_errors(at)
    assert at.text_area(key="text").value == "the big dog saw the cat"
    at.switch_page("pages/heads.py").run()
    no_errors(at)
    assert at.text_area(key="text").value == "the big dog saw the cat"
