"""Logit attribution: how much each head (and the embeddings, MLPs, biases) adds to the
explained logit."""

from __future__ import annotations

import streamlit as st

from viz_core.figures.contributions import attribution_bars, attribution_heatmap
from viz_core.i18n import _

from ..charts import chart, download_csv
from ..contributions import attempt
from ..errors import literal, translated
from ..lang import fragment
from ..runs import AnalysisRequest, run_analysis
from .explain import Explained


@fragment
def attribution_tab(sel, explained: Explained) -> None:
    request = AnalysisRequest.of(sel, "logit_attribution", text=sel.text,
                                 target=sel.target or None, position=explained.position,
                                 token=explained.token, against=explained.against)
    with attempt(_("attributing the logit")):
        a = run_analysis(request, _("Attributing the logit…"))
        total = float(a.frame["contribution"].sum())
        st.markdown(_("**{metric}** at position {position} (after {literal}) = **{logit:.4f}**; "
                      "the {n_frame} components add up to {total:.4f}.").format(
                        metric=literal(a.metric), position=a.position,
                        literal=literal(repr(a.tokens[a.position])), logit=a.logit,
                        n_frame=len(a.frame), total=total))
        left, right = st.columns([3, 2])
        with left:
            chart(attribution_heatmap(a.frame), key="hm_attr_heads", name="logit-attribution-heads")
        with right:
            chart(attribution_bars(a.frame), key="hm_attr_bars", name="logit-attribution-other")
        st.caption(literal(translated(a.note)) + _(" Blue adds to the logit, red takes away."))
        download_csv(_("Attribution (CSV)"), a.frame, "logit_attribution.csv", "dl_attr")
