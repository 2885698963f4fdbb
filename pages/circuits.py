"""Circuits: which connections between components carry the answer on a clean / corrupted
pair (edge attribution: EAP, EAP-IG, exact edge patching), the top edges as a graph with the
faithfulness curve beside it. Every setting is in the address (circ_clean, circ_corrupt,
circ_method, circ_top)."""

import streamlit as st

from attention_lab.ui import state
from attention_lab.ui.charts import chart, download_csv, table
from attention_lab.ui.circuits import (
    METHOD_LABELS,
    METHODS,
    check_against_exact,
    confirmed_exact,
    curve_counts,
    edge_rows,
    edges_request,
    faithfulness_points,
    head_of,
    head_picker,
    kept_slider,
    open_clicked_head,
    refusal,
    table_height,
)
from attention_lab.ui.contributions import (
    attempt,
    follow_the_sidebar,
    show_result_warnings,
    suggested_corruption,
)
from attention_lab.ui.controls import url_select, url_text_box
from attention_lab.ui.errors import literal, translated
from attention_lab.ui.page import selection
from attention_lab.ui.runs import run_analysis
from viz_core.figures.circuit import circuit_figure, faithfulness_figure, layer_columns
from viz_core.i18n import _

sel = selection()
st.title(_("Circuits"))
st.caption(_("Which connections between components carry the answer. Every earlier component "
           "(the embeddings, each head, each MLP) writes into the residual stream that every "
           "later one reads (a head through its q, k and v inputs), so each (sender, "
           "receiver) pair is an edge. An edge's score is the share of the clean run's "
           "logit, above the corrupted run's, that is lost when the edge alone carries its "
           "corrupted value: exact patching runs that, EAP (Syed et al., 2023) estimates it "
           "from one gradient, EAP-IG (Hanna et al., 2024) from five along the way from the "
           "corrupted input to the clean one."))

suggestion = suggested_corruption(sel.model_name, sel.device, sel.text)
follow_the_sidebar(sel, "circ_source", {"circ_clean": sel.text,  # a new sidebar text: its pair
                                         "circ_corrupt": suggestion[0] if suggestion else ""})
p1, p2 = st.columns(2)
clean = url_text_box(_("Clean text"), "circ_clean", _("The input whose answer the circuit "
                     "carries (faithfulness 1)."), limit=state.MAX_TEXT_CHARS, area=True,
                     container=p1, default=sel.text)
corrupted = url_text_box(_("Corrupted text"), "circ_corrupt", _("The same number of tokens with "
                         "something changed (faithfulness 0)."), limit=state.MAX_TEXT_CHARS,
                         area=True, container=p2, default=suggestion[0] if suggestion else "")
method = url_select(_("Method"), "circ_method", METHODS, "eap-ig", widget="radio",
                    horizontal=True, format_func=lambda m: _(METHOD_LABELS[m]),
                    help=_("EAP-IG (the default): five backward passes, close to exact where "
                         "the model is far from linear, as a saturated attention head is. "
                         "EAP: one, faster on a big model, and blind to what such a head "
                         "reads. Exact: one patched run per edge."))
state.show_notices()
refused = refusal(sel)
if refused:
    st.info(literal(refused), icon="ℹ️")
    state.stop()
if not clean.strip() or not corrupted.strip():
    st.info(_("Type a clean text and a corrupted one of the same token count to find the "
            "edges that carry the clean answer."))
    state.stop()

with attempt(_("finding the circuit")):
    result = None
    if method != "exact" or confirmed_exact(sel, clean, corrupted):
        request = edges_request(sel, clean, corrupted, method)
        result = run_analysis(request, _("Scoring every edge ({value})…").format(
                                           value=_(METHOD_LABELS[method])))
    if result is not None:
        show_result_warnings(result)
        edges = result.edges
        st.caption(_("Metric: {metric} (clean {clean:.3f}, corrupted {corrupted:.3f}); "
                     "{n_edges:,} edges.").format(
                       metric=literal(translated(result.metric)), clean=result.clean,
                       corrupted=result.corrupted, n_edges=len(edges)))
        top = kept_slider(len(edges))
        kept = result.circuit(top=top)
        counts = curve_counts(len(edges))
        curve = faithfulness_points(request, counts)
        here = faithfulness_points(request, (top,))[0]
        # a deep model's graph takes the page's width, its faithfulness curve below it
        graph, side = st.columns([3, 2]) if layer_columns(edges) <= 4 else (st.container(),) * 2
        with graph:
            fig = circuit_figure(edges, kept, title=_("Top {top} of {n_edges:,} edges ({value})").format(
                                                        top=top, n_edges=len(edges),
                                                        value=_(METHOD_LABELS[method])))
            event = chart(fig, key=f"circuit_{method}_{top}", on_select="rerun",
                          name="circuit")
            open_clicked_head(event)
            st.caption(_("Blue: the edge carries the clean answer; red: it works against it. "
                       "Width: |score|. Into a head: q solid, k dashed, v dotted. Click a "
                       "head to open it on Which heads matter."))
        with side:
            chart(faithfulness_figure(counts, curve, kept=top, kept_value=here),
                  key=f"circuit_faith_{method}", name="circuit-faithfulness")
            st.caption(_("Keeping the top {top} edges (every other edge carries its corrupted "
                         "value): faithfulness {here:.3f}.").format(
                           top=top, here=round(here, 3) + 0.0))  # + 0.0: no "-0.000"
        heads = [n for n in dict.fromkeys([*kept["sender"], *kept["receiver"]]) if head_of(n)]
        head_picker(heads)
        table(edge_rows(kept.round(4)), hide_index=True, height=table_height(len(kept)),
              width="stretch", key="circuit_edges")
        download_csv(_("Edges (CSV)"), edges, f"edges_{method}.csv", "dl_circuit_edges")
        check_against_exact(sel, clean, corrupted, method, result, kept)
