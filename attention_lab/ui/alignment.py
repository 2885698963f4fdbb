"""Cross-attention alignment for the Attention page (decoder.cross blocks)."""

from __future__ import annotations

import streamlit as st

from viz_core.i18n import _

from .charts import chart

TOP_HEADS = 3  # best heads listed over every cross-attention layer


def show_alignment(sel, trace, block, head: int, key: str = "alignment") -> None:
    """The head's heatmap with its argmax source per target (○), and when the model's task
    knows a reference alignment (shipped "dates", "en-fr" and "zh-en") the reference (+), this
    head's score against chance and the best heads of every cross-attention layer."""
    from viz_core.analysis.alignment import (
        DESCRIPTIONS,
        chance_score,
        fits,
        head_scores,
        reference_alignment,
    )
    from viz_core.analysis.heads import alignment_scores
    from viz_core.figures.aggregates import alignment_figure

    if block.kind != "decoder.cross":
        return
    gold = reference_alignment(sel.model_name, sel.text, trace.output_text or "")
    n_q, n_k = len(block.query_tokens), len(block.key_tokens)
    gold = gold if gold is not None and fits(gold, n_q, n_k) else None
    chart(alignment_figure(block.pattern[head], block.query_tokens, block.key_tokens, gold,
                           title=_("{name} · head {head}: argmax source per target").format(
                                     name=block.name, head=head)),
          key=key, name=f"alignment-{block.name}-h{head}")
    if gold is None:
        st.caption(_("○ = the source token each target row attends to most. No reference "
                   "alignment is known for this model, input and output. The shipped "
                   "**dates** model has one (the year digits), and the shipped **en-fr** and "
                   "**zh-en** models have one (each output word's source word) when the "
                   "output is the toy grammar's translation of the input."))
        return
    scores = head_scores(block.pattern, gold)
    best = max(range(len(scores)), key=scores.__getitem__)
    chance = chance_score(gold, n_k)
    what = _(DESCRIPTIONS.get(sel.model_name, "reference"))
    st.caption(_("\\+ = reference ({what}); row t is the decoder position that predicts output "
                 "token t. Score = share of reference rows whose argmax is a reference source; "
                 "chance = {chance:.2f} (a uniformly random argmax). This head: **{value:.2f}**; "
                 "best head in this layer: {best} ({value2:.2f}).").format(
                   what=what, chance=chance, value=scores[head], best=best, value2=scores[best]))
    cross = trace.layers("decoder.cross")
    if len(cross) > 1 and all(fits(gold, *b.shape[1:]) for b in cross):
        top = alignment_scores(trace, gold).head(TOP_HEADS)
        st.caption(_("Best heads over all cross-attention layers: {heads}").format(heads=", ".join(
            _("layer {layer} head {head} ({score:.2f})").format(layer=r.layer, head=r.head,
                                                                score=r.score)
            for r in top.itertuples())))
