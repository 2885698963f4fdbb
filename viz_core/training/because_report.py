"""The card's report on the en-fr textbook sentence (issue 31): which heads link "it" to its
noun, and which decide il/elle. train.py adds it to en-fr's metrics["because"]; it lives here
because the tasks never import the analyses (analysis.referent reads tasks.en_fr)."""

from __future__ import annotations

from ..analysis.referent import referent_heads, referent_patching
from ..backends.native import NativeModel
from ..tasks.en_fr import NAME

N_HEAD_SEARCH = 200  # held-out because-sentences for the head search
N_PATCHING = 40  # ... and for patching


def referent_report(model, vocabs, texts: list[str]) -> dict:
    """For the card: the heads that link "it" to its noun (analysis.referent.referent_heads:
    the best of each block kind and their shares per adjective class) and the heads whose
    patching moves il/elle most (referent_patching). en-fr is post-norm, so logit
    attribution does not add up here (DecompositionError): patching names the heads."""

    native = NativeModel(model, vocabs, {"name": NAME}, name=NAME)
    search = referent_heads(native, texts[:N_HEAD_SEARCH])

    def row(r: dict) -> dict:
        return {"block": r["block"], "head": int(r["head"]), **{
            c: round(float(r[c]), 4) for c in ("score", "animate", "thing", "right", "wrong")}}

    best = {kind: row(search.frame[search.frame.kind == kind].iloc[0].to_dict())
            for kind in search.frame.kind.unique()}
    patching = referent_patching(native, texts[:N_PATCHING])
    return {"heads": {"n": search.n, "threshold": search.threshold,
                      "top": [row(r) for r in search.frame.head(3).to_dict("records")],
                      "best_per_kind": best},
            "patching": {"n": int(patching.n.max()), "metric": "logit(pronoun) - logit("
                         "other pronoun), clean = the sentence, corrupted = other-class "
                         "adjective; 1 = the head alone restores the clean margin",
                         "top": [{"block": r.block, "head": int(r.head),
                                  "effect": round(float(r.effect), 4)}
                                 for r in patching.head(5).itertuples()]}}
