"""Figures and tables for viz_core.lessons.pretraining objectives (masks side by side)."""

from __future__ import annotations

import plotly.graph_objects as go

from ..i18n import _
from ..lessons.pretraining import Objective
from .masks import mask_panels


def objective_figure(obj: Objective) -> go.Figure:
    """The objective's masks, one panel each (True = blocked = dark red ✕)."""
    p = obj.panels
    return mask_panels([x.mask for x in p], [x.title for x in p], [x.query_tokens for x in p],
                       [x.key_tokens for x in p], title=obj.name)


def objective_rows(obj: Objective, original: list[str]) -> list[dict[str, str]]:
    """Rows of a table of what the model reads and predicts.

    Per-position objectives (MLM): one row per position with the original token, the input
    and the target ("" = no loss). Sequence objectives (MASS, T5, BART): the original, the
    input and the target as three rows of space-joined tokens.
    """
    if obj.per_position and len(obj.inputs) == len(original):
        return [{"position": str(i), "original": o, "input": x,
                 "target": "" if t is None else t}
                for i, (o, x, t) in enumerate(zip(original, obj.inputs, obj.targets))]
    rows = [(_("original"), original), (_("input (encoder)"), obj.inputs)]
    dec = obj.details.get("decoder_input")
    if dec is not None:
        rows.append((_("decoder input"), dec))
    rows.append((_("target (decoder)"), [t for t in obj.targets if t is not None]))
    return [{"sequence": name, "tokens": " ".join(toks), "length": str(len(toks))}
            for name, toks in rows]
