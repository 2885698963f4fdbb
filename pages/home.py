"""Home: what the app shows, a short tour, and the selected model's card."""

import streamlit as st

from attention_lab.ui.errors import literal, translated
from attention_lab.ui.model_card import card_sections, cut, model_card_rows, model_metrics
from attention_lab.ui.navigation import tour_markdown
from attention_lab.ui.page import selection
from viz_core.i18n import _

sel = selection()
st.title(_("Attention Lab"))
st.markdown(
    _("See inside a Transformer: run a model on your own text and look at what every "
    "attention head does — from one capture taken inside the model."))
st.markdown(tour_markdown())  # one line per page of the navigation
st.subheader(_("Model: {model_name}").format(model_name=literal(sel.model_name)))
info = sel.model.info()
card = dict(getattr(sel.model, "card", {}) or {})
if card.get("description"):
    prose = card["description"]
    st.markdown(literal(cut(translated(prose), 5_000)))  # shipped cards' prose: in the catalogue
metrics = model_metrics(info)
for col, (label, value) in zip(st.columns(len(metrics)), metrics, strict=True):
    col.metric(label, value)
sections = card_sections(card)  # metrics, training...: each a list of its own below
shown = {title for title, _text in sections}
rows = [r for r in model_card_rows(info, card) if r["field"] not in shown]
st.dataframe(rows, hide_index=True, width="stretch", height=35 * (len(rows) + 1) + 3,
             column_config={"field": _("Field"), "value": _("Value")})  # every row in view
for title, text in sections:
    with st.expander(title, expanded=title == _("Metrics")):
        st.markdown(text)
