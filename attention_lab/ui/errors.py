"""Show failures as messages, never as tracebacks."""

from __future__ import annotations

import logging
import re
from contextlib import contextmanager

import streamlit as st

import viz_core as vc
from viz_core.i18n import Message, _

from .address import stop

log = logging.getLogger("attention_lab")

_MARKUP = re.compile(r"([\\`*_{}\[\]()#+\-.!|~<>$:&=\"'])")


def literal(text) -> str:
    """Text for st.markdown / st.error & co. that shows exactly as typed: every ASCII
    punctuation mark is backslash-escaped (CommonMark), so no Markdown, LaTeX ($), colour or
    icon directive (:red[...], :material/x:) or HTML can take effect; newlines stay breaks."""
    return _MARKUP.sub(r"\\\1", str(text)).replace("\n", "  \n")


WORDS = ("what", "w", "role", "side", "stack")  # values that are words of the message


def translated(err) -> str:
    """A VizError's (or an i18n.Message's) message in the session's language: its template
    translated and filled with its values (viz_core/errors.py); a message without a catalogue
    entry stays as is."""
    if getattr(err, "parts", None):  # i18n.Message.joined: each part on its own
        return err.sep.join(translated(part) for part in err.parts)
    values = dict(getattr(err, "values", None) or {})
    for key in WORDS:  # a word filled into the message ("the target", "the encoder")
        if isinstance(values.get(key), str):
            values[key] = _(values[key])
    for key, value in values.items():  # a message filled into one (a metric's name, an
        if isinstance(value, (Message, vc.VizError)):  # error retold with a hint)
            values[key] = translated(value)
    msgid = getattr(err, "msgid", None) or str(err)
    text = _(msgid)
    if values:
        try:
            return text.format(**values)
        except (KeyError, IndexError, ValueError):  # a translation that lost a placeholder
            return str(err)
    return text


def log_cause(what: str, err: Exception) -> None:
    """A VizError told in short (e.g. loading) logs its cause; one of our own messages retold
    (an input error with a hint added) is the user's, and the log stays quiet."""
    if err.__cause__ is not None and not isinstance(err.__cause__, vc.VizError):
        log.warning("%s failed: %s", what, err, exc_info=err)


@contextmanager
def reported(what: str, also=None):
    """Run a block; a VizError becomes st.error(message), anything else a short apology.

    The user sees only the message; the log gets the traceback of anything unexpected and
    the cause of a VizError raised from another kind of exception (``raise ... from err``).
    ``also``: a second place for the message (the main area, for a failure in the sidebar,
    which a reader may have folded away or scrolled past)."""
    places = (st,) if also is None else (st, also)
    try:
        yield
    except vc.VizError as err:
        log_cause(what, err)
        message = literal(translated(err))
    except Exception as err:  # noqa: BLE001 - the user sees a message, the log the details
        log.exception("%s failed", what)
        message = _("Something went wrong while {what} ({error}). Try another input or model; "
                    "the rest of the app keeps working.").format(what=literal(what),
                                                                 error=type(err).__name__)
    else:
        return
    for place in places:
        place.error(message, icon="⚠️")
    stop()
