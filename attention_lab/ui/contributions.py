"""What "Which heads matter" and the Attention page's cell action share: `attempt`, head
search and the suggested corruption (cached), the NPZ exports, and the QK view of one cell.

The model's analyses themselves (logit attribution, the logit lens, patching, composition, QK
attribution) run through the one cached entry ``ui.runs.run_analysis(AnalysisRequest)``.
Head search reads a trace, not the model: ``SearchRequest`` is its own cache key.

``attempt`` shows a failure as a message *without* stopping the page: one section failing
(a post-norm model has no logit attribution; a contrast token equal to the target) leaves the
other sections working.
"""

from __future__ import annotations

from contextlib import contextmanager
from dataclasses import dataclass

import numpy as np
import streamlit as st

import viz_core as vc
from viz_core.analysis.patching import SMALL_GAP_WARNING
from viz_core.i18n import N_, _

from .charts import chart, download
from .errors import literal, log, log_cause, translated
from .runs import AnalysisRequest, TraceRequest, get_model, get_trace, run_analysis
from .state import MAX_TEXT_CHARS

CACHE = 16


@dataclass(frozen=True)
class SearchRequest:
    """Head search over one trace: a (query, key) cell or a template."""

    trace: TraceRequest
    kind: str
    template: str | None = None  # None: the (query, key) cell
    query: int = 0
    key: int = 0


PATCHING_HINT = N_(" The **Patching** tab works for this model.")


@contextmanager
def attempt(what: str, patching_hint: str = PATCHING_HINT):
    """Run a section; a VizError becomes st.error(message), anything else a short apology.
    Unlike ui.errors.reported, the page goes on (the rest of it still works).
    `patching_hint`: where to patch instead, after a model's "no such sum" notice."""
    try:
        yield
    except vc.errors.DecompositionError as err:  # not a failure: this model has no such sum
        st.info(literal(translated(err)) + _(patching_hint), icon="ℹ️")
    except vc.VizError as err:
        log_cause(what, err)
        st.error(literal(translated(err)), icon="⚠️")
    except Exception as err:  # noqa: BLE001 - the user sees a message, the log the details
        log.exception("%s failed", what)
        st.error(_("Something went wrong while {what} ({name}). Try another input or setting; "
                   "the rest of the page keeps working.").format(
                     what=literal(what), name=type(err).__name__),
                 icon="⚠️")


@st.cache_data(max_entries=CACHE, show_spinner=False)
def _search(request: SearchRequest):
    from viz_core.analysis.head_search import search_heads

    trace = get_trace(request.trace)
    if request.template:
        return search_heads(trace, kind=request.kind, template=request.template)
    return search_heads(trace, kind=request.kind, query=request.query, key=request.key)


def head_search(request: SearchRequest):
    with st.spinner(_("Ranking every head…")):
        return _search(request)


def show_result_warnings(result) -> None:
    """A patching or edge result's warnings: the input's cut (✂️) and a corruption that
    barely moves the metric (⚠️), shown literally."""
    for w in result.warnings:
        small = getattr(w, "msgid", None) == SMALL_GAP_WARNING
        st.warning(literal(translated(w)), icon="⚠️" if small else "✂️")


def follow_the_sidebar(sel, source_key: str, boxes: dict[str, str]) -> bool:
    """A new sidebar text puts ``boxes`` (session key -> text) in their text boxes, before they
    are drawn; the first run keeps the address's texts. ``source_key`` remembers the sidebar
    text they were made from. -> whether the boxes were replaced."""
    if st.session_state.get(source_key) == sel.text:
        return False
    replaced = source_key in st.session_state
    if replaced:
        st.session_state.update(boxes)
    st.session_state[source_key] = sel.text
    return replaced


@st.cache_data(max_entries=CACHE, show_spinner=False)
def suggested_corruption(model_name: str, device: str, text: str):
    """(corrupted text, replaced word, its replacement), or None."""
    from viz_core.analysis.corruption import suggest_corruption

    model = get_model(model_name, device)
    try:
        c = suggest_corruption(text, model.count_tokens, model.examples(),
                               max_chars=MAX_TEXT_CHARS)
    except vc.VizError:  # a text the model cannot read: the page says so elsewhere
        return None
    return None if c is None else (c.text, c.replaced, c.by)


