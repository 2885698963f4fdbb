"""Inside a head: from q and k to the output, one query token at a time."""

import streamlit as st

from ui import state
from ui.charts import chart, download
from ui.controls import pick_head
from ui.page import selection, show_trace_messages
from viz_core.export import npz_bytes
from viz_core.figures.common import unique_labels
from viz_core.figures.inside import block_inside_head, head_internals

sel = selection()
st.title("Inside a head")
trace = sel.trace()
show_trace_messages(trace)
kind, layer, head, block = pick_head(trace)
if block.q is None:
    st.info(f"This model family ({trace.model_info.get('family', '?')}) does not expose its "
            "queries and keys to us, so the step-by-step view is not available. It works for "
            "our own models, BERT-family and GPT-2-family models.")
    st.stop()

labels = unique_labels(block.query_tokens)
n_q = len(labels)
state.widget_default("query", state.url_int("query", min(1, n_q - 1), 0, n_q - 1))
st.session_state.query = max(0, min(int(st.session_state.query), n_q - 1))
st.selectbox("Query token", list(range(n_q)), key="query", format_func=lambda i: labels[i])
state.to_url(query=st.session_state.query)
state.show_notices()
qi = int(st.session_state.query)

d_k = block.q.shape[-1]
cap = block.softcap
logits = (r"\frac{q K^\top}{\sqrt{d_k}}" if cap is None else
          r"c \tanh\!\left(\frac{q K^\top}{c\sqrt{d_k}}\right)")
st.latex(r"\mathrm{Attention}(q, K, V) = \mathrm{softmax}\!\left(" + logits +
         r" + M\right) V,\qquad M_{j} = \begin{cases}-\infty & \text{key } j \text{ blocked}"
         r"\\ 0 & \text{otherwise}\end{cases},\qquad d_k = " + str(d_k)
         + ("" if cap is None else rf",\quad c = {cap:g}"))
if cap is not None:
    st.info(f"This model caps its attention logits (softcapping, as in Gemma 2): every score "
            f"s becomes {cap:g}·tanh(s / {cap:g}) before the mask and the softmax, so no "
            f"logit leaves (−{cap:g}, {cap:g}). Step 6 shows this query's scores before and "
            "after the cap.")
if block.kv_heads < block.n_heads:
    mates = [h for h, g in enumerate(block.kv_group) if g == block.kv_group[head]]
    st.caption(f"Grouped-query attention: head {head} reads key/value head "
               f"{block.kv_group[head]}, shared with heads {', '.join(map(str, mates))}, so "
               "their k and v vectors below are the same; only q differs.")
figs = block_inside_head(block, head, qi)
explain = {
    "q": "The query vector of this token: its embedding times W_Q, this head's slice.",
    "k": "The key vector of every token it may look at.",
    "products": "q ⊙ k_j elementwise; each row sums to the dot product q·k_j.",
    "raw": "The dot products q·k_j: how well each key matches the query.",
    "scaled": "Divided by √d_k so the scores do not grow with the head width.",
    "softcap": "The cap: each score before (x) and after (y) c·tanh(s/c). Small scores pass "
               "almost unchanged; large ones flatten towards ±c.",
    "masked": "Blocked keys (padding, or future tokens in a decoder) are set to −∞.",
    "weights": "Softmax turns the scores into weights that sum to 1; −∞ becomes exactly 0.",
    "weighted_v": "Each value vector v_j scaled by its weight.",
    "z": "Their sum is this head's output for this token (before W_O mixes the heads).",
}
for name, fig in figs.items():
    text_col, fig_col = st.columns([1, 4], vertical_alignment="center")
    text_col.caption(explain.get(name, ""))
    with fig_col:
        chart(fig, key=f"inside_{name}", name=f"{block.name}-h{head}-q{qi}-{name}")

steps = head_internals(block.q[head], block.k[head], block.v[head], block.mask, qi,
                       softcap=cap, scaling=getattr(block, "scaling", None))
download("These numbers (NPZ)", lambda: npz_bytes(steps), f"{block.name}-h{head}-q{qi}.npz",
         "application/octet-stream", "dl_inside")

