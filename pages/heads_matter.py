"""Which heads matter, and why: logit attribution, the logit lens, activation and attribution
patching, head composition, head search and QK attribution, for the sidebar's model and text.

Each tab runs only when it is open (lazy tabs); every setting is in the address and in the
cache key of what it changes (attention_lab.ui.contributions).
"""

from dataclasses import replace

import numpy as np
import pandas as pd
import streamlit as st

from attention_lab.ui import state
from attention_lab.ui.charts import chart, download
from attention_lab.ui.contributions import (
    POSITIONS_MAX,
    PatchRequest,
    QKRequest,
    SearchRequest,
    TargetRequest,
    attempt,
    composition,
    head_search,
    lens_npz,
    logit_attribution,
    logit_lens,
    patching,
    patching_npz,
    show_qk,
    suggested_corruption,
)
from attention_lab.ui.controls import block_kind_label, open_head
from attention_lab.ui.errors import literal
from attention_lab.ui.page import selection, show_trace_messages
from attention_lab.ui.runs import TraceRequest, run_trace
from viz_core.analysis.head_search import TEMPLATES
from viz_core.analysis.patching import compare
from viz_core.figures.common import choice_labels
from viz_core.figures.contributions import (
    attribution_bars,
    attribution_heatmap,
    composition_heatmap,
    head_search_heatmap,
    layer_effect_bars,
    logit_lens_grid,
    patching_heatmap,
    patching_scatter,
    shared_limit,
)

TABS = {"attribution": "Logit attribution", "lens": "Logit lens", "patching": "Patching",
        "composition": "Composition", "search": "Head search", "qk": "Why this score?"}
LENS_POSITIONS = 256  # positions drawn in the lens grid (long inputs: the last ones)
TOKEN_CHARS = 200  # a token box holds one token: anything longer is certainly not one

sel = selection()
model = sel.model
st.title("Which heads matter")
st.caption("Attention weights say where a head looks, not whether it matters. Here: how much "
           "each head adds to the output (logit attribution), what every layer would predict "
           "(logit lens), what restores the output when copied from a clean run into a "
           "corrupted one (patching), how heads feed each other (composition), which heads "
           "link two tokens (head search) and why a head attends where it does (QK "
           "attribution).")

# The text alone (a decoder-only model generates nothing here): the positions to explain,
# and the patterns the head search ranks.
decoder_only = model.architecture == "decoder-only"
trace_request = TraceRequest.of(sel, capture=("pattern",), max_new=0 if decoder_only else None)
trace = run_trace(trace_request)
show_trace_messages(trace)
positions = list(trace.source_tokens if model.architecture == "encoder-only"
                 else trace.target_tokens)
if not positions:
    st.info("This input has no tokens to explain.")
    st.stop()


def text_box(label: str, key: str, help: str, limit: int = TOKEN_CHARS, area: bool = False,
             container=st, default: str = "") -> str:
    """A text widget synced with the URL; hostile values are cleaned, shown as typed."""
    value = state.widget_default(key, state.url_text(key, default), typed=True)
    state.clean_state(key, label.lower())
    if len(st.session_state[key]) > limit:
        state.notice(f"The {label.lower()} was {len(st.session_state[key]):,} characters; it "
                     f"was cut to {limit:,}.")
        st.session_state[key] = st.session_state[key][:limit]
    widget = container.text_area if area else container.text_input
    widget(label, st.session_state.get(key, value), key=key, max_chars=limit, help=help)
    return st.session_state[key]


# ---- what to explain ---------------------------------------------------------------------------
st.subheader("What to explain")
c_pos, c_tok, c_against = st.columns([2, 2, 2])
n = len(positions)
state.widget_default("pos", state.url_int("pos", n - 1, 0, n - 1))
st.session_state.pos = max(0, min(n - 1, int(st.session_state.pos)))
labels = choice_labels(positions)
c_pos.selectbox("Position", list(range(n)), key="pos", format_func=lambda i: labels[i],
                help="The prediction made at this position of the decoder's input (the "
                     "next token after it).")
token = text_box("Token", "tok", "One token of the vocabulary, e.g. the word you expect "
                 "next. Empty: the model's own prediction.", container=c_tok).strip()
