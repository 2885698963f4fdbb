"""The session's interface language (viz_core/i18n.py): the sidebar's switch, in the URL as
`lang`, and the one decorator every fragment uses so its reruns speak the same language.

The language is a ContextVar, set at the start of every script run (app.py, and a page run
on its own) and of every fragment rerun (`fragment`), which run without the page's top code.
"""

from __future__ import annotations

import functools

import streamlit as st

from viz_core import i18n

KEY = "lang"  # session key and URL name


def browser_language() -> str:
    """The browser's language where Streamlit tells it (st.context.locale), else English."""
    try:
        locale = st.context.locale
    except Exception:  # noqa: BLE001 - no browser context (bare mode, tests): English
        locale = None
    return i18n.normalize(locale) or i18n.DEFAULT


def chosen_language() -> str:
    """This session's language: the switch's value, else the URL's, else the browser's."""
    from .address import url_get
    from .state import KEPT

    for value in (st.session_state.get(KEY), st.session_state.get(KEPT, {}).get(KEY),
                  url_get(KEY)):
        lang = i18n.normalize(value)
        if lang:
            return lang
    return browser_language()


def apply_language() -> str:
    """Set this run's language (the ContextVar); -> it."""
    return i18n.set_language(chosen_language())


def language_switch() -> str:
    """The sidebar's English / 简体中文 control, kept in the URL as `lang`."""
    from .controls import url_select

    lang = url_select(i18n._("Language"), KEY, list(i18n.LANGUAGES), default=browser_language(),
                      format_func=lambda code: i18n.LANGUAGES[code][1], horizontal=True,
                      widget="radio", container=st.sidebar,
                      keep_default=True)  # a shared address keeps its language
    return i18n.set_language(lang)


def fragment(fn=None, **fragment_args):
    """st.fragment that first sets the session's language: use it instead of @st.fragment."""
    if fn is None:
        return lambda f: fragment(f, **fragment_args)

    @functools.wraps(fn)
    def run(*args, **kwargs):
        from .address import send_url

        apply_language()
        try:
            return fn(*args, **kwargs)
        finally:  # a fragment's run is a run of its own: its address changes go now
            send_url()

    return st.fragment(run, **fragment_args)
