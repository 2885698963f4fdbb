"""A model's info() and card.json as readable rows (the Home page's model card)."""

from __future__ import annotations

import re

from viz_core.i18n import N_, Message, _
from viz_core.i18n.cards import MIN_WORDS, NOT_PROSE
from viz_core.i18n.cards import PROSE as CARD_PROSE

from .errors import literal, translated

LABELS = {
    "name": N_("Name"), "kind": N_("Kind"), "family": N_("Family"), "device": N_("Device"),
    "layers": N_("Layers"), "decoder_layers": N_("Decoder layers"),
    "heads": N_("Heads per layer"), "kv_heads": N_("Key/value heads"),
    "d_model": N_("Width d_model"), "parameters": N_("Parameters"), "positional": N_("Positions"),
    "scores": N_("Pre-softmax scores"),
    "path": N_("Loaded from"), "max_tokens": N_("Longest input (tokens)"),
    "d_ff": N_("Feed-forward width d_ff"), "norm_placement": N_("Norm placement"),
    "positional_kind": N_("Kind of positions"), "norm": N_("Norm"),
    "rope_base": N_("RoPE base"), "dtype": N_("Number format (dtype)"),
}
# info()'s values that are words (viz_core.model.choices; the norms' names stay names)
VALUE_WORDS = {
    "norm_placement": {"pre": N_("pre-norm (before each sublayer)"),
                       "post": N_("post-norm (after each sublayer's residual add)"),
                       "pre+post": N_("before and after each sublayer"),
                       "output": N_("on each sublayer's output, before the residual add")},
    "norm": {"layernorm": "LayerNorm", "rmsnorm": "RMSNorm"},
    "positional": {"rope": N_("rotary (RoPE)")},
}
# the shipped cards' own fields (checkpoints/*/card.json), as the card table names them
CARD_FIELDS = [N_("Task"), N_("Generator version"), N_("Metrics"), N_("Train steps"),
               N_("Train seconds"), N_("Threads"), N_("Seed"), N_("Data sizes"), N_("Training"),
               N_("Architecture"), N_("Compared"), N_("Teacher"), N_("Recipe"), N_("Text"),
               N_("Teacher seconds"), N_("Machine"), N_("Segmentation")]
