"""The n-best list with sentence BLEU against the sidebar's target (for the Beam page)."""

from __future__ import annotations

import streamlit as st

from viz_core.i18n import N_, _

from .charts import chart

# nbest_bleu_rows' columns, as the table heads them
COLUMNS = [N_("rank"), N_("text"), N_("score"), N_("token log-probs"), N_("len hyp/ref")]


def show_nbest_bleu(tree, reference: str | None, key: str = "nbest_bleu",
                    scorable: bool = True) -> list[dict]:
    """Table of the n-best with BLEU, p1..p4, BP and per-token log-probs, the definition,
    and a chart of the log-probs. Returns the rows (for a CSV download). scorable=False: the
    model takes no target (decoder-only), so the caption says BLEU does not apply."""
    from viz_core.figures.bleu import token_logprob_figure
    from viz_core.lessons.bleu import DEFINITION, nbest_bleu_rows

    rows = nbest_bleu_rows(tree, reference)
    st.dataframe(rows, hide_index=True, width="stretch", key=key,
                 column_config={c: _(c) for c in COLUMNS})
    if reference and reference.strip():
        st.caption(_(DEFINITION))
    elif not scorable:
        st.caption(_("Sentence BLEU scores a translation against a reference: it applies to "
                   "encoder-decoder models, whose sidebar has a target box."))
    else:
        st.caption(_("Type a target in the sidebar to score every hypothesis with sentence "
                   "BLEU against it."))
    chart(token_logprob_figure(tree), key=f"{key}_logprobs", name="nbest-logprobs")
    return rows
