"""Tokens as a person should read them on a heatmap axis.

- WordPiece (BERT, DistilBERT, MiniLM): shown exactly as ``convert_ids_to_tokens`` gives them
  ("##ing" keeps its continuation marker).
- SentencePiece (T5, Marian): also unchanged; "▁" already marks a word start.
- Byte-level BPE (GPT-2, RoBERTa, BART): tokens are spelled in GPT-2's byte-to-unicode alphabet
  ("Ġthe", "Ċ", "Ã©"). We map them back to bytes, decode UTF-8 and show a leading space as "▁"
  (the SentencePiece convention), a newline as "↵" and other control bytes as "<0x15>". A token
  that ends inside a multi-byte character cannot be decoded alone and is shown as the model
  spells it.
"""

from __future__ import annotations

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


def display_tokens(tokenizer, ids: list[int], byte_level: bool) -> list[str]:
    tokens = tokenizer.convert_ids_to_tokens(list(ids))
    tokens = [t if t is not None else "<?>" for t in tokens]
    if not byte_level:
        return list(tokens)
    special = set(getattr(tokenizer, "all_special_tokens", []) or [])
    return [t if t in special else readable_byte_level(t) for t in tokens]


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
