"""The address bar as one run leaves it: its changes (ui/state.to_url) are kept here and sent
in one message at the end of the run (send_url), so the browser's history gets one entry per
run, not one per setting. Imports nothing of the app, so every ui module may use it."""

from __future__ import annotations

import streamlit as st

PENDING = "_url_pending"  # this run's changes to the address ("" = remove), sent by send_url
RESEND = "_url_resend"
# The sidebar's settings, first in every address and in this order (the rest keep theirs), so
# a page link (ui/sidebar.link_query) and the page it opens write the same address.
FIRST = ("model", "text", "target", "lang", "device", "dtype", "new")


def url_get(key: str) -> str | None:
    """The address's value of ``key`` as this run has left it so far (its pending changes
    included), else None."""
    pending = st.session_state.get(PENDING, {})
    if key in pending:
        return pending[key] or None
    return st.query_params.get(key)


def stop() -> None:
    """st.stop() after sending this run's address changes: once a run is stopped, Streamlit
    sends no more messages, so the end of the run (app.py) could not send them. The app's
    modules call this (state.stop), never st.stop() itself (tests/unit/test_layout.py)."""
    send_url()
    st.stop()


def send_url() -> None:
    """Send this run's address changes (to_url) in one message; the whole address once when
    the sidebar asked to resend it. Called at the end of every run (app.py) and of every
    fragment run (ui.lang.fragment)."""
    pending = st.session_state.pop(PENDING, None) or {}
    resend = st.session_state.pop(RESEND, False)
    if not pending and not resend:
        return
    query = st.query_params.to_dict()
    for key, value in pending.items():
        if value:
            query[key] = value
        else:
            query.pop(key, None)
    query = {**{k: query[k] for k in FIRST if k in query},
             **{k: v for k, v in query.items() if k not in FIRST}}
    st.query_params.from_dict(query)  # one message: the whole query
