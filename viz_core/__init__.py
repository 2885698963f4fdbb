"""Attention Lab's library: load a model, trace a text, read every head, draw it.

    import viz_core as vc
    model = vc.load("en-fr")                  # shipped name, checkpoint dir, "minilm" or HF id/path
    trace = model.trace("the red car")        # lazy: nothing N x N is computed before it is read
    trace["decoder.0.cross"].head(3)          # float32 [query, key]

This face is what notebooks and the app's pages use: ``load``, the trace and beam types, the
errors, exports, and the namespaces ``figures``, ``analysis``, ``lessons``, ``decoding``,
``atlas`` and ``distillation`` (teacher vs student, viz_core.analysis.distillation), imported
on first use. Everything else (capture, backends, loading, model, training, tasks) is the
machinery behind it; docs/ARCHITECTURE.md maps it.
"""

from importlib import import_module

from .capture.device import available_devices, pick_device
from .capture.export import npz_bytes, trace_json, trace_npz
from .capture.trace import AttentionTrace, BlockTrace
from .decoding.beam_tree import BeamNode, BeamTree, Hypothesis
from .errors import CheckpointError, InputError, ModelLoadError, VizError
from .loading.entry import load, shipped_models

# Namespaces a page or a notebook may use, imported on first use (plotly, Ray: not at start-up).
NAMESPACES = ("figures", "analysis", "lessons", "decoding", "atlas", "distillation")
# Namespaces that live in a layer's folder rather than at the top (nothing sits beside errors.py).
NESTED = {"distillation": ".analysis.distillation"}


def __getattr__(name: str):
    if name in NAMESPACES:
        return import_module(NESTED.get(name, f".{name}"), __name__)
    raise AttributeError(f"module 'viz_core' has no attribute {name!r}")


__all__ = [
    "AttentionTrace", "BeamNode", "BeamTree", "BlockTrace", "CheckpointError", "Hypothesis",
    "InputError", "ModelLoadError", "VizError", "available_devices", "load", "npz_bytes",
    "pick_device", "shipped_models", "trace_json", "trace_npz", *NAMESPACES,
]
