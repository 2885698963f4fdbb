"""The Attention page's guided box for the shipped en-fr model: "it" follows the adjective.

The self-attention tutorials' sentence, "the animal didn't cross the street because it was
too tired" and the same with "wide", run side by side through the same head: with "tired"
"it" is the animal (French "il"), with "wide" the street ("elle"). The head defaults to the
one the model card names (patching on il/elle over held-out sentences, analysis.referent);
the block, layer and head pickers are kept in the URL (it_kind, it_layer, it_head).
"""

from __future__ import annotations

import streamlit as st

from viz_core.i18n import N_, _

from .charts import chart
from .controls import block_kind_label, url_number, url_select
from .errors import literal
from .runs import TraceRequest, run_trace

MODEL = "en-fr"
PAIR = ("the animal didn't cross the street because it was too tired",
        "the animal didn't cross the street because it was too wide")
KINDS = ["encoder.self", "decoder.cross"]
QUERY = {"encoder.self": N_("the source token “it”"),
         "decoder.cross": N_("the decoder row that writes il / elle")}
STACK = {"encoder": N_("Encoder"), "decoder": N_("Decoder")}


def card_head(model) -> tuple[str, int, int]:
    """(block kind, layer, head): of the heads of KINDS, the one whose patching moves il/elle
    most in the model card (metrics.because.patching), else the head search's best; else
    encoder layer 1, head 0."""
    because = ((getattr(model, "card", {}) or {}).get("metrics", {}).get("because", {}))
    ranked = [*because.get("patching", {}).get("top", []),
              *because.get("heads", {}).get("top", [])]
    for top in ranked:
        stack, _, rest = str(top.get("block", "")).partition(".")
        layer, _, attention = rest.partition(".")
        if f"{stack}.{attention}" in KINDS and layer.isdigit():
            return f"{stack}.{attention}", int(layer), int(top.get("head", 0))
    return "encoder.self", 1, 0


def query_row(kind: str, block) -> int | None:
    """The row of the pronoun's query: "it" in the source, or the decoder row after qu'."""
    tokens = list(block.query_tokens)
    wanted = "it" if kind == "encoder.self" else "qu'"
    return tokens.index(wanted) if wanted in tokens else None


def _use_pair() -> None:
    st.session_state.text = PAIR[0]


def show(sel) -> None:
    """The box, for the shipped en-fr model only: open with its charts when the input is one
    of the pair, else closed with a button that puts the pair's first sentence in."""
    model = sel.model
    if sel.model_name != MODEL or model.architecture != "encoder-decoder":
        return
    from viz_core.analysis.referent import referent_of
    from viz_core.figures.referent import referent_panels

    open_ = sel.text.strip().lower() in PAIR
    with st.expander(_("“it” follows the adjective: tired → the animal, wide → the street"),
                     expanded=open_):
        st.markdown(_("The self-attention tutorials' sentence, twice: only the last word "
                    "changes, and with it what “it” is. French has to choose: **il** "
                    "(l'animal) or **elle** (la rue). Same head on both sides."))
        if not open_:  # no hidden chart under a closed box: the page's first chart is seen
            st.button(_("Show it: put the sentence with “tired” in the input box"),
                      key="it_show", on_click=_use_pair)
            return
        kind0, layer0, head0 = card_head(model)
        c1, c2, c3 = st.columns([2, 1, 1])
        kind = url_select(_("Block"), "it_kind", KINDS, kind0, container=c1,
                          format_func=block_kind_label)
        traces = [run_trace(TraceRequest(sel.model_name, sel.device, text,
                                         capture=("pattern",), blocks=(kind,)))
                  for text in PAIR]
        layers = traces[0].layers(kind)
        layer = url_number(_("Layer"), "it_layer", min(layer0, len(layers) - 1), 0,
                           len(layers) - 1, container=c2)
        head = url_number(_("Head"), "it_head", head0, 0, layers[0].n_heads - 1, container=c3)
        panels, lines = [], []
        for text, trace in zip(PAIR, traces):
            block = trace.layers(kind)[layer]
            ref = referent_of(text)
            row = query_row(kind, block)
            output = trace.output_text or ""
            lines.append(f"{text}\n→ {output}")
            if row is None:
                st.caption(literal(f"The model's output {output!r} has no “qu'”, so there is "
                                   "no row writing the pronoun."))
                return
            weights = block.pattern[head][row]
            panels.append({"title": f"…too {text.split()[-1]}: “it” → "
                                    f"{ref.words[ref.right]}",
                           "tokens": list(block.key_tokens), "weights": weights,
                           "right": ref.right, "wrong": ref.wrong})
        for column, line in zip(st.columns(2), lines):  # each sentence and its translation
            column.code(line, language=None, wrap_lines=True)
        fig = referent_panels(panels, title=_("{value} layer {layer} · head {head}: attention "
                                              "from {value2}").format(
                                                value=_(STACK[kind.split('.')[0]]),
                                                layer=layer, head=head, value2=_(QUERY[kind])))
        chart(fig, key="it_follows", name=f"it-follows-{kind}-{layer}-{head}")
        animal = [float(p["weights"][1]) for p in panels]
        street = [float(p["weights"][6]) for p in panels]
        tops = [literal(p["tokens"][int(p["weights"].argmax())]) for p in panels]
        st.caption(
            _("Blue: the noun “it” refers to; orange: the other noun. The head puts {value:.2f} "
              "on animal and {value2:.2f} on street with tired (most on “{value3}”), "
              "{value4:.2f} and {value5:.2f} with wide (most on “{value6}”). The default head is "
              "the one whose patching moves il/elle most in the model card; the card's head "
              "search found no head that puts half its weight on the right noun for both "
              "adjectives. Pick another head to compare.").format(
                value=animal[0], value2=street[0], value3=tops[0], value4=animal[1],
                value5=street[1], value6=tops[1]))
