"""Why this score? One cell's pre-softmax score of one head split into (query component x
key component) terms. URL: qk_block, qk_head, qk_q, qk_k (default key: where the head looks
most from the query)."""

from __future__ import annotations

import numpy as np
import streamlit as st

from viz_core.figures.common import choice_labels
from viz_core.i18n import _

from .. import state
from ..contributions import qk_request, show_qk
from ..controls import url_number, url_select
from ..lang import fragment
from ..runs import run_trace
from .explain import text_request


@fragment
def qk_tab(sel) -> None:
    trace = run_trace(text_request(sel))
    blocks = trace.blocks
    own = [name for name in blocks if name.endswith(".self")] or blocks
    k1, k2, k3, k4 = st.columns([2, 1, 2, 2])
    b = trace[url_select(_("Block"), "qk_block", blocks, own[-1], container=k1)]
    ql, kl = choice_labels(b.query_tokens), choice_labels(b.key_tokens)
    head = url_number(_("Head"), "qk_head", 0, 0, b.n_heads - 1, container=k2)
    query = url_select(_("Query"), "qk_q", range(len(ql)), len(ql) - 1, container=k3,
                       format_func=lambda i: ql[i])
    strongest = int(np.argmax(b.window(head, (query, query + 1), (0, len(kl)))[0]))
    key = url_select(_("Key"), "qk_k", range(len(kl)), strongest, container=k4,
                     format_func=lambda i: kl[i])
    state.show_notices()
    show_qk(qk_request(sel, b.name, head, query, key), "hm_qk", ql[query], kl[key])
