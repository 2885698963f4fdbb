"""The run API for pages: typed requests in, cached model runs out.

A page says *what* it wants with a request (``TraceRequest``, ``BeamRequest``,
``BatchRequest``): frozen, hashable dataclasses that are their own cache keys. Pages never
build key or option tuples; each request turns itself into the backend's keyword arguments
(``options()``), so the meaning of an option lives in one place.

Caching, shared by every session of this server process:
- models: st.cache_resource (one object per process; viz_core models are thread-safe);
- traces, beam trees and batches: st.cache_resource too, bounded by max_entries: they are
  read-only numpy data, and handing out the same object avoids pickling tens of MB per rerun,
  which st.cache_data would do on every read. Pages must not modify what they get from here;
- analyses (``AnalysisRequest`` -> ``run_analysis``: logit attribution, the logit lens,
  patching, composition, QK attribution): st.cache_resource, read-only DataFrames and arrays;
- head statistics and similarity: st.cache_data (small tables).

Serving many sessions from one process (issue 34): a cache miss that runs the model (loading
it, a trace, a beam search, a batch, an analysis) holds one of MODEL_RUNS slots
(``model_slot``), so 30 sessions queue instead of running 30 models at once on 2 cores, and
each run uses TORCH_THREADS threads (``cap_torch_threads``, called once by app.py): runs x
threads is about the cores less one, which is left to the server's Python work (figures,
serialising). Both come from the environment (ATTENTION_LAB_MODEL_RUNS,
ATTENTION_LAB_TORCH_THREADS). The spinners (``model_spinner``) say when a run has to wait.

Capture: a trace keeps only the hook points its request asks for. The Attention page asks for
the patterns (+ scores in its scores view): a Hugging Face model then needs no recomputation
of q/k/v after the run, and a long input keeps ~half the memory (patterns and scores are
[head, N, N] per block; q/k/v/z only [head, N, d_k]). Pages that show internals (Inside a
head) ask for everything, the default.
"""

from __future__ import annotations

import os
import threading
from collections.abc import Mapping, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, replace

import plotly.graph_objects as go
import streamlit as st

import viz_core as vc
from viz_core.i18n import _, language

from .errors import reported

MODEL_CACHE = 4
TRACE_CACHE = 32
ANALYSIS_CACHE = 32
FIGURE_CACHE = 64  # a figure is <= ~1.5 MB of JSON whatever the input length


def _env_int(name: str, default: int) -> int:
    """A positive integer from the environment; the default when unset or not one."""
    try:
        value = int(os.environ.get(name, ""))
    except ValueError:
        return default
    return value if value >= 1 else default


