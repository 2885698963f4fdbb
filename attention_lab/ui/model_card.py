"""A model's info() and card.json as readable rows (the Home page's model card)."""

from __future__ import annotations

from viz_core.i18n import N_, _
from viz_core.i18n.cards import PROSE as CARD_PROSE

LABELS = {
    "name": N_("Name"), "kind": N_("Kind"), "family": N_("Family"), "device": N_("Device"),
    "layers": N_("Layers"), "decoder_layers": N_("Decoder layers"),
    "heads": N_("Heads per layer"), "kv_heads": N_("Key/value heads"),
    "d_model": N_("Width d_model"), "parameters": N_("Parameters"), "positional": N_("Positions"),
    "scores": N_("Pre-softmax scores"),
    "path": N_("Loaded from"), "max_tokens": N_("Longest input (tokens)"),
}
# the shipped cards' own fields (checkpoints/*/card.json), as the card table names them
CARD_FIELDS = [N_("Task"), N_("Generator version"), N_("Metrics"), N_("Train steps"),
               N_("Train seconds"), N_("Threads"), N_("Seed"), N_("Data sizes"), N_("Training"),
               N_("Architecture"), N_("Compared"), N_("Teacher"), N_("Recipe"), N_("Text"),
               N_("Teacher seconds"), N_("Machine")]
# a trace's positional_kind (viz_core.model.choices.PositionalKind), as pages name it
POSITIONAL_KINDS = [N_("sinusoidal"), N_("learned"), N_("rotary"), N_("relative"), N_("none")]
KIND_WORDS = {"encoder-decoder": N_("encoder–decoder (translation-style)"),
              "encoder-only": N_("encoder only (BERT-style)"),
              "decoder-only": N_("decoder only (GPT-style)")}


def readable(key: str, value, nested: bool = False) -> str:
    """One value as text a person reads: 22,713,216; yes/no; lists joined; dicts as
    "key: value" pairs (numbers inside them with thousands separators), never JSON."""
    if isinstance(value, bool):
        return _("yes") if value else _("no")
    if isinstance(value, int) and (nested or key in ("parameters", "max_tokens")):
        return f"{value:,}"
    if key == "kind" and value in KIND_WORDS:
        return _(KIND_WORDS[value])
    if isinstance(value, (list, tuple)):  # a list of dicts (en-fr's heads): one (...) each
        return ", ".join(f"({readable(key, v, nested)})" if isinstance(v, dict) else
                         readable(key, v, nested) for v in value)
    if isinstance(value, dict):
        return ", ".join(f"{str(k).replace('_', ' ')}: {readable(str(k), v, nested=True)}"
                         for k, v in value.items()) or "—"
    if key == "positional" and value in POSITIONAL_KINDS:
        return _(value)
    if key in CARD_PROSE and isinstance(value, str):
        return _(value)  # a shipped card's sentence (viz_core/i18n/cards.py)
    return "—" if value is None or value == "" else str(value)


def _depth(info: dict) -> dict:
    """info() with its layer counts as one stack has them (info() gives a decoder-only model
    layers N and decoder_layers N, an encoder-only one N and 0): encoder-only and
    decoder-only models get one "Layers" row."""
    kind = info.get("kind")
    if kind not in ("encoder-only", "decoder-only") or "layers" not in info:
        return info
    n = (info.get("decoder_layers") if kind == "decoder-only" else None) or info["layers"]
    return {**{k: v for k, v in info.items() if k != "decoder_layers"}, "layers": n}


def model_card_rows(info: dict, card: dict | None = None) -> list[dict[str, str]]:
    """[{"field", "value"}]: info() first in a fixed order, then card fields (no examples
    or description, which the page shows elsewhere). Values are plain text."""
    shown = _depth(info)
    labels = {**LABELS, "layers": N_("Encoder layers") if info.get("kind") == "encoder-decoder"
              else N_("Layers")}
    rows = [{"field": _(labels[k]) if k in labels else k.replace("_", " ").capitalize(),
             "value": readable(k, v)}
            for k, v in sorted(shown.items(), key=lambda kv: (list(LABELS).index(kv[0])
                                                             if kv[0] in LABELS else 99))]
    for k, v in (card or {}).items():
        if k in ("description", "examples", "name") or k in info:
            continue
        rows.append({"field": _(k.replace("_", " ").capitalize()), "value": readable(k, v)})
    return rows


def model_metrics(info: dict) -> list[tuple[str, str]]:
    """The four numbers a card leads with."""
    layers = info.get("layers") or 0
    dec = info.get("decoder_layers") or 0
    depth = f"{layers} + {dec}" if layers and dec and info.get("kind") == "encoder-decoder" \
        else str(layers or dec or "—")
    params = info.get("parameters")
    size = "—" if not isinstance(params, int) else (
        f"{params / 1e6:.1f} M" if params >= 1e6 else f"{params / 1e3:.0f} k")
    return [(_("Layers"), depth), (_("Heads"), str(info.get("heads", "—"))),
            ("d_model", str(info.get("d_model", "—"))), (_("Parameters"), size)]
