"""Charts and downloads with the same options on every page."""

from __future__ import annotations

import re

import streamlit as st

IMAGE_FORMATS = ["png", "svg"]  # what the camera button of every chart saves; first: default


def image_format() -> str:
    return st.session_state.get("image_format", IMAGE_FORMATS[0])


def chart(fig, key: str, on_select: str = "ignore", name: str | None = None):
    """st.plotly_chart whose toolbar camera saves PNG or SVG (the sidebar's choice)."""
    filename = re.sub(r"[^A-Za-z0-9_.-]+", "_", name or key)[:80]
    config = {"displaylogo": False, "toImageButtonOptions": {
        "format": image_format(), "filename": filename, "scale": 2}}
    kwargs = {"selection_mode": ("points",)} if on_select != "ignore" else {}
    return st.plotly_chart(fig, key=key, on_select=on_select, config=config, **kwargs)


def download(label: str, data, file_name: str, mime: str, key: str) -> None:
    """A download button; `data` may be a callable so big files are built only on click."""
    st.download_button(label, data, file_name=file_name, mime=mime, key=key,
                       on_click="ignore", icon=":material/download:")


def download_csv(label: str, frame, file_name: str, key: str) -> None:
    """A DataFrame as a CSV download (built on click)."""
    download(label, lambda: frame.to_csv(index=False), file_name, "text/csv", key)
