"""Relative positions: T5's learned bias (from the model's weights) and a toy
Transformer-XL score split into its four terms."""

import streamlit as st

from ui import state
from ui.charts import chart
from ui.controls import bounded_int
from ui.page import selection
from viz_core import relative as rp
from viz_core.figures.relative import bias_distance_figure, bias_heatmap, xl_terms_figure
from viz_core.pretraining import simple_words

sel = selection()
st.title("Relative positions")
st.markdown("Absolute encodings add a position vector to each token. Relative schemes "
            "instead change the **attention score** by the distance between query and key.")
tab_t5, tab_xl = st.tabs(["T5 relative bias", "Transformer-XL's four terms (toy)"])

with tab_t5:
    hf = getattr(sel.model, "hf_model", None)
    stacks = [s for s in ("encoder", "decoder")
              if hf is not None and rp.t5_bias_from_model(hf, s) is not None]
    if not stacks:
        st.info("T5's bias is a learned table in a T5 model's weights: load a T5 model "
                "(a folder path or Hub id in the sidebar) to see it.")
    else:
        state.widget_default("rel_stack", state.url_choice("rel_stack", stacks, stacks[0]))
        c1, c2, c3 = st.columns(3)
        stack = c1.selectbox("Stack", stacks, key="rel_stack",
                             help="The encoder's bias is bidirectional; the decoder's only "
                                  "tells keys before the query apart.")
        state.to_url(rel_stack=stack)
        bias = rp.t5_bias_from_model(hf, stack)
        n_heads = bias.weight.shape[1]
        n = bounded_int("Positions", "rel_n", 16, 2, 256, container=c2)
        head = bounded_int("Head", "rel_head", 0, 0, n_heads - 1, container=c3)
        state.show_notices()
        st.caption(f"{bias.weight.shape[0]} buckets, max distance {bias.max_distance}: "
                   "distances below half the buckets get their own bucket, longer ones share "
                   "log-spaced buckets, and everything beyond max distance shares the last.")
        table = rp.t5_bias(bias.weight, n, n, bias.bidirectional, bias.max_distance)
        chart(bias_heatmap(table[head], f"{stack} bias, head {head}: depends on k − q only"),
              key="rel_t5_map", name=f"t5-bias-{stack}-h{head}")
        dist, buckets, by_dist = rp.bias_by_distance(
            bias.weight, bias.max_distance + 8, bias.bidirectional, bias.max_distance)
        chart(bias_distance_figure(dist, by_dist, rp.bucket_boundaries(dist, buckets),
                                   list(range(n_heads))),
              key="rel_t5_curves", name=f"t5-bias-by-distance-{stack}")

with tab_xl:
    words = simple_words(sel.text)[:16]
    if len(words) < 2:
        st.warning("Type at least two words in the sidebar.")
    else:
        seed = bounded_int("Seed of the toy weights", "rel_seed", 0, 0, 9999)
        state.show_notices()
        st.latex(r"A_{ij} = \underbrace{q_i^\top k_j}_{a} + \underbrace{q_i^\top r_{i-j}}_{b}"
                 r" + \underbrace{u^\top k_j}_{c} + \underbrace{v^\top r_{i-j}}_{d}")
        st.caption("a: content–content; b: content-dependent position; c: a global bias "
                   "toward some keys' content; d: a global bias by distance. Random toy "
                   "weights (d = 16, d_k = 8), one row per word of the sidebar text "
                   f"({len(words)} words): i − j alone sets b and d, which is why d is "
                   "constant along each diagonal.")
        chart(xl_terms_figure(rp.xl_terms(rp.toy_xl(len(words), seed=seed)), words),
              key="rel_xl", name="transformer-xl-terms")
