"""Head analysis: statistics per head, head similarity, and head ablation."""

import numpy as np
import streamlit as st

from ui import state
from ui.charts import chart, download
from ui.controls import block_kind_label, open_head
from ui.errors import reported
from ui.page import selection, show_output, show_trace_messages
from ui.runs import BeamRequest, TraceRequest, get_beam, get_trace, head_similarity, head_stats
from viz_core.figures.aggregates import head_similarity_figure
from viz_core.figures.heatmap import matrix_heatmap

sel = selection()
st.title("Head analysis")
request = TraceRequest.of(sel)  # every hook point: the statistics read the whole trace
trace = sel.trace()
show_trace_messages(trace)

st.subheader("Statistics per head")
st.caption("entropy: spread of attention (nats) · distance: mean |query − key| · special: "
           "share on special tokens · previous / diagonal: weight on the previous token / "
           "itself · sink: weight on the first token. Click a row to open that head.")
stats = head_stats(request)


def _row_clicked() -> None:
    rows = st.session_state["stats_table"].selection.rows
    if rows:
        row = stats.iloc[rows[0]]
        open_head(row["kind"], int(row["layer"]), int(row["head"]))
        st.session_state["_goto_attention"] = True


st.dataframe(stats.round(4), key="stats_table", on_select=_row_clicked,
             selection_mode="single-row", hide_index=True, width="stretch", height=320)
if st.session_state.pop("_goto_attention", False):
    st.switch_page("pages/attention.py")
download("Statistics (CSV)", lambda: stats.to_csv(index=False), "head_stats.csv", "text/csv",
         "dl_head_stats")

st.subheader("Head similarity")
block_kinds = trace.kinds()
sim_block_kind = st.selectbox("Block", block_kinds, key="sim_kind",
                              format_func=block_kind_label)
matrix, labels, order = head_similarity(request, sim_block_kind)
chart(head_similarity_figure(matrix, labels, order=order,
                             title="Jensen–Shannon divergence between heads (0 = same)"),
      key="sim_fig", name=f"{sim_block_kind}-similarity")

st.subheader("Head ablation")
st.caption("Switch heads off (their output is set to zero) and run the model again.")
all_heads = [f"{b.name}:{h}" for k in block_kinds for b in trace.layers(k)
             for h in range(b.n_heads)]
url_heads = [h for h in st.query_params.get("ablate", "").split(",") if h]
if any(h not in all_heads for h in url_heads):
    state.notice("Some heads in the address do not exist in this model and were ignored.")
state.widget_default("ablate_heads", [h for h in url_heads if h in all_heads])
st.session_state.ablate_heads = [h for h in st.session_state.ablate_heads if h in all_heads]
chosen = st.multiselect("Heads to switch off", all_heads, key="ablate_heads")
state.to_url(ablate=",".join(chosen))
state.show_notices()
if chosen:
    ablate: dict[str, list[int]] = {}
    for item in chosen:
        name, h = item.rsplit(":", 1)
        ablate.setdefault(name, []).append(int(h))
    with st.spinner("Running without those heads…"), reported("running the ablated model"):
        ablated = get_trace(TraceRequest.of(sel, ablate=ablate))
    c1, c2 = st.columns(2)
    c1.markdown("**Original output**")
    with c1:
        show_output(trace)
    c2.markdown("**Without those heads**")
    with c2:
        show_output(ablated)
    if sel.model.can_generate:
        with st.spinner("Beam search with and without those heads…"), reported("beam search"):
            base_tree = get_beam(BeamRequest.of(sel, beam_size=4))
            abl_tree = get_beam(BeamRequest.of(sel, beam_size=4, ablate=ablate))
        c1.dataframe([{"text": h.text, "score": round(h.score, 4)}
                      for h in base_tree.hypotheses], hide_index=True)
        c2.dataframe([{"text": h.text, "score": round(h.score, 4)}
                      for h in abl_tree.hypotheses], hide_index=True)
    names = [n for n in trace.blocks if n in ablated.blocks]
    name = st.selectbox("Attention change in block", names, key="ablate_block")
    a, b = trace[name], ablated[name]
    if a.pattern.shape != b.pattern.shape:
        st.info("The output changed length, so the decoder attention cannot be compared cell "
                "by cell; pick an encoder block or give a target in the sidebar.")
    else:
        diff = (b.pattern - a.pattern).mean(axis=0)
        lim = float(np.abs(diff).max()) or 1.0
        chart(matrix_heatmap(diff, a.query_tokens, a.key_tokens, title=f"{name}: change of "
                             "the mean weight over heads (ablated − original)",
                             value_name="Δ weight", colorscale="RdBu", zmin=-lim, zmax=lim,
                             zmid=0.0), key="ablate_diff", name=f"{name}-ablation-diff")
