"""Inside a head: from q and k to the output, one query token at a time; then the same q and
keys under other scoring functions, and why the Transformer divides by sqrt(d_k)."""

import streamlit as st

from attention_lab.ui import state
from attention_lab.ui.charts import chart, download
from attention_lab.ui.controls import pick_head, url_number, url_select
from attention_lab.ui.errors import literal
from attention_lab.ui.page import selection, show_trace_messages
from viz_core import npz_bytes
from viz_core.figures.common import choice_labels
from viz_core.figures.inside import block_inside_head, head_internals
from viz_core.figures.scoring import (
    draw_weights_figure,
    logit_variance_figure,
    saturation_figure,
    scoring_comparison_figure,
)
from viz_core.i18n import N_, _
from viz_core.lessons import scoring

sel = selection()
st.title(_("Inside a head"))
trace = sel.trace()
show_trace_messages(trace)
kind, layer, head, block = pick_head(trace)
if block.q is None:
    st.info(_("This model family ({get}) does not expose its queries and keys to us, so the "
              "step-by-step view is not available. It works for our own models, BERT-family and "
              "GPT-2-family models.").format(get=trace.model_info.get('family', '?')))
    state.stop()

labels = choice_labels(block.query_tokens)
n_q = len(labels)
qi = url_select(_("Query token"), "query", range(n_q), min(1, n_q - 1),
                format_func=lambda i: labels[i])
state.show_notices()

d_k = block.q.shape[-1]
cap = block.softcap
logits = (r"\frac{q K^\top}{\sqrt{d_k}}" if cap is None else
          r"c \tanh\!\left(\frac{q K^\top}{c\sqrt{d_k}}\right)")
st.latex(r"\mathrm{Attention}(q, K, V) = \mathrm{softmax}\!\left(" + logits +
         r" + M\right) V,\qquad M_{j} = \begin{cases}-\infty & \text{" + _("key j blocked")
         + r"}\\ 0 & \text{" + _("otherwise") + r"}\end{cases},\qquad d_k = " + str(d_k)
         + ("" if cap is None else rf",\quad c = {cap:g}"))
if cap is not None:
    st.info(_("This model caps its attention logits (softcapping, as in Gemma 2): every score s "
              "becomes {cap:g}·tanh(s / {cap:g}) before the mask and the softmax, so no logit "
              "leaves (−{cap:g}, {cap:g}). Step 6 shows this query's scores before and after the "
              "cap.").format(cap=cap))
if block.kv_heads < block.n_heads:
    mates = [h for h, g in enumerate(block.kv_group) if g == block.kv_group[head]]
    st.caption(_("Grouped-query attention: head {head} reads key/value head {value}, shared with "
                 "heads {join}, so their k and v vectors below are the same; only q differs.").format(
                   head=head, value=block.kv_group[head], join=', '.join(map(str, mates))))
figs = block_inside_head(block, head, qi)
explain = {
    "q": N_("The query vector of this token: its embedding times W_Q, this head's slice."),
    "k": N_("The key vector of every token it may look at."),
    "products": N_("q ⊙ k_j elementwise; each row sums to the dot product q·k_j."),
    "raw": N_("The dot products q·k_j: how well each key matches the query."),
    "scaled": N_("Divided by √d_k so the scores do not grow with the head width."),
    "softcap": N_("The cap: each score before (x) and after (y) c·tanh(s/c). Small scores pass "
               "almost unchanged; large ones flatten towards ±c."),
    "masked": N_("Blocked keys (padding, or future tokens in a decoder) are set to −∞."),
    "weights": N_("Softmax turns the scores into weights that sum to 1; −∞ becomes exactly 0."),
    "weighted_v": N_("Each value vector v_j scaled by its weight."),
    "z": N_("Their sum is this head's output for this token (before W_O mixes the heads)."),
}
for name, fig in figs.items():
    text_col, fig_col = st.columns([1, 4], vertical_alignment="center")
    text_col.caption(_(explain[name]) if name in explain else "")
    with fig_col:
        chart(fig, key=f"inside_{name}", name=f"{block.name}-h{head}-q{qi}-{name}")

steps = head_internals(block.q[head], block.k[head], block.v[head], block.mask, qi,
                       softcap=cap, scaling=getattr(block, "scaling", None))
download(_("These numbers (NPZ)"), lambda: npz_bytes(steps), f"{block.name}-h{head}-q{qi}.npz",
         "application/octet-stream", "dl_inside")


