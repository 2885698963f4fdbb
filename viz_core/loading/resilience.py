"""GPU out-of-memory fallback, and text no tokenizer chokes on, for every loaded model.

vc.load returns every model wrapped in a ``GuardedModel`` (``guard(backend)``): its
``trace``, ``trace_batch`` and ``beam_search`` catch ``torch.cuda.OutOfMemoryError``, move the
(shared) model to the CPU once, retry, and add a notice to the result's warnings. The model
stays on the CPU from then on and says so in ``model.notices``, so every later session sees
why it is slower. The same wrapper replaces lone surrogates in the text arguments by U+FFFD
(with a warning): Python callers can pass them, and Hugging Face's Rust tokenizers raise
TypeError on them. Everything else (info(), kind, hf_model, cfg, tokenizer, ...) is the
wrapped backend's own: the wrapper replaces none of the backend's methods.
"""

from __future__ import annotations

import logging
import threading

import torch

log = logging.getLogger("attention_lab")

OOM_NOTICE = ("The GPU ran out of memory, so this model was moved to the CPU and the run "
              "was repeated there (slower, same results).")

_lock = threading.Lock()


def is_oom(err: BaseException) -> bool:
    oom = getattr(torch.cuda, "OutOfMemoryError", None)
    if oom is not None and isinstance(err, oom):
        return True
    return isinstance(err, RuntimeError) and "out of memory" in str(err).lower()


def _module(backend) -> torch.nn.Module | None:
    for attr in ("hf_model", "model"):
        m = getattr(backend, attr, None)
        if isinstance(m, torch.nn.Module):
            return m
    return None


def move_to_cpu(model: GuardedModel) -> None:
    """Move a guarded model's weights to the CPU (idempotent, one thread at a time)."""
    with _lock:
        module = _module(model.backend)
        if module is not None:
            module.to("cpu")
        model.backend.device = torch.device("cpu")
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
TEXT_ARGS = ("source", "target", "pair", "prefix", "sources", "targets", "clean", "corrupted",
             "token", "against")


def _has_surrogate(text: str) -> bool:
    return any(0xD800 <= ord(c) <= 0xDFFF for c in text)


def replace_surrogates(value) -> tuple[object, bool]:
    """Lone surrogates (no UTF-8 can carry them; Rust tokenizers reject them) -> U+FFFD, in a
    string or a list/tuple of strings; -> (value, whether anything was replaced)."""
    if isinstance(value, str) and _has_surrogate(value):
        return "".join("\ufffd" if 0xD800 <= ord(c) <= 0xDFFF else c for c in value), True
    if isinstance(value, (list, tuple)):
        cleaned = [replace_surrogates(v) for v in value]
        return type(value)(c for c, _ in cleaned), any(f for _, f in cleaned)
    return value, False


def _clean_args(args: tuple, kwargs: dict) -> tuple[tuple, dict, bool]:
    changed = False
    out = []
    for i, value in enumerate(args):
        value, flag = replace_surrogates(value) if i < 2 else (value, False)  # source(s), target(s)
        out.append(value)
        changed |= flag
    for key in TEXT_ARGS:
        if key in kwargs:
            kwargs[key], flag = replace_surrogates(kwargs[key])
            changed |= flag
    return tuple(out), kwargs, changed


def _delegated(attr: str, doc: str) -> property:
    """A read-only attribute of the wrapped backend, read at each use."""
    return property(lambda self: getattr(self.backend, attr), doc=doc)


class GuardedModel:
    """A loaded backend with the GPU-OOM fallback and surrogate cleaning on its runs.

    The run methods (trace, trace_batch, beam_search) go through ``_run``; the rest of the
    Backend API is read from the wrapped backend, and so is any other attribute (``hf_model``,
    ``cfg``, ``tokenizer`` ...) through ``__getattr__``. One instance is shared by every
    session, like the backend it wraps.
    """

    def __init__(self, backend):
        self.backend = backend
        self.notices: list[str] = []  # shown under the model picker (e.g. moved to the CPU)

    # ---- runs: guarded ------------------------------------------------------------------
    def trace(self, *args, **kwargs):
        return self._run("trace", args, kwargs)

    def trace_batch(self, *args, **kwargs):
        return self._run("trace_batch", args, kwargs)

    def beam_search(self, *args, **kwargs):
        return self._run("beam_search", args, kwargs)

    def logit_attribution(self, *args, **kwargs):
        return self._run("logit_attribution", args, kwargs)

    def logit_lens(self, *args, **kwargs):
        return self._run("logit_lens", args, kwargs)

    def qk_attribution(self, *args, **kwargs):
        return self._run("qk_attribution", args, kwargs)

    def patch(self, *args, **kwargs):
        return self._run("patch", args, kwargs)

    def attribution_patch(self, *args, **kwargs):
        return self._run("attribution_patch", args, kwargs)

    def show_beam(self, text: str, *, n_best: int | None = None, show_pruned: bool = True,
                  title: str | None = None, **beam_options):
        """Beam search on `text` drawn as its tree (notebooks: the figure displays itself).
        beam_options go to beam_search (beam_size, max_len, length_penalty, ...); n_best,
        show_pruned and title to figures.beam_tree_figure. Returns the plotly figure."""
        from ..figures.beam import beam_tree_figure

        tree = self.beam_search(text, **beam_options)
        return beam_tree_figure(tree, n_best=n_best, show_pruned=show_pruned, title=title)

    def _run(self, method: str, args: tuple, kwargs: dict):
        args, kwargs, cleaned = _clean_args(args, dict(kwargs))
        try:
            # looked up per call, so a method patched on the backend's class is the one used
            result = getattr(self.backend, method)(*args, **kwargs)
        except Exception as err:  # noqa: BLE001 - only OOM is handled, the rest re-raised
            if not is_oom(err):
                raise
            log.warning("%s.%s: GPU out of memory; retrying on the CPU", self.name, method)
            move_to_cpu(self)
            result = getattr(self.backend, method)(*args, **kwargs)
            _add_notice(result, OOM_NOTICE)
        if cleaned:
            _add_notice(result, SURROGATE_NOTICE)
        return result

    # ---- the rest of the Backend API: the backend's own ----------------------------------
    def info(self) -> dict:
        return self.backend.info()

    def examples(self) -> list[str]:
        return self.backend.examples()

    max_tokens = _delegated("max_tokens", "longest input in tokens, specials included")
    architecture = _delegated("architecture", "encoder-decoder | decoder-only | encoder-only")
    kind = _delegated("kind", "the backends' alias of architecture")
    family = _delegated("family", "native | bert | gpt2 | bart | t5 | ...")
    name = _delegated("name", "the name the model was loaded by")
    card = _delegated("card", "the model card (description, examples)")
    device = _delegated("device", "where the weights are (the CPU after an OOM fallback)")
    can_generate = _delegated("can_generate", "whether the model has a decoder")

    def __getattr__(self, attr: str):
        # only reached for attributes not found above; "backend" itself is never delegated
        # (it is missing only while the object is being built or copied)
        if attr == "backend":
            raise AttributeError(attr)
        return getattr(self.backend, attr)

    def __repr__(self) -> str:
        return f"GuardedModel({self.backend!r})"


def guard(model) -> GuardedModel:
    """Wrap a loaded backend with the OOM fallback (a guarded model is returned as it is)."""
    return model if isinstance(model, GuardedModel) else GuardedModel(model)
