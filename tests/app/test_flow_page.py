"""The Information flow page (AppTest): the graph with its routes and the small multiples on
the induction model, MiniLM, en-fr and tiny GPT-2 / Llama / T5 / BART; the URL holds the
output position and the threshold (out-of-range values are clamped with a notice); a long
input says attention flow stops at 64 tokens while the graph still draws; the routes table
and its downloads."""

from __future__ import annotations

import json

import pytest

from tests.support.apptest import no_errors, open_app

TEXT = "the cat saw the dog and the cat saw the"
INDUCTION = "cat sees the red king cat sees the red king"


def _model(which: str, tiny_models) -> str:
    if which in ("induction", "minilm", "en-fr"):
        return which
    return str(tiny_models.path(which, seed=1))


def _figures(at) -> list[dict]:
    return [json.loads(c.proto.spec) for c in at.get("plotly_chart")]


def _route_traces(fig: dict) -> list[dict]:
    return [t for t in fig["data"] if t.get("name") == "edges"]


@pytest.mark.parametrize("which", ["induction", "minilm", "en-fr", "gpt2", "llama", "t5",
                                   "bart"])
def test_graph_and_views_on_every_kind_of_model(which, tiny_models):
    at = open_app("flow", model=_model(which, tiny_models),
                  text=INDUCTION if which == "induction" else TEXT,
                  target="le chat" if which in ("t5", "bart") else "")
    no_errors(at)
    assert at.title[0].value == "Information flow"
    figures = _figures(at)
    assert len(figures) == 2  # the graph and raw attention / rollout / attention flow
    graph, views = figures
    assert "Information flow to" in graph["layout"]["title"]["text"]
    assert [t["type"] for t in views["data"]] == ["bar", "bar", "bar"]
    route = at.dataframe[0].value
    assert len(route) and (route.edge_weight >= 0.04 - 1e-9).all()
    assert "flow_t" not in at.query_params  # the default (0.04) leaves the address


def test_induction_route_and_url_state():
    at = open_app("flow", model="induction", text=INDUCTION, flow_pos=8, flow_t=0.1)
    no_errors(at)
    assert at.session_state["flow_pos"] == 8 and at.session_state["flow_t"] == 0.1
    route = at.dataframe[0].value
    # "the" at 8 repeats position 3: the induction head reads position 4 ("red")
    induction = route[(route.block == "decoder.1.self") & (route.source_position == 4)
                      & (route.target_position == 8)]
    assert len(induction) and (route.edge_weight >= 0.1 - 1e-9).all()
    graph = _figures(at)[0]
    clickable = _route_traces(graph)[0]["customdata"]
    assert ["decoder.1.self", 0, 4, 8] in clickable or ["decoder.1.self", 1, 4, 8] in clickable
    at.slider(key="flow_t").set_value(0.3).run()
    no_errors(at)
    assert at.query_params["flow_t"] in ("0.3", ["0.3"])
    assert (at.dataframe[0].value.edge_weight >= 0.3 - 1e-9).all()


def test_out_of_range_url_values_are_clamped():
    at = open_app("flow", model="induction", text=INDUCTION, flow_pos=99, flow_t=7)
    no_errors(at)
    assert at.session_state["flow_pos"] == 10 and at.session_state["flow_t"] == 1.0
    notices = " ".join(m.value for m in (*at.warning, *at.info, *at.caption, *at.markdown))
    assert "flow_pos=99" in notices and "flow_t=7" in notices


def test_long_input_keeps_the_graph_and_says_why_there_is_no_flow():
    text = " ".join(["cat sees the red king"] * 14)  # 71 tokens with <bos>
    at = open_app("flow", model="induction", text=text)
    no_errors(at)
    assert len(_figures(at)) == 1  # the graph; the views say why they are missing
    assert any("up to 64 tokens" in c.value for c in at.caption)


def test_a_cut_input_is_said_once():
    """The trace and the flow both carry the cut's warning: the page shows it once."""
    at = open_app("flow", model="lm", text=" ".join(["the cat sat on the mat"] * 10))
    no_errors(at)
    cuts = [w.value for w in at.warning if "was cut" in w.value]
    assert len(cuts) == 1, cuts


def test_edges_download():
    at = open_app("flow", model="en-fr", text="the cat sees the dog")
    no_errors(at)
    labels = [b.proto.label for b in at.get("download_button")]
    assert "Edges (CSV)" in labels and "Routes (CSV)" in labels


@pytest.mark.parametrize("model", ["lm", "en-fr"])
def test_the_graphs_hovers_and_route_table_read_in_chinese(model):
    """Each route edge's and MLP marker's hover (its kind, weight, heads) in 简体中文: they
    were written out in English per point ("attention decoder.0.self · weight 0.41 · heads:
    …"), where the zh page test, reading hover templates, did not look. The routes table's
    kind column was the data's codes ("residual") and an edge without a head read "None"."""
    from tests.support.chinese_text import english_words, hover_texts, user_words

    at = open_app("flow", model=model, text="the cat sees the dog", lang="zh")
    no_errors(at)
    words, hovers = user_words(at), hover_texts(at)
    assert any("权重" in h for h in hovers), hovers[:3]  # the routes and MLPs are there
    left = [h for h in hovers if english_words(h, words)]
    assert left == [], left[:5]
    route = at.dataframe[0].value
    kinds = set(route["kind"])
    assert kinds and not any(english_words(k, words) for k in kinds), kinds
    assert "残差" in kinds  # every route has a residual edge
    heads = set(route["head"])
    assert "" in heads and all(h == "" or h.startswith("h") for h in heads), heads


def test_route_table_shows_kinds_and_heads_as_words():
    at = open_app("flow", model="induction", text=INDUCTION)
    no_errors(at)
    route = at.dataframe[0].value
    assert set(route["kind"]) <= {"attention", "residual", "MLP", "cross-attention"}
    attention = route[route["kind"] == "attention"]
    assert len(attention) and all(h.startswith("h") for h in attention["head"])
    assert (route[route["kind"] != "attention"]["head"] == "").all()