# a trace's positional_kind (viz_core.model.choices.PositionalKind), as pages name it
POSITIONAL_KINDS = [N_("sinusoidal"), N_("learned"), N_("rotary"), N_("relative"), N_("none")]
# the shipped cards' nested keys (metrics, training, data sizes...), as the card table names
# them; other keys (block and weight names) stay as they are
CARD_KEYS = {
    "n": N_("n"), "perplexity": N_("perplexity"), "unigram_perplexity": N_("unigram perplexity"),
    "ratio_to_unigram": N_("ratio to unigram"), "exact_match": N_("exact match"),
    "bleu": N_("BLEU"), "because": N_("because-sentences"),
    "pronoun_accuracy": N_("pronoun accuracy"), "adjective_agreement": N_("adjective agreement"),
    "held_out_pairs": N_("held-out pairs"), "held_out_adjectives": N_("held-out adjectives"),
    "held_out": N_("held out"), "animate": N_("animate"), "thing": N_("thing"),
    "heads": N_("heads"), "threshold": N_("threshold"), "top": N_("top"),
    "block": N_("block"), "head": N_("head"), "score": N_("score"), "train": N_("train"),
    "test": N_("test"), "batch_size": N_("batch size"), "lr": N_("learning rate"),
    "warmup": N_("warm-up steps"), "label_smoothing": N_("label smoothing"),
    "final_loss": N_("final loss"), "first_half_loss": N_("first-half loss"),
    "repeated_half_loss": N_("repeated-half loss"),
    "repeated_half_accuracy": N_("repeated-half accuracy"), "ratio": N_("ratio"),
    "uniform_loss": N_("uniform loss"), "by_half": N_("by half length"),
    "first_half": N_("first half"), "repeated_half": N_("repeated half"),
    "by_length": N_("by length"), "curriculum": N_("curriculum"),
    "min_half": N_("shortest half"), "first_max": N_("first longest half"),
    "last_max": N_("last longest half"), "ramp": N_("ramp"),
    "batch_tokens": N_("tokens per batch"), "kept_rows": N_("kept rows"),
    "positional": N_("positions"), "rope_base": N_("RoPE base"), "kv_heads": N_("key/value heads"),
    "norm": N_("norm"), "alignment": N_("alignment"), "n_reference": N_("reference sentences"),
    "metric": N_("metric"), "best": N_("best"), "convention": N_("convention"),
    "best_per_convention": N_("best per convention"), "best_per_kind": N_("best per kind"),
    "predicting": N_("predicting"), "continued_from": N_("continued from"),
    "train_steps": N_("train steps"), "training": N_("training"), "published": N_("published"),
    "mapping": N_("layer mapping"), "departures": N_("departures"), "toy": N_("toy"),
    "prose": N_("prose"), "attention_kl": N_("attention KL"),
    "student_layer": N_("student layer"), "teacher_layer": N_("teacher layer"),
    "untrained": N_("untrained"), "trained": N_("trained"), "layers": N_("layers"),
    "d_model": "d_model", "d_ff": "d_ff", "weights_bytes": N_("weight bytes"),
    "dtype": "dtype", "steps": N_("steps"), "prose_share": N_("prose share"),
    "embedding_weight": N_("embedding weight"), "head_hidden": N_("head hidden width"),
    "head_all_layers": N_("head reads all layers"), "train_embeddings": N_("train embeddings"),
    "augment": N_("augmented copies"), "splice": N_("splices"), "dropout": N_("dropout"),
    "n_toy": N_("toy sentences"), "embedding": N_("embedding"), "attention": N_("attention"),
    "hidden": N_("hidden states"), "sentence": N_("sentence"), "sentences": N_("sentences"),
    "embedding_cosine": N_("embedding cosine"), "effect": N_("effect"), "file": N_("file"),
    "frozen": N_("frozen"), "input": N_("input"), "lm": "lm", "patching": N_("patching"),
    "right": N_("right"), "wrong": N_("wrong"), "seed_sentences": N_("seed sentences"),
    "speed": N_("speed"), "speedup": N_("speed-up"),
    "student_sentences_per_s": N_("student sentences/s"),
    "teacher_sentences_per_s": N_("teacher sentences/s"),
    "train_sentences": N_("train sentences"), "sha256": "sha256", "threads": N_("threads"),
}
MAX_DEPTH = 8  # levels of a card shown; deeper ones as "…"
MAX_ITEMS = 100  # entries of a list or dict shown, then "… (n more)"
MAX_CHARS = 2_000  # characters of one value shown, then "…"
COUNT_KEY = re.compile(r"([\d,]+) (words|tokens)")  # "32 words", "1,024 tokens"
KIND_WORDS = {"encoder-decoder": N_("encoder–decoder (translation-style)"),
              "encoder-only": N_("encoder only (BERT-style)"),
              "decoder-only": N_("decoder only (GPT-style)")}


