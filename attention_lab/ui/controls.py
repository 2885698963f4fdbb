"""Widgets shared by several pages, each synced with the URL."""

from __future__ import annotations

import streamlit as st

from viz_core.i18n import N_, _, bound

from . import state
from .errors import literal

# A block kind is "<stack>.<attention>": which stack a block is in and what it attends to.
BLOCK_KIND_LABELS = {"encoder.self": N_("Encoder self-attention"),
                     "decoder.self": N_("Decoder self-attention (masked)"),
                     "decoder.cross": N_("Cross-attention (decoder → encoder)")}


def block_kind_label(block_kind: str) -> str:
    return _(BLOCK_KIND_LABELS[block_kind]) if block_kind in BLOCK_KIND_LABELS else block_kind


def pick_head(trace, columns=None, block_kinds: list[str] | None = None):
    """Block kind, layer and head pickers; returns (block kind, layer, head, BlockTrace).

    The block kind lives in session state and the URL as "kind" (kept for old addresses)."""
    block_kinds = block_kinds or trace.kinds()
    c1, c2, c3 = columns or st.columns([2, 1, 1])
    kind = url_select(_("Block"), "kind", block_kinds, container=c1, format_func=block_kind_label)
    layers = trace.layers(kind)
    layer = url_number(_("Layer"), "layer", 0, 0, len(layers) - 1, container=c2)
    head = url_number(_("Head"), "head", 0, 0, layers[0].n_heads - 1, container=c3)
    return kind, layer, head, layers[layer]


def open_head(block_kind: str, layer: int, head: int) -> None:
    """Callback-safe: point the head pickers at another head."""
    st.session_state.kind = block_kind
    st.session_state.layer = int(layer)
    st.session_state.head = int(head)


def url_select(label: str, key: str, options, default=None, *, url_key: str | None = None,
               widget: str = "selectbox", container=st, keep_default: bool = False,
               **widget_args):
    """A choice kept in the URL, in one call: the default from the address (a notice when the
    address holds something else), the session's value kept to `options` (they may have
    changed since it was chosen: another block, model or input), the widget, and the choice
    written back to the address. -> the chosen option.

    `options`: strings, or integers (positions, head numbers): an integer out of range goes
    to the nearest option ("pos=99" shows the last position). `default`: the first option
    when None. `url_key`: the address's name when it is not the session key. `widget`:
    "selectbox" or "radio"; `widget_args` go to it (format_func, help, horizontal...).
    The default leaves the address (state.to_url) unless `keep_default`."""
    options = list(options)
    url_key = url_key or key
    default = options[0] if default is None else default
    numbers = all(isinstance(o, int) and not isinstance(o, bool) for o in options)
    if numbers:
        chosen = state.url_int(url_key, default, min(options), max(options))
    else:
        chosen = state.url_choice(url_key, options, default)
    value = state.widget_default(key, _nearest(chosen, options, numbers, default))
    kept = _nearest(value, options, numbers, default)
    if kept != value:
        st.session_state[key] = kept
    if widget_args.get("format_func"):  # labels in this run's language, whoever formats them
        widget_args["format_func"] = bound(widget_args["format_func"])
    getattr(container, widget)(label, options, key=key, **widget_args)
    state.to_url(**{url_key: st.session_state[key]},
                 defaults=None if keep_default else {url_key: default})
    return st.session_state[key]


def _nearest(value, options: list, numbers: bool, default):
    """The option equal to `value`; for integer options the nearest one; else `default`."""
    if value in options:
        return value
    if numbers and isinstance(value, int | float) and not isinstance(value, bool):
        return min(options, key=lambda o: (abs(o - value), o))
    return default


def url_number(label: str, key: str, default: int | float, lo: int | float, hi: int | float, *,
               step: int | float = 1, url_key: str | None = None, help: str | None = None,
               container=st) -> int | float:
    """A number kept in the URL, in one call: the default from the address (clamped to
    [lo, hi] with a notice), the session's value clamped to today's range, the number input
    (labelled "label (lo–hi)"), and the value written back. Floats when any of default, lo,
    hi or step is a float, integers otherwise."""
    url_key = url_key or key
    kind = float if any(isinstance(x, float) for x in (default, lo, hi, step)) else int
    read = state.url_float if kind is float else state.url_int
    state.widget_default(key, read(url_key, default, lo, hi))
    # the range may have shrunk since the value was chosen (another block, model or input)
    st.session_state[key] = kind(max(lo, min(hi, kind(st.session_state[key]))))
    container.number_input(f"{label} ({lo}–{hi})", kind(lo), kind(hi), key=key, step=kind(step),
                           help=help)
    state.to_url(**{url_key: kind(st.session_state[key])}, defaults={url_key: kind(default)})
    return kind(st.session_state[key])


