"""The logit lens: what every layer would predict, read through the final norm and the
unembedding."""

from __future__ import annotations

import streamlit as st

from viz_core.figures.contributions import logit_lens_grid
from viz_core.i18n import _

from ..charts import chart, download, download_csv
from ..contributions import attempt, lens_npz
from ..lang import fragment
from ..runs import AnalysisRequest, run_analysis

LENS_POSITIONS = 256  # positions drawn in the lens grid (long inputs: the last ones)


@fragment
def lens_tab(sel) -> None:
    request = AnalysisRequest.of(sel, "logit_lens", text=sel.text, target=sel.target or None,
                                 k=5)
    with attempt(_("reading the logit lens")):
        lens = run_analysis(request, _("Reading every layer through the unembedding…"))
        first = max(0, len(lens.tokens) - LENS_POSITIONS)  # long inputs: the last ones
        top1 = [[cell[0] for cell in row[first:]] for row in lens.top_tokens]
        chart(logit_lens_grid(lens.layers, lens.tokens[first:], top1,
                              lens.top_probs[:, first:, 0], lens.prob[:, first:],
                              lens.prediction_tokens[first:]),
              key="hm_lens", name="logit-lens")
        if first:
            st.caption(_("The last {LENS_POSITIONS} of {n_tokens:,} positions (the downloads "
                         "hold them all).").format(
                           LENS_POSITIONS=LENS_POSITIONS, n_tokens=len(lens.tokens)))
        st.caption(_("Each row is the residual stream after that layer (the first: the "
                   "embeddings), read through the model's final norm and unembedding; the "
                   "last row is the model's own output. Text: the top token there; colour: "
                   "the probability of the model's final prediction at that position. Hover "
                   "for both probabilities."))
        d1, d2 = st.columns(2)
        with d1:
            download_csv(_("Logit lens (CSV)"), lens.frame, "logit_lens.csv", "dl_lens")
        with d2:
            download(_("Logit lens (NPZ)"), lambda: lens_npz(lens), "logit_lens.npz",
                     "application/octet-stream", "dl_lens_npz")