against = text_box("Contrast token", "against", "Optional: explain logit(token) − "
                   "logit(contrast) instead of the logit alone.",
                   container=c_against).strip()
position = int(st.session_state.pos)
state.to_url(pos=position, tok=token, against=against)
target_request = TargetRequest(sel.model_name, sel.device, sel.text, sel.target, position,
                               token or None, against or None)
if token and against and token == against:
    st.error("The contrast token is the target token itself: their logit difference is "
             "always 0. Pick a different contrast token.", icon="⚠️")
if model.architecture == "encoder-only":
    st.caption("This model has no output head: patching compares its pooled sentence "
               "embedding (cosine similarity to the clean run's), so the position and tokens "
               "above are not used; the other sections read the attention itself.")
state.show_notices()

state.widget_default("tab", TABS[state.url_choice("tab", list(TABS), "attribution")])
if st.session_state.tab not in TABS.values():
    st.session_state.tab = TABS["attribution"]
tabs = dict(zip(TABS, st.tabs(list(TABS.values()), key="tab", on_change="rerun")))
state.to_url(tab=next(k for k, v in TABS.items() if v == st.session_state.tab))


def _frame_download(frame: pd.DataFrame, label: str, name: str, key: str) -> None:
    download(label, lambda: frame.to_csv(index=False), name, "text/csv", key)


# ---- logit attribution ---------------------------------------------------------------------
with tabs["attribution"]:
    if tabs["attribution"].open:
        with attempt("attributing the logit"):
            a = logit_attribution(target_request)
            total = float(a.frame["contribution"].sum())
            st.markdown(f"**{literal(a.metric)}** at position {a.position} "
                        f"(after {literal(repr(a.tokens[a.position]))}) = **{a.logit:.4f}**; "
                        f"the {len(a.frame)} components add up to {total:.4f}.")
            left, right = st.columns([3, 2])
            with left:
                chart(attribution_heatmap(a.frame), key="hm_attr_heads",
                      name="logit-attribution-heads")
            with right:
                chart(attribution_bars(a.frame), key="hm_attr_bars",
                      name="logit-attribution-other")
            st.caption(literal(a.note) + " Blue adds to the logit, red takes away.")
            _frame_download(a.frame, "Attribution (CSV)", "logit_attribution.csv",
                            "dl_attr")

# ---- logit lens ------------------------------------------------------------------------------
with tabs["lens"]:
    if tabs["lens"].open:
        with attempt("reading the logit lens"):
            lens = logit_lens(sel.model_name, sel.device, sel.text, sel.target)
            first = max(0, len(lens.tokens) - LENS_POSITIONS)  # long inputs: the last ones
            top1 = [[cell[0] for cell in row[first:]] for row in lens.top_tokens]
            chart(logit_lens_grid(lens.layers, lens.tokens[first:], top1,
                                  lens.top_probs[:, first:, 0], lens.prob[:, first:],
                                  lens.prediction_tokens[first:]),
                  key="hm_lens", name="logit-lens")
            if first:
                st.caption(f"The last {LENS_POSITIONS} of {len(lens.tokens):,} positions "
                           "(the downloads hold them all).")
            st.caption("Each row is the residual stream after that layer (the first: the "
                       "embeddings), read through the model's final norm and unembedding; "
                       "the last row is the model's own output. Text: the top token there; "
                       "colour: the probability of the model's final prediction at that "
                       "position. Hover for both probabilities.")
            d1, d2 = st.columns(2)
            with d1:
                _frame_download(lens.frame, "Logit lens (CSV)", "logit_lens.csv", "dl_lens")
            with d2:
                download("Logit lens (NPZ)", lambda: lens_npz(lens), "logit_lens.npz",
                         "application/octet-stream", "dl_lens_npz")

# ---- patching ----------------------------------------------------------------------------------
def _suggest_for_clean() -> None:
    """The button's callback: a corruption of the clean text as it is now."""
    found = suggested_corruption(sel.model_name, sel.device, st.session_state.get("clean", ""))
    if found:
        st.session_state.corrupt = found[0]
    st.session_state["_hm_suggested"] = found


