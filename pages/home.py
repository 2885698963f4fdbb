"""Home: what the app shows, a short tour, and the selected model's card."""

import streamlit as st

from attention_lab.ui.errors import literal
from attention_lab.ui.model_card import model_card_rows, model_metrics
from attention_lab.ui.page import selection

sel = selection()
st.title("Attention Lab")
st.markdown(
    "See inside a Transformer: run a model on your own text and look at what every "
    "attention head does — from one capture taken inside the model.")
st.markdown("""
**30-second tour**
1. Pick a model in the sidebar (the default translates English to French) and type a sentence.
2. **Attention** — pick a block (encoder self, decoder self, cross), a layer and a head: rows
   are queries (top to bottom), columns are keys. Click a cell of the layer × head grid to open
   that head; compare heads in the head view; see mean/max over heads and the rollout.
3. **Inside a head** — follow one query token from q and k through QKᵀ/√d_k, the mask and
   the softmax to the weighted sum of values.
4. **Positional encoding** — the model's own encoding, and the sinusoids for any size.
5. **Masks** — padding and causal masks on a batch of your sentences, and what they do to
   the scores.
6. **Beam search** — the whole search tree; click a node to see what the model looked at.
7. **Head analysis** — statistics per head, head similarity, and switching heads off.
8. **Compare** — two inputs or two models side by side, with their difference.

Every setting lives in the address bar: copy it to share exactly what you see.
""")
st.subheader(f"Model: {literal(sel.model_name)}")
info = sel.model.info()
card = dict(getattr(sel.model, "card", {}) or {})
if card.get("description"):
    st.markdown(literal(card["description"]))  # a user-pointed card.json
metrics = model_metrics(info)
for col, (label, value) in zip(st.columns(len(metrics)), metrics, strict=True):
    col.metric(label, value)
st.dataframe(model_card_rows(info, card), hide_index=True, width="stretch",
             column_config={"field": "Field", "value": "Value"})
