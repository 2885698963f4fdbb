"""Attention Lab: `streamlit run app.py` (or `make run`)."""

from pathlib import Path

import streamlit as st

from attention_lab.server import install as rerun_fresh_sessions
from attention_lab.ui.address import PAGE_NOW, send_url
from attention_lab.ui.lang import apply_language
from attention_lab.ui.navigation import page_links, st_pages
from attention_lab.ui.runs import cap_torch_threads
from attention_lab.ui.sidebar import link_queries, sidebar
from attention_lab.ui.state import follow_history, keep_widget_values
from viz_core.capture.memory import reuse_freed_memory

reuse_freed_memory()  # traces reuse freed memory instead of page-faulting fresh pages
cap_torch_threads()  # ATTENTION_LAB_TORCH_THREADS per model run (ui.runs: runs x threads fit)
rerun_fresh_sessions()  # also under a plain `streamlit run app.py` (attention_lab/server.py)

st.set_page_config(page_title="Attention Lab",
                   page_icon=str(Path(__file__).parent / "assets" / "icon.png"), layout="wide")

apply_language()  # this run's language (ui/lang.py): before any text, page titles too
PAGES = st_pages()  # attention_lab/ui/navigation.py: one line per page, also the Home tour

follow_history()  # Back or Forward: the address it returned to wins over the session's values
page = st.navigation(PAGES, position="hidden")  # drawn by page_links, in the reader's language
links = st.sidebar.empty()  # the page list, with the settings each link carries (ui/sidebar.py)
carried = link_queries(PAGES)
page_links(PAGES, page, carried, links.container())
try:
    st.session_state["_selection"] = sidebar()
    if (known := link_queries(PAGES)) != carried:  # a session's first run: its settings now
        page_links(PAGES, page, known, links.container())
        carried = known
    st.session_state[PAGE_NOW] = page.url_path  # the page whose keys this run's writes are
    page.run()
finally:  # also when a page stops early: remember this session's choices
    keep_widget_values()
    send_url()  # the run's address changes, as one message (one history entry)
# this run changed a page's own settings (a fragment's run, e.g. a head switch, leaves the
# links as they are until the next full run: a revisit still shows the session's choice)
if (final := link_queries(PAGES)) != carried:
    page_links(PAGES, page, final, links.container())