with tabs["patching"]:
    if tabs["patching"].open:
        suggestion = suggested_corruption(sel.model_name, sel.device, sel.text)
        # a new sidebar text brings its own clean / corrupted pair
        if st.session_state.get("_hm_source") != sel.text:
            if "_hm_source" in st.session_state:
                st.session_state.clean = sel.text
                st.session_state.corrupt = suggestion[0] if suggestion else ""
                st.session_state.pop("_hm_suggested", None)
            st.session_state["_hm_source"] = sel.text
        p1, p2 = st.columns(2)
        clean = text_box("Clean text", "clean", "The input whose behaviour is restored "
                         "(effect 1).", limit=state.MAX_TEXT_CHARS, area=True, container=p1,
                         default=sel.text)
        corrupted = text_box("Corrupted text", "corrupt", "The same number of tokens, with "
                             "something changed (effect 0).", limit=state.MAX_TEXT_CHARS,
                             area=True, container=p2,
                             default=suggestion[0] if suggestion else "")
        shown = st.session_state.get("_hm_suggested", suggestion)
        b1, b2 = st.columns([1, 3])
        b1.button("Suggest a corruption", key="hm_suggest", on_click=_suggest_for_clean,
                  help="Replace one word of the clean text by another of the same token count.")
        if shown:
            b2.caption(f"Suggested corruption: {literal(repr(shown[1]))} → "
                       f"{literal(repr(shown[2]))} (same token count).")
        elif st.session_state.get("_hm_suggested", 0) is None:
            b2.caption("No word of the clean text could be replaced keeping its token count; "
                       "edit the corrupted text yourself.")
        over_choices = ["heads", "layers", "positions"]
        state.widget_default("over", state.url_choice("over", over_choices, "heads"))
        st.radio("Patch", over_choices, key="over", horizontal=True,
                 help="heads: each head's output z at every position · layers: the residual "
                      "stream entering each layer, every position · positions: the stream "
                      "entering each layer at one position.")
        over = st.session_state.over
        state.to_url(clean=clean, corrupt=corrupted, over=over)
        state.show_notices()
        if not clean.strip() or not corrupted.strip():
            st.info("Give a clean and a corrupted text to patch.")
        elif over == "positions" and model.count_tokens(clean) > POSITIONS_MAX:
            st.info(f"Per-position patching runs the model once per layer and position; it "
                    f"is offered up to {POSITIONS_MAX} tokens. Shorten the clean text, or "
                    "patch heads or layers.")
        else:
            # the last position stays the last one of whatever clean text is patched
            at = -1 if position == n - 1 else position
            request = PatchRequest(sel.model_name, sel.device, clean, corrupted, sel.target,
                                   at, token or None, against or None, over)
            with attempt("patching"):
                real = patching(request)
                st.markdown(f"Metric: **{literal(real.metric)}**: clean {real.clean:.4f}, "
                            f"corrupted {real.corrupted:.4f}. Effect 1 = the patched unit "
                            "alone restores the clean value; 0 = no change.")
                for w in real.warnings:
                    st.warning(literal(w), icon="✂️")
                x_title = "head" if over == "heads" else "position"
                approx = None
                if over == "layers":
                    chart(layer_effect_bars(real.effect, real.rows,
                                            "Patching the stream entering each layer"),
                          key="hm_patch", name="patching-layers")
                else:
                    left, right = st.columns(2)
                    with right, attempt("attribution patching"):
                        approx = patching(replace(request, method="attribution"))
                    lim = shared_limit(real.effect, *([] if approx is None else [approx.effect]))
                    with left:
                        chart(patching_heatmap(real.effect, real.rows, real.columns,
                                               title=f"Activation patching over {over}",
                                               x_title=x_title, limit=lim),
                              key="hm_patch", name=f"patching-{over}")
                    if approx is not None:
                        with right:
                            chart(patching_heatmap(approx.effect, approx.rows, approx.columns,
                                                   title="Attribution patching (gradient "
                                                         "approximation)", x_title=x_title,
                                                   limit=lim),
                                  key="hm_attr_patch", name=f"attribution-patching-{over}")
                if approx is not None:
                    cmp = compare(real, approx)
                    frame = cmp.frame
                    left, right = st.columns(2)
                    with left:
                        chart(patching_scatter(frame["patching"], frame["attribution"],
                                               [f"{r} · {c}" for r, c in zip(frame["row"],
                                                                            frame["column"])],
                                               cmp.pearson),
                              key="hm_patch_scatter", name=f"patching-vs-attribution-{over}")
                    right.caption(f"Correlation of attribution with activation patching: Pearson "
                               f"{cmp.pearson:.3f}, Spearman {cmp.spearman:.3f}.")
                d1, d2 = st.columns(2)
                with d1:
                    _frame_download(real.frame, "Patching (CSV)", f"patching_{over}.csv",
                                    "dl_patch")
                with d2:
                    download("Patching (NPZ)", lambda: patching_npz(real),
                             f"patching_{over}.npz", "application/octet-stream",
                             "dl_patch_npz")

