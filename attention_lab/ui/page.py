"""What every page starts with."""

from __future__ import annotations

import streamlit as st

from viz_core.i18n import _

from . import state
from .errors import translated
from .lang import apply_language
from .sidebar import Selection


def leave_legacy_page_mode() -> None:
    """Run through app.py's st.navigation even when the first request named a page.

    Streamlit treats an app with a pages/ folder as a legacy multipage app until
    st.navigation is first called; a first request for /attention would then run the page
    script alone, without app.py's sidebar and page list. Switch the flag and rerun once.
    """
    try:
        from streamlit.runtime.pages_manager import PagesManager
    except ImportError:  # a future Streamlit without the flag: nothing to do
        return
    if getattr(PagesManager, "uses_pages_directory", False):
        PagesManager.uses_pages_directory = False
        st.rerun()


def selection() -> Selection:
    """The sidebar's choice for this run (set by app.py before the page runs)."""
    leave_legacy_page_mode()
    apply_language()  # app.py did it already; a page run on its own (tests) needs it too
    sel = st.session_state.get("_selection")
    if sel is None:  # a page run on its own (tests): build the sidebar here
        from .sidebar import sidebar

        sel = sidebar()
    return sel


def show_trace_messages(trace) -> None:
    """Warnings (truncation) and unknown words, shown literally (never as markup)."""
    for w in trace.warnings:
        st.warning(translated(w), icon="✂️")
    if trace.unknown_words:
        words = ", ".join(repr(w) for w in trace.unknown_words[:30])
        more = "" if len(trace.unknown_words) <= 30 else f" and {len(trace.unknown_words) - 30} more"
        st.caption(_("Not in the model's vocabulary (shown as <unk>):"))
        st.code(words + more, language=None, wrap_lines=True)
    state.show_notices()


def show_output(trace) -> None:
    """The model's own output text (for generating models), shown literally."""
    if trace.output_text:
        st.markdown(_("**Model output**"))
        st.code(trace.output_text, language=None, wrap_lines=True)
