"""Relative positions: T5's learned bias (from the model's weights) and a toy
Transformer-XL score split into its four terms."""

import streamlit as st

from attention_lab.ui import state
from attention_lab.ui.charts import chart
from attention_lab.ui.controls import url_number, url_select
from attention_lab.ui.errors import literal, translated
from attention_lab.ui.page import selection
from attention_lab.ui.runs import TraceRequest, get_trace
from viz_core.errors import InputError
from viz_core.figures.order import layer_difference_figure, restored_heatmap
from viz_core.figures.relative import bias_distance_figure, bias_heatmap, xl_terms_figure
from viz_core.i18n import _
from viz_core.lessons import order as vo
from viz_core.lessons import relative as rp
from viz_core.lessons.pretraining import simple_words

sel = selection()
st.title(_("Relative positions"))
st.markdown(_("Absolute encodings add a position vector to each token. Relative schemes "
            "instead change the **attention score** by the distance between query and key."))
tab_t5, tab_xl, tab_order = st.tabs([_("T5 relative bias"), _("Transformer-XL's four terms (toy)"),
                                     _("Order blindness")])

with tab_t5:
    hf = getattr(sel.model, "hf_model", None)
    stacks = [s for s in ("encoder", "decoder")
              if hf is not None and rp.t5_bias_from_model(hf, s) is not None]
    if not stacks:
        st.info(_("T5's bias is a learned table in a T5 model's weights: load a T5 model "
                "(a folder path or Hub id in the sidebar) to see it."))
    else:
        c1, c2, c3 = st.columns(3)
        stack = url_select(_("Stack"), "rel_stack", stacks, container=c1,
                           help=_("The encoder's bias is bidirectional; the decoder's only "
                                "tells keys before the query apart."))
        bias = rp.t5_bias_from_model(hf, stack)
        n_heads = bias.weight.shape[1]
        n = url_number(_("Positions"), "rel_n", 16, 2, 256, container=c2)
        head = url_number(_("Head"), "rel_head", 0, 0, n_heads - 1, container=c3)
        state.show_notices()
        st.caption(_("{value} buckets, max distance {max_distance}: distances below half the "
                     "buckets get their own bucket, longer ones share log-spaced buckets, and "
                     "everything beyond max distance shares the last.").format(
                       value=bias.weight.shape[0], max_distance=bias.max_distance))
        table = rp.t5_bias(bias.weight, n, n, bias.bidirectional, bias.max_distance)
        chart(bias_heatmap(table[head], _("{stack} bias, head {head}: depends on k − q only").format(
            stack=stack, head=head)),
              key="rel_t5_map", name=f"t5-bias-{stack}-h{head}")
        dist, buckets, by_dist = rp.bias_by_distance(
            bias.weight, bias.max_distance + 8, bias.bidirectional, bias.max_distance)
        chart(bias_distance_figure(dist, by_dist, rp.bucket_boundaries(dist, buckets),
                                   list(range(n_heads))),
              key="rel_t5_curves", name=f"t5-bias-by-distance-{stack}")

with tab_xl:
    words = simple_words(sel.text)[:16]
    if len(words) < 2:
        st.warning(_("Type at least two words in the sidebar."))
    else:
        seed = url_number(_("Seed of the toy weights"), "rel_seed", 0, 0, 9999)
        state.show_notices()
        st.latex(r"A_{ij} = \underbrace{q_i^\top k_j}_{a} + \underbrace{q_i^\top r_{i-j}}_{b}"
                 r" + \underbrace{u^\top k_j}_{c} + \underbrace{v^\top r_{i-j}}_{d}")
        st.caption(_("a: content–content; b: content-dependent position; c: a global bias toward "
                     "some keys' content; d: a global bias by distance. Random toy weights (d = "
                     "16, d_k = 8), one row per word of the sidebar text ({n_words} words): i − "
                     "j alone sets b and d, which is why d is constant along each diagonal.").format(
                       n_words=len(words)))
        chart(xl_terms_figure(rp.xl_terms(rp.toy_xl(len(words), seed=seed)), words),
              key="rel_xl", name="transformer-xl-terms")