# ---- composition --------------------------------------------------------------------------------
with tabs["composition"]:
    if tabs["composition"].open:
        with attempt("computing the composition scores"):
            comp = composition(sel.model_name, sel.device)
            kinds = [k for k in ("Q", "K", "V") if k in set(comp["kind"])] or ["K"]
            state.widget_default("comp", state.url_choice("comp", kinds, kinds[0]))
            if st.session_state.comp not in kinds:
                st.session_state.comp = kinds[0]
            st.radio("Composition", kinds, key="comp", horizontal=True,
                     help="How much a later head reads what an earlier head wrote: through its "
                          "queries (Q), keys (K) or values (V).")
            state.to_url(comp=st.session_state.comp)
            if comp.empty:
                st.info("This model has one layer of heads: there is no composition.")
            else:
                chart(composition_heatmap(comp, st.session_state.comp), key="hm_comp",
                      name=f"{st.session_state.comp}-composition")
            st.caption("From the weights alone (Elhage et al., 2021): ‖W_QK^recv W_OV^send‖_F /"
                       " (‖W_QK^recv‖_F ‖W_OV^send‖_F) for K; Q uses W_QKᵀ, V uses W_OV^recv.")
            _frame_download(comp, "Composition (CSV)", "composition.csv", "dl_comp")

# ---- head search ----------------------------------------------------------------------------------
with tabs["search"]:
    if tabs["search"].open:
        kinds = trace.kinds()
        state.widget_default("hs_kind", state.url_choice("hs_kind", kinds, kinds[0]))
        if st.session_state.hs_kind not in kinds:
            st.session_state.hs_kind = kinds[0]
        modes = ["pair", *TEMPLATES]
        mode_labels = {"pair": "these two tokens", **TEMPLATES}
        state.widget_default("hs_mode", state.url_choice("hs_mode", modes, "pair"))
        s1, s2 = st.columns([1, 2])
        s1.selectbox("Block", kinds, key="hs_kind", format_func=block_kind_label)
        s2.selectbox("Find heads that attend to", modes, key="hs_mode",
                     format_func=lambda m: mode_labels[m])
        kind, mode = st.session_state.hs_kind, st.session_state.hs_mode
        first = trace.layers(kind)[0]
        q_tokens, k_tokens = first.query_tokens, first.key_tokens
        query = key = 0
        if mode == "pair":
            q_labels, k_labels = choice_labels(q_tokens), choice_labels(k_tokens)
            state.widget_default("hs_q", state.url_int("hs_q", len(q_tokens) - 1, 0,
                                                       len(q_tokens) - 1))
            state.widget_default("hs_k", state.url_int("hs_k", 0, 0, len(k_tokens) - 1))
            st.session_state.hs_q = max(0, min(len(q_tokens) - 1, int(st.session_state.hs_q)))
            st.session_state.hs_k = max(0, min(len(k_tokens) - 1, int(st.session_state.hs_k)))
            c1, c2 = st.columns(2)
            c1.selectbox("Query token (attends)", list(range(len(q_tokens))), key="hs_q",
                         format_func=lambda i: q_labels[i])
            c2.selectbox("Key token (attended to)", list(range(len(k_tokens))), key="hs_k",
                         format_func=lambda i: k_labels[i])
            query, key = int(st.session_state.hs_q), int(st.session_state.hs_k)
        state.to_url(hs_kind=kind, hs_mode=mode, hs_q=query if mode == "pair" else None,
                     hs_k=key if mode == "pair" else None)
        state.show_notices()
        with attempt("searching the heads"):
            found = head_search(SearchRequest(trace_request, kind,
                                              None if mode == "pair" else mode, query, key))
            st.markdown(f"Every head of the {literal(block_kind_label(kind).lower())} ranked "
                        f"by its {literal(found.description)}.")
            if found.queries == 0:
                st.info("The template applies to no query of this input (e.g. induction needs "
                        "a token that occurs twice). Try a longer or repetitive text.")
            else:
                left, right = st.columns([2, 3])
                with left:
                    columns = ["block", "layer", "head", "score"]
                    table = found.frame[columns + ([] if mode == "pair" else ["query", "key"])]
                    st.dataframe(table.round(4), key="hs_table", on_select="rerun",
                                 selection_mode="single-row", hide_index=True, height=360,
                                 width="stretch")
                    st.caption("Click a row to open that head on the Attention page.")
                with right:
                    chart(head_search_heatmap(found.frame, "Every head's score"),
                          key="hs_heat", name=f"head-search-{mode}")
                rows = st.session_state.get("hs_table")
                picked = rows.selection.rows if rows is not None else []
                if picked:
                    row = found.frame.iloc[picked[0]]
                    open_head(kind, int(row["layer"]), int(row["head"]))
                    st.switch_page("pages/attention.py")
                _frame_download(found.frame, "Head search (CSV)", f"head_search_{mode}.csv",
                                "dl_search")