# ---- exports -------------------------------------------------------------------------------
def patching_npz(result) -> bytes:
    return vc.npz_bytes({
        "effect": np.asarray(result.effect, dtype=np.float64),
        "clean": np.float64(result.clean), "corrupted": np.float64(result.corrupted),
        "metric": np.str_(result.metric), "over": np.str_(result.over),
        "rows": np.array(list(result.rows), dtype=str),
        "columns": np.array(list(result.columns), dtype=str),
        "tokens": np.array(list(result.tokens), dtype=str)})


def lens_npz(lens) -> bytes:
    return vc.npz_bytes({
        "layers": np.array(lens.layers, dtype=str), "tokens": np.array(lens.tokens, dtype=str),
        "top_ids": lens.top_ids, "top_probs": lens.top_probs,
        "top_tokens": np.array(lens.top_tokens, dtype=str),
        "prediction_ids": lens.prediction_ids,
        "prediction_tokens": np.array(lens.prediction_tokens, dtype=str),
        "rank": lens.rank, "prob": lens.prob})


# ---- shared views ----------------------------------------------------------------------------
def qk_request(sel, block: str, head: int, query: int, key: int) -> AnalysisRequest:
    """The QK attribution of one cell of one head, on the sidebar's text (and target)."""
    return AnalysisRequest.of(sel, "qk_attribution", text=sel.text, target=sel.target or None,
                              block=block, head=int(head), query=int(query), key=int(key))


def show_qk(request: AnalysisRequest, key: str, query_label: str, key_label: str,
            patching_hint: str = PATCHING_HINT) -> None:
    """The QK attribution of one cell (a qk_request): the sum check, the largest terms as
    bars, a CSV. Used by the "Why this score?" tab and by the Attention page's cell action."""
    from viz_core.figures.contributions import qk_bars

    cell = request.options()
    block, head = cell["block"], cell["head"]
    with attempt(_("splitting the score"), patching_hint):
        qk = run_analysis(request, _("Splitting the score into components…"))
        total = float(np.sum(qk.frame["contribution"]))
        st.markdown(_("Score **{score:.4f}** (before the softmax) of head {head} in {block}, "
                      "query {query_label} → key {key_label}; the {n_frame} terms add up to "
                      "{total:.4f}.").format(
                        score=qk.score, head=head, block=literal(block),
                        query_label=literal(query_label), key_label=literal(key_label),
                        n_frame=len(qk.frame), total=total))
        if getattr(qk, "masked", False):
            st.caption(_("The mask blocks this cell: its score exists, its weight is 0."))
        chart(qk_bars(qk.frame, qk.score), key=key, name=f"{block}-h{head}-qk")
        st.caption(_("Each term: one component of the query's stream (embeddings, an earlier "
                   "head, an MLP, a bias) through the block's norm (its scale frozen at this "
                   "run's value) and W_Q, dotted with one component of the key's stream "
                   "through W_K, times the scaling."))
        download(_("QK terms (CSV)"), lambda: qk.frame.to_csv(index=False),
                 f"qk_{block}_h{head}.csv", "text/csv", f"dl_{key}")


ATTENTION_PAGE_HINT = N_(" In this app: the **Patching** tab of the **Which heads matter** "
                         "page.")


@dataclass(frozen=True)
class WhyCell:
    """What the Attention page's cell action will show this run (see why_cell)."""

    cell: tuple[int, int] | None  # (query, key) explained; None: the section is closed
    n_q: int = 0  # positions the pickers offer (the prompt of a decoder-only model)
    n_k: int = 0
    strongest: int = 0  # the key this head attends to most from the picked query
    cross: bool = False  # a cross-attention block: nothing to split
    notice: str | None = None  # a click the section cannot open (a generated token)


