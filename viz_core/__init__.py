"""Attention Lab core: models, traces, beam search, analysis and figures (no UI code)."""

from .beam_tree import BeamNode, BeamTree, Hypothesis
from .device import available_devices, pick_device
from .errors import CheckpointError, InputError, ModelLoadError, VizError
from .loading import load, shipped_models
from .trace import AttentionTrace, BlockTrace

__all__ = [
    "AttentionTrace", "BeamNode", "BeamTree", "BlockTrace", "CheckpointError", "Hypothesis",
    "InputError", "ModelLoadError", "VizError", "available_devices", "load", "pick_device",
    "shipped_models",
]
