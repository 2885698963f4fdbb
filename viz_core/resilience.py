"""GPU out-of-memory fallback: a run that runs out of GPU memory is retried on the CPU.

vc.load wraps every model it returns with ``guard``: its ``trace``, ``trace_batch`` and
``beam_search`` catch ``torch.cuda.OutOfMemoryError``, move the (shared) model to the CPU
once, retry, and add a notice to the result's warnings. The model stays on the CPU from then
on and says so in ``model.notices``, so every later session sees why it is slower.
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


def _add_notice(result) -> None:
    items = result if isinstance(result, list) else [result]
    for item in items:
        warnings = getattr(item, "warnings", None)
        if isinstance(warnings, list):
            warnings.append(OOM_NOTICE)
        settings = getattr(item, "settings", None)  # a BeamTree
        if isinstance(settings, dict):
            settings.setdefault("warnings", []).append(OOM_NOTICE)


def _guarded(model, name: str):
    @functools.wraps(getattr(type(model), name))
    def run(*args, **kwargs):
        method = getattr(type(model), name)  # looked up per call (tests patch the class)
        try:
            return method(model, *args, **kwargs)
        except Exception as err:  # noqa: BLE001 - only OOM is handled, the rest re-raised
            if not is_oom(err):
                raise
            log.warning("%s.%s: GPU out of memory; retrying on the CPU", model.name, name)
        move_to_cpu(model)
        result = method(model, *args, **kwargs)
        _add_notice(result)
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
