"""A suggested corruption for activation patching: the clean text with one word replaced by
another word that keeps the token count, so every position lines up between the two runs.

Pure Python: the model's tokenizer comes in as a callable (text -> token count), so this
never loads anything. Which word to replace: the last word the model sees, else the one
before it, and so on (a change of the last word most likely moves a prediction made there; a
toy model may ignore an earlier word entirely, leaving nothing to restore); candidates are
the text's own longer words (names, nouns: the classic "swap the subject"), a short list of
common nouns, then the words of the model's examples. An adjective of the textbook sentence's
two kinds comes first with one of the other kind: "...because it was too tired" becomes
"...too wide", so "it" changes from the animal to the street (the minimal pair of the
self-attention tutorials; the adjectives of viz_core.tasks.en_fr, and zh_en's 累 -> 宽).

A text that repeats itself ("... red king cat sees the red king": its last two words occurred
together before) gets the induction corruption instead: the earlier occurrence of the last
word is replaced, so a head looking back for "what followed king last time" finds no king,
while the last word itself stays. That is the corruption under which the textbook induction
circuit (previous-token head -> induction head's key -> logits) carries the answer (Olsson et
al., 2022); replacing the last word instead changes what the induction head looks for.
"""

from __future__ import annotations

import functools
import re
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass

from ..errors import VizError

FALLBACK_WORDS = ("dog", "cat", "house", "car", "tree", "city", "book", "river", "table",
                  "road", "bird", "apple", "train", "friend", "water", "day")
# Chinese is written without spaces: one Han character is one candidate "word"; common nouns
# come first among its replacements, and particles and measure words are not replaced.
FALLBACK_HAN = ("猫", "狗", "书", "树", "车", "水", "马", "鸟")
HAN_FUNCTION = frozenset("了的着过吗呢吧啊个只本块条张位件"  # particles, measure words
                         "上下里中外前后内在把被给从向到对和与")  # places, prepositions
_WORD = re.compile(r"[A-Za-z]{2,}|[\u3400-\u4dbf\u4e00-\u9fff]")
MAX_TRIES = 200  # tokenizer calls at most (each is one tokenisation of the whole text)


def _han(word: str) -> bool:
    return "\u3400" <= word[0] <= "\u9fff"


@dataclass(frozen=True)
class Corruption:
    text: str  # the corrupted text
    replaced: str  # the clean word
    by: str  # the word put in its place
    start: int  # character offset of the word in the clean text


@functools.cache
def _contrasts() -> dict[str, list[str]]:
    """Each adjective of the because-sentences -> those of the other kind, in the grammars'
    order: English (en-fr: tired -> wide, long, ...; wide -> tired, hungry, ...) and the
    one-character Chinese ones (zh-en: 累 -> 宽, 长, ...; 宽 -> 累, 饿, ...)."""
    from ..tasks import en_fr, zh_en

    animate, thing = [a.en for a in en_fr.ANIMATE_ADJ], [a.en for a in en_fr.THING_ADJ]
    chinese = dict(pair.split("|") for pair in zh_en.ADJECTIVES)
    zh_thing = [w for _, adjs in zh_en.BECAUSE_VERBS.values() for w in adjs.split()]
    zh_animate, zh_thing = ([chinese[w] for w in dict.fromkeys(words) if len(chinese[w]) == 1]
                            for words in (zh_en.ANIMATE_ADJ, zh_thing))
    return {**{a: thing for a in animate}, **{t: animate for t in thing},
            **{a: zh_thing for a in zh_animate}, **{t: zh_animate for t in zh_thing}}


def _candidates(word: str, pool: Iterable[str]) -> list[str]:
    """The pool's words of the word's own script (Latin letters or Han), first use of each."""
    seen, out = {word.lower()}, []
    for w in pool:
        if w.lower() not in seen and _han(w) == _han(word):
            seen.add(w.lower())
            out.append(w.capitalize() if word[0].isupper() else w.lower())
    return out


def _earlier_occurrence(words: list[re.Match]) -> re.Match | None:
    """The latest earlier occurrence of the last word that the word before the last also
    preceded (the text repeats a stretch), else None. Compared case-blind."""
    low = [m.group().lower() for m in words]
    for i in range(len(low) - 2, 0, -1):
        if low[i] == low[-1] and low[i - 1] == low[-2]:
            return words[i]
    return None


def suggest_corruption(text: str, count_tokens: Callable[[str], int],
                       examples: Sequence[str] = (), max_chars: int | None = None
                       ) -> Corruption | None:
    """One word of `text` replaced so that count_tokens gives the same count; None when no
    word of two or more letters can be replaced (or the text is empty). ``max_chars``: the
    corrupted text stays within this many characters (a text box's limit, which would cut
    a longer suggestion and change its token count)."""
    words = list(_WORD.finditer(text))
    if not words:
        return None

    def count(part: str) -> int:  # a tokenizer may refuse an empty or unreadable prefix
        if not part.strip():
            return 0
        try:
            return count_tokens(part)
        except VizError:
            return 0

    n = count(text)
    pool = list(FALLBACK_HAN) + [m.group() for m in words if len(m.group()) > 3
                                 or (_han(m.group()) and m.group() not in HAN_FUNCTION)]
    pool += list(FALLBACK_WORDS)
    pool += [m.group() for e in examples for m in _WORD.finditer(e)]
    # Only words the model sees: a long text is cut, and a word past the cut changes nothing.
    # A text is cut when a longer one (its last word once more, a word the model reads) has
    # no more tokens. Only then the binary search (a longer prefix never has fewer tokens):
    # words[:lo] start before the cut. (An uncut text must not be searched: a byte-level BPE,
    # GPT-2's or RoBERTa's, makes the space before the last word a token of its own, so that
    # prefix has as many tokens as the whole text.)
    lo, hi = 0, len(words)
    if count(f"{text} {words[-1].group()}") > n:
        lo = hi
    while lo < hi:
        mid = (lo + hi) // 2
        if count(text[:words[mid].start()]) < n:
            lo = mid + 1
        else:
            hi = mid
    words = words[:lo]
    if not words:
        return None
    tries = 0
    contrasts = _contrasts()
    repeat = _earlier_occurrence(words)
    seen = {m.group().lower() for m in words}
    # last word first; in Chinese, a character that is a word of its own (a common noun, a
    # textbook adjective) before the others, which are often half of a longer word
    whole = set(FALLBACK_HAN) | {w for w in contrasts if _han(w)}
    order = sorted(reversed(words), key=lambda m: m.group() not in whole)
    if repeat is not None:
        order = [repeat] + [m for m in order if m is not repeat]
    for m in order:
        if m.group() in HAN_FUNCTION:
            continue
        room = None if max_chars is None else max_chars - len(text) + len(m.group())
        candidates = _candidates(m.group(), contrasts.get(m.group().lower(), []) + pool)
        if m is repeat:  # a word the text does not have, so nothing else starts to repeat
            candidates.sort(key=lambda w: w.lower() in seen)
        for w in candidates:
            if room is not None and len(w) > room:
                continue  # too long for the box (no tokenisation spent)
            if tries >= MAX_TRIES:
                return None
            tries += 1
            corrupted = text[:m.start()] + w + text[m.end():]
            if count(corrupted) == n:
                return Corruption(corrupted, m.group(), w, m.start())
    return None