def bounded_int(label: str, key: str, default: int, lo: int, hi: int, help: str | None = None,
                container=st) -> int:
    """The old name of url_number for integers (pages/attention.py still calls it)."""
    return url_number(label, key, default, lo, hi, help=help, container=container)


def url_text_box(label: str, key: str, help: str, *, limit: int = 200, area: bool = False,
                 default: str = "", strip: bool = False, container=st) -> str:
    """A text box kept in the URL, in one call: the default from the address, hostile values
    cleaned (shown as typed), the text cut to `limit` characters with a notice, the widget,
    and the text written back. `strip`: the value (returned and in the URL) without the
    spaces round it."""
    value = state.widget_default(key, state.url_text(key, default), typed=True)
    state.clean_state(key, label.lower())
    if len(st.session_state[key]) > limit:
        state.notice(_("The {what} was {n:,} characters; it was cut to {limit:,}.").format(
            what=label.lower(), n=len(st.session_state[key]), limit=limit))
        st.session_state[key] = st.session_state[key][:limit]
    widget = container.text_area if area else container.text_input
    widget(label, st.session_state.get(key, value), key=key, max_chars=limit, help=help)
    text = st.session_state[key].strip() if strip else st.session_state[key]
    state.to_url(**{key: text}, defaults={key: default.strip() if strip else default})
    return text


def lazy_tabs(tabs: dict, key: str = "tab") -> None:
    """Tabs kept in the URL of which only the open one runs. `tabs`: {URL value: (label,
    view)}, the first the default; `view()` draws the tab (st.tabs(on_change="rerun") and
    tab.open: a closed tab costs nothing)."""
    labels = {name: label for name, (label, _) in tabs.items()}
    first = next(iter(tabs))
    state.widget_default(key, labels[state.url_choice(key, list(tabs), first)])
    if st.session_state[key] not in labels.values():
        st.session_state[key] = labels[first]
    shown = st.tabs(list(labels.values()), key=key, on_change="rerun")
    state.to_url(**{key: next(n for n, label in labels.items() if label == st.session_state[key])},
                 defaults={key: first})
    for (_label, view), tab in zip(tabs.values(), shown):
        with tab:
            if tab.open:
                view()


def file_box(label: str, types: list[str], key: str):
    """st.file_uploader whose own words read in the session's language. Streamlit draws its
    button ("Upload") and its limit ("200MB per file") in English only; a style rule scoped to
    this box (its .st-key-<key> container) hides them and shows ours in their place, with the
    types it reads. Its refusal of another type is English too and names a MIME type
    ("application/vnd.ms-excel files are not allowed."), so the box takes any file, and a
    name without one of `types`' suffixes gets a message of ours, in the reader's language,
    naming the file. -> the uploaded file of an accepted type, or None."""
    names = ", ".join(t.upper() for t in types)
    limit = _("Up to {mb} MB per file • {types}").format(
        mb=st.get_option("server.maxUploadSize"), types=names)
    st.html(uploader_style(key, _("Upload"), limit))  # first: no flash of Streamlit's words
    upload = st.file_uploader(label, key=key)
    if upload is not None and upload.name.rsplit(".", 1)[-1].lower() not in types:
        st.error(_("{name} is not one of the files this box reads ({types}). Choose a file "
                   "whose name ends in one of them.").format(name=literal(upload.name),
                                                            types=names))
        return None
    return upload


def css_string(text: str) -> str:
    """`text` as a CSS string literal: quotes, backslashes, angle brackets (it sits in a
    <style> element) and line ends escaped."""
    escaped = "".join(c if c.isprintable() and c not in '"\\<>' else f"\\{ord(c):x} " for c in text)
    return f'"{escaped}"'


def uploader_style(key: str, button: str, limit: str) -> str:
    """The style rule of file_box: the box's button text and limit line replaced by these."""
    box = f".st-key-{key} [data-testid='stFileUploaderDropzone']"
    hide = "font-size: 0; line-height: 0"
    show = "font-size: 0.875rem; line-height: 1.6"
    return (f"<style>{box} button [data-testid='stMarkdownContainer'] p {{{hide}}}"
            f"{box} button [data-testid='stMarkdownContainer'] p::after "
            f"{{content: {css_string(button)}; {show}}}"
            f"{box} [data-testid='stFileUploaderDropzoneInstructions'] span {{{hide}}}"
            f"{box} [data-testid='stFileUploaderDropzoneInstructions'] span::after "
            f"{{content: {css_string(limit)}; {show}}}</style>")
