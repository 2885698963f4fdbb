"""Widgets shared by several pages, each synced with the URL."""

from __future__ import annotations

import streamlit as st

from . import state

# A block kind is "<stack>.<attention>": which stack a block is in and what it attends to.
BLOCK_KIND_LABELS = {"encoder.self": "Encoder self-attention",
                     "decoder.self": "Decoder self-attention (masked)",
                     "decoder.cross": "Cross-attention (decoder → encoder)"}


KIND_LABELS = BLOCK_KIND_LABELS  # the old name, still imported by pages/atlas.py


def block_kind_label(block_kind: str) -> str:
    return BLOCK_KIND_LABELS.get(block_kind, block_kind)


def pick_head(trace, columns=None, block_kinds: list[str] | None = None):
    """Block kind, layer and head pickers; returns (block kind, layer, head, BlockTrace).

    The block kind lives in session state and the URL as "kind" (kept for old addresses)."""
    block_kinds = block_kinds or trace.kinds()
    state.widget_default("kind", state.url_choice("kind", block_kinds, block_kinds[0]))
    if st.session_state.kind not in block_kinds:
        st.session_state.kind = block_kinds[0]
    c1, c2, c3 = columns or st.columns([2, 1, 1])
    c1.selectbox("Block", block_kinds, key="kind", format_func=block_kind_label)
    layers = trace.layers(st.session_state.kind)
    n_layers, n_heads = len(layers), layers[0].n_heads
    state.widget_default("layer", state.url_int("layer", 0, 0, n_layers - 1))
    state.widget_default("head", state.url_int("head", 0, 0, n_heads - 1))
    st.session_state.layer = max(0, min(int(st.session_state.layer), n_layers - 1))
    st.session_state.head = max(0, min(int(st.session_state.head), n_heads - 1))
    c2.number_input(f"Layer (0–{n_layers - 1})", 0, n_layers - 1, key="layer", step=1)
    c3.number_input(f"Head (0–{n_heads - 1})", 0, n_heads - 1, key="head", step=1)
    state.to_url(kind=st.session_state.kind, layer=st.session_state.layer,
                 head=st.session_state.head)
    layer, head = int(st.session_state.layer), int(st.session_state.head)
    return st.session_state.kind, layer, head, layers[layer]


def open_head(block_kind: str, layer: int, head: int) -> None:
    """Callback-safe: point the head pickers at another head."""
    st.session_state.kind = block_kind
    st.session_state.layer = int(layer)
    st.session_state.head = int(head)


def bounded_int(label: str, key: str, default: int, lo: int, hi: int, help: str | None = None,
                container=st) -> int:
    state.widget_default(key, state.url_int(key, default, lo, hi))
    # the range may have shrunk since the value was chosen (another block, model or input)
    st.session_state[key] = max(lo, min(hi, int(st.session_state[key])))
    container.number_input(f"{label} ({lo}–{hi})", lo, hi, key=key, step=1, help=help)
    state.to_url(**{key: st.session_state[key]})
    return int(st.session_state[key])


def bounded_float(label: str, key: str, default: float, lo: float, hi: float, step: float,
                  help: str | None = None, container=st) -> float:
    raw = st.query_params.get(key)
    value = default
    if raw is not None:
        try:
            value = float(raw)
        except ValueError:
            state.notice(f"'{key}={state.as_typed(raw)}' in the address is not a number; "
                         f"using {default}.")
        if not lo <= value <= hi:
            state.notice(f"'{key}={value}' is out of range ({lo}–{hi}); clamped.")
            value = max(lo, min(hi, value))
    state.widget_default(key, value)
    container.number_input(f"{label} ({lo}–{hi})", lo, hi, key=key, step=step, help=help)
    state.to_url(**{key: st.session_state[key]})
    return float(st.session_state[key])
