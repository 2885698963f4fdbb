"""The Attention page at 8,192 tokens (AppTest): pooled head, zoom window, overview grid,
head view window, pooled mean/max, rollout refused with its size, faithfulness shown and
checked; every chart within its byte budget."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest
from streamlit.testing.v1 import AppTest

from viz_core.figures.heatmap import POOLED_SIZE, ZOOM_MAX
from viz_core.training.toy import save_toy

APP = str(Path(__file__).resolve().parents[2] / "app.py")
TIMEOUT = 300
N = 8192
ONE_FIGURE = 1_500_000
GRID = 3_000_000
# One-letter words: 8,191 of them (the model adds one token) fit the 20,000-character box.
WORDS = ["a", "i"]
TEXT = " ".join(WORDS[i % 2] for i in range(N - 1))


@pytest.fixture(scope="module")
def long_toy(tmp_path_factory):
    # tiny, so that the 8,192-token run takes seconds on a 2-core CPU
    return str(save_toy(tmp_path_factory.mktemp("ckpt") / "long", kind="encoder-only",
                        seed=3, max_len=N, d_model=32, n_heads=2, n_layers=2, d_ff=64))


@pytest.fixture(scope="module")
def page(long_toy):
    at = AppTest.from_file(APP, default_timeout=TIMEOUT)
    at.query_params["model"] = long_toy
    at.query_params["text"] = TEXT
    at.switch_page("pages/attention.py")
    return at.run()


def no_errors(at):
    assert not at.exception, [e.message for e in at.exception]
    assert not at.error, [e.value for e in at.error]


def specs(at) -> dict[str, str]:
    return {c.proto.id: c.proto.spec for c in at.get("plotly_chart")}


def chart_by_title(at, words: str) -> dict:
    for spec in specs(at).values():
        fig = json.loads(spec)
        if words in (fig["layout"].get("title") or {}).get("text", ""):
            return fig
    raise AssertionError(f"no chart titled with {words!r}")


def test_long_page_shows_pooled_head_zoom_and_grid(page):
    at = page
    no_errors(at)
    sizes = {k: len(s) for k, s in specs(at).items()}
    assert all(s <= GRID for s in sizes.values()), sizes
    assert sum(s > ONE_FIGURE for s in sizes.values()) <= 1  # only the grid may exceed 1.5 MB
    heat = chart_by_title(at, "head 0 · weights")
    assert "block means" in heat["layout"]["title"]["text"]
    assert len(heat["data"][0]["y"]) <= POOLED_SIZE
    assert heat["data"][0]["y"][0] == "0–18" and heat["data"][0]["x"][-1].endswith("–8191")
    zoom = chart_by_title(at, "queries 0–127 × keys 0–127")
    assert zoom["data"][0]["y"][:2] == ["0·a", "1·i"]  # tokens, with their positions
    assert "block means of 8192×8192" in chart_by_title(at, "All layers")["layout"]["title"][
        "text"]
    assert any("more than 1,024" in c.value for c in at.caption)
    assert any("match the model's reference attention" in c.value for c in at.caption)


def test_zoom_moves_the_window_at_full_resolution(page):
    at = page
    at.number_input(key="zoom_q").set_value(4000).run()
    at.number_input(key="zoom_k").set_value(8100).run()  # runs past the end: moved back
    no_errors(at)
    zoom = chart_by_title(at, "queries 4000–4127 × keys 8064–8191")
    ys, xs = zoom["data"][0]["y"], zoom["data"][0]["x"]
    assert len(ys) == len(xs) == 128 and len(set(ys)) == 128
    assert ys[0].startswith("4000·") and xs[-1].startswith("8191·")
    assert at.query_params["zoom_q"] in ("4000", ["4000"])
    at.number_input(key="zoom_size").set_value(ZOOM_MAX).run()  # the largest window
    no_errors(at)
    zoom = chart_by_title(at, f"queries 4000–{4000 + ZOOM_MAX - 1} × keys {N - ZOOM_MAX}–8191")
    shape = [int(v) for v in zoom["data"][0]["z"]["shape"].split(",")]
    assert shape == [ZOOM_MAX, ZOOM_MAX]
    assert "pooled" not in zoom["layout"]["title"]["text"]  # full resolution
    assert len(json.dumps(zoom)) <= ONE_FIGURE


def test_head_view_window_mean_max_and_rollout(page):
    at = page
    hv = chart_by_title(at, "head view · queries 0–127, keys 0–127")
    assert len(json.dumps(hv)) <= ONE_FIGURE
    at.number_input(key="hv_q").set_value(5000).run()
    no_errors(at)
    chart_by_title(at, "head view · queries 5000–5127")
    for how in ("mean", "max"):
        at.session_state["attn_tab"] = "Mean / max over heads"
        at.radio(key="agg_how").set_value(how).run()
        no_errors(at)
        fig = chart_by_title(at, f"{how} over heads")
        assert len(fig["data"][0]["y"]) <= POOLED_SIZE
        assert len(json.dumps(fig)) <= ONE_FIGURE
    at.session_state["attn_tab"] = "Rollout"
    at.run()
    no_errors(at)
    info = [i.value for i in at.info if "Rollout" in i.value]
    assert info and "8,192 × 8,192" in info[0] and "GiB" in info[0]
    # 2 layers x 2 heads x 8192^2 float32 = 1.0 GiB
    assert f"{2 * 2 * N * N * 4 / 2**30:,.1f} GiB" in info[0]


def test_check_faithfulness_button(page):
    at = page
    at.button(key="faith_check").click().run()
    no_errors(at)
    done = [s.value for s in at.success]
    assert done and "differ from the reference by at most" in done[0]
    value = float(done[0].rsplit(" ", 1)[1].rstrip("."))
    assert np.isfinite(value) and 0 <= value < 1e-3
