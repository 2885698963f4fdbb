"""Streamlit glue shared by the pages: sidebar, URL state, cached model runs.

viz_core never imports streamlit; everything Streamlit-specific lives here or in pages/.
"""
