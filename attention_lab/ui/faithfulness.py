"""How far the traced run drifts from the model's own attention, shown on the page.

The model checks itself on its first trace after loading (``model.faithfulness``: the largest
max |logits(traced) - logits(reference attention)| found, and the token count of that input);
the user can check again on the current input. A failed check is a message, never a stop.
"""

from __future__ import annotations

import math

import streamlit as st

from viz_core.i18n import _

from .errors import log


def describe(value: float, n_tokens: int | None) -> str:
    """"Traced logits match the model's reference attention to 3e-06 (checked on a 12-token
    input)"; a difference of exactly 0 is said as such: bit-identical ("to 0" read like a
    rounded number)."""
    where = _(" (checked on a {n:,}-token input)").format(n=n_tokens) if n_tokens else ""
    if not math.isfinite(value):  # weights or outputs that are not numbers
        return _("The traced logits could not be compared with the model's reference "
                 "attention: they are not numbers (NaN or infinity){where}.").format(where=where)
    if value == 0:
        return _("Traced logits are bit-identical to the model's reference attention: the "
                 "difference is exactly 0{where}.").format(where=where)
    return _("Traced logits match the model's reference attention to {value:.1g}{where}.").format(
        value=value, where=where)


def on_this_input(value: float) -> str:
    """The result of the button's check, in words (exactly 0: bit-identical)."""
    if not math.isfinite(value):
        return _("On this input the traced logits are not numbers (NaN or infinity): they "
                 "cannot be compared with the reference.")
    if value == 0:
        return _("On this input the traced logits are bit-identical to the reference: they "
                 "differ from the reference by at most 0.")
    return _("On this input: the traced logits differ from the reference by at most "
             "{value:.1g}.").format(value=value)


def check(model, text: str, target: str | None) -> float | str:
    """model.check_faithfulness on this input: the difference or, when the check fails, a
    short message."""
    try:
        return float(model.check_faithfulness(text, target))
    except Exception as err:  # noqa: BLE001 - the page keeps working without the check
        log.exception("faithfulness check failed")
        return _("The check could not run on this input ({error}).").format(
            error=type(err).__name__)


def show(model, text: str, target: str | None) -> None:
    """The model's faithfulness line and a button that checks the current input."""
    faith = getattr(model, "faithfulness", None)
    cols = st.columns([2, 1], vertical_alignment="center")  # room for the whole button label
    with cols[0]:
        if faith is None:
            st.caption(_("Faithfulness not checked yet: the traced logits have not been compared "
                       "with the model's reference attention."))
        else:
            st.caption(describe(*faith))
    key = ("faith_result", getattr(model, "name", ""), text, target)
    cols[1].button(_("Check faithfulness on this input"), key="faith_check",
                   on_click=_check_now, args=(model, text, target, key),
                   help=_("Run this input through the model's reference attention (SDPA) and "
                        "compare its logits with the traced run's."))
    stored = st.session_state.get("_faith")
    if stored is not None and stored[0] == key:
        result = stored[1]
        if isinstance(result, str):
            st.warning(result, icon="⚠️")
        elif not math.isfinite(result):
            st.warning(on_this_input(result), icon="⚠️")
        else:
            st.success(on_this_input(result), icon="✅")


def _check_now(model, text: str, target: str | None, key: tuple) -> None:
    """Button callback: runs before the page, so the result shows on this very run."""
    st.session_state["_faith"] = (key, check(model, text, target))
