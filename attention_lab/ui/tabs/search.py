"""Head search: every head of one block kind ranked by its weight on one (query, key) cell or
by a template (previous token, induction...). A click on a row opens that head on the
Attention page. URL: hs_kind, hs_mode, hs_q, hs_k (the last two in "pair" mode only)."""

from __future__ import annotations

import streamlit as st

from viz_core.analysis.head_search import TEMPLATES
from viz_core.figures.common import choice_labels
from viz_core.figures.contributions import head_search_heatmap
from viz_core.i18n import N_, _, bound

from .. import state
from ..cells import position
from ..charts import chart, download_csv, table
from ..contributions import SearchRequest, attempt, head_search
from ..controls import block_kind_label, open_head, url_select
from ..errors import literal, translated
from ..lang import fragment
from ..runs import run_trace
from .explain import text_request

MODES = {"pair": N_("these two tokens"), **TEMPLATES}


@fragment
def search_tab(sel) -> None:
    request = text_request(sel)
    trace = run_trace(request)
    s1, s2 = st.columns([1, 2])
    kind = url_select(_("Block"), "hs_kind", trace.kinds(), container=s1,
                      format_func=block_kind_label)
    mode = url_select(_("Find heads that attend to"), "hs_mode", list(MODES), container=s2,
                      format_func=bound(lambda m: _(MODES[m])))
    query = key = 0
    if mode == "pair":
        first = trace.layers(kind)[0]
        q_labels, k_labels = choice_labels(first.query_tokens), choice_labels(first.key_tokens)
        c1, c2 = st.columns(2)
        query = url_select(_("Query token (attends)"), "hs_q", range(len(q_labels)),
                           len(q_labels) - 1, container=c1, format_func=lambda i: q_labels[i])
        seen = (~first.mask_window((query, query + 1), (0, len(k_labels)))[0]).nonzero()[0]
        key = url_select(_("Key token (attended to)"), "hs_k", range(len(k_labels)),
                         int(seen[0]) if len(seen) else 0,  # the first key the query may see
                         container=c2, format_func=lambda i: k_labels[i])
    else:
        state.to_url(hs_q=None, hs_k=None)
    state.show_notices()
    with attempt(_("searching the heads")):
        found = head_search(SearchRequest(request, kind, None if mode == "pair" else mode,
                                          query, key))
        st.markdown(_("Every head of the {literal} ranked by its {description}.").format(
                        literal=literal(block_kind_label(kind).lower()),
                        description=literal(translated(found.description))))
        if found.queries == 0:
            st.info(_("The template applies to no query of this input (e.g. induction needs a "
                    "token that occurs twice). Try a longer or repetitive text."))
            return
        _ranking(found, kind, mode)


def _ranking(found, kind: str, mode: str) -> None:
    """The ranked table (a click on a row opens that head) beside every head's score."""
    left, right = st.columns([2, 3])
    with left:
        columns = ["block", "layer", "head", "score"]
        rows = found.frame[columns + ([] if mode == "pair" else ["query", "key"])]
        table(rows.round(4), key="hs_table", on_select="rerun",
                     selection_mode="single-row", hide_index=True, height=360,
                     width="stretch")
        st.caption(_("Click a row to open that head on the Attention page."))
    with right:
        chart(head_search_heatmap(found.frame, _("Every head's score")), key="hs_heat",
              name=f"head-search-{mode}")
    rows = st.session_state.get("hs_table")
    picked = [r for r in (rows.selection.rows if rows is not None else [])
              if position(r, len(found.frame)) is not None]  # a stale row of another table
    if picked:
        row = found.frame.iloc[picked[0]]
        open_head(kind, int(row["layer"]), int(row["head"]))
        st.switch_page("pages/attention.py")
    download_csv(_("Head search (CSV)"), found.frame, f"head_search_{mode}.csv", "dl_search")
