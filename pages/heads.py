"""Head analysis: statistics per head, head similarity, and head ablation.

The similarity views (one block kind) and the ablation are st.fragments: their pickers rerun
only their own part, not the statistics table or the sidebar."""

import numpy as np
import streamlit as st

from attention_lab.ui import state
from attention_lab.ui.charts import chart, download, table
from attention_lab.ui.controls import block_kind_label, open_head
from attention_lab.ui.errors import reported
from attention_lab.ui.lang import fragment
from attention_lab.ui.page import selection, show_output, show_trace_messages
from attention_lab.ui.runs import (
    BeamRequest,
    TraceRequest,
    cached_figure,
    get_beam,
    get_trace,
    head_similarity,
    head_stats,
)
from viz_core.analysis.heads import kv_group_heads, kv_group_table, layer_to_layer_divergence
from viz_core.figures.aggregates import head_similarity_figure
from viz_core.figures.heatmap import matrix_heatmap
from viz_core.i18n import N_, _, bound

# families whose layers share one set of attention weights (the same module, called per layer)
SHARED_WEIGHTS = {"albert": N_("ALBERT shares one layer's weights across all its layers")}


def _span(heads: list[int]) -> str:
    """[0, 1] -> "0-1"; [0, 2] -> "0, 2"."""
    if heads == list(range(heads[0], heads[-1] + 1)) and len(heads) > 1:
        return f"{heads[0]}-{heads[-1]}"
    return ", ".join(map(str, heads))


sel = selection()
st.title(_("Head analysis"))
request = TraceRequest.of(sel)  # every hook point: the statistics read the whole trace
trace = sel.trace()
show_trace_messages(trace)

st.subheader(_("Statistics per head"))
st.caption(_("entropy: spread of attention (nats) · distance: mean |query − key| · special: "
           "share on special tokens · previous / diagonal: weight on the previous token / "
           "itself · sink: weight on the first token. Click a row to open that head."))
stats = head_stats(request)


def _row_clicked() -> None:
    rows = st.session_state["stats_table"].selection.rows
    if rows:
        row = stats.iloc[rows[0]]
        open_head(row["kind"], int(row["layer"]), int(row["head"]))
        st.session_state["_goto_attention"] = True


table(stats.round(4), key="stats_table", on_select=_row_clicked,
             selection_mode="single-row", hide_index=True, width="stretch", height=320)
if st.session_state.pop("_goto_attention", False):
    st.switch_page("pages/attention.py")
download(_("Statistics (CSV)"), lambda: stats.to_csv(index=False), "head_stats.csv", "text/csv",
         "dl_head_stats")

block_kinds = trace.kinds()


@fragment
def similarity() -> None:
    """Head similarity, layer to layer and key/value groups of the block kind picked here."""
    st.subheader(_("Head similarity"))
    state.widget_default("sim_kind", state.url_choice("sim_kind", block_kinds, block_kinds[0]))
    if st.session_state.sim_kind not in block_kinds:
        st.session_state.sim_kind = block_kinds[0]
    kind = st.selectbox(_("Block"), block_kinds, key="sim_kind", format_func=bound(block_kind_label))
    state.to_url(sim_kind=kind, defaults={"sim_kind": block_kinds[0]})
    state.show_notices()
    matrix, labels, order = head_similarity(request, kind)
    chart(cached_figure(request, "similarity", (kind,), lambda: head_similarity_figure(
        matrix, labels, order=order, title=_("Jensen–Shannon divergence between heads (0 = same)"))),
        key="sim_fig", name=f"{kind}-similarity")

    st.subheader(_("From one layer to the next"))
    family = str(trace.model_info.get("family", ""))
    layers = trace.layers(kind)
    if len(layers) < 2:
        st.caption(_("This block kind has one layer: there is no next layer to compare with."))
    else:
        if family in SHARED_WEIGHTS:
            st.info(_("**Shared weights.** {value}: every layer applies the same W_Q, W_K, W_V "
                      "to a different input, so low values here mean the input barely changed "
                      "from one layer to the next.").format(value=_(SHARED_WEIGHTS[family])))
        chart(cached_figure(request, "layer-to-layer", (kind,), lambda: _layer_steps(kind)),
              key="layer_step_fig", name=f"{kind}-layer-to-layer")

    first = layers[0]
    if first.kv_heads < first.n_heads:
        st.subheader(_("Key/value groups (grouped-query attention)"))
        groups = kv_group_heads(first.kv_group)
        st.caption(_("{n_heads} query heads read {kv_heads} key/value heads: {groups}. Heads of "
                     "one group see the same keys; are their patterns closer to each other than "
                     "to the other groups' heads? (mean Jensen–Shannon divergence, 0 = same)"
                     ).format(n_heads=first.n_heads, kv_heads=first.kv_heads, groups="; ".join(
                         _("kv {g}: heads {span}").format(g=g, span=_span(hs))
                         for g, hs in groups.items())))
        table(kv_group_table(trace, kind).round(4), hide_index=True, key="kv_group_table")


