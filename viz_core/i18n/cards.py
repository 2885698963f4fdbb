"""A Babel extractor for the shipped model cards (babel.cfg: checkpoints/*/card.json): their
prose becomes catalogue msgids, so a card reads in the session's language where the app
shows it (the sidebar's model list, the Home page's card): the prose fields, and every
sentence nested in the others (a training recipe's steps, a metric's definition).
"""

from __future__ import annotations

import json

PROSE = ("description", "machine")  # the card fields a person reads as sentences
# fields whose text is data or the model's own output, never translated
NOT_PROSE = ("examples", "seed_sentences", "name")
MIN_WORDS = 3  # a nested string of fewer words is a value (a block's name, "predicting")


def nested_prose(card) -> list[tuple[str, str]]:
    """(field path, sentence) of every string of MIN_WORDS words or more inside the card's
    fields other than PROSE and NOT_PROSE."""
    out = []

    def walk(value, path):
        if isinstance(value, dict):
            for k, v in value.items():
                if k not in NOT_PROSE:
                    walk(v, f"{path}.{k}")
        elif isinstance(value, list):
            for v in value:
                walk(v, path)
        elif isinstance(value, str) and len(value.split()) >= MIN_WORDS:
            out.append((path, value))

    for key, value in (card.items() if isinstance(card, dict) else ()):
        if key not in PROSE and key not in NOT_PROSE:
            walk(value, key)
    return out


def extract(fileobj, keywords, comment_tags, options):
    """Babel's extraction interface: (line, function, message, comments) per prose field
    and per nested sentence."""
    card = json.loads(fileobj.read().decode("utf-8"))
    for key in PROSE:
        value = card.get(key) if isinstance(card, dict) else None
        if isinstance(value, str) and value.strip():
            yield 1, None, value, [f"model card: {key}"]
    for path, value in nested_prose(card):
        yield 1, None, value, [f"model card: {path}"]
