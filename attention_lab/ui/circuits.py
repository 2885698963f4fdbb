"""The Circuits page's pieces: its run (edge attribution through runs.py's cached entry), the
exact method's "how many forward passes" check, the edges-kept slider kept in the URL, the
faithfulness curve (cached per request and kept counts) and a clicked or picked head opening on
"Which heads matter".

Every edge's score is computed once per (clean, corrupted, method); moving the slider only
redraws the graph and marks one more point on the curve."""

from __future__ import annotations

import math

import numpy as np
import streamlit as st

import viz_core as vc
from viz_core.figures.circuit import HEAD, agreement_figure
from viz_core.i18n import N_, _

from . import state
from .cells import points_of
from .charts import chart
from .errors import translated
from .runs import AnalysisRequest, model_slot, model_spinner, run_analysis

METHODS = ["eap", "eap-ig", "exact"]
EXACT = METHODS[2]
METHOD_LABELS = {"eap": "EAP", "eap-ig": N_("EAP-IG (5 steps)"), "exact": N_("Exact patching")}
CONFIRM_ABOVE = 2000  # exact patching asks first above this many forward passes
MAX_KEPT = 300  # the slider's top (one line per drawn edge)
CURVE_POINTS = 12
QK_TAB = N_("Why this score?")  # the label of the QK tab of Which heads matter


def edges_request(sel, clean: str, corrupted: str, method: str) -> AnalysisRequest:
    """The sidebar's target (an encoder-decoder's decoder text) is teacher-forced in both."""
    return AnalysisRequest.of(sel, "edge_attribution", clean=clean, corrupted=corrupted,
                              method=method, target=sel.target or None)


def refusal(sel) -> str | None:
    """The library's one line when this model has no edges (post-norm, encoder-only, ...),
    else None: the model is checked before the texts are read."""
    if getattr(sel.model, "norm_placement", "pre") == "pre" and \
            sel.model.architecture != "encoder-only":
        return None
    try:
        run_analysis(edges_request(sel, "", "", "eap"))
    except vc.VizError as err:
        return translated(err)
    return None


def exact_passes(sel, clean: str, corrupted: str) -> int:
    """Forward passes exact patching takes: one patched run per edge, plus the clean and the
    corrupted runs (the edge count comes from the cheap EAP run, cached)."""
    eap = run_analysis(edges_request(sel, clean, corrupted, "eap"), _("Counting the edges…"))
    return len(eap.edges) + 2


def confirmed_exact(sel, clean: str, corrupted: str) -> bool:
    """Exact patching runs at once up to CONFIRM_ABOVE forward passes; above, it says how
    many and waits for the button (remembered for this pair in the session)."""
    passes = exact_passes(sel, clean, corrupted)
    key = f"circ_ok_{sel.model_name}_{hash((clean, corrupted))}"
    if passes <= CONFIRM_ABOVE or st.session_state.get(key):
        st.caption(_("Exact patching: {passes:,} forward passes (one per edge, batched).").format(
                       passes=passes))
        return True
    st.warning(_("Exact patching would take {passes:,} forward passes (one per edge, plus the "
                 "clean and corrupted runs). EAP and EAP-IG estimate the same scores with one "
                 "and five backward passes.").format(passes=passes), icon="⏳")
    st.button(_("Run {passes:,} forward passes").format(passes=passes), key="circ_confirm",
              on_click=st.session_state.__setitem__, args=(key, True))
    return False


def check_against_exact(sel, clean: str, corrupted: str, method: str, result, kept) -> None:
    """For EAP and EAP-IG, a toggle (URL ``circ_check``): every edge's score against exact
    patching's on this pair (run as the Exact method runs, asking first above CONFIRM_ABOVE
    passes), with Spearman's rho and how many of the kept edges exact keeps too."""
    if method == EXACT:
        return
    state.widget_default("circ_check", bool(state.url_int("circ_check", 0, 0, 1)))
    st.toggle(_("Check against exact patching"), key="circ_check",
              help=_("Score every edge exactly too (one patched run per edge) and plot each "
                     "edge's estimate against it: how far to trust this ranking here."))
    state.to_url(circ_check=1 if st.session_state["circ_check"] else None)
    if not st.session_state["circ_check"] or not confirmed_exact(sel, clean, corrupted):
        return
    label, reference = _(METHOD_LABELS[method]), _(METHOD_LABELS[EXACT])
    exact = run_analysis(edges_request(sel, clean, corrupted, EXACT),
                         _("Scoring every edge ({value})…").format(value=reference))
    agree = result.agreement(exact, top=max(1, len(kept)))
    rho = (_("Spearman's ρ = {rho:.2f}").format(rho=agree.spearman)
           if not math.isnan(agree.spearman) else _("Spearman's ρ undefined (all scores equal)"))
    st.caption(_("{label} against exact patching over all {n_edges:,} edges: {rho}; {shared} of "
                 "its top {top} edges are in exact patching's top {top}.").format(
                   label=label, n_edges=agree.n_edges, rho=rho, shared=agree.shared,
                   top=agree.top))
    chart(agreement_figure(result.edges, exact.edges, kept=kept, label=label,
                           reference_label=reference),
          key=f"circuit_agreement_{method}", name="circuit-agreement")


