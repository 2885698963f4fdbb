"""The Circuits page (AppTest): on the shipped induction model a held-out repeated sequence
and its corruption (the first occurrence of the last word replaced, as tests/unit/test_edges.py
builds them) draw the kept edges and the faithfulness curve, and the graph's edges are the
library's top edges with its scores; the URL holds the texts, the method and the count; a
tiny HF GPT-2 runs every method; exact patching asks first above its limit; a picked head
opens on Which heads matter; MiniLM (post-norm), different token counts and an empty text
give one clear line and the page stays up."""

from __future__ import annotations

import json

import numpy as np
import pytest

import viz_core as vc
from tests.support.apptest import no_errors, open_app

CLEAN = "cat sees the red king cat sees the red"
CORRUPTED = "cat sees the blue king cat sees the red"  # "red" first seen before "blue"
GPT2_CLEAN = "the cat sat on the mat because it was"
GPT2_CORRUPTED = "the dog sat on the mat because it was"


def _figures(at) -> list[dict]:
    return [json.loads(c.proto.spec) for c in at.get("plotly_chart")]


def _drawn(fig: dict) -> dict:
    return {tuple(t["customdata"][0][:3]): t["customdata"][0][3]
            for t in fig["data"] if t.get("name") == "edge"}


@pytest.fixture(scope="module")
def reference():
    """The library's own EAP-IG scores on the pair: what the page must draw."""
    model = vc.load("induction", device="cpu")
    return model.edge_attribution(CLEAN, CORRUPTED, method="eap-ig")


def test_induction_circuit_and_url_state(reference):
    # EAP-IG is the page's default: on this pair its top 5 differ from EAP's (which has
    # the previous-token head -> induction head k edge in them, EAP-IG the embed -> L0 h0 v)
    at = open_app("circuits", model="induction", circ_clean=CLEAN, circ_corrupt=CORRUPTED,
                  circ_top=5)
    no_errors(at)
    assert at.title[0].value == "Circuits"
    assert at.radio(key="circ_method").value == "eap-ig" and "circ_method" not in at.query_params
    graph, curve = _figures(at)
    want = reference.circuit(top=5)
    drawn = _drawn(graph)
    assert set(drawn) == set(zip(want["sender"], want["receiver"], want["input"]))
    for (s, r, i), score in zip(zip(want["sender"], want["receiver"], want["input"]),
                                want["score"]):
        assert drawn[(s, r, i)] == pytest.approx(score, abs=1e-9)  # same cached call
    # the curve: 0 edges kept is the corrupted run, every edge the clean one
    xs, ys = curve["data"][0]["x"], curve["data"][0]["y"]
    assert xs[0] == 0 and xs[-1] == len(reference.edges)
    assert ys[0] == pytest.approx(0, abs=1e-4) and ys[-1] == pytest.approx(1, abs=1e-4)
    assert curve["data"][1]["x"] == [5]
    assert curve["data"][1]["y"][0] == pytest.approx(reference.faithfulness(want), abs=1e-6)
    # 5 of the 46 edges is the default (10%), so the address leaves it out (state.to_url)
    assert "circ_top" not in at.query_params
    at.slider(key="circ_top").set_value(12).run()
    no_errors(at)
    assert len(_drawn(_figures(at)[0])) == 12 and len(at.dataframe[0].value) == 12
    # the inputs as text: an MLP's or the logits' empty input an empty cell (the categorical's
    # "" showed as a grey "None"; every row in view: tests/browser/test_flow_browser.py)
    rows = at.dataframe[0].value
    plain = ~rows["receiver"].str.contains(r"\.h\d+$")
    assert plain.any() and set(rows.loc[plain, "input"]) == {""}
    assert set(rows.loc[~plain, "input"]) <= {"q", "k", "v"}
    assert at.query_params["circ_top"] in ("12", ["12"])
    assert "Edges (CSV)" in [b.proto.label for b in at.get("download_button")]


def test_a_deep_models_graph_takes_the_pages_width(monkeypatch):
    """Past 4 layer columns (GPT-2-small's 12 squeezed into three fifths of the page) the
    graph takes the page's width and the faithfulness curve goes under it; up to 4 they sit
    side by side. The model's depth is faked (the page asks viz_core's layer_columns)."""
    import viz_core.figures.circuit as C

    def charts_in_columns(at) -> int:
        return sum(len(c.get("plotly_chart")) for c in at.columns)

    at = open_app("circuits", model="induction", circ_clean=CLEAN, circ_corrupt=CORRUPTED)
    no_errors(at)
    assert len(_figures(at)) == 2 and charts_in_columns(at) == 2
    monkeypatch.setattr(C, "layer_columns", lambda edges: 12)
    at.run()
    no_errors(at)
    assert len(_figures(at)) == 2 and charts_in_columns(at) == 0


