"""The Attention page's "it follows the adjective" box (attention_lab/ui/seed_example.py):
the tired / wide pair side by side through one head, with the shipped en-fr model's
translations; the bars are that head's attention row as the model's own trace gives it."""

import json

import numpy as np
import pytest

import viz_core as vc
from attention_lab.ui.seed_example import PAIR, card_head
from tests.support.apptest import no_errors, open_app
from tests.support.language import in_chinese


@pytest.fixture(scope="module")
def model():
    return vc.load("en-fr", device="cpu")


def box_figure(at, marker: str = "attention from"):
    for chart in at.get("plotly_chart"):
        spec = json.loads(chart.proto.spec)
        if marker in json.dumps(spec["layout"].get("title", ""), ensure_ascii=False):
            return spec
    raise AssertionError("no 'it follows the adjective' chart")


def expected_rows(model, kind, layer, head):
    rows = []
    for text in PAIR:
        tr = model.trace(text)
        block = tr.layers(kind)[layer]
        q = list(block.query_tokens).index("it" if kind == "encoder.self" else "qu'")
        rows.append(block.pattern[head][q])
    return rows


def test_box_shows_the_flip_with_the_cards_head(model):
    at = open_app("attention", model="en-fr", text=PAIR[0])
    no_errors(at)
    assert any("follows the adjective" in e.label for e in at.expander)
    code = "\n".join(c.value for c in at.code)
    assert "parce qu'il était trop fatigué" in code  # the model's own translations
    assert "parce qu'elle était trop large" in code
    kind, layer, head = card_head(model)
    spec = box_figure(at)
    bars = [np.array(values(t["y"]), float) for t in spec["data"]]
    assert len(bars) == 2
    for got, want in zip(bars, expected_rows(model, kind, layer, head)):
        np.testing.assert_allclose(got, want, atol=1e-6)  # the figure vs the model's trace
    # the default is the card's head that moves il/elle most when patched (a cross head)
    top = model.card["metrics"]["because"]["patching"]["top"][0]
    assert top["block"].startswith("decoder.") and top["block"].endswith(".cross")
    assert (kind, layer, head) == ("decoder.cross", int(top["block"].split(".")[1]), top["head"])
    assert f"Decoder layer {layer} · head {head}" in spec["layout"]["title"]["text"]
    animal, street = 1, 6
    caption = next(c.value for c in at.caption if c.value.startswith("Blue: the noun"))
    assert f"puts {bars[0][animal]:.2f} on animal and {bars[0][street]:.2f} on street" in caption
    assert f"{bars[1][animal]:.2f} and {bars[1][street]:.2f} with wide" in caption


def values(y) -> list[float]:
    """A trace's numbers: a list, or plotly's typed-array form {"dtype", "bdata"}."""
    if not isinstance(y, dict):
        return y
    import base64

    return np.frombuffer(base64.b64decode(y["bdata"]), dtype=y["dtype"]).tolist()


def test_head_pickers_are_in_the_url(model):
    at = open_app("attention", model="en-fr", text=PAIR[1], it_kind="decoder.cross",
                  it_layer=1, it_head=2)
    no_errors(at)
    spec = box_figure(at)
    assert "Decoder layer 1 · head 2" in spec["layout"]["title"]["text"]
    rows = expected_rows(model, "decoder.cross", 1, 2)
    for trace, want in zip(spec["data"], rows):
        np.testing.assert_allclose(values(trace["y"]), want, atol=1e-6)
    # the card's head is the default, which the address leaves out; another one is written
    card = dict(zip(("it_kind", "it_layer", "it_head"), map(str, card_head(model))))
    for key, value in (("it_kind", "decoder.cross"), ("it_layer", "1"), ("it_head", "2")):
        assert at.query_params.get(key) == (None if value == card[key] else value), key


def test_closed_box_has_no_chart_and_its_button_opens_it():
    """On another sentence the box is closed and draws nothing (a chart in a closed box
    would be the page's first, hidden, chart); its button puts the tired sentence in."""
    at = open_app("attention", model="en-fr", text="the red car")
    no_errors(at)
    box = next(e for e in at.expander if "follows the adjective" in e.label)
    assert not box.get("plotly_chart") and not box.code
    at.button(key="it_show").click().run()
    no_errors(at)
    assert at.text_area(key="text").value == PAIR[0]
    assert box_figure(at)


def test_bad_url_values_are_clamped_with_a_notice(model):
    at = open_app("attention", model="en-fr", text=PAIR[1], it_kind="<b>x</b>", it_head=99)
    no_errors(at)
    assert box_figure(at)
    assert at.number_input(key="it_head").value == 3  # clamped to the last head
    assert at.query_params.get("it_head") == (None if card_head(model)[2] == 3 else "3")


def test_no_box_for_other_models():
    at = open_app("attention", model="dates", text="9 may 2018")
    no_errors(at)
    assert not any("follows the adjective" in e.label for e in at.expander)


def test_the_box_speaks_chinese(model):
    """In 简体中文 the chart's title names the stack and the query row in Chinese (they were
    English words inside the translated title)."""
    from attention_lab.ui.seed_example import QUERY, STACK

    at = open_app("attention", model="en-fr", text=PAIR[0], lang="zh")
    no_errors(at)
    kind, layer, head = card_head(model)
    query = in_chinese(QUERY[kind])
    title = in_chinese("{value} layer {layer} · head {head}: attention from {value2}",
                       value=in_chinese(STACK[kind.split(".")[0]]), layer=layer, head=head,
                       value2=query)
    assert query != QUERY[kind] and "解码器" in title
    assert box_figure(at, query)["layout"]["title"]["text"] == title
