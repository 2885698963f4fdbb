"""The whole block page (AppTest): our models, MiniLM and tiny GPT-2 / T5 / Llama / Gemma 2;
the head shares add up to the model's own output; hostile text keeps the page working."""

import json

import pytest

from tests.support.apptest import no_errors, open_app
from tests.support.hostile_inputs import CORPUS, sendable


def _figures(at):
    return [json.loads(c.proto.spec) for c in at.get("plotly_chart")]


def _largest_difference(at) -> float:
    for c in at.caption:
        if "largest difference" in c.value:
            return float(c.value.rsplit("largest difference ", 1)[1].rstrip(")."))
    raise AssertionError("no sum check shown")


def _check_page(at, stacks: int):
    no_errors(at)
    titles = [json.dumps(f.get("layout", {}).get("title", "")) for f in _figures(at)]
    assert any("share after W_O" in t for t in titles)
    assert sum("Residual stream" in t for t in titles) == stacks
    assert _largest_difference(at) < 1e-4
    table = at.dataframe[0].value
    assert list(table["step"])[0] == "input" and "W_O" in list(table["step"])


@pytest.mark.parametrize("name,stacks", [("en-fr", 2), ("lm-rope", 1), ("minilm", 1)])
def test_block_page_on_shipped_models(name, stacks):
    at = open_app("block", model=name, text="the red car")
    _check_page(at, stacks)
    placement = "post" if name in ("en-fr", "minilm") else "pre"
    assert any(placement in m.value for m in at.markdown if "Norm placement" in m.value)
    # another layer and head: the shapes follow the block
    at.number_input(key="layer").set_value(1).run()
    no_errors(at)
    assert _largest_difference(at) < 1e-4


@pytest.mark.parametrize("family,stacks", [("gpt2", 1), ("t5", 2), ("llama", 1),
                                           ("gemma2", 1)])
def test_block_page_on_tiny_hf_models(tiny_models, family, stacks):
    path = tiny_models.path(family, seed=1)
    at = open_app("block", model=str(path), text="the cat sat on the mat",
                  target="le chat" if family == "t5" else "")
    _check_page(at, stacks)


def test_block_page_cross_attention_shapes():
    at = open_app("block", model="en-fr", text="the small black cats eat the cake",
                  kind="decoder.cross")
    no_errors(at)
    table = at.dataframe[0].value
    shapes = dict(zip(table["step"], table["shape [B, …]"]))
    n_src = len("the small black cats eat the cake".split()) + 1  # + </s>
    assert f", {n_src}]" in shapes["scores"]


@pytest.mark.parametrize("label,text", CORPUS[:12])
def test_block_page_hostile_text(label, text):
    at = open_app("block", model="lm", text=sendable(text))
    assert not at.exception, (label, [e.message for e in at.exception])
