"""Decoding over any backend: beam search (beam_size=1: greedy) recording the search tree.

    tree = beam_search(model, "9 may 2018", beam_size=4, max_len=16)

The algorithm lives in search.py (its docstring defines the scores, identical to Hugging
Face's `sequences_scores`); the model-specific steps in steppers.py.
"""

from __future__ import annotations

import math

from viz_core.i18n import N_, Message

from ..errors import InputError
from .beam_tree import BeamTree
from .search import NEG, attention_key_labels, make_tree, run_search
from .steppers import HFStepper, Stepper

__all__ = ["NEG", "HFStepper", "Stepper", "attention_key_labels", "beam_search", "run_search",
           "search_with"]

MAX_BEAM, MAX_LEN = 16, 256
MAX_LENGTH_PENALTY = 100  # score / length**penalty: far beyond it, a power of the length overflows


def _check(beam_size, max_len, num_return, length_penalty, early_stopping) -> int:
    if isinstance(beam_size, bool) or not isinstance(beam_size, int) or not 1 <= beam_size <= MAX_BEAM:
        raise InputError(N_("Beam size must be a whole number from 1 to {MAX_BEAM}, not "
                           "{beam_size!r}."), MAX_BEAM=MAX_BEAM, beam_size=beam_size)
    if isinstance(max_len, bool) or not isinstance(max_len, int) or not 1 <= max_len <= MAX_LEN:
        raise InputError(N_("Maximum length must be a whole number from 1 to {MAX_LEN}, not "
                           "{max_len!r}."), MAX_LEN=MAX_LEN, max_len=max_len)
    if num_return is None:
        num_return = beam_size
    if isinstance(num_return, bool) or not isinstance(num_return, int) or not 1 <= num_return <= beam_size:
        raise InputError(N_("Number of results must be from 1 to the beam size ({beam_size}), not "
                           "{num_return!r}."), beam_size=beam_size, num_return=num_return)
    if isinstance(length_penalty, bool) or not isinstance(length_penalty, int | float) \
            or not math.isfinite(length_penalty) or abs(length_penalty) > MAX_LENGTH_PENALTY:
        raise InputError(N_("Length penalty must be a number from -{most} to {most}, not "
                            "{length_penalty!r}."), most=MAX_LENGTH_PENALTY,
                         length_penalty=length_penalty)
    if not (early_stopping is True or early_stopping is False or early_stopping == "never"):
        raise InputError(N_("early_stopping must be True, False or 'never', not "
                           "{early_stopping!r}."), early_stopping=early_stopping)
    return num_return


def beam_search(model, source: str, beam_size: int = 4, max_len: int = 32,
                length_penalty: float = 1.0, early_stopping: bool | str = False,
                num_return: int | None = None, prefix: str | None = None,
                ablate: dict | None = None) -> BeamTree:
    """Beam search over any backend (through its ``make_stepper``), recording every candidate.

    source: the input (encoder-decoder) or the prompt (decoder-only; hypotheses hold only
    the continuation). max_len: most generated tokens, EOS and forced prefix included.
    num_return: size of the n-best list (default beam_size). prefix: a text whose tokens
    are forced as the first generated tokens. ablate: {"decoder.0.cross": [heads]} heads
    zeroed during the whole search (encoder included).
    """
    num_return = _check(beam_size, max_len, num_return, length_penalty, early_stopping)
    if prefix is not None and not isinstance(prefix, str):
        raise InputError(N_("The forced prefix must be text, not {kind}."),
                         kind=type(prefix).__name__)
    if not isinstance(source, str) or not source.strip():
        raise InputError(N_("The input is empty: type some text."))
    if not model.can_generate:
        raise InputError(N_("This model has no decoder: it cannot generate text."))
    warnings: list[str] = []
    stepper = model.make_stepper(source, prefix, beams=beam_size, max_new=max_len,
                                 length_penalty=float(length_penalty),
                                 early_stopping=early_stopping, ablate=ablate,
                                 warnings=warnings)
    settings = {"beam_size": beam_size, "max_len": max_len, "length_penalty": length_penalty,
                "early_stopping": early_stopping, "num_return": num_return, "prefix": prefix,
                "ablate": {k: sorted(int(h) for h in v) for k, v in (ablate or {}).items()},
                "model": getattr(model, "name", ""), "family": getattr(model, "family", "")}
    return search_with(stepper, settings, warnings)


def search_with(stepper: Stepper, settings: dict, warnings: list[str] | None = None) -> BeamTree:
    """Run the search on a ready stepper; settings as recorded by beam_search."""
    warnings = list(warnings or [])
    max_new = min(settings["max_len"], stepper.room)
    if max_new < 1:
        raise InputError(N_("The input leaves no room to generate: shorten it."))
    if max_new < settings["max_len"]:
        warnings.append(Message(N_("This model's positions leave room for {max_new} new tokens only: the "
                          "search stops there."), max_new=max_new))
    prefix_ids = list(stepper.prefix_ids)
    if settings.get("prefix") and not prefix_ids:
        warnings.append(Message(N_("The forced prefix has no tokens this model knows: ignored.")))
    if len(prefix_ids) >= max_new:
        raise InputError(N_("The forced prefix has {n_prefix_ids} tokens: it must be shorter than "
                           "the maximum length ({max_new})."), n_prefix_ids=len(prefix_ids), max_new=max_new)
    num_return = settings.get("num_return") or settings["beam_size"]
    nodes, hyps, info = run_search(
        stepper, beam_size=settings["beam_size"], max_new=max_new,
        length_penalty=float(settings["length_penalty"]),
        early_stopping=settings["early_stopping"], num_return=num_return,
        prefix_ids=prefix_ids)
    settings = {**settings, "num_return": num_return, "max_new": max_new,
                "prefix_ids": prefix_ids, "eos_ids": list(stepper.eos_ids),
                "logits_processors": list(stepper.processors),
                "warnings": warnings, **info}
    return make_tree(stepper, nodes, hyps, settings)