st.subheader(_("Scoring functions"))
st.caption(_("How else could a query rate its keys? The same q and keys, scored three ways: the "
           "dot product, the scaled dot product of the Transformer, and the additive "
           "(Bahdanau) scorer of the first attention models; and why the Transformer divides "
           "by √d_k."))
state.widget_default("scoring", bool(state.url_int("scoring", 0, 0, 1)))
st.toggle(_("Compare scoring functions"), key="scoring")
state.to_url(scoring=1 if st.session_state.scoring else None)
state.show_notices()
if st.session_state.scoring:
    c_dk, c_seed = st.columns([3, 1])
    own_dk = d_k if d_k in scoring.DK_CHOICES else 64
    url_dk = state.url_int("dk", own_dk, scoring.DK_CHOICES[0], scoring.DK_CHOICES[-1])
    if scoring.nearest_choice(url_dk) != url_dk:
        state.notice(_("'dk={url_dk}' is not a power of two; showing {nearest_choice}.").format(
                         url_dk=url_dk, nearest_choice=scoring.nearest_choice(url_dk)))
    state.widget_default("dk", scoring.nearest_choice(url_dk))
    st.session_state.dk = scoring.nearest_choice(int(st.session_state.dk))  # powers of two
    c_dk.select_slider(_("d_k of the random experiment"), scoring.DK_CHOICES, key="dk",
                       help=_("This head's own d_k is {d_k}.").format(d_k=d_k))
    state.to_url(dk=st.session_state.dk)
    seed = url_number(_("Seed"), "score_seed", 0, 0, 9999, container=c_seed,
                      help=_("Draws the additive scorer's weights and the random q and keys."))
    state.show_notices()
    dk = int(st.session_state.dk)

    cmp = scoring.compare_scores(block.q[head][qi], block.k[head], block.mask[qi], seed=seed)
    st.caption(_("Query {literal}, this head's own q and keys (d_k = {d_k}). The additive row is "
                 "a **random, untrained additive scorer of width d_a = {d_a}** (W₁, W₂, v_a "
                 "drawn from seed {seed}): this model has no such weights, so it shows the shape "
                 "of the function, not a trained choice. Its tanh bounds every score; the dot "
                 "product grows with the length of q and k. Blocked keys get weight 0 under "
                 "every scorer. No position bias or softcap is added here.").format(
                   literal=literal(labels[qi]), d_k=d_k, d_a=cmp.d_a, seed=seed))
    if block.scaling is not None and abs(block.scaling * d_k ** 0.5 - 1) > 1e-3:
        st.caption(_("This model multiplies q·k by {scaling:.4g}, not by 1/√d_k = {value:.4g}: "
                     "the middle row is the textbook scaling; step 5 above shows the model's own.").format(
                       scaling=block.scaling, value=d_k ** -0.5))
    chart(scoring_comparison_figure(cmp.scores, cmp.weights, block.key_tokens, cmp.blocked),
          key="scoring_compare", name=f"{block.name}-h{head}-q{qi}-scoring")

    draw = scoring.one_draw(dk, seed=seed)
    curves = scoring.saturation_curves(seed=seed)
    i_dk = list(curves.d_ks).index(dk)
    st.caption(_("Why √d_k: with q and k of independent components of variance 1, q·k is a sum "
                 "of d_k products, so Var(q·k) = d_k. As d_k grows the logits spread by √d_k, "
                 "the softmax puts almost all its weight on the largest one (it saturates) and "
                 "its gradient p_j(1−p_j) vanishes, so the head stops learning. Dividing by √d_k "
                 "keeps the variance at 1 for any width. At d_k = {dk}, {value:.0%} of unscaled "
                 "rows put more than {SATURATED} on one key; scaled: {value2:.0%}.").format(
                   dk=dk, value=curves.stats['unscaled']['saturated'][i_dk],
                   SATURATED=scoring.SATURATED, value2=curves.stats['scaled']['saturated'][i_dk]))
    chart(draw_weights_figure(draw.weights, dk), key="scoring_draw", name=f"scoring-draw-{dk}")
    chart(saturation_figure(curves.d_ks, curves.stats, dk, curves.n_keys, curves.draws),
          key="scoring_saturation", name="scoring-saturation")
    chart(logit_variance_figure(curves.d_ks, curves.dot_var, dk), key="scoring_variance",
          name="scoring-variance")