def _layer_steps(kind: str):
    layers = trace.layers(kind)
    div = layer_to_layer_divergence(trace.stack(kind))  # [layer - 1, head]
    n_heads = div.shape[1]
    with_mean = np.concatenate([div, div.mean(axis=1, keepdims=True)], axis=1)
    steps = [f"L{b.layer}→L{b.layer + 1}" for b in layers[:-1]]
    return matrix_heatmap(with_mean, steps, [f"head {h}" for h in range(n_heads)] + ["mean"],
                          title=_("Jensen–Shannon divergence of each head's pattern from one "
                                "layer to the next (0 = same, ln 2 ≈ 0.69 = disjoint)"),
                          value_name=_("JS (nats)"), colorscale="Viridis", zmin=0.0,
                          zmax=float(np.log(2)), x_title=_("head"), y_title=_("layer step"))


@fragment
def ablation() -> None:
    """Heads switched off, the model run again, and what changed."""
    st.subheader(_("Head ablation"))
    st.caption(_("Switch heads off (their output is set to zero) and run the model again."))
    all_heads = [f"{b.name}:{h}" for k in block_kinds for b in trace.layers(k)
                 for h in range(b.n_heads)]
    url_heads = [h for h in (state.url_get("ablate") or "").split(",") if h]
    if any(h not in all_heads for h in url_heads):
        state.notice(_("Some heads in the address do not exist in this model and were ignored."))
    state.widget_default("ablate_heads", [h for h in url_heads if h in all_heads])
    st.session_state.ablate_heads = [h for h in st.session_state.ablate_heads if h in all_heads]
    group_choices = {f"{b.name} · " + _("kv {g}: heads {span}").format(g=g, span=_span(hs)):
                     [f"{b.name}:{h}" for h in hs]
                     for k in block_kinds for b in trace.layers(k) if b.kv_heads < b.n_heads
                     for g, hs in kv_group_heads(b.kv_group).items()}

    def _add_group() -> None:
        """Expand the chosen key/value group into its heads in the ablation multiselect."""
        picked = st.session_state.get("ablate_group")
        if picked in group_choices:
            st.session_state.ablate_heads = list(dict.fromkeys(
                st.session_state.ablate_heads + group_choices[picked]))
        st.session_state.ablate_group = None

    if group_choices:
        st.selectbox(_("Switch off a whole key/value group"), list(group_choices), index=None,
                     key="ablate_group", on_change=_add_group,
                     placeholder=_("pick a group: its query heads are added below"))
    chosen = st.multiselect(_("Heads to switch off"), all_heads, key="ablate_heads", placeholder=_("Choose"))
    state.to_url(ablate=",".join(chosen))
    state.show_notices()
    if chosen:
        ablated_views(chosen)


def ablated_views(chosen: list[str]) -> None:
    ablate: dict[str, list[int]] = {}
    for item in chosen:
        name, h = item.rsplit(":", 1)
        ablate.setdefault(name, []).append(int(h))
    with reported(_("running the ablated model")), st.spinner(_("Running without those heads…")):
        ablated = get_trace(TraceRequest.of(sel, ablate=ablate))
    c1, c2 = st.columns(2)
    c1.markdown(_("**Original output**"))
    with c1:
        show_output(trace)
    c2.markdown(_("**Without those heads**"))
    with c2:
        show_output(ablated)
    if sel.model.can_generate:
        with reported(_("beam search")), st.spinner(_("Beam search with and without those heads…")):
            base_tree = get_beam(BeamRequest.of(sel, beam_size=4))
            abl_tree = get_beam(BeamRequest.of(sel, beam_size=4, ablate=ablate))
        table([{"text": h.text, "score": round(h.score, 4)}
               for h in base_tree.hypotheses], container=c1, hide_index=True)
        table([{"text": h.text, "score": round(h.score, 4)}
               for h in abl_tree.hypotheses], container=c2, hide_index=True)
    names = [n for n in trace.blocks if n in ablated.blocks]
    name = st.selectbox(_("Attention change in block"), names, key="ablate_block")
    a, b = trace[name], ablated[name]
    if a.pattern.shape != b.pattern.shape:
        st.info(_("The output changed length, so the decoder attention cannot be compared cell "
                "by cell; pick an encoder block or give a target in the sidebar."))
        return
    diff = (b.pattern - a.pattern).mean(axis=0)
    lim = float(np.abs(diff).max()) or 1.0
    chart(matrix_heatmap(diff, a.query_tokens, a.key_tokens, title=_("{name}: change of the mean "
                                                                     "weight over heads (ablated "
                                                                     "− original)").format(name=name),
                         value_name="Δ weight", colorscale="RdBu", zmin=-lim, zmax=lim,
                         zmid=0.0), key="ablate_diff", name=f"{name}-ablation-diff")


similarity()
ablation()
