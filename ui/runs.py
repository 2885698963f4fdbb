"""Cached model loads and runs, shared by every session of this server process.

Models: st.cache_resource (one object per process; viz_core models are thread-safe).
Traces and beam trees: st.cache_resource too, bounded by max_entries: they are read-only
numpy data, and handing out the same object avoids pickling tens of MB per rerun, which
st.cache_data would do on every read. Pages must not modify what they get from here.

Capture: a trace keeps only the hook points its options ask for. The Attention page asks for
the patterns (+ scores in its scores view): a Hugging Face model then needs no recomputation
of q/k/v after the run, and a long input keeps ~half the memory (patterns and scores are
[head, N, N] per block; q/k/v/z only [head, N, d_k]). Pages that show internals (Inside a
head) ask for everything, the default.
"""

from __future__ import annotations

import streamlit as st

import viz_core as vc

MODEL_CACHE = 4
TRACE_CACHE = 32
FIGURE_CACHE = 64  # a figure is <= ~1.5 MB of JSON whatever the input length


def _unfreeze(options: tuple) -> dict:
    """Cache keys hold options as sorted tuples; ablate={block: [heads]} travels as pairs."""
    opts = dict(options)
    if opts.get("ablate"):
        opts["ablate"] = {block: list(heads) for block, heads in opts["ablate"]}
    return opts


@st.cache_resource(max_entries=MODEL_CACHE, show_spinner=False)
def get_model(name: str, device: str):
    return vc.load(name, device)


@st.cache_resource(max_entries=TRACE_CACHE, show_spinner=False)
def get_trace(name: str, device: str, text: str, target: str | None, options: tuple = ()):
    model = get_model(name, device)
    return model.trace(text, target or None, **_unfreeze(options))


def has_scores(model) -> bool:
    """Whether this model can show pre-softmax scores (native: always; HF: some families)."""
    return bool(model.info().get("scores", True))


def attention_capture(view: str) -> tuple[str, ...]:
    """Hook points the Attention page draws in this view."""
    return ("pattern", "scores") if view == "scores" else ("pattern",)


def full_trace(sel):
    """The trace with every hook point (for downloads); usable outside a script run."""
    return get_trace(sel.model_name, sel.device, sel.text, sel.target, ())


@st.cache_resource(max_entries=FIGURE_CACHE, show_spinner=False)
def _figure(key: tuple, _build):
    return _build()


def cached_figure(sel, options: dict, name: str, params: tuple, build):
    """build() once per (trace, figure name, params), shared by every session.

    Building a plotly figure costs ~10-40 ms of validation whatever its size, so a rerun that
    only changes the head must not rebuild the figures that do not depend on it (the layer x
    head grid, the rollout) and going back to a head is free. st.plotly_chart serialises a
    copy (to_dict): a shared figure is never modified by showing it. Pages must not modify it.
    """
    key = (sel.model_name, sel.device, sel.text, sel.target, tuple(sorted(options.items())),
           name, params)
    return _figure(key, build)


@st.cache_resource(max_entries=TRACE_CACHE, show_spinner=False)
def get_beam(name: str, device: str, text: str, options: tuple = ()):
    model = get_model(name, device)
    return model.beam_search(text, **_unfreeze(options))


@st.cache_resource(max_entries=TRACE_CACHE, show_spinner=False)
def _batch(name: str, device: str, sentences: tuple, targets: tuple | None):
    model = get_model(name, device)
    return model.trace_batch(list(sentences), list(targets) if targets else None,
                             capture=("pattern", "scores"))


def get_batch(sel, sentences: tuple):
    """A padded batch; encoder-decoder models are teacher-forced on their own outputs."""
    from .errors import reported

    with st.spinner("Running the batch…"), reported("running the batch"):
        targets = None
        if sel.model.kind == "encoder-decoder":
            targets = tuple(get_trace(sel.model_name, sel.device, s, None, ()).output_text
                            or "<unk>" for s in sentences)
        return _batch(sel.model_name, sel.device, sentences, targets)


@st.cache_data(max_entries=TRACE_CACHE, show_spinner=False)
def head_stats(name: str, device: str, text: str, target: str | None):
    from viz_core.analysis import head_stats as stats

    return stats(get_trace(name, device, text, target, ()))


@st.cache_data(max_entries=TRACE_CACHE, show_spinner=False)
def head_similarity(name: str, device: str, text: str, target: str | None, kind: str):
    from viz_core.analysis import cluster_order, js_divergence_matrix, trace_head_patterns

    patterns, labels = trace_head_patterns(get_trace(name, device, text, target, ()), kind)
    matrix, labels = js_divergence_matrix(patterns, labels)
    return matrix, labels, cluster_order(matrix)
