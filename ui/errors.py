"""Show failures as messages, never as tracebacks."""

from __future__ import annotations

import logging
from contextlib import contextmanager

import streamlit as st

import viz_core as vc

log = logging.getLogger("attention_lab")


@contextmanager
def reported(what: str):
    """Run a block; a VizError becomes st.error(message), anything else a short apology."""
    try:
        yield
    except vc.VizError as err:
        st.error(str(err), icon="⚠️")
        st.stop()
    except Exception as err:  # noqa: BLE001 - the user sees a message, the log the details
        log.exception("%s failed", what)
        st.error(f"Something went wrong while {what} ({type(err).__name__}). "
                 "Try another input or model; the rest of the app keeps working.", icon="⚠️")
        st.stop()