def test_a_repeated_texts_own_pair_shows_the_induction_circuit():
    """No pair in the address: the sidebar's example (a repeated sequence) and its suggested
    corruption, the earlier occurrence of its last word replaced. EAP-IG's top 5 then hold
    the previous-token head -> induction head (k) edge, both heads found from their patterns."""
    from viz_core.atlas.worker import trace_rows

    at = open_app("circuits", model="induction")
    no_errors(at)
    clean, corrupted = at.session_state["circ_clean"], at.session_state["circ_corrupt"]
    assert clean.split()[-1] == corrupted.split()[-1] and clean != corrupted
    cols, _ = trace_rows(vc.load("induction", device="cpu").trace(clean, capture=("pattern",),
                                                                   max_new=0))
    best = {role: max(zip(cols[role], cols["layer"], cols["head"])) for role in
            ("previous", "induction")}
    prev, ind = (f"decoder.{layer}.self.h{head}" for _, layer, head in best.values())
    drawn = _drawn(_figures(at)[0])
    assert (prev, ind, "k") in drawn and any(s == ind for s, _, _ in drawn)


def test_a_picked_head_opens_on_which_heads_matter():
    at = open_app("circuits", model="induction", circ_clean=CLEAN, circ_corrupt=CORRUPTED,
                  circ_top=5)
    no_errors(at)
    heads = at.selectbox(key="circ_head").options
    assert heads and all(".self.h" in h for h in heads)
    at.selectbox(key="circ_head").set_value("decoder.1.self.h0")
    at.button(key="circ_open").click().run()
    no_errors(at)
    assert at.title[0].value == "Which heads matter"
    assert at.session_state["qk_block"] == "decoder.1.self" and at.session_state["qk_head"] == 0
    # on the circuit's clean text, not the sidebar's example; back on Circuits, the same pair
    assert at.text_area(key="text").value == CLEAN
    assert at.query_params["text"] in (CLEAN, [CLEAN])
    at.switch_page("pages/circuits.py").run()
    no_errors(at)
    assert at.session_state["circ_clean"] == CLEAN
    assert at.session_state["circ_corrupt"] == CORRUPTED


def test_the_metric_is_named_in_the_readers_language(reference):
    """The metric's name is data in English (the result, its CSV) and words on the page: in
    简体中文 it reads in Chinese, the token as it is."""
    assert str(reference.metric) == "logit 'king' at 9"
    at = open_app("circuits", model="induction", circ_clean=CLEAN, circ_corrupt=CORRUPTED,
                  lang="zh")
    no_errors(at)
    captions = [c.value.replace("\\", "") for c in at.caption]  # literal()'s escapes
    assert any("位置 9 处的 logit 'king'" in c for c in captions), captions
    assert not any("at 9" in c for c in captions)


@pytest.mark.parametrize("method", ["eap", "eap-ig", "exact"])
def test_tiny_gpt2_every_method(method, tiny_models):
    at = open_app("circuits", model=str(tiny_models.path("gpt2", seed=1)),
                  circ_clean=GPT2_CLEAN, circ_corrupt=GPT2_CORRUPTED, circ_method=method)
    no_errors(at)
    graph, _ = _figures(at)
    assert len(_drawn(graph)) == at.session_state["circ_top"] > 0


def test_exact_asks_first_above_the_limit(monkeypatch):
    import attention_lab.ui.circuits as circuits

    monkeypatch.setattr(circuits, "CONFIRM_ABOVE", 10)  # the induction graph: 46 edges
    at = open_app("circuits", model="induction", circ_clean=CLEAN, circ_corrupt=CORRUPTED,
                  circ_method="exact")
    no_errors(at)
    assert not _figures(at)
    assert any("48 forward passes" in w.value for w in at.warning)
    at.button(key="circ_confirm").click().run()
    no_errors(at)
    assert len(_figures(at)) == 2
    at.slider(key="circ_top").set_value(3).run()  # a rerun keeps the confirmation
    no_errors(at)
    assert len(_drawn(_figures(at)[0])) == 3


