"""GPU out-of-memory fallback, and text no tokenizer chokes on, for every loaded model.

vc.load returns every model wrapped in a ``GuardedModel`` (``guard(backend)``). One
``guarded(fn)`` makes its runs (``trace``, ``trace_batch``, ``beam_search``) and every analysis
of viz_core/analysis/registry.py: each catches ``torch.cuda.OutOfMemoryError``, moves the
(shared) model to the CPU once, retries, and adds a notice to the result's warnings. The model
stays on the CPU from then on and says so in ``model.notices``, so every later session sees
why it is slower. The same wrapper replaces lone surrogates in the text arguments by U+FFFD
(with a warning): Python callers can pass them, and Hugging Face's Rust tokenizers raise
TypeError on them. Everything else (info(), kind, hf_model, cfg, tokenizer, ...) is the
wrapped backend's own: the wrapper replaces none of the backend's methods.
"""

from __future__ import annotations

import functools
import inspect
import logging
import threading
from collections.abc import Callable
from typing import Any

import torch

from ..analysis.registry import ANALYSES, attach
from ..backends.base import Backend
from ..i18n import N_, Message

log = logging.getLogger("attention_lab")

OOM_NOTICE = Message(N_("The GPU ran out of memory, so this model was moved to the CPU and "
                        "the run was repeated there (slower, same results)."))

NONFINITE_NOTICE = N_("{count} of this model's weights hold values that are not numbers (NaN "
                      "or infinity: {names}), so its attention and outputs may too: a "
                      "training run that diverged leaves such weights.")
CHECK_CHUNK = 1 << 24  # elements of a weight checked at once (no full-size temporary)

_lock = threading.Lock()


def first_names(names: list[str], n: int = 3) -> str:
    """The first ``n`` names (sorted), then "…" when there are more."""
    names = sorted(names)
    return ", ".join(names[:n]) + (", …" if len(names) > n else "")


@torch.no_grad()
def nonfinite_weights(module: torch.nn.Module) -> list[str]:
    """The names of the module's floating-point weights that hold NaN or ±infinity."""
    out = []
    for name, p in module.named_parameters():
        if not p.is_floating_point() or p.is_meta:
            continue
        flat = p.detach().reshape(-1)
        if any(not bool(torch.isfinite(flat[i:i + CHECK_CHUNK]).all())
               for i in range(0, flat.numel(), CHECK_CHUNK)):
            out.append(name)
    return out


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
             "token", "against", "text", "texts")


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


def _text_positions(fn) -> tuple[frozenset[int], bool]:
    """(positions among the arguments after the model that take text, whether ``fn`` has
    ``*args``: then the first two positional arguments are taken as texts, as a backend's
    ``trace(source, target)``)."""
    try:
        params = list(inspect.signature(fn).parameters.values())[1:]
    except (TypeError, ValueError):
        return frozenset(), True
    positional = [p for p in params if p.kind in (p.POSITIONAL_ONLY, p.POSITIONAL_OR_KEYWORD)]
    texts = frozenset(i for i, p in enumerate(positional) if p.name in TEXT_ARGS)
    return texts, any(p.kind is p.VAR_POSITIONAL for p in params)


def _clean_args(args: tuple, kwargs: dict, texts: frozenset[int] = frozenset({0, 1})
                ) -> tuple[tuple, dict, bool]:
    changed = False
    out = []
    for i, value in enumerate(args):
        value, flag = replace_surrogates(value) if i in texts else (value, False)
        out.append(value)
        changed |= flag
    for key in TEXT_ARGS:
        if key in kwargs:
            kwargs[key], flag = replace_surrogates(kwargs[key])
            changed |= flag
    return tuple(out), kwargs, changed


