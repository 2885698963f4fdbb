"""The analyses a model offers as methods: one table, name -> "module:function".

Each function takes the model first (``fn(model, ...)``). ``Backend`` gets one method per row
(``model.logit_attribution(...)`` is ``logit_attribution(model, ...)``), and ``GuardedModel``
(what ``vc.load`` returns) the same methods through its OOM guard. Modules are imported on
first use, so ``import viz_core`` stays cheap. Adding an analysis: its module here in
``viz_core/analysis/``, one row below, its figure in ``viz_core/figures/`` and its page or tab.

The UI calls any of them by name: ``run(model, name, **kwargs)`` (an unknown name is an
InputError listing the analyses).
"""

from __future__ import annotations

import functools
import importlib
import types
from collections.abc import Callable
from typing import Any

from viz_core.i18n import N_

from ..errors import InputError

ANALYSES: dict[str, str] = {
    "logit_attribution": "viz_core.analysis.contributions:logit_attribution",
    "logit_lens": "viz_core.analysis.contributions:logit_lens",
    "qk_attribution": "viz_core.analysis.qk:qk_attribution",
    "composition": "viz_core.analysis.composition:composition",
    "patch": "viz_core.analysis.patching:patch",
    "attribution_patch": "viz_core.analysis.patching:attribution_patch",
    "edge_attribution": "viz_core.analysis.edges:edge_attribution",
    "head_entropy": "viz_core.analysis.entropy:head_entropy",
    "information_flow": "viz_core.analysis.information_flow:information_flow",
    "attention_flow": "viz_core.analysis.attention_flow:attention_flow",
    "referent_heads": "viz_core.analysis.referent:referent_heads",
    "referent_patching": "viz_core.analysis.referent:referent_patching",
}


@functools.cache
def function(name: str) -> Callable[..., Any]:
    """The analysis function registered as ``name`` (imported on first use)."""
    if not isinstance(name, str) or name not in ANALYSES:
        raise InputError(N_("There is no analysis named {value!r}; the analyses are: {join}."),
                            value=str(name)[:40], join=', '.join(ANALYSES))
    module, _, attr = ANALYSES[name].partition(":")
    return getattr(importlib.import_module(module), attr)


def run(model, name: str, /, *args, **kwargs):
    """``model.<name>(*args, **kwargs)``: one registered analysis, called through the model
    (a guarded model runs it with its OOM fallback). InputError for an unknown name."""
    function(name)  # the clear error, before any attribute lookup
    return getattr(model, name)(*args, **kwargs)


class AnalysisMethod:
    """A class attribute that makes one registered analysis a method: ``model.name`` is the
    function bound to the model (a real bound method: help(), signature and __doc__ are the
    function's own). ``wrap`` turns the function into the method's function first (the
    guarded model's OOM guard); read from the class, the attribute is that function."""

    def __init__(self, name: str, wrap: Callable[[Callable], Callable] | None = None):
        self.name = name
        self.wrap = wrap

    @functools.cached_property
    def method(self) -> Callable[..., Any]:
        fn = function(self.name)
        return fn if self.wrap is None else self.wrap(fn)

    def __get__(self, obj, owner=None):
        if obj is None:
            return self.method
        return types.MethodType(self.method, obj)


def attach(cls: type, wrap: Callable[[Callable], Callable] | None = None) -> type:
    """Give ``cls`` one method per registered analysis (those it does not define itself)."""
    for name in ANALYSES:
        if name not in vars(cls):
            setattr(cls, name, AnalysisMethod(name, wrap))
    return cls
