"""Every page in 简体中文 (issue 32): with ?lang=zh each page renders without an exception and
its visible text (titles, headers, captions, markdown, notices, widget labels and help) holds
no run of three or more English words but names; the sidebar's switch changes the language
and the address; no browser language means English.

One AppTest session walks the pages (switch_page), so the models and traces load once."""

import re

import pytest
from streamlit.testing.v1 import AppTest

from attention_lab.ui.navigation import PAGES
from tests.support.apptest import APP, TIMEOUT
from tests.support.chinese_text import (
    english_runs,
    english_words,
    figure_texts,
    option_texts,
    option_words,
    shown_texts,
    user_words,
)

# the default translator (encoder-decoder) and the toy GPT (decoder-only): each page's other
# branches; MiniLM (encoder-only) for the pages that need one
MODELS = {"en-fr": [s.path for s in PAGES], "lm": [s.path for s in PAGES],
          "minilm": ["pages/pairs.py", "pages/heads_matter.py", "pages/masks.py"],
          "lm-rope": ["pages/positional.py"],  # the rotary views
          # a Hugging Face family: T5's learned relative bias, its cross-attention circuits
          "tiny-t5": ["pages/relative.py", "pages/heads_matter.py", "pages/circuits.py"],
          # grouped-query attention: the key/value groups on the grid and on Head analysis
          "tiny-llama": ["pages/attention.py", "pages/heads.py"],
          "tiny-mistral": ["pages/masks.py"]}  # a sliding window


@pytest.fixture(scope="module")
def sessions(tiny_models):
    """One AppTest session per model, shared by its pages (models and traces load once)."""
    opened: dict[str, AppTest] = {}

    def session(model: str) -> AppTest:
        if model not in opened:
            at = AppTest.from_file(APP, default_timeout=TIMEOUT)
            at.query_params["lang"] = "zh"
            at.query_params["model"] = (str(tiny_models.path(model.removeprefix("tiny-")))
                                        if model.startswith("tiny-") else model)
            opened[model] = at.run()
        return opened[model]

    return session


@pytest.mark.parametrize("model,page", [(m, p) for m, pages in MODELS.items() for p in pages],
                         ids=lambda v: v.removeprefix("pages/").removesuffix(".py"))
def test_every_page_speaks_chinese(sessions, model, page):
    at = sessions(model)
    at.switch_page(page).run()
    assert not at.exception, [e.message for e in at.exception]
    assert not at.error, [e.value for e in at.error]
    assert at.query_params.get("lang") in ("zh", ["zh"])
    words = user_words(at)
    left = [(kind, run) for kind, text in shown_texts(at) for run in english_runs(text, words)]
    models = at.selectbox(key="model_pick").options  # the model list's descriptions too
    left += [("model list", run) for text in models for run in english_runs(text, set())]
    left += [(part, text) for part, text in figure_texts(at) if english_words(text, words)]
    left += [(part, text) for part, text in option_texts(at) if option_words(text, words)]
    assert left == [], left
    assert re.search(r"[\u4e00-\u9fff]", at.title[0].value) if at.title else True


def _english_left(at: AppTest) -> list[tuple[str, str]]:
    words = user_words(at)
    left = [(kind, run) for kind, text in shown_texts(at) for run in english_runs(text, words)]
    left += [(part, text) for part, text in figure_texts(at) if english_words(text, words)]
    left += [(part, text) for part, text in option_texts(at) if option_words(text, words)]
    return left


@pytest.mark.parametrize("model", ["lm", "en-fr"])
def test_every_switch_and_mode_speaks_chinese(model):
    """What a page shows once a toggle or checkbox is flipped or a radio's other option is
    picked (the Inside page's scoring comparison: its three figures were English), in zh."""
    at = AppTest.from_file(APP, default_timeout=TIMEOUT)
    at.query_params.update({"lang": "zh", "model": model})
    at.run()
    flipped = 0
    for spec in PAGES:
        at.switch_page(spec.path).run()
        for kind in ("toggle", "checkbox"):
            for i in range(len(at.get(kind))):
                element = at.get(kind)[i]
                element.set_value(not element.value).run()
                assert not at.exception, (spec.path, element.key, at.exception[0].message)
                assert _english_left(at) == [], (spec.path, element.key)
                flipped += 1
        for i, key in enumerate(r.key for r in at.radio):
            if key == "lang" or i >= len(at.radio):
                continue
            for option in list(at.radio[i].options)[1:]:
                at.radio[i].set_value(option).run()
                assert not at.exception, (spec.path, key, at.exception[0].message)
                assert _english_left(at) == [], (spec.path, key, option)
                flipped += 1
                if i >= len(at.radio) or at.radio[i].key != key:
                    break
    assert flipped >= 5  # the sweep reached the switches (scoring, compare's modes, ...)


