"""Cross-attention alignment for the Attention page (decoder.cross blocks)."""

from __future__ import annotations

import streamlit as st

from .charts import chart


def show_alignment(sel, trace, block, head: int, key: str = "alignment") -> None:
    """The head's heatmap with its argmax source per target (○), the reference alignment
    (+) and every head's score when the model's task knows one (shipped "dates")."""
    from viz_core.alignment import fits, head_scores, reference_alignment
    from viz_core.figures.aggregates import alignment_figure

    if block.kind != "decoder.cross":
        return
    gold = reference_alignment(sel.model_name, sel.text, trace.output_text or "")
    n_q, n_k = len(block.query_tokens), len(block.key_tokens)
    gold = gold if gold is not None and fits(gold, n_q, n_k) else None
    chart(alignment_figure(block.pattern[head], block.query_tokens, block.key_tokens, gold,
                           title=f"{block.name} · head {head}: argmax source per target"),
          key=key, name=f"alignment-{block.name}-h{head}")
    if gold is None:
        st.caption("○ = the source token each target row attends to most. No reference "
                   "alignment is known for this model and input (the shipped dates model "
                   "has one: the year digits).")
        return
    scores = head_scores(block.pattern, gold)
    best = max(range(len(scores)), key=scores.__getitem__)
    st.caption(f"+ = reference (year digits); score = share of reference rows whose argmax "
               f"is a reference source. This head: {scores[head]:.2f}; best head in this "
               f"layer: {best} ({scores[best]:.2f}).")