CORES = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count() or 1
# torch threads per model run, and model runs at once: runs x threads ~ cores - 1
TORCH_THREADS = _env_int("ATTENTION_LAB_TORCH_THREADS", max(1, min(4, CORES - 1)))
MODEL_RUNS = _env_int("ATTENTION_LAB_MODEL_RUNS", max(1, (CORES - 1) // TORCH_THREADS))


def cap_torch_threads(threads: int | None = None) -> int:
    """torch's intra-op threads for this server process (default TORCH_THREADS), so that
    MODEL_RUNS runs at once fit the cores; -> the number in use. Under AppTest the script
    runs inside the test's (or benchmark's) process, whose threads are left alone."""
    import torch

    if st.get_option("global.appTest"):
        return torch.get_num_threads()
    threads = threads or TORCH_THREADS
    if torch.get_num_threads() != threads:
        torch.set_num_threads(threads)
    return threads


class ModelSlots:
    """At most `size` model runs at once in this process; the others wait their turn."""

    def __init__(self, size: int):
        self.size = size
        self._free = threading.BoundedSemaphore(size)
        self._lock = threading.Lock()
        self._held = 0
        self._mine = threading.local()  # this thread holds a slot (a run inside a run)

    @contextmanager
    def hold(self):
        """One slot while the block runs; waits while all are taken. Re-entrant per thread
        (a run that starts another run does not wait for itself). Draws nothing: it runs
        inside cached functions, whose elements Streamlit would replay."""
        if getattr(self._mine, "held", False):
            yield
            return
        self._free.acquire()
        self._mine.held = True
        with self._lock:
            self._held += 1
        try:
            yield
        finally:
            with self._lock:
                self._held -= 1
            self._mine.held = False
            self._free.release()

    def busy(self) -> bool:
        """Whether every slot is taken now (a new run would wait)."""
        return self._held >= self.size


SLOTS = ModelSlots(MODEL_RUNS)


def model_slot():
    """SLOTS.hold(): one of this process's model-run slots, for a model run's cache miss."""
    return SLOTS.hold()


def model_spinner(text: str):
    """st.spinner for a call that may run the model: it says so when the run must wait."""
    if SLOTS.busy():
        text = _("Waiting for a free model slot (this server runs {size} at a time and all are "
                 "busy), then: {text}").format(size=SLOTS.size, text=text[0].lower() + text[1:])
    return st.spinner(text)


# Heads to switch off, frozen: ((block name, (head, ...)), ...), sorted.
Ablation = tuple[tuple[str, tuple[int, ...]], ...]


def freeze_ablation(ablate: Mapping[str, Sequence[int]] | Ablation | None) -> Ablation:
    """{block: [heads]} (or pairs) -> sorted pairs of sorted head tuples: one key per choice."""
    if not ablate:
        return ()
    pairs = ablate.items() if isinstance(ablate, Mapping) else ablate
    return tuple(sorted((str(block), tuple(sorted(int(h) for h in heads)))
                        for block, heads in pairs))


def thaw_ablation(ablate: Ablation) -> dict[str, list[int]]:
    """The backends' form: {block name: [head, ...]}."""
    return {block: list(heads) for block, heads in ablate}


@dataclass(frozen=True)
class TraceRequest:
    """One traced run: a model on a text (and target), with what to capture or switch off."""

    model_name: str
    device: str
    text: str
    target: str | None = None  # teacher-forced output; None: the model's own greedy output
    pair: str | None = None  # second sentence (BERT-family models: one sequence with [SEP])
    capture: tuple[str, ...] | None = None  # hook points to keep; None: all of them
    blocks: tuple[str, ...] | None = None  # block names or block kinds; None: all blocks
    ablate: Ablation = ()  # heads switched off (see freeze_ablation; a dict is frozen too)
    max_new: int | None = None  # new tokens the model may generate; None: its default
    permute: tuple[int, ...] | None = None  # a new order of the input's ordinary tokens
    positions: bool = True  # False: no position information (the order-blindness demo)

    def __post_init__(self):  # normalise, so equal choices are one cache entry
        object.__setattr__(self, "target", self.target or None)
        object.__setattr__(self, "pair", self.pair or None)
        if self.permute is not None:
            object.__setattr__(self, "permute", tuple(int(i) for i in self.permute))
        if self.capture is not None:
            object.__setattr__(self, "capture", tuple(self.capture))
        if self.blocks is not None:
            object.__setattr__(self, "blocks", tuple(self.blocks))
        object.__setattr__(self, "ablate", freeze_ablation(self.ablate))

    @classmethod
    def of(cls, sel, **options) -> TraceRequest:
        """The sidebar's selection (model, device, text, target, new tokens) with these
        options (an explicit max_new wins over the sidebar's)."""
        options.setdefault("max_new", getattr(sel, "max_new", None))
        return cls(sel.model_name, sel.device, sel.text, sel.target, **options)

    def options(self) -> dict:
        """Keyword arguments for Backend.trace: only what differs from its defaults."""
        opts: dict = {}
        if self.pair is not None:
            opts["pair"] = self.pair
        if self.capture is not None:
            opts["capture"] = self.capture
        if self.blocks is not None:
            opts["blocks"] = list(self.blocks)
        if self.ablate:
            opts["ablate"] = thaw_ablation(self.ablate)
        if self.max_new is not None:
            opts["max_new"] = self.max_new
        if self.permute is not None:
            opts["permute"] = list(self.permute)
        if not self.positions:
            opts["positions"] = False
        return opts


@dataclass(frozen=True)
class BeamRequest:
    """One beam search, recording the whole tree."""

    model_name: str
    device: str
    text: str
    beam_size: int = 4  # 1 is greedy search
    max_new_tokens: int = 32  # tokens generated after the prompt / decoder start
    length_penalty: float = 1.0  # score = sum of log-probs / length ** length_penalty
    early_stopping: bool | str = False  # as in Hugging Face generate: False, True or "never"
    prefix: str | None = None  # forced start of the output
    ablate: Ablation = ()  # heads switched off

    def __post_init__(self):
        object.__setattr__(self, "prefix", self.prefix or None)
        object.__setattr__(self, "ablate", freeze_ablation(self.ablate))

    @classmethod
    def of(cls, sel, **options) -> BeamRequest:
        return cls(sel.model_name, sel.device, sel.text, **options)

    def greedy(self) -> BeamRequest:
        """The same search with one beam."""
        return replace(self, beam_size=1)

    def options(self) -> dict:
        """Keyword arguments for Backend.beam_search (whose max_len counts new tokens)."""
        opts = {"beam_size": self.beam_size, "max_len": self.max_new_tokens,
                "length_penalty": self.length_penalty, "early_stopping": self.early_stopping,
                "prefix": self.prefix}
        if self.ablate:
            opts["ablate"] = thaw_ablation(self.ablate)
        return opts


@dataclass(frozen=True)
class BatchRequest:
    """Several inputs traced in one right-padded batch (patterns and scores)."""

    model_name: str
    device: str
    sentences: tuple[str, ...]
    targets: tuple[str, ...] | None = None  # None: encoder-decoders use their own outputs

    def __post_init__(self):
        object.__setattr__(self, "sentences", tuple(self.sentences))
        if self.targets is not None:
            object.__setattr__(self, "targets", tuple(self.targets))

    @classmethod
    def of(cls, sel, sentences: Sequence[str]) -> BatchRequest:
        return cls(sel.model_name, sel.device, tuple(sentences))


@dataclass(frozen=True)
class AnalysisRequest:
    """One analysis of the model: ``model.<name>(**kwargs)`` (logit_attribution, logit_lens,
    patch, attribution_patch, composition, qk_attribution, or any analysis the model grows).

    kwargs are stored as sorted (name, value) pairs (a dict is accepted and frozen, lists
    become tuples), so equal choices are one cache entry. Values are passed as given: write
    None, not "", for "the model's default"."""

    model_name: str
    device: str
    name: str
    kwargs: tuple[tuple[str, object], ...] = ()

    def __post_init__(self):
        if not self.name.isidentifier() or self.name.startswith("_"):
            raise ValueError(f"not an analysis name: {self.name!r}")
        pairs = self.kwargs.items() if isinstance(self.kwargs, Mapping) else self.kwargs
        object.__setattr__(self, "kwargs", tuple(sorted(
            (str(k), tuple(v) if isinstance(v, list) else v) for k, v in pairs)))
        hash(self.kwargs)  # TypeError here, not in the cache, for an unhashable value

    @classmethod
    def of(cls, sel, name: str, **kwargs) -> AnalysisRequest:
        """The sidebar's model and device; the analysis's own arguments by name."""
        return cls(sel.model_name, sel.device, name, kwargs)

    def options(self) -> dict:
        return dict(self.kwargs)


@st.cache_resource(max_entries=ANALYSIS_CACHE, show_spinner=False)
def _analysis(request: AnalysisRequest):
    model = get_model(request.model_name, request.device)
    with model_slot():
        return getattr(model, request.name)(**request.options())


def run_analysis(request: AnalysisRequest, spinner: str | None = None):
    """The one entry for analyses: the model's result, cached and shared by every session
    (pages must not modify it), with a spinner while it runs. Errors propagate (wrap the
    call in ui.contributions.attempt or ui.errors.reported)."""
    with model_spinner(spinner or _("Running {name}…").format(name=request.name.replace("_", " "))):
        return _analysis(request)


PRECISIONS = ["auto", "float32", "bfloat16", "float16"]


def with_precision(device: str, dtype: str) -> str:
    """The model key of a device and precision choice: "cuda", or "cuda/float16" when the
    precision is not auto (so every request's cache key carries it)."""
    return device if dtype in (None, "", "auto") else f"{device}/{dtype}"


@st.cache_data(max_entries=64, show_spinner=False)
def _footprint(name: str, device: str):
    from viz_core.loading.footprint import estimate

    dev, _sep, dtype = device.partition("/")
    return estimate(name, dtype or "auto", dev)


def model_footprint(name: str, device: str) -> str | None:
    """"22.7 M parameters, 87 MB at float32" from safetensors headers, before loading (in
    the session's language: the cache keeps the numbers)."""
    fp = _footprint(name, device)
    return None if fp is None else fp.describe()


@st.cache_resource(max_entries=MODEL_CACHE, show_spinner=False)
def get_model(name: str, device: str):
    """device: "auto", "cpu", "cuda", ..., optionally "/float32" etc. (with_precision)."""
    dev, _, dtype = device.partition("/")
    with model_slot():
        return vc.load(name, dev, dtype=dtype or "auto")


@st.cache_resource(max_entries=TRACE_CACHE, show_spinner=False)
def get_trace(request: TraceRequest):
    model = get_model(request.model_name, request.device)
    with model_slot():
        return model.trace(request.text, request.target, **request.options())


def run_trace(request: TraceRequest):
    """get_trace with the page's spinner; a failure becomes a message and stops the page."""
    with reported(_("running the model")), model_spinner(_("Running the model…")):
        return get_trace(request)


def full_trace(sel):
    """The trace with every hook point (for downloads); usable outside a script run."""
    return get_trace(TraceRequest.of(sel))


def has_scores(model) -> bool:
    """Whether this model can show pre-softmax scores (native: always; HF: some families)."""
    return bool(model.info().get("scores", True))


def attention_capture(view: str) -> tuple[str, ...]:
    """Hook points the Attention page draws in this view."""
    return ("pattern", "scores") if view == "scores" else ("pattern",)


class SharedFigure(go.Figure):
    """A cached figure shared by every session: its plotly dict is built once.

    st.plotly_chart calls ``fig.to_dict()`` on every run that shows a figure: a deep copy of
    the figure plus a walk turning numpy arrays into base64 (~2 ms for a head's heatmap,
    ~15-20 ms for MiniLM's 6 x 12 grid). A shared figure never changes, so the dict is kept
    and handed out as it is: read it, never modify it (``go.Figure(d, _validate=False)``
    copies it, as outline_cell does)."""

    def to_dict(self):
        frozen = self.__dict__.get("_shared_dict")
        if frozen is None:
            frozen = self.__dict__["_shared_dict"] = super().to_dict()
        return frozen


@st.cache_resource(max_entries=FIGURE_CACHE, show_spinner=False)
def _figure(request: TraceRequest, name: str, params: tuple, _build):
    fig = _build()
    if type(fig) is go.Figure:  # built and serialised once, under the cache's lock
        fig.__class__ = SharedFigure
        fig.to_dict()
    return fig


def cached_figure(request: TraceRequest, name: str, params: tuple, build):
    """build() once per (trace request, figure name, params), shared by every session.

    Building a plotly figure costs ~10-40 ms of validation whatever its size, so a rerun that
    only changes the head must not rebuild the figures that do not depend on it (the layer x
    head grid, the rollout) and going back to a head is free; showing it again costs only
    its JSON (SharedFigure keeps its dict). Pages must not modify it.
    """
    return _figure(request, name, (*params, language()), build)  # titles are in its language


@st.cache_resource(max_entries=TRACE_CACHE, show_spinner=False)
def get_beam(request: BeamRequest):
    model = get_model(request.model_name, request.device)
    with model_slot():
        return model.beam_search(request.text, **request.options())


@st.cache_resource(max_entries=TRACE_CACHE, show_spinner=False)
def _batch(request: BatchRequest):
    model = get_model(request.model_name, request.device)
    with model_slot():
        return model.trace_batch(list(request.sentences),
                                 list(request.targets) if request.targets else None,
                                 capture=("pattern", "scores"))


def get_batch(request: BatchRequest):
    """A padded batch; encoder-decoder models are teacher-forced on their own outputs."""
    with reported(_("running the batch")), model_spinner(_("Running the batch…")):
        model = get_model(request.model_name, request.device)
        if request.targets is None and model.architecture == "encoder-decoder":
            request = replace(request, targets=tuple(
                get_trace(TraceRequest(request.model_name, request.device, s)).output_text
                or "<unk>" for s in request.sentences))
        return _batch(request)


@st.cache_data(max_entries=TRACE_CACHE, show_spinner=False)
def head_stats(request: TraceRequest):
    from viz_core.analysis.heads import head_stats as stats

    return stats(get_trace(request))


@st.cache_data(max_entries=TRACE_CACHE, show_spinner=False)
def head_similarity(request: TraceRequest, block_kind: str):
    from viz_core.analysis.heads import cluster_order, js_divergence_matrix, trace_head_patterns

    patterns, labels = trace_head_patterns(get_trace(request), block_kind)
    matrix, labels = js_divergence_matrix(patterns, labels)
    return matrix, labels, cluster_order(matrix)
