"""Page state that lives in the URL (st.query_params), so a copied address reproduces a view."""

from __future__ import annotations

import streamlit as st

from viz_core.i18n import _

from .address import PENDING, send_url, stop, url_get, written  # noqa: F401 (the app's stop)

MAX_TEXT_CHARS = 20_000


def as_typed(raw: str, limit: int = 40) -> str:
    """A URL value quoted in a notice (rendered as Markdown): cut, and shown as typed."""
    from .errors import literal

    return literal(raw[:limit])


def notice(message: str) -> None:
    """Collect a notice about a clamped/ignored URL value; shown once by show_notices()."""
    st.session_state.setdefault("_notices", []).append(message)


def show_notices() -> None:
    for message in st.session_state.pop("_notices", []):
        st.info(message, icon="ℹ️")


def clean_text(value: str, what: str = "text") -> str:
    """Text that can be sent to the browser and the model: NUL removed, lone surrogates
    (which no UTF-8 page can carry) replaced by U+FFFD, with a notice when anything changed."""
    cleaned = value.replace("\x00", "")
    if any(0xD800 <= ord(c) <= 0xDFFF for c in cleaned):
        cleaned = "".join("\ufffd" if 0xD800 <= ord(c) <= 0xDFFF else c for c in cleaned)
        notice(_("The {what} held invalid characters (lone UTF-16 surrogates); each was replaced "
                 "by �.").format(what=_(what)))
    return cleaned


def clean_state(key: str, what: str = "text") -> None:
    """clean_text on a widget's session value, before the widget is created."""
    value = st.session_state.get(key)
    if isinstance(value, str):
        cleaned = clean_text(value, what)
        if len(cleaned) > MAX_TEXT_CHARS:
            notice(_("The {what} was {n_cleaned:,} characters; it was cut to {MAX_TEXT_CHARS:,}.").format(
                       what=_(what), n_cleaned=len(cleaned), MAX_TEXT_CHARS=MAX_TEXT_CHARS))
            cleaned = cleaned[:MAX_TEXT_CHARS]
        if cleaned != value:
            st.session_state[key] = cleaned


def url_text(key: str, default: str = "") -> str:
    """A text from the address (else ``default``), at most MAX_TEXT_CHARS characters: a cut
    says so when the address carried the text; a longer default is cut quietly."""
    raw = url_get(key)
    if raw is None:
        return default[:MAX_TEXT_CHARS]
    value = clean_text(raw, _("'{key}' value in the address").format(key=key))
    if len(value) > MAX_TEXT_CHARS:
        notice(_("The '{key}' value in the address was {n_value:,} characters; it was cut to "
                 "{MAX_TEXT_CHARS:,}.").format(
                   key=key, n_value=len(value), MAX_TEXT_CHARS=MAX_TEXT_CHARS))
        value = value[:MAX_TEXT_CHARS]
    return value


def url_int(key: str, default: int, lo: int, hi: int) -> int:
    """An integer from the URL, clamped to [lo, hi] with a notice when it was out of range."""
    raw = url_get(key)
    if raw is None:
        return max(lo, min(hi, default))
    try:
        value = int(raw)
    except ValueError:
        notice(_("'{key}={as_typed}' in the address is not a number; using {default}.").format(
                   key=key, as_typed=as_typed(raw), default=default))
        return max(lo, min(hi, default))
    if not lo <= value <= hi:
        clamped = max(lo, min(hi, value))
        notice(_("'{key}={value}' is out of range ({lo}–{hi}); showing {clamped}.").format(
                   key=key, value=value, lo=lo, hi=hi, clamped=clamped))
        return clamped
    return value


