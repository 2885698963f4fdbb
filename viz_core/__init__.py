"""Attention Lab core: models, traces, beam search, analysis and figures (no UI code)."""

from .capture.device import available_devices, pick_device
from .capture.trace import AttentionTrace, BlockTrace
from .decoding.beam_tree import BeamNode, BeamTree, Hypothesis
from .errors import CheckpointError, InputError, ModelLoadError, VizError
from .loading.entry import load, shipped_models

__all__ = [
    "AttentionTrace", "BeamNode", "BeamTree", "BlockTrace", "CheckpointError", "Hypothesis",
    "InputError", "ModelLoadError", "VizError", "available_devices", "load", "pick_device",
    "shipped_models",
]
