"""Hostile input on every page, with every shipped model and MiniLM: the normal view or a clear
message (st.error / st.warning / st.info), never an exception; typed and as URL parameters.

Coverage (one AppTest per page and model, reused across inputs, keeps this affordable):
- every page, with every shipped model and MiniLM, typed (MiniLM: each page's own view
  first, the app's every-page sweep for an HF model). The Attention page, where the text
  meets each tokenizer and the trace, takes the whole corpus on MiniLM and every entry a
  tokenizer can tell apart on the shipped models (THIN_CORPUS below); every other page takes
  the first entry of each category and every length (FIRSTS) on one model of each kind, and
  every empty and huge text on the others;
- URL parameters: a fresh AppTest per corpus entry (?text=...&target=...&kind=...&layer=...),
  the whole corpus on the attention page for the first native model, and FIRSTS on the home
  page for MiniLM and the models the typed sweep leaves out.
The counts actually tried are printed (pytest -s) and collected in COUNTS.
"""

from __future__ import annotations

import time
from collections import Counter

import pytest
from streamlit.testing.v1 import AppTest

import viz_core as vc
from tests.support.apptest import APP, PAGES, assert_answered, no_errors, type_text
from tests.support.hostile_inputs import CORPUS, ONE_OF_EACH, sendable

MODELS = [*vc.shipped_models(), "minilm"]
# Every page x the whole corpus: the induction model is lm-rope's architecture with max_len
# 8,192, so its 100,000-character entry traces 8,191 tokens on each of the 14 pages (about 9
# minutes on 2 cores) without reaching code lm-rope does not. It keeps the URL and direct tests.
# minilm-student is a BERT like minilm (the same family code): it keeps them too.
PAGE_MODELS = [m for m in MODELS if m not in ("induction", "minilm-student")]
NATIVE = vc.shipped_models()[:1]
# On the Attention page the shipped models take every entry of the categories a tokenizer or
# a length limit can tell apart (empty, huge, control, surrogate, unknown words) and the first
# entry of each other category (the variants of markup, script, emoji, ... are the same kind
# of text to a word-level vocabulary).
EVERY_ENTRY = {"empty", "huge", "control", "surrogate", "oov"}
THIN_CORPUS = [(c, t) for i, (c, t) in enumerate(CORPUS)
               if c in EVERY_ENTRY or c not in {c2 for c2, _ in CORPUS[:i]}]
# lm-rope reads lm's very vocabulary (the same vocab.json): what tells the tokenizer's
# categories apart is lm's to try; lm-rope gets each category once, and every length.
SAME_VOCAB = {"lm-rope": "lm"}
# The Attention page (the main view: the trace, its token groups and clicks) is where a
# tokenizer's categories are told apart: MiniLM's whole corpus there, each shipped model's
# THIN_CORPUS. The other pages read the same text box and the same trace, so each takes one
# entry of every category and every length (17 of 44 entries: the variants of markup, script
# and emoji reach a tokenizer as the same pieces or unknown words).
FULL = {("minilm", "attention")}
FIRSTS = ONE_OF_EACH
# On the other pages one model of each kind takes FIRSTS (encoder-decoder, decoder, Hugging
# Face encoder); the others of its kind, the entries that differ by model: every empty and
# every huge text (each model has its own length limit), after the page's own view.
KIND_FIRST = {"en-fr", "lm", "minilm"}
LENGTHS = [(c, t) for c, t in CORPUS if c in ("empty", "huge")]
# URL parameters: the first native model on the attention page; on the home page MiniLM and
# the models the typed sweep leaves out (the URL's parsing is the same for every model; the
# typed sweep already loads every other model with every category).
URL_MODELS = [*NATIVE, "minilm", *(m for m in MODELS if m not in PAGE_MODELS)]
COUNTS: Counter = Counter()


def app(page: str, model: str, **params) -> AppTest:
    at = AppTest.from_file(APP, default_timeout=120)
    at.query_params["model"] = model
    for key, value in params.items():
        at.query_params[key] = value
    at.switch_page(f"pages/{page}.py")
    return at.run()


