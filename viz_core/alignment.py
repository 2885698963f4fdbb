"""Cross-attention alignment: a reference alignment where the task knows one (the shipped
"dates" model: the output's year digits come from where the input writes the year), and
every head's alignment score against it (analysis.alignment_score: the share of reference
target tokens whose argmax source token is a reference source token).

Rows of decoder.cross are the decoder's inputs <bos> y1 .. yn. Output token t is *predicted*
at row t and *read* at row t + 1; both conventions are offered (see tasks.common).
"""

from __future__ import annotations

import numpy as np

from .analysis import alignment_score

CONVENTIONS = {"predicting": 0, "input": 1}


def reference_alignment(model_name: str, source: str, output: str,
                        convention: str = "predicting") -> list[tuple[int, int]] | None:
    """[(query row, key position)] for the shipped "dates" model, else None (unknown)."""
    if model_name != "dates" or not source.strip() or not output:
        return None
    from .tasks.common import Pair
    from .tasks.dates import year_alignment

    try:
        pairs = year_alignment(Pair(source, output), "all")
    except ValueError:  # no year written in the input
        return None
    shift = CONVENTIONS[convention]
    return [(t + shift, s) for t, s in pairs]


def fits(gold, n_queries: int, n_keys: int) -> bool:
    return bool(gold) and all(0 <= q < n_queries and 0 <= k < n_keys for q, k in gold)


def head_scores(pattern: np.ndarray, gold) -> list[float]:
    """alignment_score of every head of one block: pattern [head, q, k]."""
    return [alignment_score(pattern[h], gold) for h in range(pattern.shape[0])]
