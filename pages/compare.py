"""Compare: two inputs, or two models on one input, side by side, with their difference; or a
teacher and its distilled student, layer by layer (attention_lab/ui/distillation.py)."""

import numpy as np
import streamlit as st

from attention_lab.ui import state
from attention_lab.ui.charts import chart, download
from attention_lab.ui.contributions import follow_the_sidebar, suggested_corruption
from attention_lab.ui.controls import block_kind_label, url_number, url_select
from attention_lab.ui.distillation import teacher_and_student
from attention_lab.ui.errors import literal, reported
from attention_lab.ui.generation import for_model
from attention_lab.ui.page import selection, show_trace_messages
from attention_lab.ui.runs import TraceRequest, get_model, get_trace
from attention_lab.ui.sidebar import model_choices
from viz_core import npz_bytes
from viz_core.figures.heatmap import block_heatmap, matrix_heatmap
from viz_core.i18n import N_, _

sel = selection()
st.title(_("Compare"))
modes = [N_("two inputs"), N_("two models"), N_("teacher and student")]
mode = url_select(_("Compare"), "cmp_mode", modes, widget="radio", horizontal=True, format_func=_)
if mode == "teacher and student":
    teacher_and_student(sel)
    state.stop()
if mode == "two inputs":  # the second starts as the text with one word changed
    pair = suggested_corruption(sel.model_name, sel.device, sel.text)
    second = pair[0] if pair else sel.text
    follow_the_sidebar(sel, "cmp_source", {"text_b": second})
    text_b = state.widget_default("text_b", state.url_text("text_b", second), typed=True)
    st.text_input(_("Second input"), text_b, key="text_b")
    state.to_url(text_b=st.session_state.text_b, defaults={"text_b": second})
    if pair and st.session_state.text_b == pair[0]:
        st.caption(_("Your text with {literal} → {literal2}: what changes in the attention when "
                     "one word does. Type any other input.").format(
                       literal=literal(repr(pair[1])), literal2=literal(repr(pair[2]))))
    runs = [(sel.model_name, sel.text), (sel.model_name, st.session_state.text_b)]
else:
    others = [m for m in model_choices() if m != sel.model_name] or [sel.model_name]
    model_b = url_select(_("Second model"), "model_b", others)
    runs = [(sel.model_name, sel.text), (model_b, sel.text)]

traces = []
for name, text in runs:
    with reported(_("running {name}").format(name=name)), \
            st.spinner(_("Running {name}…").format(name=literal(name))):
        max_new = for_model(get_model(name, sel.device), sel.max_new)  # decoders only
        target = sel.target if name == sel.model_name else None
        traces.append(get_trace(TraceRequest(name, sel.device, text, target, max_new=max_new)))
common = [k for k in traces[0].kinds() if k in traces[1].kinds()]
if not common:
    st.warning(_("These two models share no kind of attention block to compare."))
    state.stop()
c1, c2, c3 = st.columns([2, 1, 1])
block_kind = url_select(_("Block"), "cmp_kind", common, container=c1, format_func=block_kind_label)
n_layers = min(len(t.layers(block_kind)) for t in traces)
n_heads = min(t.layers(block_kind)[0].n_heads for t in traces)
layer = url_number(_("Layer"), "cmp_layer", 0, 0, n_layers - 1, container=c2)
head = url_number(_("Head"), "cmp_head", 0, 0, n_heads - 1, container=c3)
state.show_notices()
blocks = [t.layers(block_kind)[int(layer)] for t in traces]

left, right = st.columns(2)
for col, (name, text), t, b, key in zip((left, right), runs, traces, blocks, ("a", "b")):
    with col:
        st.markdown(f"**{literal(name)}**")
        output = getattr(t, "output_text", None)  # a translation or a continuation
        st.code(text + (f"\n→ {output}" if output else ""), language=None, wrap_lines=True)
        show_trace_messages(t)
        chart(block_heatmap(b, int(head)), key=f"cmp_{key}", name=f"compare-{key}")

a, b = blocks
if a.pattern.shape[1:] == b.pattern.shape[1:]:
    diff = b.pattern[int(head)] - a.pattern[int(head)]
    lim = float(np.abs(diff).max()) or 1.0
    chart(matrix_heatmap(diff, [f"{x}|{y}" if x != y else x for x, y in
                                zip(a.query_tokens, b.query_tokens)],
                         [f"{x}|{y}" if x != y else x for x, y in
                          zip(a.key_tokens, b.key_tokens)],
                         title=_("Difference (right − left)"), value_name=_("Δ weight"),
                         colorscale="RdBu", zmin=-lim, zmax=lim, zmid=0.0),
          key="cmp_diff", name="compare-diff")
else:
    st.info(_("The two runs have different token counts ({value} vs {value2}), so a cell-by-cell "
              "difference is not defined. Use inputs with the same number of tokens (e.g. swap "
              "one word) to see the difference.").format(
                value=a.pattern.shape[1:], value2=b.pattern.shape[1:]))
download(_("Both patterns (NPZ)"), lambda: npz_bytes(
    {"left/pattern": a.pattern, "right/pattern": b.pattern, "left/mask": a.mask,
     "right/mask": b.mask}), "compare.npz", "application/octet-stream", "dl_compare")
