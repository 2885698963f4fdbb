"""A Babel extractor for the shipped model cards (babel.cfg: checkpoints/*/card.json): their
prose fields become catalogue msgids, so a card's description reads in the session's
language where the app shows it (the sidebar's model list, the Home page's card)."""

from __future__ import annotations

import json

PROSE = ("description", "machine")  # the card fields a person reads as sentences


def extract(fileobj, keywords, comment_tags, options):
    """Babel's extraction interface: (line, function, message, comments) per prose field."""
    card = json.loads(fileobj.read().decode("utf-8"))
    for key in PROSE:
        value = card.get(key) if isinstance(card, dict) else None
        if isinstance(value, str) and value.strip():
            yield 1, None, value, [f"model card: {key}"]
