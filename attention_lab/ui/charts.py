"""Charts and downloads with the same options on every page."""

from __future__ import annotations

import re

import streamlit as st

from viz_core import i18n
from viz_core.i18n import N_, _

IMAGE_FORMATS = ["png", "svg"]  # what the camera button of every chart saves; first: default
# Plotly's own words on a 2-D chart (its toolbar's tooltips, its notices), which it draws in
# English unless the chart's config gives a locale with a dictionary: these are its keys
# (plotly.js's modebar buttons and notifier, as bundled with Streamlit).
PLOTLY_WORDS = (
    N_("Download plot as a PNG"), N_("Download plot"), N_("Zoom"), N_("Pan"),
    N_("Box Select"), N_("Lasso Select"), N_("Zoom in"), N_("Zoom out"), N_("Autoscale"),
    N_("Reset axes"), N_("Toggle Spike Lines"), N_("Show closest data on hover"),
    N_("Compare data on hover"), N_("Double-click to zoom back out"),
    N_("Double-click on legend to isolate one trace"),
    N_("Preparing image - this may take a few seconds"), N_("Image download succeeded"),
    N_("Sorry, there was a problem downloading your image!"),
)


def plotly_locale() -> dict:
    """The config entries that make a chart's own words speak the session's language (none
    in English, Plotly's own)."""
    lang = i18n.language()
    if lang == i18n.DEFAULT:
        return {}
    return {"locale": lang, "locales": {lang: {"dictionary": {w: _(w) for w in PLOTLY_WORDS}}}}


def image_format() -> str:
    return st.session_state.get("image_format", IMAGE_FORMATS[0])


def chart(fig, key: str, on_select: str = "ignore", name: str | None = None):
    """st.plotly_chart whose toolbar camera saves PNG or SVG (the sidebar's choice)."""
    filename = re.sub(r"[^A-Za-z0-9_.-]+", "_", name or key)[:80]
    config = {"displaylogo": False, "toImageButtonOptions": {
        "format": image_format(), "filename": filename, "scale": 2}, **plotly_locale()}
    kwargs = {"selection_mode": ("points",)} if on_select != "ignore" else {}
    return st.plotly_chart(fig, key=key, on_select=on_select, config=config, **kwargs)


def download(label: str, data, file_name: str, mime: str, key: str) -> None:
    """A download button; `data` may be a callable so big files are built only on click."""
    st.download_button(label, data, file_name=file_name, mime=mime, key=key,
                       on_click="ignore", icon=":material/download:")


def download_csv(label: str, frame, file_name: str, key: str) -> None:
    """A DataFrame as a CSV download (built on click)."""
    download(label, lambda: frame.to_csv(index=False), file_name, "text/csv", key)


# A table's column names are data (code reads them back: row clicks, tests, CSV downloads);
# their headers on the page are shown through the catalogue (column_config labels).
COLUMN_LABELS = {
    "block": N_("block"), "layer": N_("layer"), "head": N_("head"), "kind": N_("kind"),
    "score": N_("score"), "query": N_("query"), "key": N_("key"), "entropy": N_("entropy"),
    "diagonal": N_("diagonal"), "distance": N_("distance"), "previous": N_("previous"),
    "sink": N_("sink"), "special": N_("special"), "groups": N_("groups"),
    "within": N_("within"), "across": N_("across"), "weight": N_("weight"),
    "edge_weight": N_("edge weight"), "source_layer": N_("source layer"),
    "source_point": N_("source point"), "source_position": N_("source position"),
    "target_layer": N_("target layer"), "target_point": N_("target point"),
    "target_position": N_("target position"), "sender": N_("sender"),
    "receiver": N_("receiver"), "input": N_("input"), "rank": N_("rank"), "text": N_("text"),
    "effect": N_("effect"), "clean": N_("clean"), "corrupted": N_("corrupted"),
    "metric": N_("metric"), "peak": N_("peak"), "token": N_("token"),
    "position": N_("position"), "segment": N_("segment"), "position row": N_("position row"),
    "‖token‖": N_("‖token‖"), "‖segment‖": N_("‖segment‖"), "‖position‖": N_("‖position‖"),
    "‖sum‖": N_("‖sum‖"), "token log-probs": N_("token log-probs"),
    "student_layer": N_("student layer"), "teacher_layer": N_("teacher layer"),
    "attention_kl": N_("attention KL (head mean)"), "score_mse": N_("score MSE"),
    "value_relation_kl": N_("value-relation KL"), "hidden_mse": N_("hidden-state MSE"),
    "attention_kl_heads": N_("attention KL (per head)"),
}


def table(data, container=None, **kwargs):
    """st.dataframe (or ``container.dataframe``) with its known column headers in the
    session's language; a caller's own column_config wins."""
    columns = getattr(data, "columns", None)
    if columns is None and isinstance(data, list) and data and isinstance(data[0], dict):
        columns = list(data[0])
    config = {c: _(COLUMN_LABELS[c]) for c in (columns if columns is not None else [])
              if c in COLUMN_LABELS}
    config.update(kwargs.pop("column_config", None) or {})
    return (container or st).dataframe(data, column_config=config, **kwargs)
