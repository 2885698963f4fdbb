"""Inside a head, "Scoring functions" (AppTest): on our own models, MiniLM and tiny random GPT-2
and T5 the section shows the three scorers on the head's own q and keys (the numbers of
viz_core.lessons.scoring on the model's trace), the d_k slider changes the experiment, and hostile
URL values are clamped, never fatal."""

from __future__ import annotations

import base64
import json

import numpy as np
import pytest

import viz_core as vc
from tests.support.apptest import no_errors, open_app
from viz_core.lessons import scoring

TEXT = "the cat sat on the mat"
DATES = "9 may 2018"
INSIDE_CHARTS = 9  # the step-by-step panels above the section (no softcap)
SECTION_CHARTS = 4  # comparison, one draw, saturation curves, variance


@pytest.fixture(scope="module")
def models(tiny_models):
    """Page model argument and text per name."""
    return {"dates": ("dates", DATES), "lm": ("lm", TEXT),
            "minilm": ("minilm", "The quick brown fox jumps over the lazy dog."),
            "gpt2": (str(tiny_models.path("gpt2", seed=1)), TEXT),
            "t5": (str(tiny_models.path("t5", seed=1)), TEXT)}


def specs(at) -> list[dict]:
    return [json.loads(c.proto.spec) for c in at.get("plotly_chart")]


def title(spec: dict) -> str:
    return json.dumps(spec.get("layout", {}).get("title"))


def section(at) -> list[dict]:
    return [s for s in specs(at) if any(w in title(s) for w in (
        "scoring functions", "random query", "saturation", "Variance of the logits"))]


def values(y) -> np.ndarray:
    """A trace's y: plotly's typed array ({"dtype", "bdata"}) or a plain list."""
    if isinstance(y, dict):
        return np.frombuffer(base64.b64decode(y["bdata"]), dtype=np.dtype(y["dtype"]))
    return np.asarray(y, dtype=np.float64)


def subheaders(at) -> list[str]:
    return [s.value for s in at.subheader]


@pytest.mark.parametrize("name", ["dates", "lm", "minilm", "gpt2", "t5"])
def test_section_runs_and_the_d_k_slider_changes_the_experiment(models, name):
    model, text = models[name]
    at = open_app("inside", model=model, text=text, scoring=1)
    no_errors(at)
    assert "Scoring functions" in subheaders(at)
    assert at.toggle(key="scoring").value is True
    assert len(at.get("plotly_chart")) == INSIDE_CHARTS + SECTION_CHARTS
    assert len(section(at)) == SECTION_CHARTS
    assert any("random, untrained additive scorer of width d_a" in c.value for c in at.caption)
    slider = at.select_slider(key="dk")
    assert slider.value in scoring.DK_CHOICES
    before = section(at)
    new = 1024 if slider.value != 1024 else 4
    slider.set_value(new).run()
    no_errors(at)
    assert at.select_slider(key="dk").value == new
    assert at.query_params["dk"] in (str(new), [str(new)])
    after = section(at)
    assert after[0] == before[0]  # the model's own q and keys: not the slider's business
    assert after[1:] != before[1:]  # the random draw and the marked d_k follow the slider
    assert f"d_k = {new}" in title(after[1])


def test_t5_names_its_own_scaling(models):
    at = open_app("inside", model=models["t5"][0], text=TEXT, scoring=1)
    no_errors(at)
    assert any("This model multiplies q·k by 1," in c.value for c in at.caption)
    at = open_app("inside", model="dates", text=DATES, scoring=1)
    assert not any("This model multiplies" in c.value for c in at.caption)


@pytest.mark.parametrize("name,block,head_dk", [("dates", "encoder.0.self", 16),
                                                ("minilm", "encoder.0.self", 32)])
def test_comparison_shows_the_scorers_on_the_heads_own_q_and_k(models, name, block, head_dk):
    model, text = models[name]
    at = open_app("inside", model=model, text=text, scoring=1, kind="encoder.self", layer=0,
                  head=1, query=2, score_seed=7)
    no_errors(at)
    assert at.select_slider(key="dk").value == head_dk  # the head's own d_k by default
    b = vc.load(model).trace(text)[block]
    cmp = scoring.compare_scores(b.q[1][2], b.k[1], b.mask[2], seed=7)
    assert cmp.d_k == head_dk
    bars = [t for t in section(at)[0]["data"] if t["type"] == "bar"]
    assert len(bars) == 6
    for i, scorer in enumerate(scoring.SCORERS):
        np.testing.assert_allclose(values(bars[2 * i]["y"]), cmp.scores[scorer], rtol=1e-4,
                                   atol=1e-5)
        np.testing.assert_allclose(values(bars[2 * i + 1]["y"]), cmp.weights[scorer],
                                   atol=1e-6)
    assert len(set(bars[0]["x"])) == len(b.key_tokens)  # unique key labels


def test_section_is_off_by_default_and_the_toggle_lives_in_the_url():
    at = open_app("inside", model="dates", text=DATES)
    no_errors(at)
    assert "Scoring functions" in subheaders(at)
    assert at.toggle(key="scoring").value is False
    assert len(at.get("plotly_chart")) == INSIDE_CHARTS and not section(at)
    assert "scoring" not in at.query_params
    at.toggle(key="scoring").set_value(True).run()
    no_errors(at)
    assert len(section(at)) == SECTION_CHARTS
    assert at.query_params["scoring"] in ("1", ["1"])
    assert at.query_params["dk"] in ("16", ["16"])


@pytest.mark.parametrize("raw,expected,note", [
    ("-5", 1, "out of range"), (str(10 ** 30), 1024, "out of range"),
    ("abc", 16, "not a number"), ("1e3", 16, "not a number"), ("", 16, "not a number"),
    ("100", 128, "not a power of two"), ("0", 1, "out of range"), ("256", 256, None)])
def test_hostile_d_k_in_the_url_is_clamped(raw, expected, note):
    at = open_app("inside", model="dates", text=DATES, scoring=1, dk=raw, score_seed="-1")
    no_errors(at)
    assert at.select_slider(key="dk").value == expected
    assert at.number_input(key="score_seed").value == 0
    infos = [i.value for i in at.info]
    if note:
        assert any(note in i and "dk=" in i for i in infos), infos
    assert len(section(at)) == SECTION_CHARTS


@pytest.mark.parametrize("raw", ["maybe", "-1", "99"])
def test_hostile_scoring_switch_in_the_url_is_not_fatal(raw):
    at = open_app("inside", model="dates", text=DATES, scoring=raw, dk="x" * 500,
                  score_seed=10 ** 40)
    no_errors(at)
    assert at.toggle(key="scoring").value is (raw == "99")  # 99 clamps to 1: on
    if raw == "99":
        assert at.select_slider(key="dk").value == 16
        assert at.number_input(key="score_seed").value == 9999
