"""Attention Lab, the application: the Streamlit glue (``attention_lab.ui``) and the
``attention-lab`` command. The library itself is ``viz_core``."""
