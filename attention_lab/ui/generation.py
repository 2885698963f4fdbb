"""The sidebar's "New tokens" control for decoder-only models, kept in the URL as ``new``.

Empty (the default) leaves the choice to the model: the shipped toys continue their prompt;
a loaded Hugging Face decoder is traced on the prompt alone when generating would cost more
than the trace (viz_core.backends.continuation), and its trace says so. 0 traces the prompt
alone; n generates up to n greedy tokens first. The value reaches every trace request of a
decoder-only model (TraceRequest.max_new), so each choice is its own cache entry.
"""

from __future__ import annotations

import streamlit as st

from viz_core.i18n import _

from . import state

KEY = "max_new"  # session key of the widget
URL_KEY = "new"  # the address bar's name for it
MAX_NEW_TOKENS = 256


def url_new_tokens() -> int | None:
    """``new`` from the URL: None when absent or empty; out-of-range values are clamped and
    anything else ignored, each with a notice."""
    raw = state.url_get(URL_KEY)
    if raw is None or not raw.strip() or raw.strip().lower() in ("auto", "default"):
        return None
    try:
        value = int(raw.strip())
    except ValueError:
        state.notice(_("'{URL_KEY}={as_typed}' in the address is not a number of new tokens; "
                       "using the model's default.").format(
                         URL_KEY=URL_KEY, as_typed=state.as_typed(raw)))
        return None
    if not 0 <= value <= MAX_NEW_TOKENS:
        clamped = max(0, min(MAX_NEW_TOKENS, value))
        state.notice(_("'{URL_KEY}={value}' is out of range (0–{MAX_NEW_TOKENS}); using "
                       "{clamped}.").format(
                         URL_KEY=URL_KEY, value=value, MAX_NEW_TOKENS=MAX_NEW_TOKENS,
                         clamped=clamped))
        return clamped
    return value


def for_model(model, max_new: int | None) -> int | None:
    """The New tokens choice as it applies to ``model``: decoder-only models only."""
    return max_new if getattr(model, "architecture", None) == "decoder-only" else None


def new_tokens_control(model) -> int | None:
    """Draw the control (decoder-only models) and keep it in the URL; -> max_new or None."""
    if getattr(model, "architecture", None) != "decoder-only":
        state.to_url(**{URL_KEY: None})
        return None
    chosen = state.widget_default(KEY, url_new_tokens())
    if chosen is not None:  # a kept value from before a range change, or a hand-set one
        try:
            st.session_state[KEY] = max(0, min(MAX_NEW_TOKENS, int(chosen)))
        except (TypeError, ValueError):
            st.session_state[KEY] = None
    st.number_input(
        _("New tokens (0–{MAX_NEW_TOKENS})").format(MAX_NEW_TOKENS=MAX_NEW_TOKENS), min_value=0,
        max_value=MAX_NEW_TOKENS, value=None,
        step=1, key=KEY, placeholder=_("model's default"),
        help=_("Greedy tokens the model generates after your prompt before the trace; 0 traces "
             "the prompt alone. Empty: the model decides (the shipped toys continue their "
             "prompt; a loaded model is traced on the prompt alone when generating would take "
             "longer than the trace)."))
    value = st.session_state[KEY]
    value = None if value is None else int(value)
    state.to_url(**{URL_KEY: value})
    return value
