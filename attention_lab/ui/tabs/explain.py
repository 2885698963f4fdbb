"""The head of "Which heads matter", above its tabs: the text's own trace and what to
explain (a position, a token, a contrast token; in the URL as pos, tok, against)."""

from __future__ import annotations

from dataclasses import dataclass

import streamlit as st

from viz_core.figures.common import choice_labels
from viz_core.i18n import _

from .. import state
from ..controls import url_select, url_text_box
from ..page import show_trace_messages
from ..runs import TraceRequest, run_trace

TOKEN_CHARS = 200  # a token box holds one token: anything longer is certainly not one


@dataclass(frozen=True)
class Explained:
    """What logit attribution and patching explain: the logit of `token` (None: the model's
    prediction) at `position` of the decoder input, minus that of `against` when given."""

    position: int
    last: bool  # the last position: patching keeps it the last of whatever clean text
    token: str | None = None
    against: str | None = None


def text_request(sel) -> TraceRequest:
    """The text alone (a decoder-only model generates nothing here): the positions to explain
    and the patterns head search and the QK tab read."""
    decoder_only = sel.model.architecture == "decoder-only"
    return TraceRequest.of(sel, capture=("pattern",), max_new=0 if decoder_only else None)


def what_to_explain(sel) -> Explained:
    """The text's trace (its messages), then the position, token and contrast pickers.
    Stops the page when the input has no tokens."""
    trace = run_trace(text_request(sel))
    show_trace_messages(trace)
    encoder_only = sel.model.architecture == "encoder-only"
    positions = list(trace.source_tokens if encoder_only else trace.target_tokens)
    if not positions:
        st.info(_("This input has no tokens to explain."))
        state.stop()
    st.subheader(_("What to explain"))
    c_pos, c_tok, c_against = st.columns([2, 2, 2])
    n, labels = len(positions), choice_labels(positions)
    # an encoder-decoder's last position predicts the end of the output: by default, explain
    # the last output word instead (where a swapped source word shows)
    default = n - 2 if sel.model.architecture == "encoder-decoder" and n >= 2 else n - 1
    position = url_select(_("Position"), "pos", range(n), default, container=c_pos,
                          format_func=lambda i: labels[i],
                          help=_("The prediction made at this position of the decoder's input "
                               "(the next token after it). An encoder–decoder starts at the "
                               "one before the last: the last predicts the end of the "
                               "output."))
    token = url_text_box(_("Token"), "tok", _("One token of the vocabulary, e.g. the word you "
                         "expect next (read as running text has it, after a space; a "
                         "vocabulary entry such as Ġcat or ##ing as it is). Empty: the "
                         "model's own prediction."), limit=TOKEN_CHARS,
                         strip=True, container=c_tok)
    against = url_text_box(_("Contrast token"), "against", _("Optional: explain logit(token) − "
                           "logit(contrast) instead of the logit alone."), limit=TOKEN_CHARS,
                           strip=True, container=c_against)
    if token and against and token == against:
        st.error(_("The contrast token is the target token itself: their logit difference is "
                 "always 0. Pick a different contrast token."), icon="⚠️")
    if encoder_only:
        st.caption(_("This model has no output head: patching compares its pooled sentence "
                   "embedding (cosine similarity to the clean run's), so the position and "
                   "tokens above are not used; the other sections read the attention itself."))
    state.show_notices()
    return Explained(int(position), position == n - 1, token or None, against or None)
