"""The Positional encoding page for rotary models (issue 14, item 6): the shipped lm-rope and
a tiny random Llama, each read from its own config; the sinusoidal vs rotary tab."""

import json

import numpy as np
import pytest

from tests.support.apptest import no_errors, open_app
from tests.support.hf_tiny_modern import make_tiny
from viz_core.lessons.rope import rope_frequencies


def figures(at) -> dict[str, dict]:
    """{title: figure} of every chart on the page."""
    out = {}
    for c in at.get("plotly_chart"):
        fig = json.loads(c.proto.spec)
        out[(fig["layout"].get("title") or {}).get("text", "")] = fig
    return out


def values(trace, axis="y") -> np.ndarray:
    v = trace[axis]
    if isinstance(v, dict):  # plotly's typed-array encoding
        import base64

        return np.frombuffer(base64.b64decode(v["bdata"]), dtype=v["dtype"]).astype(float)
    return np.asarray(v, dtype=float)


@pytest.fixture(scope="module")
def tiny_llama(tmp_path_factory):
    return str(make_tiny("llama", tmp_path_factory.mktemp("hf") / "llama"))


def check_rope_views(at, dim, base):
    no_errors(at)
    figs = figures(at)
    freq = figs["Rotation speed of each dimension pair"]
    np.testing.assert_allclose(values(freq["data"][0]), rope_frequencies(dim, base), rtol=1e-6)
    for title in ("Rotation angle pos·θᵢ of each pair", "cos(pos·θᵢ): position × pair",
                  "Long-range decay of the q·k bound"):
        assert title in figs, sorted(figs)
    pair = [t for t in figs if t.startswith("q·k at (")]
    assert pair, sorted(figs)
    first, second = pair[0].split(" = ")[1].split(";")[0], pair[0].split(" = ")[-1]
    assert first == second  # q·k at (m, n) equals q·k at (m + s, n + s)
    assert any(f"base = {base:g}" in c.value for c in at.caption)
    assert at.get("plotly_chart")[0]  # and the formula
    assert any("theta" in latex.value for latex in at.latex)
    return figs


def test_positional_page_shows_rope_for_lm_rope():
    at = open_app("positional", model="lm-rope", text="the red car")
    figs = check_rope_views(at, dim=32, base=10000)
    assert "Positional encoding by dimension" in figs  # the formula explorer still works
    at.number_input(key="rope_shift").set_value(9).run()
    no_errors(at)
    assert any(t.startswith("q·k at (3, 1)") and "(12, 10)" in t for t in figures(at))
    assert at.query_params["rope_shift"] in ("9", ["9"])


def test_positional_page_shows_rope_for_a_tiny_llama(tiny_llama):
    at = open_app("positional", model=tiny_llama, text="Hello world, this is a test")
    check_rope_views(at, dim=8, base=10000)


def test_sinusoidal_vs_rotary_tab_agrees():
    at = open_app("positional", model="lm-rope", text="the red car", cmp_d=16, cmp_len=10)
    no_errors(at)
    figs = figures(at)
    sin = values(figs["PE(p) · PE(q)"]["data"][0], "z").reshape(10, 10)
    rot = values(figs["q_m · k_n for q = k = (1, …, 1)"]["data"][0], "z").reshape(10, 10)
    np.testing.assert_allclose(rot, 2 * sin, atol=1e-4)  # the same kernel of p - q, twice


def test_positional_page_draws_the_configs_rope_scaling(tmp_path):
    """A Llama 3-scaled tiny model: the scaled frequencies come from transformers' own
    function and are drawn beside the unscaled ones."""
    from transformers import AutoConfig
    from transformers.modeling_rope_utils import ROPE_INIT_FUNCTIONS

    path = make_tiny("llama", tmp_path / "llama3")
    raw = json.loads((path / "config.json").read_text())
    raw["rope_parameters"] = {"rope_type": "llama3", "rope_theta": 10000.0, "factor": 8.0,
                              "low_freq_factor": 1.0, "high_freq_factor": 4.0,
                              "original_max_position_embeddings": 16}
    raw.pop("rope_scaling", None)
    (path / "config.json").write_text(json.dumps(raw))
    want, _ = ROPE_INIT_FUNCTIONS["llama3"](AutoConfig.from_pretrained(path), "cpu")
    at = open_app("positional", model=str(path), text="Hello world")
    no_errors(at)
    freq = figures(at)["Rotation speed of each dimension pair"]
    assert len(freq["data"]) == 2 and "llama3" in freq["data"][1]["name"]
    np.testing.assert_allclose(values(freq["data"][1]), want.double().numpy(), rtol=1e-6)
    assert any("llama3 factor = 8.0" in c.value for c in at.caption)
    decay = figures(at)["Long-range decay of the q·k bound"]
    assert [t["name"] for t in decay["data"]] == ["this model (llama3)", "without scaling"]


@pytest.mark.parametrize("page", ["home", "attention", "inside", "masks", "beam", "heads",
                                  "compare"])
def test_every_other_page_runs_on_lm_rope(page):
    at = open_app(page, model="lm-rope", text="the red car")
    no_errors(at)