def test_the_english_detector_can_fail():
    assert english_runs("这是 the query vector of 词元", set()) == ["the query vector of"]
    assert english_words("layer 3, head 2", set()) == ["layer", "head"]
    assert english_words("encoder.0.self · 注意力头 2 · the", {"the"}) == []
    assert english_words("流向 2·red → teacher 的信息流", set()) == []
    assert english_runs("模型 BERT 的 Hugging Face 文件夹", set()) == []
    assert english_runs("输入：the red car", {"the", "red", "car"}) == []
    assert option_words("Normalised (0 = one key, 1 = uniform)", set()) == [
        "Normalised", "one", "key", "uniform"]
    assert option_words("auto", set()) == option_words("3·the", set()) == []
    assert option_words("float32 · MASS · EAP-IG", set()) == []


def test_the_switch_changes_the_language_and_the_address():
    at = AppTest.from_file(APP, default_timeout=TIMEOUT).run()  # no lang, no browser: English
    assert not at.exception
    assert at.title[0].value == "Attention Lab"
    assert at.radio(key="lang").value == "en"
    at.radio(key="lang").set_value("zh").run()
    assert not at.exception
    assert at.query_params["lang"] in ("zh", ["zh"])
    assert at.title[0].value == "注意力实验室 Attention Lab"
    assert at.text_area(key="text").label == "输入文本"
    at.radio(key="lang").set_value("en").run()
    assert at.query_params["lang"] in ("en", ["en"])
    assert at.text_area(key="text").label == "Input text"


def test_the_default_is_the_browsers_language(monkeypatch):
    """st.context.locale (the browser's Accept-Language) picks the language when the address
    names none: zh-CN and zh-TW give 简体中文, en-US and an unknown or missing one English."""
    from types import SimpleNamespace

    from attention_lab.ui import lang

    for locale, expected in (("zh-CN", "zh"), ("zh-TW", "zh"), ("en-US", "en"), ("fr-FR", "en"),
                             (None, "en")):
        monkeypatch.setattr(lang.st, "context", SimpleNamespace(locale=locale))
        assert lang.browser_language() == expected, locale


@pytest.mark.parametrize("tab", ["attribution", "lens", "patching", "composition", "search",
                                 "qk", "entropy"])
def test_every_tab_of_which_heads_matter_speaks_chinese(tab):
    """The tabs of Which heads matter run only when open: each one opened by its address."""
    at = AppTest.from_file(APP, default_timeout=TIMEOUT)
    for key, value in {"lang": "zh", "model": "lm", "tab": tab}.items():
        at.query_params[key] = value
    at.switch_page("pages/heads_matter.py").run()
    assert not at.exception, [e.message for e in at.exception]
    assert not at.error, [e.value for e in at.error]
    words = user_words(at)
    left = [(kind, run) for kind, text in shown_texts(at) for run in english_runs(text, words)]
    left += [(part, text) for part, text in figure_texts(at) if english_words(text, words)]
    left += [(part, text) for part, text in option_texts(at) if option_words(text, words)]
    assert left == [], left


def test_bad_input_gets_the_same_one_line_messages_in_chinese():
    """A token the model does not know (an InputError from viz_core, its template and values
    translated where shown) and an out-of-range address value (a notice): one line, zh."""
    at = AppTest.from_file(APP, default_timeout=TIMEOUT)
    for key, value in {"lang": "zh", "model": "lm", "tok": "zzqx"}.items():
        at.query_params[key] = value
    at.switch_page("pages/heads_matter.py").run()
    assert not at.exception
    errors = [e.value for e in at.error]
    assert len(errors) == 1 and "\n" not in errors[0], errors
    assert "zzqx" in errors[0] and "不在这个模型的词表中" in errors[0], errors
    at = AppTest.from_file(APP, default_timeout=TIMEOUT)
    for key, value in {"lang": "zh", "model": "en-fr", "beam": "99"}.items():
        at.query_params[key] = value
    at.switch_page("pages/beam.py").run()
    assert any("超出范围（1–16）" in i.value for i in at.info), [i.value for i in at.info]


def test_switching_language_keeps_the_view():
    """Labels change with the language, the user's choices do not: text, block, layer, head."""
    at = AppTest.from_file(APP, default_timeout=TIMEOUT)
    for key, value in {"model": "en-fr", "text": "the red car", "layer": "1", "head": "2"}.items():
        at.query_params[key] = value
    at.switch_page("pages/attention.py").run()
    assert not at.exception
    at.radio(key="lang").set_value("zh").run()
    assert not at.exception, [e.message for e in at.exception]
    assert at.text_area(key="text").value == "the red car"
    assert at.number_input(key="layer").value == 1 and at.number_input(key="head").value == 2
    assert at.title[0].value == "注意力"
    assert at.query_params["layer"] in ("1", ["1"]) and at.query_params["lang"] in ("zh", ["zh"])
