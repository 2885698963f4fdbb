"""Which heads link "it" to its referent in the en-fr textbook sentence?

"the X did not VERB the Y because it was too ADJ": the adjective decides whether "it" is the
animate X (tired, afraid, ...) or the thing Y (wide, heavy, ...), and the French pronoun
(il/elle) shows which the model chose (tasks.en_fr.because_parts). For each sentence, head
search (head_search.search_pair) reads every head's weight from the pronoun's query to the
right noun and to the wrong one, in two block kinds:

- encoder.self: the query is the source token "it" (Google's 2017 picture of this sentence);
- decoder.cross: the query is the decoder row that predicts il/elle (teacher-forced on the
  grammar's translation), the keys the source tokens.

A head scores, for each adjective class, the share of sentences where it puts at least
`threshold` on the right noun; its score is the smaller of the two shares, so a head that
always looks at X (or always at Y) scores 0 however sharp it is.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import pandas as pd

from viz_core.i18n import N_

from ..errors import InputError
from .head_search import search_pair

KINDS = ("encoder.self", "decoder.cross")
CLASSES = ("animate", "thing")  # "it" is X (animate adjective) or Y (thing adjective)
COLUMNS = ["block", "kind", "layer", "head", "score", *CLASSES, "right", "wrong"]


@dataclass(frozen=True)
class Referent:
    """Token positions of one because-sentence (source tokens; the decoder row that
    predicts the pronoun), its referent and the French pronoun."""

    text: str
    target: str  # the grammar's translation
    it: int  # source position of "it"
    x: int  # source position of the animate noun X
    y: int  # source position of the thing Y
    pronoun_row: int  # decoder input row predicting il/elle
    referent: str  # "animate" | "thing"
    pronoun: str  # "il" | "elle"
    words: list[str]  # the source tokens

    @property
    def right(self) -> int:
        return self.x if self.referent == "animate" else self.y

    @property
    def wrong(self) -> int:
        return self.y if self.referent == "animate" else self.x


def referent_of(text: str) -> Referent:
    """The positions of a because-sentence of the en-fr grammar (InputError otherwise)."""
    from ..tasks import en_fr

    try:
        parts = en_fr.because_parts(text)
    except ValueError:
        raise InputError(N_("Give sentences like 'the animal didn't cross the street because "
                         "it was too tired' (the en-fr grammar's because-sentences).")) from None
    words = en_fr.split_words(text)
    target = en_fr.translate(text)
    fr = en_fr.split_words(target)
    # "the X did not VERB the Y because it ..." ("didn't" is two tokens too)
    return Referent(text, target, words.index("it"), words.index(parts.x.en),
                    len(words) - 1 - words[::-1].index(parts.y.en), fr.index("qu'") + 1,
                    parts.referent, parts.pronoun, words)


@dataclass(frozen=True)
class ReferentHeads:
    """Every head of both kinds, best first.

    frame: block, kind, layer, head, score (the smaller class share), animate and thing (the
    share of that class's sentences with >= threshold on the right noun), right and wrong
    (the mean weight on the right and on the wrong noun).
    sentences: one row per sentence and head: text, referent, block, head, right, wrong.
    """

    frame: pd.DataFrame
    sentences: pd.DataFrame
    threshold: float
    n: dict  # sentences per class

    def best(self, kind: str | None = None) -> pd.Series:
        frame = self.frame if kind is None else self.frame[self.frame.kind == kind]
        return frame.iloc[0]


def referent_weights(model, text: str, *, kinds=KINDS) -> pd.DataFrame:
    """One sentence: every head's weight from the pronoun's query to the right and to the
    wrong noun (rows: block, kind, layer, head, right, wrong)."""
    ref = referent_of(text)
    trace = model.trace(text, ref.target, capture=("pattern",), blocks=list(kinds))
    rows = []
    for kind in kinds:
        query = ref.it if kind == "encoder.self" else ref.pronoun_row
        keys = trace.layers(kind)[0].key_tokens
        if keys[:len(ref.words)] != ref.words:
            raise InputError(N_("This model does not read the sentence as the en-fr grammar's "
                             "tokens; use the shipped en-fr model."))
        right = search_pair(trace, query, ref.right, kind).frame
        wrong = search_pair(trace, query, ref.wrong, kind).frame
        merged = right.merge(wrong[["block", "head", "score"]], on=["block", "head"],
                             suffixes=("_right", "_wrong"))
        for r in merged.itertuples():
            rows.append({"block": r.block, "kind": kind, "layer": r.layer, "head": r.head,
                         "right": r.score_right, "wrong": r.score_wrong})
    return pd.DataFrame(rows)


def _sentences(texts) -> list[str]:
    """The sentences an analysis reads: a list (or tuple) of texts, at least one."""
    if isinstance(texts, str) or not isinstance(texts, (list, tuple)) or \
            not all(isinstance(t, str) for t in texts):
        raise InputError(N_("Give the sentences as a list of texts."))
    if not texts:
        raise InputError(N_("Give at least one sentence."))
    return list(texts)


def referent_heads(model, texts: list[str], *, threshold: float = 0.5,
                   kinds=KINDS) -> ReferentHeads:
    """Head search over because-sentences of the en-fr grammar: which head puts at least
    `threshold` of the pronoun's attention on the noun it refers to, for both adjective
    classes? (See the module docstring.)"""
    texts = _sentences(texts)
    if isinstance(threshold, bool) or not isinstance(threshold, (int, float)) or \
            not 0 < threshold <= 1:
        raise InputError(N_("The threshold is a weight in (0, 1], not {threshold}."), threshold=threshold)
    per = []
    for text in texts:
        frame = referent_weights(model, text, kinds=kinds)
        frame.insert(0, "text", text)
        frame.insert(1, "referent", referent_of(text).referent)
        per.append(frame)
    sentences = pd.concat(per, ignore_index=True)
    n = {c: int((sentences.drop_duplicates("text").referent == c).sum()) for c in CLASSES}
    rows = []
    for (block, head), g in sentences.groupby(["block", "head"], sort=False):
        shares = {c: float((g[g.referent == c].right >= threshold).mean()) if n[c] else np.nan
                  for c in CLASSES}
        rows.append({"block": block, "kind": g.kind.iloc[0], "layer": int(g.layer.iloc[0]),
                     "head": int(head), "score": float(np.nanmin(list(shares.values()))),
                     **shares, "right": float(g.right.mean()), "wrong": float(g.wrong.mean())})
    frame = pd.DataFrame(rows, columns=COLUMNS).sort_values(
        ["score", "right"], ascending=False, kind="stable").reset_index(drop=True)
    return ReferentHeads(frame, sentences, threshold, n)


def contrast(text: str) -> str:
    """The same because-sentence with an adjective of the other class (same length), so "it"
    changes referent: tired -> the first thing adjective of the verb, and back."""
    from ..tasks import en_fr

    parts = referent_of(text)
    words = en_fr.split_words(text)
    verb = words[words.index(parts.words[parts.y]) - 2]
    _, _, thing_adj = en_fr.BECAUSE_VERBS[verb]
    others = [a for a in (thing_adj.split() if parts.referent == "animate" else [
        a.en for a in en_fr.ANIMATE_ADJ]) if a not in en_fr.HELD_OUT_ADJ]
    adj = words[-1]
    return text[: text.lower().rindex(adj)] + others[len(adj) % len(others)]


def referent_patching(model, texts: list[str]) -> pd.DataFrame:
    """Activation patching of every head on the pronoun (analysis.patching.patch): clean =
    the sentence, corrupted = contrast(sentence) (the other referent), metric = logit(clean
    pronoun) - logit(corrupted pronoun) where the decoder, teacher-forced on the translation
    up to "parce qu'", predicts il/elle. Sentences whose two pronouns are the same word are
    skipped (none in the grammar: X and Y differ in gender). -> block, head, effect (mean
    over sentences; 1 = patching this head alone restores the clean pronoun's margin), n,
    best first."""
    texts = _sentences(texts)
    frames = []
    for text in texts:
        ref, other = referent_of(text), referent_of(contrast(text))
        if ref.pronoun == other.pronoun:
            continue
        prefix = " ".join(ref.target.replace("'", "' ").split()[: ref.pronoun_row])
        p = model.patch(text, other.text, target=prefix, token=ref.pronoun,
                        against=other.pronoun, position=-1, over="heads")
        frames.append(p.frame)
    if not frames:
        raise InputError(N_("No sentence has a contrast with the other pronoun."))
    allf = pd.concat(frames, ignore_index=True)
    out = allf.groupby(["row", "index"], sort=False).effect.agg(["mean", "size"]).reset_index()
    out.columns = ["block", "head", "effect", "n"]
    return out.sort_values("effect", ascending=False, kind="stable").reset_index(drop=True)
