"""Cached runs with a second sentence (encoder-only models), shared by every session.

attention_lab.ui.runs.TraceRequest has no `pair` field yet; until it has, this keeps its own small cache
keyed by (model, device, text, pair). Pages must not modify what they get from here.
"""

from __future__ import annotations

import streamlit as st

from viz_core.i18n import _

from .errors import reported
from .runs import get_model

CACHE = 16


@st.cache_resource(max_entries=CACHE, show_spinner=False)
def _pair_trace(name: str, device: str, text: str, pair: str | None):
    return get_model(name, device).trace(text, pair=pair)


@st.cache_resource(max_entries=CACHE, show_spinner=False)
def _parts(name: str, device: str, text: str, pair: str | None):
    from viz_core.lessons.embeddings import embedding_parts

    return embedding_parts(get_model(name, device), text, pair)


def pair_trace(sel, pair: str | None):
    """The sidebar's text as sentence A and `pair` as sentence B (None: one sentence)."""
    with reported(_("running the model on the pair")), st.spinner(_("Running the model…")):
        return _pair_trace(sel.model_name, sel.device, sel.text, pair or None)


def embedding_parts(sel, pair: str | None):
    with reported(_("reading the embeddings")), st.spinner(_("Reading the embedding tables…")):
        return _parts(sel.model_name, sel.device, sel.text, pair or None)
