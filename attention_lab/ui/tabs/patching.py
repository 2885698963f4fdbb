"""Patching: what restores the output when copied from a clean run into a corrupted one;
activation patching beside its gradient approximation (attribution patching).

URL: clean, corrupt, over. A new sidebar text brings its own clean / corrupted pair."""

from __future__ import annotations

from dataclasses import replace

import streamlit as st

from viz_core.analysis.patching import compare
from viz_core.figures.contributions import (
    layer_effect_bars,
    patching_heatmap,
    patching_scatter,
    shared_limit,
)
from viz_core.i18n import N_, _

from .. import state
from ..charts import chart, download, download_csv
from ..contributions import (
    attempt,
    follow_the_sidebar,
    patching_npz,
    show_result_warnings,
    suggested_corruption,
)
from ..controls import url_select, url_text_box
from ..errors import literal, translated
from ..lang import fragment
from ..runs import AnalysisRequest, run_analysis
from .explain import Explained

POSITIONS_MAX = 64  # tokens up to which per-position patching (layers x positions runs) is run
OVER = ["heads", "layers", "positions"]
OVER_LABELS = {"heads": N_("heads"), "layers": N_("layers"), "positions": N_("positions")}
SOURCE = "patch_source"  # the sidebar text the clean / corrupted pair was made from
SUGGESTED = "patch_suggested"  # the button's last answer: (text, replaced, by) or None


def _suggest_for_clean(sel) -> None:
    """The button's callback: a corruption of the clean text as it is now."""
    found = suggested_corruption(sel.model_name, sel.device, st.session_state.get("clean", ""))
    if found:
        st.session_state.corrupt = found[0]
    st.session_state[SUGGESTED] = found


def _pair(sel) -> tuple[str, str]:
    """The clean and corrupted text boxes and the suggestion button; -> (clean, corrupted)."""
    suggestion = suggested_corruption(sel.model_name, sel.device, sel.text)
    # a new sidebar text: the pair is that text and its suggested corruption
    if follow_the_sidebar(sel, SOURCE, {"clean": sel.text,
                                        "corrupt": suggestion[0] if suggestion else ""}):
        st.session_state.pop(SUGGESTED, None)
    p1, p2 = st.columns(2)
    clean = url_text_box(_("Clean text"), "clean", _("The input whose behaviour is restored "
                         "(effect 1)."), limit=state.MAX_TEXT_CHARS, area=True, container=p1,
                         default=sel.text)
    corrupted = url_text_box(_("Corrupted text"), "corrupt", _("The same number of tokens, with "
                             "something changed (effect 0)."), limit=state.MAX_TEXT_CHARS,
                             area=True, container=p2,
                             default=suggestion[0] if suggestion else "")
    shown = st.session_state.get(SUGGESTED, suggestion)
    b1, b2 = st.columns([1, 3])
    b1.button(_("Suggest a corruption"), key="hm_suggest", on_click=_suggest_for_clean, args=(sel,),
              help=_("Replace one word of the clean text by another of the same token count."))
    if shown:
        b2.caption(_("Suggested corruption: {literal} → {literal2} (same token count).").format(
                       literal=literal(repr(shown[1])), literal2=literal(repr(shown[2]))))
    elif st.session_state.get(SUGGESTED, 0) is None:
        b2.caption(_("No word of the clean text could be replaced keeping its token count; "
                   "edit the corrupted text yourself."))
    return clean, corrupted


@fragment
def patching_tab(sel, explained: Explained) -> None:
    clean, corrupted = _pair(sel)
    over = url_select(_("Patch"), "over", OVER, widget="radio", horizontal=True,
                      format_func=lambda o: _(OVER_LABELS[o]),
                      help=_("heads: each head's output z at every position · layers: the "
                           "residual stream entering each layer, every position · positions: "
                           "the stream entering each layer at one position."))
    state.show_notices()
    if not clean.strip() or not corrupted.strip():
        st.info(_("Give a clean and a corrupted text to patch."))
        return
    if over == "positions" and sel.model.count_tokens(clean) > POSITIONS_MAX:
        st.info(_("Per-position patching runs the model once per layer and position; it is "
                  "offered up to {POSITIONS_MAX} tokens. Shorten the clean text, or patch heads "
                  "or layers.").format(POSITIONS_MAX=POSITIONS_MAX))
        return
    # the last position stays the last one of whatever clean text is patched
    request = AnalysisRequest.of(sel, "patch", clean=clean, corrupted=corrupted,
                                 target=sel.target or None, token=explained.token,
                                 against=explained.against, over=over,
                                 position=-1 if explained.last else explained.position)
    with attempt(_("patching")):
        real = run_analysis(request, _("Patching over {over}…").format(
            over=_(OVER_LABELS[over])))
        st.markdown(_("Metric: **{metric}**: clean {clean:.4f}, corrupted {corrupted:.4f}. "
                      "Effect 1 = the patched unit alone restores the clean value; 0 = no change.").format(
                        metric=literal(translated(real.metric)), clean=real.clean, corrupted=real.corrupted))
        show_result_warnings(real)
        if over == "layers":
            chart(layer_effect_bars(real.effect, real.rows,
                                    _("Patching the stream entering each layer")),
                  key="hm_patch", name="patching-layers")
            if sel.model.architecture != "encoder-decoder":
                st.caption(_("One stack: the stream entering a layer, at every position, is "
                             "all that layer and the ones after it read, so patching it "
                             "restores the clean run whole, and every layer gives 1 by "
                             "construction. Patch heads or positions to see where the "
                             "difference travels."))
        else:
            _beside_attribution_patching(real, replace(request, name="attribution_patch"), over)
        d1, d2 = st.columns(2)
        with d1:
            download_csv(_("Patching (CSV)"), real.frame, f"patching_{over}.csv", "dl_patch")
        with d2:
            download(_("Patching (NPZ)"), lambda: patching_npz(real), f"patching_{over}.npz",
                     "application/octet-stream", "dl_patch_npz")


def _beside_attribution_patching(real, request: AnalysisRequest, over: str) -> None:
    """Activation patching's heatmap, its gradient approximation beside it on one colour
    scale, and how well the two agree (a scatter and two correlations)."""
    x_title = "head" if over == "heads" else "position"
    left, right = st.columns(2)
    approx = None
    with right, attempt(_("attribution patching")):
        approx = run_analysis(request, _("Attribution patching over {over}…").format(
            over=_(OVER_LABELS[over])))
    lim = shared_limit(real.effect, *([] if approx is None else [approx.effect]))
    with left:
        chart(patching_heatmap(real.effect, real.rows, real.columns,
                               title=_("Activation patching over {over}").format(over=_(OVER_LABELS[over])),
                               x_title=x_title,
                               limit=lim),
              key="hm_patch", name=f"patching-{over}")
    if approx is None:
        return
    with right:
        chart(patching_heatmap(approx.effect, approx.rows, approx.columns,
                               title=_("Attribution patching (gradient approximation)"),
                               x_title=x_title, limit=lim),
              key="hm_attr_patch", name=f"attribution-patching-{over}")
    cmp = compare(real, approx)
    frame = cmp.frame
    left, right = st.columns(2)
    with left:
        chart(patching_scatter(frame["patching"], frame["attribution"],
                               [f"{r} · {c}" for r, c in zip(frame["row"], frame["column"])],
                               cmp.pearson),
              key="hm_patch_scatter", name=f"patching-vs-attribution-{over}")
    right.caption(_("Correlation of attribution with activation patching: Pearson {pearson:.3f}, "
                    "Spearman {spearman:.3f}.").format(pearson=cmp.pearson, spearman=cmp.spearman))
