"""The shipped zh-en model in the app (issue 31 item 2): in the model list, its examples in the
sidebar (the seed sentence first), the Attention page's alignment score against the grammar's
reference, and Chinese bad input answered as English bad input is (<unk> notice, cut warning)."""

import json

from tests.support.apptest import assert_answered, no_errors, open_app, type_text
from viz_core.loading.entry import CHECKPOINTS

SEED = "动物没有过马路，因为它太累了"


def test_zh_en_in_the_sidebar_with_the_seed_example():
    at = open_app("attention", model="zh-en")
    no_errors(at)
    model = at.selectbox(key="model_pick")
    assert model.options[1].startswith("zh-en — Toy Chinese -> English")  # after en-fr
    assert model.value == "zh-en"
    assert at.text_area(key="text").value == SEED  # the first example
    assert SEED in at.selectbox(key="example").options
    assert any("the animal did not cross the street because it was too tired" in c.value
               for c in at.code)


def test_attention_page_scores_zh_en_alignment():
    best = json.loads((CHECKPOINTS / "zh-en" / "card.json").read_text())["metrics"][
        "alignment"]["best"]
    layer = int(best["block"].split(".")[1])
    at = open_app("attention", model="zh-en", text=SEED, kind="decoder.cross", layer=layer,
                  head=best["head"])
    no_errors(at)
    captions = [c.value for c in at.caption]
    text = next(c for c in captions if "This head" in c)
    assert "word alignment" in text
    score = float(text.split("This head: **")[1].split("**")[0])
    chance = float(text.split("chance = ")[1].split(" ")[0])
    assert score >= 0.8 > 3 * chance, text


def test_chinese_bad_input_is_answered_like_english():
    at = open_app("attention", model="zh-en", text=SEED)
    for what, text in [("mixed", "动物didn't过马路 the street，因为它太累了"),
                       ("emoji", "动物🐈没有过马路👍，因为它太累了"),
                       ("full-width", "动物没有过马路！因为它太累了？（）"),
                       ("long", "动物没有过马路，因为它太累了。" * 700)]:
        at = type_text(at, text)
        assert_answered(at, "attention", "zh-en", what, text)
        no_errors(at)
        captions = [c.value for c in at.caption]
        if what == "long":
            assert at.warning  # the input is cut to the model's length, with a warning
        else:
            assert any("Not in the model's vocabulary" in c for c in captions), what
