"""Cross-attention alignment: a reference alignment where the task knows one, and every
head's alignment score against it (analysis.alignment_score: the share of reference target
tokens whose argmax source token is a reference source token).

References are known for three shipped encoder-decoder models:

- "dates": the output's year digits come from where the input writes the year;
- "en-fr": the grammar's word alignment (tasks.en_fr.translate_aligned: each French word
  and the English word(s) it translates), when the output is the grammar's translation of
  the input; "zh-en" likewise (tasks.zh_en.translate_aligned: each English word and the
  Chinese word(s) it translates). Punctuation in the input (its own tokens, unknown to the model) is skipped;
  any other word outside the grammar, or an output the grammar would not give (a mistake
  of the model), means no reference.

Rows of decoder.cross are the decoder's inputs <bos> y1 .. yn. Output token t is *predicted*
at row t and *read* at row t + 1; both conventions are offered (see tasks.common). Keys are
the source tokens followed by <eos>.
"""

from __future__ import annotations

import re

import numpy as np

from ..i18n import N_
from .heads import alignment_score, gold_sets

CONVENTIONS = {"predicting": 0, "input": 1}
MODELS = ("dates", "en-fr", "zh-en")  # the shipped models with a reference alignment
DESCRIPTIONS = {"dates": N_("the year digits"), "en-fr": N_("the grammar's word alignment"),
                "zh-en": N_("the grammar's word alignment")}  # msgids: shown through _()
_WORD = re.compile(r"\w")


def reference_alignment(model_name: str, source: str, output: str,
                        convention: str = "predicting") -> list[tuple[int, int]] | None:
    """[(query row, key position)] for the shipped "dates", "en-fr" and "zh-en" models, else
    None (no reference known for this model, input and output)."""
    if model_name not in MODELS or not source.strip() or not output:
        return None
    pairs = {"dates": _dates, "en-fr": _en_fr, "zh-en": _zh_en}[model_name](source, output)
    if not pairs:
        return None
    shift = CONVENTIONS[convention]
    return [(t + shift, s) for t, s in pairs]


def _dates(source: str, output: str) -> list[tuple[int, int]] | None:
    """(output character, input character): dates are character-level models."""
    from ..tasks.common import Pair
    from ..tasks.dates import year_alignment

    try:
        return year_alignment(Pair(source, output), "all")
    except ValueError:  # no year written in the input
        return None


def _en_fr(source: str, output: str) -> list[tuple[int, int]] | None:
    """(output token, source token) for the word-level en-fr model, tokenised as its
    vocabularies do (tokenizer.Vocab: lowercase, words and punctuation apart)."""
    from ..model.tokenizer import SPECIALS, Vocab
    from ..tasks.common import Pair
    from ..tasks.en_fr import word_alignment

    split = Vocab(list(SPECIALS), "word", lowercase=True).split
    src, out = split(source), split(output)
    words = [k for k, tok in enumerate(src) if _WORD.match(tok)]  # punctuation skipped
    if not words or not all(_WORD.match(tok) for tok in out):
        return None
    try:
        links = word_alignment(Pair(" ".join(src[k] for k in words), " ".join(out)))
    except ValueError:  # not a sentence of the grammar, or not its translation
        return None
    return [(t, words[k]) for t, k in links]


def _zh_en(source: str, output: str) -> list[tuple[int, int]] | None:
    """(output token, source token) for zh-en: the source in the model's words (the
    lexicon's maximum matching, tasks.zh_en.split_words); punctuation other than the
    grammar's "，" and "。" is skipped, as in en-fr."""
    from ..model.tokenizer import SPECIALS, Vocab
    from ..tasks.zh_en import COMMA, STOP, split_words, translate_aligned

    src = split_words(source)
    out = Vocab(list(SPECIALS), "word", lowercase=True).split(output)
    words = [k for k, tok in enumerate(src) if _WORD.match(tok) or tok in (COMMA, STOP)]
    if not words or not all(_WORD.match(tok) for tok in out):
        return None
    try:
        english, links = translate_aligned([src[k] for k in words])
    except ValueError:  # not a sentence of the grammar
        return None
    if english != out:  # not its translation (a mistake of the model)
        return None
    return [(t, words[k]) for t, k in links]


def fits(gold, n_queries: int, n_keys: int) -> bool:
    return bool(gold) and all(0 <= q < n_queries and 0 <= k < n_keys for q, k in gold)


def head_scores(pattern: np.ndarray, gold) -> list[float]:
    """alignment_score of every head of one block: pattern [head, q, k]."""
    return [alignment_score(pattern[h], gold) for h in range(pattern.shape[0])]


def chance_score(gold, n_keys: int) -> float:
    """Expected alignment_score of a head whose argmax is uniformly random over n_keys keys:
    the mean over reference rows of (reference sources of the row) / n_keys."""
    sets = gold_sets(gold)
    if not sets or n_keys < 1:
        raise ValueError("need a non-empty reference and at least one key")
    return float(np.mean([len(ks) / n_keys for ks in sets.values()]))
