"""Composition: how much a later head reads what an earlier one wrote, from the weights."""

from __future__ import annotations

import streamlit as st

from viz_core.figures.contributions import composition_heatmap
from viz_core.i18n import _

from ..charts import chart, download_csv
from ..contributions import attempt
from ..controls import url_select
from ..lang import fragment
from ..runs import AnalysisRequest, run_analysis


@fragment
def composition_tab(sel) -> None:
    with attempt(_("computing the composition scores")):
        comp = run_analysis(AnalysisRequest.of(sel, "composition"),
                            _("Composition scores from the weights…"))
        kinds = [k for k in ("Q", "K", "V") if k in set(comp["kind"])] or ["K"]
        kind = url_select(_("Composition"), "comp", kinds, widget="radio", horizontal=True,
                          help=_("How much a later head reads what an earlier head wrote: "
                               "through its queries (Q), keys (K) or values (V)."))
        if comp.empty:
            st.info(_("This model has one layer of heads: there is no composition."))
        else:
            chart(composition_heatmap(comp, kind), key="hm_comp", name=f"{kind}-composition")
        st.caption(_("From the weights alone (Elhage et al., 2021): ‖W_QK^recv W_OV^send‖_F / "
                   "(‖W_QK^recv‖_F ‖W_OV^send‖_F) for K; Q uses W_QKᵀ, V uses W_OV^recv."))
        download_csv(_("Composition (CSV)"), comp, "composition.csv", "dl_comp")
