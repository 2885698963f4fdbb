"""Home: what the app shows, a short tour, and the selected model's card."""

import streamlit as st

from ui.page import selection

sel = selection()
st.title("Attention Lab")
st.markdown(
    "See inside a Transformer: run a model on your own text and look at what every "
    "attention head does — from one capture taken inside the model.")
st.markdown("""
**30-second tour**
1. Pick a model in the sidebar (the default translates English to French) and type a sentence.
2. **Attention**: pick a block (encoder self, decoder self, cross) a layer and a head to see
   which words each word looks at. Rows are queries (top to bottom), columns are keys.
3. Copy the address bar to share exactly what you see.
""")
st.subheader(f"Model: {sel.model_name}")
card = dict(getattr(sel.model, "card", {}) or {})
if card.get("description"):
    st.write(card["description"])
st.json({"info": sel.model.info(), **{k: v for k, v in card.items() if k != "description"}},
        expanded=False)
