"""Detectors of English left in a page shown in 简体中文 (AppTest): the visible text, the
options of pickers, the charts' text, their per-point hover text and Plotly's toolbar words,
each against the names, notation and the user's own words that stay as they are. Used by the
zh page sweep (tests/app/test_i18n_pages.py) and the pages' own zh tests."""

import json
import re

import numpy as np
from streamlit.testing.v1 import AppTest

from attention_lab.ui.charts import PLOTLY_WORDS

# Names and notation that stay as they are in a Chinese page (model families, papers'
# authors, terms of art the Chinese tutorials also write in English).
NAMES = ["Hugging Face", "Hub id", "Transformer-XL", "Jensen–Shannon", "Abnar & Zuidema",
         "Ferrando & Voita", "Elhage", "logit lens", "Attention Lab", "teacher forcing",
         "softmax", "rollout", "span masking", "It was very tired", "python -m viz_core.atlas",
         "because it was too ADJ",  # an English sentence pattern the zh-en model translates
         "ln 2", "Pearson", "Spearman", "Syed", "Hanna", "Bahdanau", "Vaswani", "RoFormer",
         "MiniLM", "TinyBERT", "Jiao et al",
         "all-MiniLM-L6-v2", "ERNIE", "UniLM", "XLNet", "RoBERTa", "BERT", "GPT", "BART",
         "Marian", "Llama", "Mistral", "Qwen", "Gemma", "OLMo", "Phi-3", "NTK", "YaRN"]
WORD_RUN = re.compile(r"[A-Za-z][A-Za-z'’]+(?:[-–][A-Za-z]+)*(?:[ ,]+[A-Za-z][A-Za-z'’]+"
                      r"(?:[-–][A-Za-z]+)*){2,}")


def english_runs(text: str, user_words: set[str]) -> list[str]:
    """Runs of >= 3 English words left after names, code spans and the user's own words."""
    text = text.replace("\\", "")
    text = re.sub(r"`[^`]*`", " ", text)  # code spans: commands, identifiers
    text = re.sub(r"https?://\S+", " ", text)
    for name in NAMES:
        text = text.replace(name, " · ")
    runs = []
    for run in WORD_RUN.findall(text):
        words = [w for w in re.split(r"[ ,]+", run) if w.lower() not in user_words]
        if len(words) >= 3:
            runs.append(run)
    return runs


# Pickers whose options are the user's data, not the interface's words: the model list (its
# descriptions are checked on their own), the example inputs, the mask page's sentences.
USER_OPTIONS = {"model_pick", "example", "mask_sentence",
                "model_b", "student"}  # Compare's second model and student: model names
OPTION_KINDS = ("selectbox", "radio", "multiselect", "select_slider")


def option_texts(at: AppTest) -> list[tuple[str, str]]:
    """(widget kind and key, label) of every option a picker shows, but the user's data."""
    return [(f"{kind} {e.key} option", str(o)) for kind in OPTION_KINDS for e in at.get(kind)
            if e.key not in USER_OPTIONS for o in (e.options or [])]


def shown_texts(at: AppTest) -> list[tuple[str, str]]:
    """(element kind, text) of everything a reader sees as prose or as a label."""
    out = []
    for kind in ("title", "header", "subheader", "markdown", "caption", "info", "warning",
                 "error", "success"):
        out += [(kind, str(e.value)) for e in at.get(kind)]
    for kind in ("selectbox", "number_input", "text_area", "text_input", "radio", "checkbox",
                 "multiselect", "slider", "button", "toggle", "select_slider"):
        for e in at.get(kind):
            out += [(f"{kind} label", e.label or ""), (f"{kind} help", e.help or "")]
    return out


def figure_texts(at: AppTest) -> list[tuple[str, str]]:
    """(part, text) of what each chart shows in words: its title, axis and colour-bar titles,
    annotations, legend entries and hover templates (their %{...} fields and tags removed),
    and Plotly's own toolbar words as its config gives them."""
    out = []

    def add(part, value):
        value = value.get("text") if isinstance(value, dict) else value
        if isinstance(value, str) and value:
            out.append((part, re.sub(r"<[^>]+>", " ", re.sub(r"%\{[^}]*\}", " ", value))))

    for chart in at.get("plotly_chart"):
        fig = json.loads(chart.proto.spec)
        layout = fig.get("layout", {})
        add("title", layout.get("title"))
        for name, axis in layout.items():
            if re.fullmatch(r"[xy]axis\d*", name) and isinstance(axis, dict):
                add("axis", axis.get("title"))
        for note in layout.get("annotations") or []:
            add("annotation", note.get("text"))
        for trace in fig.get("data", []):
            if (trace.get("type", "scatter") in ("scatter", "bar") and trace.get("showlegend")
                    is not False and layout.get("showlegend") is not False):
                add("legend", trace.get("name"))
            add("colour bar", (trace.get("colorbar") or {}).get("title"))
            add("hover", trace.get("hovertemplate"))
        # Plotly's own words (toolbar tooltips, notices): English unless the config's locale
        # gives each its translation
        config = json.loads(chart.proto.config or "{}")
        words = (config.get("locales") or {}).get(config.get("locale"), {}).get("dictionary", {})
        for key in PLOTLY_WORDS:
            add("toolbar", words.get(key, key))
    return out