@pytest.mark.parametrize("model", PAGE_MODELS)
@pytest.mark.parametrize("page", PAGES)
def test_every_page_answers_hostile_text(page, model):
    start = time.monotonic()
    at = app(page, model, text="the cat sat on the mat")
    assert not at.exception, [e.message for e in at.exception][:1]
    if model == "minilm":  # every page's own view on MiniLM, before any hostile text
        no_errors(at)
        if page == "beam":
            assert any("no decoder" in i.value for i in at.info)
        elif page == "circuits":  # post-norm: no edges, and the page says why
            assert any("post" in i.value and "norm" in i.value for i in at.info)
        elif page not in ("home", "heads", "atlas"):  # atlas: a message until one is opened
            assert at.get("plotly_chart"), page
    inputs = (CORPUS if (model, page) in FULL else
              THIN_CORPUS if page == "attention" and model not in SAME_VOCAB else
              FIRSTS if page == "attention" or model in KIND_FIRST else LENGTHS)
    for category, text in inputs:
        at = type_text(at, text)
        assert_answered(at, page, model, category, text)
        expected = sendable(text).replace("\x00", "")[:20_000]
        assert at.text_area(key="text").value == expected  # kept literally (cleaned, cut)
    COUNTS[(page, model)] += len(inputs)
    print(f"\n{page}/{model}: {len(inputs)} hostile inputs in {time.monotonic() - start:.1f}s")


def test_models_with_a_thinner_sweep_share_their_vocabulary():
    for model, same in SAME_VOCAB.items():
        a, b = (vc.load(m, device="cpu").backend for m in (model, same))
        for vocab in ("src_vocab", "tgt_vocab"):
            va, vb = getattr(a, vocab), getattr(b, vocab)
            assert (va and va.to_dict()) == (vb and vb.to_dict()), (model, same, vocab)
        assert a.max_tokens == b.max_tokens, (model, same)


@pytest.mark.parametrize("model", URL_MODELS)
def test_hostile_text_as_url_parameters(model):
    """A fresh AppTest per entry: the attention page (URL text, target and view settings) for
    the first native model, with the whole corpus; the home page (URL parsing, model load,
    text box) for the rest, with one entry of each category and every length (the URL's
    parsing is the same code for every model)."""
    page = "attention" if model in NATIVE else "home"
    entries = CORPUS if model in NATIVE else FIRSTS
    start = time.monotonic()
    for category, text in entries:
        text = sendable(text)
        at = app(page, model, text=text, target=text, kind=text[:50], layer=text[:20],
                 head="-1e309", view=text[:30])
        assert_answered(at, f"{page}(url)", model, category, text)
        assert at.text_area(key="text").value == text.replace("\x00", "")[:20_000]
    COUNTS[(f"{page}(url)", model)] += len(entries)
    print(f"\nURL/{page}/{model}: {len(entries)} inputs in {time.monotonic() - start:.1f}s")


def _clean_script():
    import streamlit as st

    from attention_lab.ui import state

    st.session_state["raw"] = "the cat \ud800 sat\x00"
    state.clean_state("raw", "input text")
    st.code(st.session_state["raw"], language=None)
    state.show_notices()


def test_surrogates_are_replaced_with_a_notice():
    at = AppTest.from_function(_clean_script, default_timeout=30).run()
    assert not at.exception, [e.message for e in at.exception]
    assert at.code[0].value == "the cat \ufffd sat"
    assert any("surrogate" in i.value for i in at.info)


def test_no_page_renders_user_text_as_markup():
    """User text reaches the page only through code blocks, widget values and chart labels;
    anything that goes through Markdown (messages, headings) is escaped with ui.errors.literal."""
    from attention_lab.ui.errors import literal

    for _, text in CORPUS:
        escaped = literal(text)
        for ch in "<>*_`$[]()#:|~!":
            assert f"\\{ch}" in escaped or ch not in text
    at = app("home", "/nonexistent/<img src=x onerror=alert(1)>/$x^2$/:red[r]")
    assert not at.exception
    assert at.error and all("\\<img" in e.value and "\\$x" in e.value for e in at.error)
