"""Vocabularies of the native models: word-level or character-level, with special tokens.

Every vocabulary starts with the same four special tokens, so their ids agree with
TransformerConfig (pad 0, bos 1, eos 2, unk 3).
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field

from ..errors import CheckpointError
from .choices import VocabLevel, options

PAD, BOS, EOS, UNK = "<pad>", "<bos>", "<eos>", "<unk>"
SPECIALS = (PAD, BOS, EOS, UNK)
WORD_RE = re.compile(r"\w+'?|[^\w\s]")  # "l'homme" -> "l'", "homme"; punctuation alone


@dataclass
class Vocab:
    tokens: list[str]  # id -> token; the first four are SPECIALS
    level: VocabLevel = "word"
    lowercase: bool = True
    index: dict[str, int] = field(init=False, repr=False)

    def __post_init__(self):
        if list(self.tokens[:4]) != list(SPECIALS):
            raise CheckpointError(f"vocabulary must start with {list(SPECIALS)}")
        if self.level not in options(VocabLevel):
            raise CheckpointError(f"vocabulary level must be 'word' or 'char', not {self.level!r}")
        self.index = {t: i for i, t in enumerate(self.tokens)}

    def __len__(self) -> int:
        return len(self.tokens)

    @classmethod
    def build(cls, texts, level: VocabLevel = "word", lowercase: bool = True) -> Vocab:
        """Vocabulary of every token in texts, in order of first appearance."""
        seen: dict[str, None] = {}
        probe = cls(list(SPECIALS), level, lowercase)
        for text in texts:
            for tok in probe.split(text):
                seen.setdefault(tok, None)
        return cls([*SPECIALS, *(t for t in seen if t not in SPECIALS)], level, lowercase)

    def split(self, text: str) -> list[str]:
        if self.lowercase:
            text = text.lower()
        if self.level == "char":
            return list(" ".join(text.split()))  # collapse runs of whitespace
        return WORD_RE.findall(text)

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
        text = re.sub(r" ([.,!?;:])", r"\1", text)
        return text.replace("' ", "'")

    def display(self, token: str) -> str:
        """Label for a token in a figure: make spaces visible in character models."""
        return "␣" if token == " " else token

    def to_dict(self) -> dict:
        return {"tokens": self.tokens, "level": self.level, "lowercase": self.lowercase}

    @classmethod
    def from_dict(cls, data) -> Vocab:
        if not isinstance(data, dict) or not isinstance(data.get("tokens"), list):
            raise CheckpointError("vocab.json: each vocabulary needs a 'tokens' list")
        if not all(isinstance(t, str) for t in data["tokens"]):
            raise CheckpointError("vocab.json: tokens must be strings")
        return cls(list(data["tokens"]), data.get("level", "word"), bool(data.get("lowercase", True)))
