"""Pretraining objectives: each scheme as its attention masks and its inputs/targets."""

import streamlit as st

from attention_lab.ui import state
from attention_lab.ui.charts import chart
from attention_lab.ui.controls import url_number, url_select
from attention_lab.ui.errors import literal, translated
from attention_lab.ui.page import selection, show_trace_messages
from viz_core.errors import InputError
from viz_core.figures.pretraining import objective_figure, objective_rows
from viz_core.i18n import N_, _
from viz_core.lessons import pretraining as pt
from viz_core.lessons.order import parse_order

SCHEMES = [N_("BERT masked LM"), N_("RoBERTa dynamic masking"), N_("Whole-word masking"),
           N_("ERNIE entity/phrase masking"), "GPT", "UniLM", "XLNet", "MASS",
           N_("T5 span corruption"), N_("BART noising")]

COLUMNS = [N_("position"), N_("original"), N_("input"), N_("target"), N_("sequence"),
           N_("tokens"), N_("length")]  # objective_rows' columns

sel = selection()
st.title(_("Pretraining objectives"))
st.info(_("Each pretrained model is mostly its **attention mask** plus a way of corrupting "
        "the input. Masks: **True = blocked** (dark red ✕): the query row may NOT attend to "
        "that key column. Everything is drawn with a fixed seed: change it to re-draw."))

if getattr(sel.model, "family", "native") == "native":
    tokens, total = pt.lesson_tokens(sel.text)  # our vocabularies would show many <unk>
    if not tokens:
        st.warning(_("Type some text in the sidebar (words or punctuation)."))
        state.stop()
else:
    trace = sel.trace()
    show_trace_messages(trace)
    tokens, total = pt.lesson_tokens(sel.text, trace.source_tokens)
    if not tokens:
        st.warning(_("The text has no tokens besides the model's special tokens."))
        state.stop()
if total > len(tokens):
    st.caption(_("The text has {total} tokens; the lessons use the first {n_tokens}.").format(
                   total=total, n_tokens=len(tokens)))

c1, c2 = st.columns([3, 1])
scheme = url_select(_("Objective"), "pt_scheme", SCHEMES, container=c1, format_func=_)
seed = url_number(_("Seed"), "pt_seed", 0, 0, 9999, container=c2,
                  help=_("The random draw (positions, spans, orders) comes from this seed."))
n = len(tokens)
vocab = sorted(set(tokens))

if scheme == "BERT masked LM":
    objectives = [pt.bert_mlm(tokens, seed, vocab=vocab)]
elif scheme == "RoBERTa dynamic masking":
    st.caption(_("Static masking (original BERT) draws the corruption once and reuses it every "
               "epoch; RoBERTa draws it afresh each time the sentence is seen."))
    objectives = pt.roberta_dynamic(tokens, epochs=3, seed=seed, vocab=vocab)
elif scheme == "Whole-word masking":
    spans = pt.spans_from_ids(pt.word_ids(tokens))
    objectives = [pt.span_mlm(tokens, spans, seed, vocab=vocab)]
elif scheme == "ERNIE entity/phrase masking":
    st.caption(_("Entities here are runs of capitalised words and phrases are pairs of other "
               "words (a simple rule; ERNIE uses a tagger and a chunker)."))
    objectives = [pt.span_mlm(tokens, pt.phrase_spans(tokens), seed, vocab=vocab,
                              name=N_("ERNIE entity/phrase masking"),
                              teaches=N_("Hide whole entities and phrases so the model must "
                                         "know them, not spell them out from their parts."))]
elif scheme == "GPT":
    objectives = [pt.gpt(tokens)]
elif scheme == "UniLM":
    source, target = pt.split_source_target(tokens)
    st.caption(_("The seq2seq mask uses the first sentence as the source and the rest as the "
               "target (one sentence: its two halves)."))
    objectives = [pt.unilm(source, target)]
elif scheme == "XLNet":
    default = " ".join(str(i) for i in pt.random_order(n, seed))
    shown = state.widget_default("pt_order", state.url_text("pt_order", default), typed=True)
    state.clean_state("pt_order", "order")
    raw = st.text_input(_("Factorisation order (a permutation of 0–{value})").format(value=n - 1), shown,
                        key="pt_order",
                        help=_("Positions in the order they are predicted, e.g. 3 1 2 0."))
    try:
        order = parse_order(raw, n)
    except InputError as err:
        st.warning(_("Order not used: {err} Showing the seed's order {default}.").format(
                       err=literal(translated(err)), default=literal(default)))
        order = pt.random_order(n, seed)
    state.to_url(pt_order=raw)
    objectives = [pt.xlnet(tokens, order)]
elif scheme == "MASS":
    k = url_number(_("Span length k"), "pt_k", max(1, n // 2), 1, n,
                   help=_("k = 1 is BERT-like (one token, bidirectional context); k = n is "
                        "GPT-like (the encoder sees nothing, the decoder is a language model)."))
    objectives = [pt.mass(tokens, k, seed=seed)]
elif scheme == "T5 span corruption":
    objectives = [pt.t5_span_corruption(tokens, seed)]
else:
    objectives = pt.bart_all(tokens, seed)
state.show_notices()

for i, obj in enumerate(objectives):
    st.subheader(_(obj.name))
    st.caption(_(obj.teaches))
    st.dataframe(objective_rows(obj, tokens), hide_index=True, width="stretch",
                 column_config={c: _(c) for c in COLUMNS})
    chart(objective_figure(obj), key=f"pt_fig_{i}", name=f"pretraining-{scheme}-{i}")