def readable(key: str, value, nested: bool = False, depth: int = 0) -> str:
    """One value as text a person reads: 22,713,216; yes/no; lists joined; dicts as
    "key: value" pairs (numbers inside them with thousands separators), never JSON; what
    lies deeper than MAX_DEPTH levels (a user's card can nest anything) as "…"."""
    if isinstance(value, (list, tuple, dict)) and value and depth >= MAX_DEPTH:
        return "…"
    if isinstance(value, bool):
        return _("yes") if value else _("no")
    if isinstance(value, int) and (nested or key in ("parameters", "max_tokens")):
        return f"{value:,}"
    if key == "kind" and value in KIND_WORDS:
        return _(KIND_WORDS[value])
    if isinstance(value, (list, tuple)):  # a list of dicts (en-fr's heads): one (...) each
        return ", ".join([f"({readable(key, v, nested, depth + 1)})" if isinstance(v, dict)
                          else readable(key, v, nested, depth + 1) for v in value[:MAX_ITEMS]]
                         + _more(len(value)))
    if isinstance(value, dict):
        return ", ".join([f"{key_label(str(k))}: {readable(str(k), v, True, depth + 1)}"
                          for k, v in list(value.items())[:MAX_ITEMS]]
                         + _more(len(value))) or "—"
    if isinstance(value, Message):  # a family's note (its positions)
        return translated(value)
    if key in ("positional", "positional_kind") and value in POSITIONAL_KINDS:
        return _(value)
    words = VALUE_WORDS.get(key, {})
    if isinstance(value, str) and value in words:
        return _(words[value])
    if isinstance(value, str) and (key in CARD_PROSE or nested
                                   or len(value.split()) >= MIN_WORDS):
        return cut(_(value))  # a shipped card's sentence (viz_core/i18n/cards.py)
    return "—" if value is None or value == "" else cut(str(value))


def cut(text: str, limit: int = MAX_CHARS) -> str:
    """``text`` up to ``limit`` characters, then "…" (a user's card can hold anything)."""
    return text if len(text) <= limit else text[:limit] + "…"


def card_sections(card: dict | None) -> list[tuple[str, str]]:
    """(field as the table names it, Markdown) of each card field that holds a structure
    (metrics, training, a recipe): a nested list a person can read, where the table's one
    cell would cut it off. Every key and value is shown as text (``literal``)."""
    out = []
    for k, v in (card or {}).items():
        if k in ("description", "examples", "name") or not isinstance(v, (dict, list)) or not v:
            continue
        out.append((_(k.replace("_", " ").capitalize()), "\n".join(_items(k, v, 0))))
    return out


def _items(key: str, value, depth: int) -> list[str]:
    """Markdown list lines of a dict's keys or a list's items, nested two spaces a level."""
    pad = "  " * depth
    if isinstance(value, dict):
        entries = [(key_label(str(k)), str(k), v) for k, v in value.items()]
    else:
        entries = [(str(i + 1), key, v) for i, v in enumerate(value)]
    lines = []
    for label, k, v in entries[:MAX_ITEMS]:
        nests = isinstance(v, (dict, list)) and v and depth + 1 < MAX_DEPTH and (
            k in NOT_PROSE or any(
                isinstance(x, (dict, list)) for x in (v.values() if isinstance(v, dict) else v)))
        if nests:
            lines.append(f"{pad}- **{literal(label)}**")
            lines += _items(k, v, depth + 1)
        elif key in NOT_PROSE:  # the model's own output (zh-en's seed sentences): as code
            text = readable(k, v, True, depth + 1).replace("`", "'")
            lines.append(f"{pad}- **{literal(label)}**: `{text}`")
        else:
            lines.append(f"{pad}- **{literal(label)}**: "
                         f"{literal(readable(k, v, True, depth + 1))}")
    return lines + [f"{pad}- {literal(more)}" for more in _more(len(entries))]


def _more(n: int) -> list[str]:
    """["… (n more)"] for a list or dict cut at MAX_ITEMS, else []."""
    return [_("… ({n} more)").format(n=f"{n - MAX_ITEMS:,}")] if n > MAX_ITEMS else []


def key_label(key: str) -> str:
    """A card's nested key as the table names it: "exact match" (translated where known),
    "32 words", else as it is (a block's or a weight's name)."""
    if key in CARD_KEYS:
        return _(CARD_KEYS[key])
    count = COUNT_KEY.fullmatch(key)
    if count:
        n = count.group(1)
        return _("{n} words").format(n=n) if count.group(2) == "words" else \
            _("{n} tokens").format(n=n)
    return key.replace("_", " ") if "." not in key else key


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
