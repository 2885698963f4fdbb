"""GPU out-of-memory fallback, and text no tokenizer chokes on, for every loaded model.

vc.load wraps every model it returns with ``guard``: its ``trace``, ``trace_batch`` and
``beam_search`` catch ``torch.cuda.OutOfMemoryError``, move the (shared) model to the CPU
once, retry, and add a notice to the result's warnings. The model stays on the CPU from then
on and says so in ``model.notices``, so every later session sees why it is slower.
The same wrapper replaces lone surrogates in the text arguments by U+FFFD (with a warning):
Python callers can pass them, and Hugging Face's Rust tokenizers raise TypeError on them.
"""

from __future__ import annotations

import functools
import logging
import threading

import torch

log = logging.getLogger("attention_lab")

GUARDED = ("trace", "trace_batch", "beam_search")
OOM_NOTICE = ("The GPU ran out of memory, so this model was moved to the CPU and the run "
              "was repeated there (slower, same results).")

_lock = threading.Lock()


def is_oom(err: BaseException) -> bool:
    oom = getattr(torch.cuda, "OutOfMemoryError", None)
    if oom is not None and isinstance(err, oom):
        return True
    return isinstance(err, RuntimeError) and "out of memory" in str(err).lower()


def _module(model) -> torch.nn.Module | None:
    for attr in ("hf_model", "model"):
        m = getattr(model, attr, None)
        if isinstance(m, torch.nn.Module):
            return m
    return None


def move_to_cpu(model) -> None:
    """Move a backend's weights to the CPU (idempotent, one thread at a time)."""
    with _lock:
        module = _module(model)
        if module is not None:
            module.to("cpu")
        model.device = torch.device("cpu")
        if OOM_NOTICE not in model.notices:
            model.notices.append(OOM_NOTICE)
        if torch.cuda.is_available():
            torch.cuda.empty_cache()


def _add_notice(result, notice: str) -> None:
    items = result if isinstance(result, list) else [result]
    for item in items:
        warnings = getattr(item, "warnings", None)
        if isinstance(warnings, list):
            warnings.append(notice)
        settings = getattr(item, "settings", None)  # a BeamTree
        if isinstance(settings, dict):
            settings.setdefault("warnings", []).append(notice)


SURROGATE_NOTICE = ("The text held invalid characters (lone UTF-16 surrogates); each was "
                    "replaced by \ufffd.")
TEXT_ARGS = ("source", "target", "pair", "prefix", "sources", "targets")


def _has_surrogate(text: str) -> bool:
    return any(0xD800 <= ord(c) <= 0xDFFF for c in text)


def clean_text(value):
    """Lone surrogates (no UTF-8 can carry them; Rust tokenizers reject them) -> U+FFFD."""
    if isinstance(value, str) and _has_surrogate(value):
        return "".join("\ufffd" if 0xD800 <= ord(c) <= 0xDFFF else c for c in value), True
    if isinstance(value, (list, tuple)):
        cleaned = [clean_text(v) for v in value]
        return type(value)(c for c, _ in cleaned), any(f for _, f in cleaned)
    return value, False


def _clean_args(args: tuple, kwargs: dict) -> tuple[tuple, dict, bool]:
    changed = False
    out = []
    for i, value in enumerate(args):
        value, flag = clean_text(value) if i < 2 else (value, False)  # source(s), target(s)
        out.append(value)
        changed |= flag
    for key in TEXT_ARGS:
        if key in kwargs:
            kwargs[key], flag = clean_text(kwargs[key])
            changed |= flag
    return tuple(out), kwargs, changed


def _guarded(model, name: str):
    @functools.wraps(getattr(type(model), name))
    def run(*args, **kwargs):
        method = getattr(type(model), name)  # looked up per call (tests patch the class)
        args, kwargs, cleaned = _clean_args(args, dict(kwargs))
        try:
            result = method(model, *args, **kwargs)
            if cleaned:
                _add_notice(result, SURROGATE_NOTICE)
            return result
        except Exception as err:  # noqa: BLE001 - only OOM is handled, the rest re-raised
            if not is_oom(err):
                raise
            log.warning("%s.%s: GPU out of memory; retrying on the CPU", model.name, name)
        move_to_cpu(model)
        result = method(model, *args, **kwargs)
        _add_notice(result, OOM_NOTICE)
        if cleaned:
            _add_notice(result, SURROGATE_NOTICE)
        return result

    return run


def guard(model):
    """Give a loaded backend the OOM fallback (instance attributes; the class is untouched)."""
    if getattr(model, "_oom_guarded", False):
        return model
    model.notices = []
    for name in GUARDED:
        if callable(getattr(type(model), name, None)):
            setattr(model, name, _guarded(model, name))
    model._oom_guarded = True
    return model
