"""The card's alignment figure for a translation model with a reference word alignment (zh-en,
issue 31): on held-out sentences, the Attention page's score of every cross-attention head
against the grammar's reference (analysis.alignment: the share of reference target tokens
whose argmax source token is a reference source), through the same code as the page. It
lives here because the tasks never import the analyses."""

from __future__ import annotations

import numpy as np

from ..analysis.alignment import CONVENTIONS, fits, head_scores, reference_alignment
from ..backends.native import NativeModel
from ..tasks.common import Pair

N_ALIGNMENT = 200  # held-out sentences


def alignment_scores(model: NativeModel, name: str, texts: list[str]) -> dict:
    """{(block, head, convention): [score per sentence]} over texts (the model's own greedy
    outputs), and how many texts had a reference (the output is the grammar's translation)."""
    scores: dict[tuple[str, int, str], list[float]] = {}
    n_ref = 0
    for text in texts:
        trace = model.trace(text, capture=("pattern",), blocks=["decoder.cross"])
        cross = trace.layers("decoder.cross")
        golds = {c: reference_alignment(name, text, trace.output_text or "", c)
                 for c in CONVENTIONS}
        if any(g is None for g in golds.values()):
            continue
        n_ref += 1
        for conv, gold in golds.items():
            for block in cross:
                if not fits(gold, *block.pattern.shape[1:]):
                    continue
                for head, score in enumerate(head_scores(block.pattern, gold)):
                    scores.setdefault((block.name, head, conv), []).append(score)
    return {"scores": scores, "n_reference": n_ref}


def alignment_report(model, vocabs, name: str, pairs: list[Pair]) -> dict:
    """For the card: the best cross-attention heads' mean alignment score on the first
    N_ALIGNMENT held-out pairs, under each row convention ("predicting" is the page's)."""
    native = NativeModel(model, vocabs, {"name": name}, name=name)
    texts = [p.source for p in pairs[:N_ALIGNMENT]]
    found = alignment_scores(native, name, texts)
    rows = sorted(({"block": b, "head": h, "convention": c,
                    "score": round(float(np.mean(v)), 4)}
                   for (b, h, c), v in found["scores"].items() if v),
                  key=lambda r: -r["score"])
    best = {c: next((r for r in rows if r["convention"] == c), None) for c in CONVENTIONS}
    return {"n": len(texts), "n_reference": found["n_reference"],
            "metric": "share of reference target tokens whose argmax source token is a "
                      "reference source (the Attention page's score), mean over sentences",
            "best": best["predicting"], "best_per_convention": best, "top": rows[:5]}
