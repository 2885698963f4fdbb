"""The whole block: heads split, concatenated and mixed by W_O, then residual + norm and the
feed-forward; the residual stream's size per layer and what each sublayer adds."""

import pandas as pd
import streamlit as st

from attention_lab.ui import state
from attention_lab.ui.charts import chart
from attention_lab.ui.controls import pick_head
from attention_lab.ui.page import selection, show_trace_messages
from viz_core.analysis import block as vb
from viz_core.figures.block import head_share_heatmap, ratio_figure, residual_figure, stream_heatmap
from viz_core.i18n import N_, _

STREAM_LIMIT = 256 << 20  # bytes a stream capture may keep for this page

STACKS = {"encoder": N_("Encoder"), "decoder": N_("Decoder")}
PLACEMENTS = {
    "post": N_("x ← Norm(x + f(x)): the norm after the residual add, as in the paper, BERT, BART"),
    "pre": N_("x ← x + f(Norm(x)): the norm before each sublayer, as in GPT-2, T5, Llama"),
    "pre+post": N_("x ← x + Norm₂(f(Norm₁(x))): a norm before and after each sublayer (Gemma 2/3)"),
    "output": N_("x ← x + Norm(f(x)): the norm on each sublayer's output (OLMo 2)"),
}

sel = selection()
st.title(_("The whole block"))
st.latex(r"\mathrm{MultiHead}(x) = \mathrm{Concat}(z_1, \dots, z_h)\,W_O + b_O"
         r" = \sum_h z_h\, W_{O,h}^\top + b_O,\qquad z_h = \mathrm{softmax}\!\left("
         r"\frac{Q_h K_h^\top}{\sqrt{d_k}}\right) V_h")

plain = sel.trace(capture=("pattern",))
need = vb.stream_bytes(plain)
if need > STREAM_LIMIT:
    n_tokens = max(len(plain.source_tokens), len(plain.target_tokens))
    st.warning(_("This input has {n_tokens} tokens: keeping the residual stream of every layer "
                 "would take about {value:.0f} MB (this page keeps at most {value2} MB). Shorten "
                 "the text to see the whole block.").format(
                   n_tokens=n_tokens, value=need / 2**20, value2=STREAM_LIMIT >> 20))
    state.stop()
trace = sel.trace(capture=("z", "stream"))
show_trace_messages(trace)
info = trace.model_info
if not trace.stream:
    st.info(_("This model does not offer its residual stream to Attention Lab."))
    state.stop()

kind, layer, head, block = pick_head(trace)
st.subheader(_("From heads to the block's output"))
steps = [(vb.step_label(name), what, shape) for name, what, shape in vb.shape_steps(block, info, trace)]
st.dataframe(pd.DataFrame(steps, columns=[_("step"), _("what happens"), _("shape [B, …]")]),
             hide_index=True, width="stretch", height=35 * (len(steps) + 1) + 3)
stack, layer_no, sub = block.name.split(".")
points = trace.stream.get(f"{stack}.{layer_no}", {})
try:
    w_o, b_o = sel.model.output_projection(block.name)
except (KeyError, NotImplementedError):
    w_o = None
if w_o is not None and block.z is not None and sub in points:
    shares = vb.head_share_norms(block.z, w_o)
    chart(head_share_heatmap(shares, block.query_tokens, head, block.name),
          key="block_shares", name=f"{block.name}-head-shares")
    total = vb.head_contributions(block.z, w_o).sum(0)
    if b_o is not None:
        total = total + b_o.detach().float()
    diff = float((total - points[sub].float()).abs().max())
    st.caption(_("Each row is one head's z_h (its d_v = {value} columns of the concatenation) "
                 "times its own slice of W_O. Adding the {n_heads} shares and W_O's bias gives "
                 "the block's output as the model computed it (largest difference {diff:.1e}).").format(
                   value=block.z.shape[-1], n_heads=block.n_heads, diff=diff))

st.subheader(_("Residual stream, layer by layer"))
placement = info.get("norm_placement", "post")
st.markdown(_("**Norm placement: {placement}**, {get}. Norm: `{value}`.").format(
                placement=placement, get=_(PLACEMENTS[placement]) if placement in PLACEMENTS else placement,
                value=info.get('norm') or 'LayerNorm'))
for stack_name in vb.stacks(trace):
    rows = vb.layer_rows(trace, stack_name, placement)
    if not rows:
        continue
    st.markdown("**" + _(STACKS.get(stack_name, stack_name.capitalize())) + "**")
    c1, c2 = st.columns(2)
    with c1:
        chart(residual_figure(rows), key=f"block_resid_{stack_name}",
              name=f"{stack_name}-residual")
    with c2:
        chart(ratio_figure(rows), key=f"block_ratio_{stack_name}", name=f"{stack_name}-ratio")
    tokens = trace.source_tokens if stack_name == "encoder" else trace.target_tokens
    norms = vb.stream_norms(trace, stack_name)
    if norms.shape[1] == len(tokens):
        chart(stream_heatmap(norms, tokens, stack_name),
              key=f"block_stream_{stack_name}", name=f"{stack_name}-stream-norms")
st.caption(_("Bars: the mean per-token L2 norm of what each sublayer adds to the stream "
           "(attention after W_O, feed-forward after W_2; for models with a norm on the "
           "sublayer's output, after that norm). Lines: the stream entering and leaving the "
           "layer. With post-norm the stream is renormalised after every add, so its norm "
           "stays near √d_model × the norm's gain; with pre-norm it grows layer by layer."))
