"""Vocabularies of the native models: word-level or character-level, with special tokens.

Every vocabulary starts with the same four special tokens, so their ids agree with
TransformerConfig (pad 0, bos 1, eos 2, unk 3). A word-level vocabulary with ``segment`` (zh-en's
source) cuts Chinese, which has no spaces, into its own words by forward maximum matching;
vocab.json records it ("segment": true) only where it is set, so other files do not change.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field

from ..errors import CheckpointError
from ..i18n import N_
from .choices import VocabLevel, options

PAD, BOS, EOS, UNK = "<pad>", "<bos>", "<eos>", "<unk>"
SPECIALS = (PAD, BOS, EOS, UNK)
WORD_RE = re.compile(r"\w+'?|[^\w\s]")  # "l'homme" -> "l'", "homme"; punctuation alone
_CJK = "\u3400-\u4dbf\u4e00-\u9fff\uf900-\ufaff"
CJK_RE = re.compile(f"[{_CJK}]+")  # Chinese characters
CJK_RUN_RE = re.compile(f"[{_CJK}]+|[^{_CJK}]+")  # runs of Chinese characters, and the rest
_CJK_GAP_RE = re.compile(f"(?<=[{_CJK}\uff0c\u3002]) (?=[{_CJK}\uff0c\u3002])")


def max_match(text: str, words, longest: int) -> list[str]:
    """Forward maximum matching of a run of Chinese characters: at each position the longest
    of words (at most ``longest`` characters) that starts there, else the one character.
    max_match("动物没有过马路", {"动物", "没有", "过", "马路", "马"}, 2) ==
    ["动物", "没有", "过", "马路"]."""
    out, i = [], 0
    while i < len(text):
        for n in range(min(longest, len(text) - i), 1, -1):
            if text[i:i + n] in words:
                break
        else:
            n = 1
        out.append(text[i:i + n])
        i += n
    return out


@dataclass
class Vocab:
    tokens: list[str]  # id -> token; the first four are SPECIALS
    level: VocabLevel = "word"
    lowercase: bool = True
    # word level: split Chinese (which has no spaces) into this vocabulary's words by forward
    # maximum matching (max_match); a character no word starts with stays alone (<unk>)
    segment: bool = False
    index: dict[str, int] = field(init=False, repr=False)

    def __post_init__(self):
        if list(self.tokens[:4]) != list(SPECIALS):
            raise CheckpointError(N_("vocab.json: a vocabulary must start with {specials}."),
                                  specials=list(SPECIALS))
        if self.level not in options(VocabLevel):
            raise CheckpointError(N_("vocab.json: a vocabulary's level must be 'word' or 'char', "
                                     "not {level!r}."), level=str(self.level)[:40])
        self.index = {t: i for i, t in enumerate(self.tokens)}
        self.longest = max((len(t) for t in self.tokens if CJK_RE.fullmatch(t)), default=1)

    def __len__(self) -> int:
        return len(self.tokens)

    @classmethod
    def build(cls, texts, level: VocabLevel = "word", lowercase: bool = True,
              segment: bool = False) -> Vocab:
        """Vocabulary of every token in texts, in order of first appearance (with segment,
        texts give their words apart: "动物 没有 过 马路")."""
        seen: dict[str, None] = {}
        probe = cls(list(SPECIALS), level, lowercase)
        for text in texts:
            for tok in probe.split(text):
                seen.setdefault(tok, None)
        return cls([*SPECIALS, *(t for t in seen if t not in SPECIALS)], level, lowercase,
                   segment)

    def split(self, text: str) -> list[str]:
        if self.lowercase:
            text = text.lower()
        if self.level == "char":
            return list(" ".join(text.split()))  # collapse runs of whitespace
        words = WORD_RE.findall(text)
        if not self.segment:
            return words
        out: list[str] = []
        for word in words:
            for run in CJK_RUN_RE.findall(word):
                out += max_match(run, self.index, self.longest) if CJK_RE.match(run) else [run]
        return out

    def encode(self, text: str) -> tuple[list[int], list[str], list[str]]:
        """text -> (ids, tokens as shown, unknown pieces). No special tokens added."""
        pieces = self.split(text)
        unk = self.index[UNK]
        ids = [self.index.get(p, unk) for p in pieces]
        unknown = [p for p, i in zip(pieces, ids) if i == unk]
        shown = [p if i != unk else UNK for p, i in zip(pieces, ids)]
        return ids, shown, list(dict.fromkeys(unknown))

    def decode(self, ids, skip_special: bool = True) -> str:
        toks = [self.tokens[i] for i in ids if not (skip_special and self.tokens[i] in SPECIALS)]
        return self.detokenize(toks)

    def detokenize(self, tokens: list[str]) -> str:
        if self.level == "char":
            return "".join(tokens)
        text = " ".join(tokens)
        if self.segment:  # Chinese words and full-width punctuation without spaces
            text = _CJK_GAP_RE.sub("", text)
        text = re.sub(r" ([.,!?;:])", r"\1", text)
        return text.replace("' ", "'")

    def display(self, token: str) -> str:
        """Label for a token in a figure: make spaces visible in character models."""
        return "␣" if token == " " else token

    def to_dict(self) -> dict:
        return {"tokens": self.tokens, "level": self.level, "lowercase": self.lowercase,
                **({"segment": True} if self.segment else {})}

    @classmethod
    def from_dict(cls, data) -> Vocab:
        if not isinstance(data, dict) or not isinstance(data.get("tokens"), list):
            raise CheckpointError(N_("vocab.json: each vocabulary needs a 'tokens' list."))
        if not all(isinstance(t, str) for t in data["tokens"]):
            raise CheckpointError(N_("vocab.json: tokens must be strings."))
        return cls(list(data["tokens"]), data.get("level", "word"), bool(data.get("lowercase", True)),
                   bool(data.get("segment", False)))
