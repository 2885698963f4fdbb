"""Home: what the app shows, a short tour, and the selected model's card."""

import streamlit as st

from attention_lab.ui.errors import literal
from attention_lab.ui.model_card import model_card_rows, model_metrics
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
    st.markdown(literal(_(prose)))  # shipped cards' prose is in the catalogue
metrics = model_metrics(info)
for col, (label, value) in zip(st.columns(len(metrics)), metrics, strict=True):
    col.metric(label, value)
st.dataframe(model_card_rows(info, card), hide_index=True, width="stretch",
             column_config={"field": _("Field"), "value": _("Value")})
