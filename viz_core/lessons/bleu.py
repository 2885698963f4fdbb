"""Sentence BLEU of each beam-search hypothesis against a reference, with the parts of the
definition (n-gram precisions p1..p4 and the brevity penalty), and per-token log-probs.

BLEU (Papineni et al., 2002) as computed by sacreBLEU's sentence_bleu:
    BLEU = BP · exp( (1/4) Σ_{n=1..4} log p_n ),   BP = min(1, exp(1 − r / c))
p_n = clipped n-gram matches / n-grams in the hypothesis, r = reference length, c =
hypothesis length (tokens after sacreBLEU's "13a" tokenisation). Sentence BLEU smooths zero
counts with sacreBLEU's default "exp" method (each further zero precision halves).
"""

from __future__ import annotations

from dataclasses import dataclass

from ..i18n import N_

DEFINITION = N_("BLEU = BP · exp(¼ Σₙ log pₙ), n = 1..4; pₙ = clipped n-gram matches / "
                "hypothesis n-grams; BP = min(1, exp(1 − r/c)), r = reference length, "
                "c = hypothesis length. sacreBLEU sentence_bleu, 13a tokenisation, exp "
                "smoothing of zero counts; scores 0–100.")


@dataclass
class Bleu:
    score: float  # 0..100
    precisions: list[float]  # p1..p4 in percent (as sacreBLEU reports them)
    bp: float  # brevity penalty
    hyp_len: int
    ref_len: int
    counts: list[int]  # clipped matches per order
    totals: list[int]  # hypothesis n-grams per order


def sentence_bleu(hypothesis: str, reference: str) -> Bleu:
    import sacrebleu

    b = sacrebleu.sentence_bleu(hypothesis, [reference])
    return Bleu(float(b.score), [float(p) for p in b.precisions], float(b.bp),
                int(b.sys_len), int(b.ref_len), [int(c) for c in b.counts],
                [int(t) for t in b.totals])


def token_logprobs(tree, hypothesis) -> list[tuple[str, float]]:
    """(token, log P(token | prefix)) along a hypothesis's path in the search tree."""
    return [(n.token, float(n.logprob)) for n in tree.path(hypothesis.node_id)]


def nbest_bleu_rows(tree, reference: str | None) -> list[dict]:
    """One row per hypothesis, best first: text, score, BLEU with p1..p4 and BP (when a
    reference is given), and the log-prob of every token."""
    rows = []
    for rank, h in enumerate(tree.hypotheses, start=1):
        row = {"rank": rank, "text": h.text, "score": round(float(h.score), 4)}
        if reference and reference.strip():
            b = sentence_bleu(h.text, reference)
            row.update({"BLEU": round(b.score, 2),
                        **{f"p{n}": round(p, 1) for n, p in enumerate(b.precisions, 1)},
                        "BP": round(b.bp, 3), "len hyp/ref": f"{b.hyp_len}/{b.ref_len}"})
        row["token log-probs"] = " ".join(f"{t}:{lp:.2f}" for t, lp in token_logprobs(tree, h))
        rows.append(row)
    return rows
