"""Masks: padding, causal and their union, and what they do to the scores."""

import streamlit as st

from attention_lab.ui import state
from attention_lab.ui.charts import chart, download
from attention_lab.ui.controls import url_number, url_select
from attention_lab.ui.page import selection, show_trace_messages
from attention_lab.ui.runs import BatchRequest, get_batch
from viz_core import npz_bytes
from viz_core.figures.masks import (
    batch_masks_figure,
    layer_masks_figure,
    mask_parts_figure,
    masking_steps_figure,
    span_label,
)
from viz_core.i18n import _

PER_LAYER_TOKENS = 256  # the per-layer masks show at most this many tokens

sel = selection()
st.title(_("Masks"))
st.info(_("A mask entry **True** means *this query may NOT attend to this key*. Padding masks "
        "block the PAD **columns** (keys) for every row; the causal mask blocks keys after "
        "the query; a decoder's self-attention uses their union. Blocked scores become −∞ "
        "before the softmax, so their weights are exactly 0."))

st.caption(_("The batch: one sentence per line (up to 6). The sidebar's text is the first."))
default_batch = "\n".join([sel.text.strip(), *[e for e in sel.model.examples()
                                                if e.strip() != sel.text.strip()][:2]])
batch_default = state.widget_default("mask_batch", state.url_text("mask_batch", default_batch),
                                     typed=True)
batch_text = st.text_area(_("Batch"), batch_default, key="mask_batch", height=110,
                          max_chars=state.MAX_TEXT_CHARS)
state.to_url(mask_batch=batch_text, defaults={"mask_batch": default_batch})
sentences = [line.strip() for line in batch_text.splitlines() if line.strip()][:6]
if not sentences:
    st.warning(_("Type at least one sentence."))
    state.stop()
traces = get_batch(BatchRequest.of(sel, sentences))
for t in traces:
    show_trace_messages(t)

kind = "decoder.self" if "decoder.self" in traces[0].kinds() else traces[0].kinds()[0]
# Each block's own mask is the truth: its padding is the key columns blocked for every
# query, whatever the model calls its pad token ("<pad>", "[PAD]", "<|endoftext|>").
firsts = [t.layers(kind)[0] for t in traces]
chart(batch_masks_figure([b.mask for b in firsts], [b.query_tokens for b in firsts],
                         [b.key_tokens for b in firsts],
                         title=_("{kind} masks of the padded batch").format(kind=kind)),
      key="mask_batch_fig", name="padding-batch")

choice = url_select(_("Sentence"), "mask_sentence", range(len(sentences)),
                    format_func=lambda i: sentences[i][:60])
trace = traces[choice]
block_names = [b.name for k in trace.kinds() for b in trace.layers(k)]
default_block = trace.layers(kind)[0].name
name = url_select(_("Block"), "mask_block", block_names, default_block)
block = trace[name]
chart(mask_parts_figure(block.mask, block.query_tokens, block.key_tokens,
                        causal=block.kind == "decoder.self", window=block.window_size),
      key="mask_union", name="mask-union")
st.caption(f"{name}: {span_label(block.window_size)}")
head = url_number(_("Head"), "mask_head", 0, 0, block.n_heads - 1)
state.show_notices()
if block.scores is None:
    st.info(_("This model family does not expose pre-softmax scores; only the masks are shown."))
else:
    chart(masking_steps_figure(block.scores[head], block.mask, block.query_tokens,
                               block.key_tokens, title=_("{name} · head {head}").format(
                                                           name=name, head=head)),
          key="mask_steps", name=f"masking-{name}-h{head}")
if "decoder.self" in trace.kinds():
    st.subheader(_("This model's masks per layer"))
    layers = trace.layers("decoder.self")
    st.caption(_("Each layer's own mask, as the model used it for this sentence. A local layer "
               "(sliding window of N) lets a query see only itself and the N − 1 keys before "
               "it; a global layer sees every earlier key. Layers with equal masks share a "
               "panel."))
    st.dataframe([{_("layer"): b.layer, _("attention"): span_label(b.window_size)} for b in layers],
                 hide_index=True, height=min(400, 36 + 35 * len(layers)))
    if max(layers[0].shape[1:]) > PER_LAYER_TOKENS:
        st.info(_("Long input: the masks below show the first {PER_LAYER_TOKENS} tokens.").format(
                    PER_LAYER_TOKENS=PER_LAYER_TOKENS))
    chart(layer_masks_figure(layers, layers[0].query_tokens, layers[0].key_tokens,
                             max_tokens=PER_LAYER_TOKENS),
          key="mask_layers", name="masks-per-layer")

download(_("Masks and scores (NPZ)"), lambda: npz_bytes(
    {f"sentence{i}/{n}/mask": t[n].mask for i, t in enumerate(traces) for n in t.blocks}),
    "masks.npz", "application/octet-stream", "dl_masks")