def kept_slider(n_edges: int, container=st) -> int:
    """The number of highest-|score| edges kept (URL ``circ_top``), 10% by default."""
    hi = max(1, min(n_edges, MAX_KEPT))
    default = max(1, min(hi, round(0.1 * n_edges)))
    state.widget_default("circ_top", state.url_int("circ_top", default, 0, hi))
    st.session_state["circ_top"] = int(max(0, min(hi, int(st.session_state["circ_top"]))))
    container.slider(_("Edges kept"), 0, hi, key="circ_top",
                     help=_("The edges with the largest |score| (of {n_edges:,}); the graph "
                            "draws up to {MAX_KEPT}.").format(n_edges=n_edges, MAX_KEPT=MAX_KEPT))
    state.to_url(circ_top=int(st.session_state["circ_top"]), defaults={"circ_top": default})
    return int(st.session_state["circ_top"])


def curve_counts(n_edges: int) -> tuple[int, ...]:
    """0, then about CURVE_POINTS counts spaced evenly on a log scale up to every edge."""
    if n_edges <= 0:
        return (0,)
    grid = np.geomspace(1, n_edges, CURVE_POINTS - 1)
    return tuple(sorted({0, n_edges, *map(int, np.round(grid))}))


@st.cache_data(max_entries=64, show_spinner=False, hash_funcs={AnalysisRequest: hash})
def faithfulness_points(request: AnalysisRequest, counts: tuple[int, ...]) -> list[float]:
    """Faithfulness of the top ``counts`` edges (one batched run), cached per request."""
    result = run_analysis(request)
    with model_spinner(_("Measuring faithfulness…")), model_slot():
        return [float(v) for v in
                result.faithfulness_curve([result.circuit(top=int(n)) for n in counts])]


def head_of(name: str) -> tuple[str, int] | None:
    """"decoder.1.self.h0" -> ("decoder.1.self", 0); None for embed, an MLP, logits."""
    m = HEAD.match(str(name))
    if not m:
        return None
    block = ".".join(p for p in (m[1], m[2], m[3]) if p)
    return block, int(m[4])


def open_head(name: str) -> None:
    """Open a head's "Why this score?" on Which heads matter (its attention, logit
    attribution and QK attribution are that page's tabs)."""
    found = head_of(name)
    if found:
        st.session_state.update(qk_block=found[0], qk_head=found[1], tab=_(QK_TAB))
        clean = st.session_state.get("circ_clean")
        if clean and clean != st.session_state.get("text"):
            # the head opens on the circuit's clean text (the sidebar takes it before its
            # box is drawn), and coming back keeps this pair
            st.session_state.update(_open_text=clean, circ_source=clean)
        st.switch_page("pages/heads_matter.py")


ROW_PX, MOST_ROWS = 35, 15  # a table row of st.dataframe; a longer table scrolls


def edge_rows(frame):
    """A table of edges as text: the names as plain strings, a receiver's empty input (an
    MLP, the logits) an empty cell (a categorical's "" showed as a grey "None")."""
    out = frame.copy()
    for column in ("sender", "receiver", "input"):
        if column in out:
            out[column] = out[column].astype(object).where(out[column].notna(), "").astype(str)
    return out


def table_height(n_rows: int) -> int:
    """Every row shown, up to MOST_ROWS (a fixed 280 px hid the 8th of 8 kept edges)."""
    return ROW_PX * (min(n_rows, MOST_ROWS) + 1) + 3


def head_picker(heads: list[str]) -> None:
    """A picker of the circuit's heads and a button opening the one picked (a callback marks
    it; the next run switches page, which a callback cannot)."""
    if st.session_state.pop("circ_go", None):
        open_head(st.session_state.get("circ_head", ""))
    h1, h2 = st.columns([3, 1])
    h1.selectbox(_("A head of the circuit"), heads or [_("(no head kept)")], key="circ_head",
                 disabled=not heads)
    h2.button(_("Open on Which heads matter"), key="circ_open", disabled=not heads,
              on_click=st.session_state.__setitem__, args=("circ_go", True))


def open_clicked_head(event) -> None:
    """A click on a head node (customdata [name]) or on an edge (customdata [sender,
    receiver, input, score]: its receiving head, else its sending one)."""
    for point in points_of(event):
        data = point.get("customdata")
        data = list(data) if isinstance(data, (list, tuple)) else []
        for name in (data[1:2] + data[:1]) if len(data) == 4 else data[:1]:
            if isinstance(name, str) and head_of(name):
                open_head(name)
