"""Attention Lab: `streamlit run app.py` (or `make run`)."""

import streamlit as st

from ui.sidebar import sidebar

st.set_page_config(page_title="Attention Lab", page_icon=":material/visibility:", layout="wide")

PAGES = [
    st.Page("pages/home.py", title="Home", icon=":material/home:", default=True, url_path="home"),
    st.Page("pages/attention.py", title="Attention", icon=":material/grid_on:", url_path="attention"),
]

page = st.navigation(PAGES)
st.session_state["_selection"] = sidebar()
page.run()
