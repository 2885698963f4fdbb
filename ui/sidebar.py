"""The shared sidebar: model, device, input text (and target). Returns a Selection."""

from __future__ import annotations

import json
from dataclasses import dataclass

import streamlit as st

import viz_core as vc
from viz_core.loading import CHECKPOINTS

from . import state
from .errors import reported
from .runs import get_model

MINILM = "minilm"
CUSTOM = "Other (path or Hub id)…"
DEFAULT_ORDER = ("en-fr", "dates", "lm")


@dataclass(frozen=True)
class Selection:
    model_name: str
    device: str
    text: str
    target: str | None
    model: object  # a viz_core backend

    def trace(self, **options):
        from .runs import get_trace

        with st.spinner("Running the model…"), reported("running the model"):
            return get_trace(self.model_name, self.device, self.text, self.target,
                             tuple(sorted(options.items())))


def describe(name: str) -> str:
    card = CHECKPOINTS / name / "card.json"
    if name == MINILM:
        return "all-MiniLM-L6-v2: a real pretrained BERT (6 layers × 12 heads)"
    try:
        return json.loads(card.read_text())["description"]
    except (OSError, ValueError, KeyError, TypeError):
        return ""


def model_choices() -> list[str]:
    shipped = vc.shipped_models()
    ordered = [n for n in DEFAULT_ORDER if n in shipped] + [n for n in shipped
                                                             if n not in DEFAULT_ORDER]
    return [*ordered, MINILM]


def sidebar() -> Selection:
    choices = model_choices()
    url_model = state.url_text("model", choices[0])
    picked = url_model if url_model in choices else CUSTOM
    state.widget_default("model_pick", picked)
    state.widget_default("model_custom", "" if url_model in choices else url_model)

    with st.sidebar:
        st.selectbox("Model", [*choices, CUSTOM], key="model_pick",
                     format_func=lambda n: n if n == CUSTOM else f"{n} — {describe(n)}"[:80],
                     help="Shipped demo models, the embedded MiniLM, or your own model.")
        name = st.session_state.model_pick
        if name == CUSTOM:
            st.text_input("Checkpoint dir, Hugging Face dir or Hub id", key="model_custom",
                          placeholder="e.g. /path/to/model or bert-base-uncased")
            name = st.session_state.model_custom.strip()
            if not name:
                st.info("Enter a path or id to load a model of your own.")
                st.stop()
        devices = ["auto", *vc.available_devices()]
        state.widget_default("device", state.url_choice("device", devices, "auto"))
        st.selectbox("Device", devices, key="device",
                     help="auto picks a GPU when there is one, else the CPU.")
        with st.spinner(f"Loading {name}…"), reported(f"loading the model {name!r}"):
            model = get_model(name, st.session_state.device)

        examples = model.examples()
        # a new model brings its own first example unless the URL names a text
        if st.session_state.get("_text_model") != name:
            st.session_state["_text_model"] = name
            st.session_state["text"] = state.url_text("text", examples[0] if examples else "")
        st.text_area("Input text", key="text", max_chars=state.MAX_TEXT_CHARS, height=90)
        if examples:
            st.selectbox("Examples", ["—", *examples], key="example",
                         on_change=_use_example, help="Put an example into the input box.")
        target = None
        if model.kind == "encoder-decoder":
            state.widget_default("target", state.url_text("target", ""))
            st.text_input("Target (optional)", key="target",
                          help="Teacher-force this output; leave empty to see the model's "
                               "own greedy output.")
            target = st.session_state.target.strip() or None
        st.radio("Chart images", ["png", "svg"], key="image_format", horizontal=True,
                 help="Format saved by the camera button of every chart's toolbar.")
        state.to_url(model=name, device=st.session_state.device, text=st.session_state.text,
                     target=target)
    return Selection(name, st.session_state.device, st.session_state.text, target, model)


def _use_example() -> None:
    if st.session_state.example != "—":
        st.session_state.text = st.session_state.example
    st.session_state.example = "—"