def hover_texts(at: AppTest) -> list[str]:
    """The hover text each chart writes out per point (a trace's ``hovertext``, or its
    ``text`` shown through a %{text} template), tags removed: not read by figure_texts,
    since on some charts (beam search) it holds the model's tokens."""
    out = []
    for chart in at.get("plotly_chart"):
        for trace in json.loads(chart.proto.spec)["data"]:
            texts = trace.get("hovertext") or (
                trace.get("text") if "%{text}" in str(trace.get("hovertemplate")) else None)
            for text in np.ravel(np.asarray(texts, dtype=object)) if texts else ():
                out.append(re.sub(r"<[^>]+>", " ", str(text)))
    return out


# Words a chart keeps as they are: block names (encoder.0.self), special tokens, True/False of a
# mask, and notation.
FIGURE_TERMS = {"encoder", "decoder", "self", "cross", "embed", "mlp", "logits", "True",
                "False", "PAD", "CLS", "SEP", "eos", "bos", "unk", "pad", "softmax", "rollout",
                "EAP", "MLP", "logit", "sin", "cos", "log", "out", "best", "nats",
                "pos", "mod",  # RoPE's notation: pos·θᵢ, mod 2π
                "tanh", "max",  # the additive scorer vᵀ tanh(W₁q + W₂k), max_j p_j(1−p_j)
                "PNG"}  # the image format the toolbar's camera saves


def english_words(text: str, user_words: set[str]) -> list[str]:
    """English words (3+ letters) of a chart's text, but names, notation, the user's words and
    tokens: "2·red" and what it predicts ("2·red → teacher", model output)."""
    text = re.sub(r"\d+·\S+(\s*→\s*[^\s（(]+)?", " ", text)
    for name in NAMES:
        text = text.replace(name, " ")
    return [w for w in re.findall(r"[A-Za-z]{3,}", text)
            if w not in FIGURE_TERMS and w.lower() not in user_words]


TOKEN_OPTION = re.compile(r"^\d+·")  # a token picker's option: position·token
# Options that stay as they are: file formats, devices, engines, the language switch's own
# name for English.
OPTION_TERMS = {"auto", "png", "svg", "cpu", "cuda", "mps", "ray", "local", "English", "txt",
                "csv", "tsv", "parquet",
                "never"}  # generate()'s early_stopping values: True, False, "never"


def option_words(text: str, user_words: set[str]) -> list[str]:
    """English words (3+ letters) of an option's label, but names, notation (float32, acronyms
    such as MLM or EAP, identifiers such as beam_size), tokens ("3·the") and the user's
    words."""
    text = re.sub(r"\d+·\S+", " ", text)
    for name in NAMES:
        text = text.replace(name, " ")
    return [w for w in re.findall(r"[A-Za-z][A-Za-z0-9_]*", text)
            if w.isalpha() and len(w) >= 3 and not w.isupper() and w not in OPTION_TERMS
            and w not in FIGURE_TERMS and w.lower() not in user_words]


def user_words(at: AppTest) -> set[str]:
    """The words of the user's text, the examples and model output: shown as typed."""
    words = set()
    for e in at.get("text_area") + at.get("text_input"):
        words |= set(re.findall(r"[A-Za-z'’]+", str(e.value or "").lower()))
    for e in at.get("selectbox"):  # token pickers ("3·red"), examples (not the model list)
        for option in e.options or []:
            if (e.key in USER_OPTIONS - {"model_pick"} or TOKEN_OPTION.match(str(option))):
                words |= set(re.findall(r"[A-Za-z'’]+", str(option).lower()))
    for e in at.get("code"):
        words |= set(re.findall(r"[A-Za-z'’]+", str(e.value).lower()))
    return words
