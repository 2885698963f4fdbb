"""The Compare page's "Teacher and student" mode: MiniLM and its shipped student, and two
tiny random BERTs of different depth and head count; the URL restores the view."""

import json

import pytest

from tests.support.apptest import no_errors, open_app
from tests.support.tiny_distil import make_bert

MODE = "teacher and student"
OTHER = "Other (path or Hub id)…"
TEXT = "The cat sat on the mat because it was tired."


def charts(at) -> list[dict]:
    return [json.loads(c.proto.spec) for c in at.get("plotly_chart")]


def mapped(at) -> list[tuple[int, int]]:
    frame = at.dataframe[0].value
    return list(zip(frame.student_layer, frame.teacher_layer))


@pytest.fixture(scope="module")
def tiny(tmp_path_factory):
    root = tmp_path_factory.mktemp("distil_page")
    return {"teacher": str(make_bert(root / "teacher", 4, 4, seed=0)),
            "student": str(make_bert(root / "student", 2, 2, seed=1))}


def test_minilm_and_its_student():
    at = open_app("compare", model="minilm", text=TEXT, cmp_mode=MODE)
    no_errors(at)
    assert at.selectbox(key="student").value == "minilm-student"
    layer_map, pair = charts(at)
    assert layer_map["data"][1]["x"] == [1, 3, 5] and layer_map["data"][1]["y"] == [0, 1, 2]
    assert mapped(at) == [(0, 1), (1, 3), (2, 5)]  # TinyBERT's uniform map, 3 of 6 layers
    assert [d["name"] for d in pair["data"]] == ["teacher", "student", "difference"]
    assert any("What TinyBERT and MiniLM transfer" in e.label for e in at.expander)
    # the measure and the pair change the view, and land in the URL
    at.selectbox(key="dist_measure").set_value("value_relation_kl").run()
    no_errors(at)
    assert charts(at)[0] != layer_map
    at.selectbox(key="dist_head").set_value("4").run()  # 12 heads each: one head can be shown
    no_errors(at)
    assert charts(at)[1] != pair
    assert at.query_params["dist_measure"] in ("value_relation_kl", ["value_relation_kl"])
    assert at.query_params["dist_head"] in ("4", ["4"])


def test_the_url_restores_the_view():
    at = open_app("compare", model="minilm", text=TEXT, cmp_mode=MODE, dist_map="last",
                  dist_on="the input text", dist_pair=17, dist_measure="score_mse")
    no_errors(at)
    assert mapped(at) == [(2, 5)]  # MiniLM's: the last layers only
    assert at.selectbox(key="dist_pair").value == 17  # student 2, teacher 5
    assert at.selectbox(key="dist_measure").value == "score_mse"
    assert "score MSE" in charts(at)[0]["layout"]["title"]["text"]


def test_tiny_berts_of_different_depth_and_heads(tiny):
    at = open_app("compare", model=tiny["teacher"], text="the cat sat on the mat",
                  cmp_mode=MODE, student=OTHER, student_path=tiny["student"],
                  dist_on="the input text")
    no_errors(at)
    assert mapped(at) == [(0, 1), (1, 3)]
    assert any("4 heads" in c.value and "2" in c.value for c in at.caption)
    assert at.selectbox(key="dist_head").options == ["mean of the heads"]
    at.selectbox(key="dist_map").set_value("custom").run()
    at.text_input(key="dist_layers").input("0,3").run()
    no_errors(at)
    assert mapped(at) == [(0, 0), (1, 3)]
    assert at.query_params["dist_layers"] in ("0,3", ["0,3"])


def test_bad_choices_are_one_line(tiny):
    at = open_app("compare", model=tiny["teacher"], text="the cat", cmp_mode=MODE,
                  student=OTHER, student_path=tiny["student"], dist_on="the input text",
                  dist_map="custom", dist_layers="0,9")
    assert not at.exception
    assert [e.value for e in at.error] and "Teacher layer 9" in at.error[0].value
    at = open_app("compare", model=tiny["student"], text="the cat", cmp_mode=MODE,
                  student=OTHER, student_path=tiny["teacher"], dist_on="the input text")
    assert not at.exception
    assert "deeper than the teacher" in at.error[0].value
