"""The address bar as one run leaves it: its changes (ui/state.to_url) are kept here and sent
in one message at the end of the run (send_url), so the browser's history gets one entry per
run, not one per setting. It also remembers, per page, which of the address's keys the page
writes and the value each key last had (page_settings), so a page link can carry the page's
own settings as a revisit will show them. Imports nothing of the app, so every ui module may
use it."""

from __future__ import annotations

import streamlit as st

PENDING = "_url_pending"  # this run's changes to the address ("" = remove), sent by send_url
# The sidebar's settings, first in every address and in this order (the rest keep theirs), so
# a page link (ui/sidebar.link_query) and the page it opens write the same address.
FIRST = ("model", "text", "target", "lang", "device", "dtype", "new")
WRITTEN = "_url_written"  # this run's keys given to state.to_url -> their value ("" = default)
PAGE_NOW = "_url_page"  # the url_path of the page this run shows (app.py)
PAGE_KEYS = "_url_page_keys"  # url_path -> the keys (not FIRST) that page writes
LAST = "_url_last"  # key -> the value it had when a run last wrote it ("" = left out)
LINK_VALUE_LIMIT = 2_000  # characters of one value a page link carries


def written(key: str, value: str) -> None:
    """state.to_url's record of a key this run writes (``value`` "" when at its default)."""
    st.session_state.setdefault(WRITTEN, {})[key] = value


def _remember_page_keys() -> None:
    """At the end of a run (or a fragment's run): the keys the shown page wrote join that
    page's keys, and every written key's value is its latest (LAST)."""
    ss = st.session_state
    run = ss.pop(WRITTEN, None) or {}
    ss.setdefault(LAST, {}).update(run)
    page = ss.get(PAGE_NOW)
    if page is not None:
        keys = ss.setdefault(PAGE_KEYS, {}).setdefault(page, [])
        keys.extend(k for k in run if k not in FIRST and k not in keys)


def page_settings(url_path: str) -> dict[str, str]:
    """The page's own settings as a visit of it will show them (its keys at their latest
    value; those at their default left out, as the page leaves them): what its sidebar link
    adds to the sidebar's settings, so a revisit writes nothing more and is one history
    entry. Empty for a page this session has not shown. A value over LINK_VALUE_LIMIT stays
    out (the page writes it, as a second entry)."""
    ss = st.session_state
    last = ss.get(LAST, {})
    return {k: v for k in ss.get(PAGE_KEYS, {}).get(url_path, ())
            if (v := last.get(k)) and len(v) <= LINK_VALUE_LIMIT}


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
    """Send this run's address changes (to_url) in one message, the sidebar's keys first;
    nothing when they leave the address as it is. Called at the end of every run (app.py) and
    of every fragment run (ui.lang.fragment).

    Nothing goes when nothing changed (a page opened from its link, which carries the whole
    address): Streamlit's browser side pushes a query message's address at once, onto the
    path it shows, and switches the path only once it has drawn the new page. Each run used
    to resend the whole view, and on a busy machine that message came first and added
    "/masks?<Attention's address>" before "/attention?..." (two history entries for one
    click: a fresh-clone run, then every time with Chromium's CPU throttled 6x)."""
    pending = st.session_state.pop(PENDING, None) or {}
    _remember_page_keys()
    if not pending:
        return
    now = st.query_params.to_dict()
    query = dict(now)
    for key, value in pending.items():
        if value:
            query[key] = value
        else:
            query.pop(key, None)
    query = {**{k: query[k] for k in FIRST if k in query},
             **{k: v for k, v in query.items() if k not in FIRST}}
    if list(query.items()) != list(now.items()):
        st.query_params.from_dict(query)  # one message: the whole query