def guarded(fn: Callable[..., Any]) -> Callable[..., Any]:
    """``fn(backend, *args, **kwargs)`` as a method of GuardedModel: it runs on the wrapped
    backend with lone surrogates in its text arguments replaced (and a notice), and a GPU
    out-of-memory error moves the model to the CPU once and runs it again (and a notice).
    Keeps fn's name, docstring and signature (``__wrapped__``)."""
    texts, star = _text_positions(fn)
    if star:
        texts = texts | {0, 1}

    @functools.wraps(fn)
    def method(self: GuardedModel, *args, **kwargs):
        args, kwargs, cleaned = _clean_args(args, dict(kwargs), texts)
        try:
            result = fn(self.backend, *args, **kwargs)
        except Exception as err:  # noqa: BLE001 - only OOM is handled, the rest re-raised
            if not is_oom(err):
                raise
            log.warning("%s.%s: GPU out of memory; retrying on the CPU", self.name,
                        fn.__name__)
            move_to_cpu(self)
            result = fn(self.backend, *args, **kwargs)
            _add_notice(result, OOM_NOTICE)
        if cleaned:
            _add_notice(result, SURROGATE_NOTICE)
        return result

    return method


def backend_run(name: str) -> Callable[..., Any]:
    """``backend.<name>(*args, **kwargs)``, looked up at each call (a method patched on the
    backend's class is the one used), with Backend.<name>'s name, docstring and signature."""
    def call(backend, *args, **kwargs):
        return getattr(backend, name)(*args, **kwargs)

    return functools.wraps(getattr(Backend, name))(call)


def _delegated(attr: str, doc: str) -> property:
    """A read-only attribute of the wrapped backend, read at each use."""
    return property(lambda self: getattr(self.backend, attr), doc=doc)


class GuardedModel:
    """A loaded backend with the GPU-OOM fallback and surrogate cleaning on its runs.

    The runs (trace, trace_batch, beam_search) and the analyses (logit_attribution, patch,
    ...: viz_core.analysis.registry) are ``guarded``; the rest of the Backend API is read
    from the wrapped backend, and so is any other attribute (``hf_model``,
    ``cfg``, ``tokenizer`` ...) through ``__getattr__``. One instance is shared by every
    session, like the backend it wraps.
    """

    def __init__(self, backend):
        self.backend = backend
        # shown under the model picker (moved to the CPU, weights not in the checkpoint)
        self.notices: list[str] = list(getattr(backend, "load_notices", None) or [])
        module = getattr(backend, "hf_model", None) or getattr(backend, "model", None)
        if isinstance(module, torch.nn.Module):
            bad = nonfinite_weights(module)
            if bad:
                self.notices.append(Message(NONFINITE_NOTICE, count=len(bad),
                                            names=first_names(bad)))

    # ---- runs and analyses: guarded (the analyses from viz_core.analysis.registry) ------
    trace = guarded(backend_run("trace"))
    trace_batch = guarded(backend_run("trace_batch"))
    beam_search = guarded(backend_run("beam_search"))

    def show_beam(self, text: str, *, n_best: int | None = None, show_pruned: bool = True,
                  title: str | None = None, **beam_options):
        """Beam search on `text` drawn as its tree (notebooks: the figure displays itself).
        beam_options go to beam_search (beam_size, max_len, length_penalty, ...); n_best,
        show_pruned and title to figures.beam_tree_figure. Returns the plotly figure."""
        from ..figures.beam import beam_tree_figure

        tree = self.beam_search(text, **beam_options)
        return beam_tree_figure(tree, n_best=n_best, show_pruned=show_pruned, title=title)

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
        try:
            return getattr(self.backend, attr)
        except AttributeError:
            if attr.startswith("_"):
                raise
            raise AttributeError(
                f"{type(self.backend).__name__} has no attribute {attr!r}; its analyses are "
                f"{', '.join(ANALYSES)}.", name=attr, obj=self) from None

    def __repr__(self) -> str:
        return f"GuardedModel({self.backend!r})"


# model.logit_attribution(...), model.patch(...), ...: every analysis of the table, guarded
attach(GuardedModel, wrap=guarded)


def guard(model) -> GuardedModel:
    """Wrap a loaded backend with the OOM fallback (a guarded model is returned as it is)."""
    return model if isinstance(model, GuardedModel) else GuardedModel(model)
