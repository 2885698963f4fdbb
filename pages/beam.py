"""Beam search: the whole search tree, the n-best list, greedy versus beam, and what the
model looked at when it chose each token."""

import pandas as pd
import streamlit as st

from attention_lab.ui import state
from attention_lab.ui.bleu import show_nbest_bleu
from attention_lab.ui.charts import chart, download
from attention_lab.ui.controls import url_number, url_select
from attention_lab.ui.errors import literal, reported, translated
from attention_lab.ui.page import selection
from attention_lab.ui.runs import BeamRequest, get_beam
from viz_core.decoding import attention_key_labels
from viz_core.figures.beam import beam_tree_figure, selected_node
from viz_core.figures.heatmap import matrix_heatmap
from viz_core.i18n import N_, _

# generate's early_stopping values (kept in the address) and what each one does
EARLY = {"False": N_("False (likely done)"), "True": N_("True (beam_size finished)"),
         "never": N_("never (none can win)")}

sel = selection()
st.title(_("Beam search"))
if not sel.model.can_generate:
    st.info(_("This model has no decoder, so it does not generate text. Pick a translation "
            "or language model (or a GPT-2 / BART / T5 / Marian model) to see a search."))
    state.stop()

c1, c2, c3, c4 = st.columns(4)
beam_size = url_number(_("Beam size"), "beam", 4, 1, 16, container=c1,
                       help=_("1 is greedy search."))
max_new_tokens = url_number(_("Max new tokens"), "max_len", 24, 1, 256, container=c2)
length_penalty = url_number(_("Length penalty"), "lp", 1.0, -2.0, 5.0, step=0.25, container=c3,
                            help=_("score = sum of log-probs / length ** penalty"))
early = url_select(_("Early stopping"), "early", list(EARLY), container=c4,
                   format_func=lambda v: _(EARLY[v]),
                   help=_("As in Hugging Face generate: True stops once beam_size hypotheses "
                        "are finished; False stops when a live beam is unlikely to beat them "
                        "(judged at its current length); never only when none can."))
prefix = state.widget_default("prefix", state.url_text("prefix", ""), typed=True)
st.text_input(_("Force the output to start with (optional)"), prefix, key="prefix",
              help=_("What if it had started with …? The search continues after these tokens."))
state.to_url(prefix=st.session_state.prefix)
state.show_notices()
early = {"False": False, "True": True, "never": "never"}[early]
prefix = st.session_state.prefix.strip() or None

request = BeamRequest.of(sel, beam_size=beam_size, max_new_tokens=max_new_tokens,
                         length_penalty=length_penalty, early_stopping=early, prefix=prefix)
with reported(_("running the beam search")), st.spinner(_("Searching…")):
    tree = get_beam(request)
    greedy = get_beam(request.greedy())
for w in tree.settings.get("warnings", []):
    st.warning(translated(w))

best, g = tree.hypotheses[0], greedy.hypotheses[0]
c1, c2 = st.columns(2)
c1.markdown(_("**Beam {beam_size} best** (score {score:.3f})").format(
                beam_size=beam_size, score=best.score))
c1.code(best.text or _("(empty)"), language=None, wrap_lines=True)
c2.markdown(_("**Greedy** (score {score:.3f})").format(score=g.score))
c2.code(g.text or _("(empty)"), language=None, wrap_lines=True)
if best.token_ids != g.token_ids:
    c2.caption(_("Beam search found a different output than greedy search."))

node_key = "beam_tree"
event = chart(beam_tree_figure(tree, title=_("Search tree: steps left to right — click a node")),
              key=node_key, on_select="rerun", name="beam-tree")
st.caption(_("● kept in the beam · ✕ pruned · ★ finished (EOS or max length); thick lines are "
           "the n-best paths."))

st.subheader("n-best")
table = pd.DataFrame(show_nbest_bleu(
    tree, sel.target, scorable=sel.model.architecture == "encoder-decoder"))

node_id = selected_node(event.selection) if event else None
st.subheader(_("What the model looked at"))
if node_id is None:
    st.caption(_("Click a kept or finished node in the tree to see the attention of the step "
               "that chose it."))
else:
    node = tree.node(node_id)
    path = " ".join(n.token for n in tree.path(node_id))
    st.markdown(_("Node {node_id}: step {step}, token {token}, log-prob {logprob:.3f}, "
                  "cumulative {cum_logprob:.3f}, score {score:.3f} — {status}").format(
                    node_id=node_id, step=node.step, token=literal(node.token),
                    logprob=node.logprob, cum_logprob=node.cum_logprob, score=node.score,
                    status=node.status))
    st.code(path, language=None, wrap_lines=True)
    if node.attention is None:
        st.info(_("Only kept and finished nodes carry attention (pruned candidates were never "
                "fed back to the model)."))
    else:
        n_layers = node.attention.shape[0]
        layer = st.slider(_("Layer"), 0, n_layers - 1, n_layers - 1, key="beam_layer")
        att = node.attention[layer]  # (head, key)
        keys = attention_key_labels(tree, node_id)
        chart(matrix_heatmap(att, [f"head {h}" for h in range(att.shape[0])], keys,
                             title=_("{attention_kind}-attention at step {step}, layer {layer}").format(
                                       attention_kind=tree.attention_kind, step=node.step,
                                       layer=layer), y_title=_("head")),
              key="beam_att", name=f"beam-node{node_id}-attention")

download(_("Search tree (JSON)"), tree.to_json, "beam_tree.json", "application/json", "dl_tree")
download(_("n-best (CSV)"), lambda: table.to_csv(index=False), "nbest.csv", "text/csv", "dl_nbest")
