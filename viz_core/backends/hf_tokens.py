"""Tokens as a person should read them on a heatmap axis.

- WordPiece (BERT, DistilBERT, MiniLM): shown exactly as ``convert_ids_to_tokens`` gives them
  ("##ing" keeps its continuation marker).
- SentencePiece (T5, Marian): also unchanged; "▁" already marks a word start.
- Byte-level BPE (GPT-2, RoBERTa, BART): tokens are spelled in GPT-2's byte-to-unicode alphabet
  ("Ġthe", "Ċ", "Ã©"). We map them back to bytes, decode UTF-8 and show a leading space as "▁"
  (the SentencePiece convention), a newline as "↵" and other control bytes as "<0x15>".
- A character split over several tokens (a rare Chinese character is 3 UTF-8 bytes, which a
  byte-level BPE may cut 1 + 2; SentencePiece's byte fallback spells each byte "<0xE7>") is
  shown in each of its tokens as the character with its part: "累¹/₂", "累²/₂". The parts
  come from the bytes of the whole run of tokens, so they agree with a fast tokenizer's
  offsets (every part of one character has that character's offsets).
"""

from __future__ import annotations

import re
from functools import lru_cache

SPACE_MARK = "▁"
NEWLINE_MARK = "↵"


@lru_cache(maxsize=1)
def _unicode_to_byte() -> dict[str, int]:
    """Inverse of GPT-2's byte alphabet: printable Latin-1 bytes stand for themselves, the
    other 68 bytes were moved to code points 256, 257, ... in byte order."""
    printable = (list(range(ord("!"), ord("~") + 1)) + list(range(ord("¡"), ord("¬") + 1))
                 + list(range(ord("®"), ord("ÿ") + 1)))
    table = {chr(b): b for b in printable}
    shifted = 0
    for b in range(256):
        if b not in printable:
            table[chr(256 + shifted)] = b
            shifted += 1
    return table


def readable_byte_level(token: str) -> str:
    table = _unicode_to_byte()
    try:
        text = bytes(table[ch] for ch in token).decode("utf-8")
    except (KeyError, UnicodeDecodeError):
        return token.replace("Ġ", SPACE_MARK).replace("Ċ", NEWLINE_MARK)
    text = text.replace(" ", SPACE_MARK).replace("\n", NEWLINE_MARK)
    # control bytes (e.g. "\x15") would be invisible on an axis: spell them <0x15>
    return "".join(ch if ch.isprintable() else f"<0x{ord(ch):02X}>" for ch in text)


SUPERSCRIPT = str.maketrans("0123456789", "⁰¹²³⁴⁵⁶⁷⁸⁹")
SUBSCRIPT = str.maketrans("0123456789", "₀₁₂₃₄₅₆₇₈₉")
BYTE_TOKEN = re.compile(r"<0x([0-9A-Fa-f]{2})>")  # SentencePiece's byte fallback


def part_mark(k: int, n: int) -> str:
    """The mark of part k (1-based) of a character cut into n tokens: "¹/₂"."""
    return f"{str(k).translate(SUPERSCRIPT)}/{str(n).translate(SUBSCRIPT)}"


def _token_bytes(token: str, byte_level: bool) -> bytes | None:
    """The bytes a token stands for (None: not a byte token of this tokenizer's kind)."""
    if byte_level:
        table = _unicode_to_byte()
        try:
            return bytes(table[ch] for ch in token)
        except KeyError:
            return None
    m = BYTE_TOKEN.fullmatch(token)
    return bytes([int(m[1], 16)]) if m else None


def _shown(text: str) -> str:
    text = text.replace(" ", SPACE_MARK).replace("\n", NEWLINE_MARK)
    return "".join(ch if ch.isprintable() else f"<0x{ord(ch):02X}>" for ch in text)


def split_characters(raw: list[bytes | None]) -> list[str | None]:
    """Labels for a run of byte tokens where some cut a UTF-8 character: each token shows the
    characters it holds whole, and the one(s) it holds part of as "char" + part_mark. None
    where a token's bytes are not part of valid UTF-8 here (it keeps its own label)."""
    labels: list[str | None] = [None] * len(raw)
    i = 0
    while i < len(raw):
        if raw[i] is None:
            i += 1
            continue
        j = i  # the run of byte tokens i..j-1
        while j < len(raw) and raw[j] is not None:
            j += 1
        _label_run(raw, i, j, labels)
        i = j
    return labels


def _label_run(raw: list, i: int, j: int, labels: list) -> None:
    stream = b"".join(raw[i:j])
    owner = []  # the token of each byte
    for t in range(i, j):
        owner += [t] * len(raw[t])
    pos = 0
    parts: dict[int, list[str]] = {t: [] for t in range(i, j)}
    while pos < len(stream):
        size = _utf8_size(stream[pos])
        chunk = stream[pos:pos + size]
        try:
            ch = chunk.decode("utf-8") if size and pos + size <= len(stream) else None
        except UnicodeDecodeError:
            ch = None
        if ch is None:  # not valid UTF-8 from here: these tokens keep their own labels
            for t in set(owner[pos:]):
                parts[t] = None
            break
        holders = list(dict.fromkeys(owner[pos:pos + size]))
        for k, t in enumerate(holders, 1):
            if parts[t] is not None:
                parts[t].append(_shown(ch) + (part_mark(k, len(holders)) if len(holders) > 1
                                              else ""))
        pos += size
    for t, p in parts.items():
        labels[t] = "".join(p) if p else None


def _utf8_size(lead: int) -> int:
    """Bytes of the UTF-8 character that starts with byte ``lead`` (0: not a lead byte)."""
    if lead < 0x80:
        return 1
    for size, (lo, hi) in ((2, (0xC2, 0xDF)), (3, (0xE0, 0xEF)), (4, (0xF0, 0xF4))):
        if lo <= lead <= hi:
            return size
    return 0


def display_tokens(tokenizer, ids: list[int], byte_level: bool) -> list[str]:
    tokens = tokenizer.convert_ids_to_tokens(list(ids))
    tokens = [t if t is not None else "<?>" for t in tokens]
    special = set(getattr(tokenizer, "all_special_tokens", []) or [])
    raw = [None if t in special else _token_bytes(t, byte_level) for t in tokens]
    if not byte_level and not any(r is not None for r in raw):
        return list(tokens)
    split = split_characters(raw)
    out = []
    for t, label in zip(tokens, split):
        if label is not None:
            out.append(label)
        elif byte_level and t not in special:
            out.append(readable_byte_level(t))
        else:
            out.append(t)
    return out


def truncate_ids(enc: dict, room: int) -> dict:
    """Drop content tokens (never special ones) from the end until ``room`` tokens remain.

    With two segments (token_type_ids), drop from the longer one first ("longest first").
    """
    ids, special, types = enc["input_ids"], enc["special"], enc["token_type_ids"]
    drop: set[int] = set()
    excess = len(ids) - room
    segments: dict[int, list[int]] = {}
    for pos, (s, t) in enumerate(zip(special, types or [0] * len(ids))):
        if not s:
            segments.setdefault(t, []).append(pos)
    while excess > 0 and any(segments.values()):
        longest = max(segments, key=lambda t: len(segments[t]))
        drop.add(segments[longest].pop())
        excess -= 1
    keep = [p for p in range(len(ids)) if p not in drop][:room]
    return {"input_ids": [ids[p] for p in keep], "special": [special[p] for p in keep],
            "token_type_ids": None if types is None else [types[p] for p in keep]}
