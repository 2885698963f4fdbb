"""Head entropy: how spread out each head's attention is (viz_core.analysis.entropy)."""

from __future__ import annotations

import streamlit as st

from viz_core.figures.entropy import head_entropy_heatmap
from viz_core.i18n import N_, _, bound

from ..charts import chart, download_csv
from ..contributions import attempt
from ..controls import url_select
from ..lang import fragment
from ..runs import AnalysisRequest, run_analysis

MEASURES = {"normalised": N_("Normalised (0 = one key, 1 = uniform)"), "entropy": N_("Nats")}


@fragment
def entropy_tab(sel) -> None:
    measure = url_select(_("Measure"), "ent_measure", list(MEASURES), widget="radio",
                         horizontal=True, format_func=bound(lambda m: _(MEASURES[m])),
                         help=_("Nats: the mean entropy of a head's rows, between 0 and "
                              "log(allowed keys). Normalised: divided by log(allowed keys), "
                              "so heads of short and long rows compare."))
    request = AnalysisRequest.of(sel, "head_entropy", text=sel.text,
                                 target=sel.target or None)
    with attempt(_("measuring each head's attention entropy")):
        frame = run_analysis(request, _("Measuring how spread out each head's attention is…"))
        chart(head_entropy_heatmap(frame, measure), key="hm_entropy", name=f"head-{measure}")
        st.caption(_("Per head, the entropy −Σ p log p of each query's attention over the keys "
                   "it may see, averaged over the queries. Low: a sharp head (the previous "
                   "token, a sink); near log(keys), or 1 normalised: a head that averages."))
        download_csv(_("Head entropy (CSV)"), frame, "head_entropy.csv", "dl_entropy")
