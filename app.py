"""Attention Lab: `streamlit run app.py` (or `make run`)."""

from pathlib import Path

import streamlit as st

from attention_lab.ui.sidebar import sidebar
from attention_lab.ui.state import keep_widget_values
from viz_core.capture.memory import reuse_freed_memory

reuse_freed_memory()  # traces reuse freed memory instead of page-faulting fresh pages

st.set_page_config(page_title="Attention Lab", page_icon=str(Path(__file__).parent / "assets" / "icon.png"), layout="wide")

PAGES = [
    st.Page("pages/home.py", title="Home", icon=":material/home:", default=True),
    st.Page("pages/attention.py", title="Attention", icon=":material/grid_on:", url_path="attention"),
    st.Page("pages/inside.py", title="Inside a head", icon=":material/calculate:",
            url_path="inside"),
    st.Page("pages/block.py", title="The whole block", icon=":material/stacks:",
            url_path="block"),
    st.Page("pages/positional.py", title="Positional encoding", icon=":material/waves:",
            url_path="positional"),
    st.Page("pages/masks.py", title="Masks", icon=":material/visibility_off:", url_path="masks"),
    st.Page("pages/pretraining.py", title="Pretraining objectives", icon=":material/school:", url_path="pretraining"),
    st.Page("pages/pairs.py", title="Sentence pairs", icon=":material/join:", url_path="pairs"),
    st.Page("pages/relative.py", title="Relative positions", icon=":material/straighten:", url_path="relative"),
    st.Page("pages/beam.py", title="Beam search", icon=":material/account_tree:",
            url_path="beam"),
    st.Page("pages/heads.py", title="Head analysis", icon=":material/analytics:",
            url_path="heads"),
    st.Page("pages/compare.py", title="Compare", icon=":material/compare:", url_path="compare"),
    st.Page("pages/atlas.py", title="Head atlas", icon=":material/map:", url_path="atlas"),
]

page = st.navigation(PAGES)
try:
    st.session_state["_selection"] = sidebar()
    page.run()
finally:  # also when a page stops early: remember this session's choices
    keep_widget_values()