def why_cell(sel, block, head: int) -> WhyCell:
    """The first half of why_this_cell, run before the page draws its heatmap: takes the
    click handed over by the chart's callback, sets the toggle (in the URL as why=1) and the
    query / key pickers (why_q, why_k) it implies, and says which cell the section will
    explain, so the heatmap can frame that cell (figures.cells.outline_cell) and its chart
    key can name it (ui.cells.chart_key). Draws nothing."""
    from . import state
    from .cells import take_click

    click = take_click()
    if click is not None:
        st.session_state.why = True
    state.widget_default("why", state.url_get("why") == "1")
    if not st.session_state.why:
        return WhyCell(None)
    if block.kind.endswith("cross"):
        return WhyCell(None, cross=True)
    n_q, n_k = block.shape[1], block.shape[2]
    if sel.model.architecture == "decoder-only":
        prompt = get_trace(TraceRequest.of(sel, capture=("pattern",), max_new=0))
        n_q = n_k = min(n_q, len(prompt[block.name].query_tokens))
    notice = None
    if click is not None:
        q, k = click
        if q < n_q and k < n_k:
            st.session_state.why_q, st.session_state.why_k = q, k
        else:
            side, pos = ("query", q) if q >= n_q else ("key", k)
            tokens = block.query_tokens if side == "query" else block.key_tokens
            token = tokens[pos] if pos < len(tokens) else ""
            notice = _("The clicked {side}, {pos} ({token}), is a generated token: QK "
                       "attribution runs the prompt alone (positions 0–{last}); click a cell of "
                       "the prompt.").format(side=_(side), pos=pos, token=literal(repr(str(token))),
                                             last=n_q - 1)
    state.widget_default("why_q", state.url_int("why_q", n_q - 1, 0, n_q - 1))
    st.session_state.why_q = max(0, min(n_q - 1, int(st.session_state.why_q)))
    strongest = int(np.argmax(block.window(head, (st.session_state.why_q,
                                                  st.session_state.why_q + 1), (0, n_k))[0]))
    state.widget_default("why_k", state.url_int("why_k", strongest, 0, n_k - 1))
    st.session_state.why_k = max(0, min(n_k - 1, int(st.session_state.why_k)))
    return WhyCell((int(st.session_state.why_q), int(st.session_state.why_k)), n_q, n_k,
                   strongest, notice=notice)


def why_this_cell(sel, block, head: int, why: WhyCell | None = None) -> None:
    """The Attention page's cell action: "why does this head attend here?". A click on a
    cell of the page's heatmap (charts drawn with ``on_select=ui.cells.on_cell_click(key)``)
    or the toggle (in the URL as why=1) with its query / key pickers (why_q, why_k) opens the
    cell's QK attribution; a click sets the toggle and the pickers, so the URL reproduces it.
    `why`: what why_cell(sel, block, head) resolved before the heatmap was drawn (resolved
    here when not given).

    QK attribution runs the text alone (a decoder-only model generates nothing), so the
    pickers offer that run's positions: the prompt of a decoder-only model; a click on a
    generated token says so in one line."""
    from viz_core.figures.common import choice_labels

    from . import state

    if why is None:
        why = why_cell(sel, block, head)
    st.toggle(_("Why does this head attend here?"), key="why",
              help=_("Split one cell's pre-softmax score into (query component × key "
                   "component) terms: embeddings, earlier heads, MLPs, biases. Click a cell "
                   "of the heatmap, or pick it here."))
    state.to_url(why="1" if st.session_state.why else None)
    if not st.session_state.why:
        return
    if why.cross:
        st.info(_("QK attribution covers self-attention blocks: the keys of cross-attention "
                "come from the encoder's output, not from this stream."))
        return
    if why.cell is None:  # not reached: why_cell saw the same toggle value
        return
    n_q, n_k, strongest = why.n_q, why.n_k, why.strongest
    if why.notice:
        st.info(why.notice, icon="ℹ️")
    q_labels = choice_labels(block.query_tokens[:n_q])
    k_labels = choice_labels(block.key_tokens[:n_k])
    c1, c2 = st.columns(2)
    c1.selectbox(_("Query (row)"), list(range(n_q)), key="why_q",
                 format_func=lambda i: q_labels[i])
    c2.selectbox(_("Key (column)"), list(range(n_k)), key="why_k",
                 format_func=lambda i: k_labels[i],
                 help=_("Default: the key this head attends to most from the query ({value}).").format(
                          value=k_labels[strongest]))
    query, key = int(st.session_state.why_q), int(st.session_state.why_k)
    state.to_url(why_q=query, why_k=key)
    state.show_notices()
    show_qk(qk_request(sel, block.name, head, query, key), "why_qk", q_labels[query],
            k_labels[key], patching_hint=ATTENTION_PAGE_HINT)
