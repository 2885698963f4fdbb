"""The test thread's interface language for a block (viz_core/i18n's ContextVar), put back
after it: what a session speaking that language would see."""

from __future__ import annotations

from contextlib import contextmanager

from viz_core import i18n


@contextmanager
def speaking(lang: str):
    previous = i18n.language()
    i18n.set_language(lang)
    try:
        yield
    finally:
        i18n.set_language(previous)


def in_chinese(msgid: str, **values) -> str:
    """A catalogue template in 简体中文, filled with `values`."""
    with speaking("zh"):
        return i18n._(msgid).format(**values)