# ---- QK attribution ---------------------------------------------------------------------------------
with tabs["qk"]:
    if tabs["qk"].open:
        blocks = trace.blocks
        own = [name for name in blocks if name.endswith(".self")] or blocks
        state.widget_default("qk_block", state.url_choice("qk_block", blocks, own[-1]))
        if st.session_state.qk_block not in blocks:
            st.session_state.qk_block = own[-1]
        k1, k2, k3, k4 = st.columns([2, 1, 2, 2])
        k1.selectbox("Block", blocks, key="qk_block")
        b = trace[st.session_state.qk_block]
        qmax, kmax = len(b.query_tokens) - 1, len(b.key_tokens) - 1
        for key_, hi, default in (("qk_head", b.n_heads - 1, 0), ("qk_q", qmax, qmax)):
            state.widget_default(key_, state.url_int(key_, default, 0, hi))
            st.session_state[key_] = max(0, min(hi, int(st.session_state[key_])))
        q_now = int(st.session_state.qk_q)  # default key: where this head looks most from there
        strongest = int(np.argmax(b.window(int(st.session_state.qk_head), (q_now, q_now + 1),
                                           (0, kmax + 1))[0]))
        state.widget_default("qk_k", state.url_int("qk_k", strongest, 0, kmax))
        st.session_state.qk_k = max(0, min(kmax, int(st.session_state.qk_k)))
        k2.number_input(f"Head (0–{b.n_heads - 1})", 0, b.n_heads - 1, key="qk_head", step=1)
        ql, kl = choice_labels(b.query_tokens), choice_labels(b.key_tokens)
        k3.selectbox("Query", list(range(qmax + 1)), key="qk_q", format_func=lambda i: ql[i])
        k4.selectbox("Key", list(range(kmax + 1)), key="qk_k", format_func=lambda i: kl[i])
        state.to_url(qk_block=b.name, qk_head=st.session_state.qk_head,
                     qk_q=st.session_state.qk_q, qk_k=st.session_state.qk_k)
        state.show_notices()
        qk_request = QKRequest(sel.model_name, sel.device, sel.text, sel.target, b.name,
                               int(st.session_state.qk_head), int(st.session_state.qk_q),
                               int(st.session_state.qk_k))
        show_qk(qk_request, "hm_qk", ql[qk_request.query], kl[qk_request.key])
