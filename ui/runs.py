"""Cached model loads and runs, shared by every session of this server process.

Models: st.cache_resource (one object per process; viz_core models are thread-safe).
Traces and beam trees: st.cache_resource too, bounded by max_entries: they are read-only
numpy data, and handing out the same object avoids pickling tens of MB per rerun, which
st.cache_data would do on every read. Pages must not modify what they get from here.
"""

from __future__ import annotations

import streamlit as st

import viz_core as vc

MODEL_CACHE = 4
TRACE_CACHE = 32


@st.cache_resource(max_entries=MODEL_CACHE, show_spinner=False)
def get_model(name: str, device: str):
    return vc.load(name, device)


@st.cache_resource(max_entries=TRACE_CACHE, show_spinner=False)
def get_trace(name: str, device: str, text: str, target: str | None, options: tuple = ()):
    model = get_model(name, device)
    return model.trace(text, target or None, **dict(options))


@st.cache_resource(max_entries=TRACE_CACHE, show_spinner=False)
def get_beam(name: str, device: str, text: str, options: tuple = ()):
    model = get_model(name, device)
    return model.beam_search(text, **dict(options))