with tab_order:
    st.markdown(_("Self-attention by itself has no sense of order: shuffle the tokens and each "
                "head's pattern is the same matrix with its rows and columns shuffled the same "
                "way. Positions (a table added to the embeddings, a rotation of q and k, a "
                "relative bias) break that symmetry. Here the sidebar text and a shuffle of it "
                "run with positions on and off; each shuffled pattern is put back in the "
                "original order and compared."))
    model = sel.model
    kind = "decoder.self" if model.kind == "decoder-only" else "encoder.self"
    try:
        n = model.count_tokens(sel.text)
    except InputError as err:
        n = 0
        st.warning(translated(err))
    if n < 2:
        st.warning(_("Type at least two tokens in the sidebar to shuffle them."))
        state.stop()
    c1, c2 = st.columns([1, 2])
    seed = url_number(_("Shuffle seed"), "order_seed", 0, 0, 9999, container=c1)
    order = vo.seeded_order(n, seed)
    example = " ".join(map(str, reversed(range(min(n, 6))))) + (" …" if n > 6 else "")
    typed = c2.text_input(_("…or your own order of the {n} tokens (e.g. {example})").format(
                              n=n, example=example),
                          key="order_custom", max_chars=4000)
    if typed.strip():
        try:
            order = vo.parse_order(typed, n)
        except InputError as err:
            st.warning(_("Order not used: {err}").format(err=literal(translated(err))), icon="↩️")
    state.show_notices()
    opts = {"blocks": (kind,), "capture": ("pattern",),
            "max_new": 0 if model.kind == "decoder-only" else 1}
    with st.spinner(_("Running the model four times…")):
        runs, off_note = {}, None
        for pos in (True, False):
            try:
                runs[pos] = tuple(get_trace(TraceRequest.of(sel, positions=pos, permute=p,
                                                            **opts)) for p in (None, order))
            except InputError as err:
                if pos:
                    st.error(translated(err))
                    state.stop()
                off_note = translated(err)
    base, shuffled = runs[True]
    layers = [b.name for b in base.layers(kind)]
    diffs = {pos: [float(vo.head_differences(o[n_].pattern, s_[n_].pattern,
                                             s_.source_order).max()) for n_ in layers]
             for pos, (o, s_) in runs.items()}
    chart(layer_difference_figure(layers, diffs[True], diffs.get(False)), key="order_layers",
          name="order-blindness-by-layer")
    tokens = base.target_tokens if kind == "decoder.self" else base.source_tokens
    shown = shuffled.target_tokens if kind == "decoder.self" else shuffled.source_tokens
    st.caption(_("Shuffled input (tokens, shown literally):"))
    st.code(" ".join(shown), language=None, wrap_lines=True)
    if off_note:
        st.info(off_note)
    elif kind == "decoder.self":
        st.info(_("This is a decoder: its causal mask lets each token see only the tokens before "
                "it, so the shuffle changes the attention even with positions off. A causal "
                "model can infer order from the mask alone."))
    else:
        worst = max(diffs[False])
        st.success(_("Positions off: the shuffled run equals the original up to {worst:.1e} in "
                     "every head of every layer. Positions on: up to {max:.2f}.").format(
                       worst=worst, max=max(diffs[True])))
    c1, c2 = st.columns(2)
    layer = url_number(_("Layer"), "order_layer", 0, 0, len(layers) - 1, container=c1)
    head = url_number(_("Head"), "order_head", 0, 0, base[layers[layer]].n_heads - 1,
                      container=c2)
    cols = st.columns(2)
    for col, pos in zip(cols, (True, False)):
        if pos not in runs:
            continue
        o, s_ = runs[pos]
        back = vo.unshuffle(s_[layers[layer]].pattern[head], s_.source_order)
        word, shown = ("on", _("on")) if pos else ("off", _("off"))
        with col:
            chart(restored_heatmap(o[layers[layer]].pattern[head], tokens,
                                   _("positions {word}: original").format(word=shown)),
                  key=f"order_orig_{word}", name=f"order-{word}-original")
            chart(restored_heatmap(back, tokens,
                                   _("positions {word}: shuffled, put back").format(word=shown)),
                  key=f"order_back_{word}", name=f"order-{word}-restored")