def url_float(key: str, default: float, lo: float, hi: float) -> float:
    """A number from the URL, clamped to [lo, hi] with a notice when it was out of range."""
    raw = url_get(key)
    value = float(default)
    if raw is not None:
        try:
            value = float(raw)
        except ValueError:
            notice(_("'{key}={as_typed}' in the address is not a number; using {default}.").format(
                       key=key, as_typed=as_typed(raw), default=default))
        if not lo <= value <= hi:  # NaN too
            clamped = max(lo, min(hi, value)) if value == value else float(default)
            notice(_("'{key}={value}' is out of range ({lo}–{hi}); showing {clamped}.").format(
                       key=key, value=value, lo=lo, hi=hi, clamped=clamped))
            return clamped
    return max(lo, min(hi, value))


def url_choice(key: str, options: list[str], default: str) -> str:
    raw = url_get(key)
    if raw is None:
        return default
    if raw not in options:
        notice(_("'{key}={as_typed}' in the address is not one of {options}; using {default}.").format(
                   key=key, as_typed=as_typed(raw), options=options, default=default))
        return default
    return raw


KEPT = "_kept_widget_values"


def widget_default(key: str, value, *, typed: bool = False):
    """Seed a widget's session value before the widget is created; -> the value it will show.

    Streamlit drops a widget's state after any completed run that did not draw it (another
    page, or a run cut short by st.stop). What this session last chose survives in a plain
    session entry (see keep_widget_values) and wins over `value` (usually from the URL, which
    a page switch clears), so switching pages never resets the model or the text.

    A widget on another page is a new element to the browser (Streamlit puts the page in
    every element id). Unless the server says otherwise, the browser shows such an element
    at its proto default (a selectbox's `index`, a text box's `value`) and sends that back
    with the next rerun, which is how a busy server could lose a session's model. So:
    - choice widgets (typed=False) get their value written every run, which makes Streamlit
      send it to the browser with the element;
    - text boxes (typed=True) are written only when they have no value (writing every run
      would overwrite what a user is typing during a rerun); the caller passes the returned
      value as the widget's `value=`, so even the proto default is this session's text.
    """
    kept = st.session_state.setdefault(KEPT, {})
    current = st.session_state[key] if key in st.session_state else kept.get(key, value)
    if not typed or key not in st.session_state:
        st.session_state[key] = current
    kept.setdefault(key, current)
    return current


def follow_history() -> None:
    """A run that Back or Forward started (Streamlit marks its rerun as a history navigation)
    shows the address it returned to: every session value that widget_default seeded is
    dropped, so each widget reads its value from that address again (a setting the address
    leaves out is at its default). Otherwise the session's value won and the run wrote it
    back: Back changed the address for a moment, then the view put it back. Called at the
    start of every run (app.py)."""
    from streamlit.runtime.scriptrunner import get_script_run_ctx

    ctx = get_script_run_ctx()
    if ctx is None or not getattr(ctx, "is_history_navigation", False):
        return
    for key in list(st.session_state.get(KEPT, {})):
        st.session_state.pop(key, None)
    st.session_state[KEPT] = {}


def keep_widget_values() -> None:
    """Copy the current value of every widget seeded by widget_default (end of each run)."""
    kept = st.session_state.get(KEPT)
    if not kept:
        return
    for key in list(kept):
        if key in st.session_state:
            kept[key] = st.session_state[key]


def to_url(*, defaults: dict | None = None, **values) -> None:
    """Write the current view back to the address bar (only what changed), at the end of the
    run: address.send_url sends the run's changes as one message, so the browser's history gets one
    entry per run, not one per setting (Back then steps back a view, not a setting at a time).

    ``defaults``: a page setting equal to its default (what a page shows when the address does
    not name it) leaves the address, which then reads as the view without it. So opening a
    page from the sidebar (whose links carry the sidebar's settings) writes nothing more, and
    its visit is one history entry: Back returns to the previous page at once.

    A page switched to by ``st.switch_page`` starts with an empty address, so its run
    writes the whole view; a page opened from its link starts with the link's.
    """
    pending = st.session_state.setdefault(PENDING, {})
    defaults = defaults or {}
    for key, value in values.items():
        value = "" if value is None else str(value)
        if key in defaults and value == str(defaults[key]):
            value = ""
        written(key, value)
        if url_get(key) != (value or None):  # an empty value leaves the address too
            pending[key] = value


