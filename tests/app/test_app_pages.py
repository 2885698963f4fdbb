"""Every page: an interaction changes what is shown, and the URL restores the view (every page
on MiniLM: tests/app/test_hostile.py, which opens each before typing its corpus)."""

import json

import pytest

from tests.support.apptest import PAGES, no_errors, open_app
from viz_core.training.toy import save_toy


@pytest.fixture(scope="module")
def toy_path(tmp_path_factory):
    return str(save_toy(tmp_path_factory.mktemp("ckpt") / "toy", seed=2))


def charts(at) -> list[dict]:
    return [json.loads(c.proto.spec) for c in at.get("plotly_chart")]


def test_inside_changing_the_query_changes_the_panels(toy_path):
    at = open_app("inside", model=toy_path, text="the cat saw the dog")
    no_errors(at)
    before = charts(at)
    assert len(before) == 9
    at.selectbox(key="query").set_value(3).run()
    no_errors(at)
    assert charts(at) != before
    assert at.query_params["query"] in ("3", ["3"])


def test_positional_formula_explorer_follows_d_model(toy_path):
    at = open_app("positional", model=toy_path, text="the cat", pe_d=16, pe_len=20)
    no_errors(at)
    assert at.number_input(key="pe_d").value == 16
    before = charts(at)
    at.number_input(key="pe_d").set_value(32).run()
    no_errors(at)
    assert charts(at) != before


def test_masks_page_shows_the_chosen_sentence(toy_path):
    at = open_app("masks", model=toy_path, text="the cat saw the dog")
    no_errors(at)
    at.text_area(key="mask_batch").input("the cat saw the dog\nthe dog").run()
    no_errors(at)
    before = charts(at)
    at.selectbox(key="mask_sentence").set_value(1).run()
    no_errors(at)
    assert charts(at) != before


def test_beam_settings_change_the_tree_and_restore_from_url(toy_path):
    at = open_app("beam", model=toy_path, text="the cat saw the dog", beam=2, max_len=4)
    no_errors(at)
    assert at.number_input(key="beam").value == 2
    before = charts(at)
    at.number_input(key="beam").set_value(5).run()
    no_errors(at)
    assert charts(at) != before
    assert at.query_params["beam"] in ("5", ["5"])
    at = open_app("beam", model=toy_path, text="the cat", beam=99, max_len=999)
    assert not at.exception
    assert at.number_input(key="beam").value == 16
    assert at.number_input(key="max_len").value == 256
    assert any("out of range" in i.value for i in at.info)


def test_head_ablation_reruns_the_model(toy_path):
    at = open_app("heads", model=toy_path, text="the cat saw the dog")
    no_errors(at)
    assert at.dataframe
    at.multiselect(key="ablate_heads").set_value(["encoder.0.self:0", "encoder.0.self:1",
                                                 "encoder.1.self:2"]).run()
    no_errors(at)
    diff = [c for c in charts(at) if "ablated" in json.dumps(c.get("layout", {}).get("title"))]
    assert diff, "the ablation difference heatmap is shown"


def test_compare_two_inputs(toy_path):
    at = open_app("compare", model=toy_path, text="the cat saw the dog")
    no_errors(at)
    at.text_input(key="text_b").input("the dog saw the cat").run()
    no_errors(at)
    titles = [json.dumps(c.get("layout", {}).get("title")) for c in charts(at)]
    assert any("Difference" in t for t in titles)


def test_compare_starts_with_the_text_and_one_word_changed():
    """The second input starts as the sidebar text's suggested corruption (the textbook pair:
    tired -> an adjective that makes "it" the street) and follows a new sidebar text; what a
    user typed stays until then."""
    from viz_core.tasks.en_fr import because_parts

    clean = "the animal didn't cross the street because it was too tired"
    at = open_app("compare", model="en-fr", text=clean)
    no_errors(at)
    second = at.text_input(key="text_b").value
    assert second != clean and because_parts(second).referent == "thing"
    assert any("tired" in c.value and "→" in c.value for c in at.caption)
    # each side shows its translation: the shipped model's pronoun follows the adjective
    codes = [c.value for c in at.code]
    assert "→ " in codes[0] and "qu'il" in codes[0] and "qu'elle" in codes[1], codes
    assert any("Difference" in json.dumps(c.get("layout", {}).get("title")) for c in charts(at))
    at.text_input(key="text_b").input("the dog saw the cat").run()
    at.text_area(key="text").input("the cat sat on the mat").run()
    no_errors(at)
    assert at.text_input(key="text_b").value not in ("the dog saw the cat", second)
    at.text_input(key="text_b").input("the dog saw the cat").run()
    assert at.text_input(key="text_b").value == "the dog saw the cat"
    assert not any("→" in c.value for c in at.caption)  # no suggestion shown for a typed one


@pytest.mark.parametrize("page", PAGES)
def test_bad_settings_in_the_url_are_clamped_not_fatal(toy_path, page):
    at = open_app(page, model=toy_path, text="the cat", layer="x", head=-5, query=10**9,
                  beam="abc", max_len=-1, lp="nan?", pe_d=10**9, pe_len=0, kind="bogus",
                  view="weird", early="maybe")
    assert not at.exception, [e.message for e in at.exception]


def test_page_settings_live_in_the_url(toy_path):
    at = open_app("masks", model=toy_path, text="the cat saw the dog",
                  mask_batch="the cat saw the dog\nthe dog", mask_sentence=1, mask_head=3)
    no_errors(at)
    assert at.selectbox(key="mask_sentence").value == 1
    assert at.number_input(key="mask_head").value == 3
    at = open_app("compare", model=toy_path, text="the cat saw the dog", cmp_kind="decoder.cross",
                  cmp_layer=1, cmp_head=2, text_b="the dog saw the cat")
    no_errors(at)
    assert at.selectbox(key="cmp_kind").value == "decoder.cross"
    assert (at.number_input(key="cmp_layer").value, at.number_input(key="cmp_head").value) \
        == (1, 2)
    at = open_app("heads", model=toy_path, text="the cat saw the dog",
                  ablate="encoder.0.self:1,encoder.9.self:0")
    assert not at.exception
    assert at.multiselect(key="ablate_heads").value == ["encoder.0.self:1"]
    assert any("do not exist" in i.value for i in at.info)


def test_precision_choice_reaches_the_model_and_the_address():
    at = open_app("attention", model="dates", text="9 may 2018", dtype="bfloat16")
    assert not at.exception
    assert at.selectbox(key="dtype").value == "bfloat16"
    assert at.query_params["dtype"] == "bfloat16"
    at.query_params["dtype"] = "<script>"  # hostile: ignored, the choice stays
    at.run()
    assert not at.exception and at.selectbox(key="dtype").value == "bfloat16"
