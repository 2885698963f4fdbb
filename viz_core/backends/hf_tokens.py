"""Tokens as a person should read them on a heatmap axis.

- WordPiece (BERT, DistilBERT, MiniLM): shown exactly as ``convert_ids_to_tokens`` gives them
  ("##ing" keeps its continuation marker).
- SentencePiece (T5, Marian): also unchanged; "▁" already marks a word start.
- Byte-level BPE (GPT-2, RoBERTa, BART): tokens are spelled in GPT-2's byte-to-unicode alphabet
  ("Ġthe", "Ċ", "Ã©"). We map them back to bytes, decode UTF-8 and show a leading space as "▁"
  (the SentencePiece convention) and a newline as "↵". A token that ends inside a multi-byte
  character cannot be decoded alone and is shown as the model spells it.
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
    return text.replace(" ", SPACE_MARK).replace("\n", NEWLINE_MARK)


def display_tokens(tokenizer, ids: list[int], byte_level: bool) -> list[str]:
    tokens = tokenizer.convert_ids_to_tokens(list(ids))
    tokens = [t if t is not None else "<?>" for t in tokens]
    if not byte_level:
        return list(tokens)
    special = set(getattr(tokenizer, "all_special_tokens", []) or [])
    return [t if t in special else readable_byte_level(t) for t in tokens]
