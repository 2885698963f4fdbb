"""Tokens grouped into characters or words, and attention between the groups.

A byte-level model (GPT-2, Qwen) cuts a rare Chinese character into byte tokens, shown as
"累¹/₂", "累²/₂" (viz_core.backends.hf_tokens); a subword model cuts words ("▁play", "ing";
"play", "##ing"). ``token_groups`` finds the groups from the tokens as shown:

- "character": the tokens of one cut character form a group; every other token is its own;
- "word": a word starts at a token marked as a word start ("▁" for SentencePiece and
  byte-level BPE), at every token not marked as a continuation ("##") for WordPiece, at a
  special token ("[CLS]", "<s>", "<|endoftext|>") and at each Chinese/Japanese/Korean
  character (these scripts write no spaces: a character is the word the tokens can show).
  A cut character is never split between words.

``grouped_attention`` turns a pattern over tokens into one over groups as BertViz's users ask
(BertViz issue #40): the mean over a group's query rows and the sum over its key columns, so
each row still sums to 1.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from typing import Literal

import numpy as np

from ..errors import InputError
from ..i18n import N_

TokenGrouping = Literal["token", "character", "word"]
PART = re.compile(r"(.)([⁰¹²³⁴⁵⁶⁷⁸⁹]+)/([₀₁₂₃₄₅₆₇₈₉]+)")  # "累¹/₂": the char, k, n
_DIGITS = str.maketrans("⁰¹²³⁴⁵⁶⁷⁸⁹₀₁₂₃₄₅₆₇₈₉", "01234567890123456789")
SPECIAL = re.compile(r"^(\[[A-Z]+\]|<[^<>\s]{1,20}>|<\|[^|]{1,30}\|>)$")
CJK = re.compile("[\u2e80-\u9fff\uac00-\ud7af\uf900-\ufaff\U00020000-\U0002fa1f]")


def _parts(label: str) -> list[tuple[int, int, int, int]]:
    """(start, end, k, n) of every part mark in a label."""
    return [(m.start(), m.end(), int(m[2].translate(_DIGITS)), int(m[3].translate(_DIGITS)))
            for m in PART.finditer(label)]


def _continues(label: str) -> bool:
    """The label's last character goes on in the next token (a part k < n at its end)."""
    parts = _parts(label)
    return bool(parts) and parts[-1][1] == len(label) and parts[-1][2] < parts[-1][3]


def _continued(label: str) -> bool:
    """The label begins with part k > 1 of a character begun in the token before."""
    parts = _parts(label)
    return bool(parts) and parts[0][0] == 0 and parts[0][2] > 1


def token_groups(tokens: Sequence[str], by: TokenGrouping = "character") -> list[list[int]]:
    """Consecutive token positions, grouped ``by`` "token" (each alone), "character" or
    "word" (module docstring)."""
    if by not in ("token", "character", "word"):
        raise InputError(N_("Group tokens by 'token', 'character' or 'word', not {by!r}."),
                         by=str(by)[:40])
    labels = [str(t) for t in tokens]
    spaced = any(t.startswith("▁") for t in labels)
    groups: list[list[int]] = []
    for i, label in enumerate(labels):
        joined = i > 0 and (_continues(labels[i - 1]) or _continued(label))
        if not joined and by == "word" and i > 0:
            prev = labels[i - 1]
            new = (SPECIAL.match(label) or SPECIAL.match(prev)
                   or (label.startswith("▁") if spaced else not label.startswith("##"))
                   or CJK.match(label) or CJK.search(prev[-1:]))
            joined = not new
        if joined:
            groups[-1].append(i)
        else:
            groups.append([i])
    return groups


def group_label(tokens: Sequence[str]) -> str:
    """The text of a group's tokens, each cut character once: "累¹/₂" + "累²/₂了" -> "累了";
    "▁play" + "ing" -> "▁playing"; "play" + "##ing" -> "playing"."""
    out = []
    for j, label in enumerate(str(t) for t in tokens):
        if j and label.startswith("##"):
            label = label[2:]
        text, pos = [], 0
        for start, end, k, _n in _parts(label):
            text.append(label[pos:start])
            if k == 1 or (start == 0 and j == 0):
                text.append(label[start])  # the character, once: where its first part is
            pos = end
        text.append(label[pos:])
        out.append("".join(text))
    return "".join(out)


def grouped_attention(pattern, groups: Sequence[Sequence[int]],
                      key_groups: Sequence[Sequence[int]] | None = None) -> np.ndarray:
    """A pattern [..., query, key] over groups: the mean over each query group's rows and
    the sum over each key group's columns (``key_groups``: the key side's, default
    ``groups``; cross-attention has its own). Rows that summed to 1 still do."""
    a = np.asarray(pattern, dtype=np.float64)
    key_groups = groups if key_groups is None else key_groups
    for name, gs, size in (("query", groups, a.shape[-2]), ("key", key_groups, a.shape[-1])):
        flat = [i for g in gs for i in g]
        if sorted(flat) != list(range(size)):
            raise InputError(N_("The {name} groups must cover the {size} tokens once each."),
                             name=name, size=size)
    cols = np.stack([a[..., list(g)].sum(-1) for g in key_groups], axis=-1)
    return np.stack([cols[..., list(g), :].mean(-2) for g in groups], axis=-2)