def test_check_against_exact(reference):
    """The toggle (URL circ_check) scores every edge exactly too: the caption's rho and
    shared count are those of the library's exact run through scipy and set intersection,
    the scatter has one point per edge at (exact, EAP-IG); off, it goes; Exact has none."""
    from scipy.stats import spearmanr

    exact = vc.load("induction", device="cpu").edge_attribution(CLEAN, CORRUPTED, method="exact")
    keys = ["sender", "receiver", "input"]
    both = reference.edges.merge(exact.edges, on=keys, suffixes=("", "_exact"))
    rho = spearmanr(both["score"], both["score_exact"])[0]
    top = [set(map(tuple, f.circuit(top=5)[keys].astype(str).to_numpy()))
           for f in (reference, exact)]
    at = open_app("circuits", model="induction", circ_clean=CLEAN, circ_corrupt=CORRUPTED,
                  circ_top=5, circ_check=1)
    no_errors(at)
    assert at.toggle(key="circ_check").value
    figures = _figures(at)
    assert len(figures) == 3
    caption = next(c.value for c in at.caption if "Spearman" in c.value)
    assert f"ρ = {rho:.2f}" in caption and f"{len(top[0] & top[1])} of its top 5" in caption
    points = sorted((x, y) for t in figures[2]["data"] if t.get("mode") == "markers"
                    for x, y in zip(t["x"], t["y"]))
    np.testing.assert_allclose(points, sorted(zip(both["score_exact"], both["score"])),
                               atol=1e-9)
    at.toggle(key="circ_check").set_value(False).run()
    no_errors(at)
    assert len(_figures(at)) == 2 and "circ_check" not in at.query_params
    zh = open_app("circuits", model="induction", circ_clean=CLEAN, circ_corrupt=CORRUPTED,
                  circ_top=5, circ_check=1, lang="zh")
    no_errors(zh)
    assert zh.toggle(key="circ_check").label == "与精确修补对照"
    assert any(f"Spearman ρ = {rho:.2f}" in c.value and "精确修补" in c.value
               for c in zh.caption)
    assert _figures(zh)[2]["layout"]["title"]["text"] == "EAP-IG（5 步） 对照 精确修补"
    at.radio(key="circ_method").set_value("exact").run()
    no_errors(at)
    assert not [t for t in at.toggle if t.key == "circ_check"]


def test_a_post_norm_model_says_why_it_has_no_edges():
    """MiniLM renormalises after every sublayer: the library's own line, as information."""
    at = open_app("circuits", model="minilm", circ_clean=GPT2_CLEAN,
                  circ_corrupt=GPT2_CORRUPTED)
    no_errors(at)
    assert len(at.info) == 1 and "post-norm" in at.info[0].value.replace("\\", "")
    assert not _figures(at)


def test_different_token_counts_give_one_clear_line():
    at = open_app("circuits", model="induction", circ_clean=CLEAN,
                  circ_corrupt="cat sees the red")
    assert not at.exception
    assert len(at.error) == 1 and "same number" in at.error[0].value
    assert not _figures(at)


def test_a_pair_that_barely_moves_the_metric_is_said():
    at = open_app("circuits", model="lm", circ_clean="the cat sat on the",
                  circ_corrupt="the dog sat on the")
    no_errors(at)
    said = [w for w in at.warning if "barely moves" in w.value]
    assert said and _figures(at)
    assert said[0].icon == "⚠️"  # not the ✂️ of a cut input


def test_empty_text_asks_for_a_pair():
    at = open_app("circuits", model="induction", circ_clean=CLEAN, circ_corrupt=" ")
    no_errors(at)
    assert any("corrupted one" in i.value for i in at.info) and not _figures(at)


def test_a_new_sidebar_text_brings_its_own_pair():
    at = open_app("circuits", model="induction", circ_clean=CLEAN, circ_corrupt=CORRUPTED)
    no_errors(at)
    at.text_area(key="text").set_value("the red king sees the cat the red king sees").run()
    no_errors(at)
    assert at.session_state["circ_clean"] == "the red king sees the cat the red king sees"
    assert at.session_state["circ_corrupt"] != at.session_state["circ_clean"]


def test_tiny_t5_draws_the_encoder_and_cross_attention(tiny_models):
    """An encoder-decoder: the sidebar's target is teacher-forced in both runs; encoder
    components write into the cross-attention heads' k and v."""
    at = open_app("circuits", model=str(tiny_models.path("t5", seed=1)), target="le chat",
                  circ_clean="the cat sat on the mat", circ_corrupt="the dog sat on the mat",
                  circ_top=300)
    no_errors(at)
    edges = at.dataframe[0].value
    into_cross = edges[edges.receiver.str.contains(".cross.")]
    assert len(into_cross) and set(into_cross.input) <= {"q", "k", "v"}
    assert (into_cross[into_cross.sender.str.startswith("encoder.")].input != "q").all()
    graph, _ = _figures(at)
    assert len(_drawn(graph)) == len(edges)
