"""The tabs of "Which heads matter" (pages/heads_matter.py), one module a tab.

A tab is a function decorated with ``@st.fragment``: a change to one of its own widgets
reruns that tab alone, not the page around it (the trace of the text, the "What to explain"
pickers) nor the other tabs. It takes the sidebar's selection (``sel``) and, where it
explains one prediction, the page's ``Explained`` choice (``explain.py``). Its settings live
in the URL (``attention_lab.ui.controls.url_select`` / ``url_number``) and its model calls go
through ``attention_lab.ui.runs.run_analysis``.

Adding a tab: its module here, and one line in the page's tab list.
"""
