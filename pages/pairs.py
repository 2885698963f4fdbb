"""Sentence pairs and BERT's input: [CLS]/[SEP], segments, and the three embeddings."""

import streamlit as st

from attention_lab.ui import state
from attention_lab.ui.charts import chart, table
from attention_lab.ui.controls import url_number, url_select
from attention_lab.ui.page import selection, show_trace_messages
from attention_lab.ui.pairs import embedding_parts, pair_trace
from viz_core.figures.common import choice_labels
from viz_core.figures.embeddings import (
    embedding_norms_figure,
    embedding_rows_figure,
    segment_heatmap,
)
from viz_core.i18n import N_, _
from viz_core.lessons.embeddings import parts_rows

sel = selection()
st.title(_("Sentence pairs and BERT's input"))
if sel.model.kind != "encoder-only":
    st.info(_("Sentence pairs, segments and BERT's three embeddings apply to encoder-only "
            "models: pick MiniLM (a BERT) or another BERT-family model in the sidebar."))
    state.stop()
st.markdown(_("BERT reads one sequence `[CLS] A [SEP] B [SEP]`. Every token's input is the sum "
            "of three learned rows: its **token** embedding, its **segment** embedding (A or "
            "B) and its **position** embedding; LayerNorm of that sum enters layer 0."))

shown = state.widget_default("pair", state.url_text("pair", ""), typed=True)
state.clean_state("pair", N_("second sentence"))
st.text_input(_("Second sentence (segment B)"), shown, key="pair",
              placeholder=_("optional: e.g. It was very tired."),
              help=_("Leave empty for a single sentence."))
pair = st.session_state.pair.strip() or None
state.to_url(pair=st.session_state.pair)

trace = pair_trace(sel, pair)
show_trace_messages(trace)
parts = embedding_parts(sel, pair)
kind = trace.kinds()[0]
layers = trace.layers(kind)
c1, c2 = st.columns(2)
layer = url_number(_("Layer"), "pair_layer", 0, 0, len(layers) - 1, container=c1)
head = url_number(_("Head"), "pair_head", 0, 0, layers[layer].n_heads - 1, container=c2)
state.show_notices()
block = layers[layer]
segments = parts.segments if len(parts.segments) == len(block.key_tokens) else \
    [0] * len(block.key_tokens)
chart(segment_heatmap(block.pattern[head], block.key_tokens, segments,
                      title=_("{name} · head {head}").format(name=block.name, head=head)), key="pair_heatmap",
      name=f"pair-{block.name}-h{head}")

st.subheader(_("The input embedding, split"))
if not parts.has_segments:
    st.caption(_("This model has no segment table (DistilBERT, RoBERTa with one type): the "
               "segment part is zero."))
table(parts_rows(parts), hide_index=True, width="stretch")
chart(embedding_norms_figure(parts), key="pair_norms", name="embedding-norms")
labels = choice_labels(parts.tokens)
i = url_select(_("Token"), "pair_token", range(len(labels)), format_func=lambda j: labels[j])
chart(embedding_rows_figure(parts, i), key="pair_rows", name="embedding-rows")
