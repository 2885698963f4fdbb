"""Pick the torch device: cuda when there is one, then mps, then cpu."""

from __future__ import annotations

import os

import torch

from viz_core.i18n import N_

from ..errors import InputError
from ..model.choices import Dtype, options


def available_devices() -> list[str]:
    """Devices this machine can run on, best first, always ending with "cpu"."""
    out = []
    if torch.cuda.is_available():
        out.append("cuda")
    mps = getattr(torch.backends, "mps", None)
    if mps is not None and mps.is_available():
        out.append("mps")
    out.append("cpu")
    return out


def pick_device(device: str | torch.device | None = "auto") -> torch.device:
    """"auto"/None -> the best available; otherwise the named device, if it exists."""
    if device is None or str(device) == "auto":
        return torch.device(available_devices()[0])
    try:
        dev = torch.device(device)
    except (RuntimeError, TypeError):
        dev = None
    if dev is None or dev.type not in available_devices():
        raise InputError(
            N_("device {device!r} is not available here; choose one of {value}"),
               device=str(device), value=['auto', *available_devices()]
        )
    return dev


DTYPES = {name: getattr(torch, name) for name in options(Dtype) if name != "auto"}


def pick_dtype(dtype: Dtype | torch.dtype | None, device: torch.device) -> torch.dtype:
    """"auto"/None -> bfloat16 on a GPU, float32 elsewhere; or a name from DTYPES.

    Only the weights and activations use it: softmax and every captured pattern and score are
    computed in float32 whatever the weights' dtype (viz_core.capture.recorder).
    """
    if isinstance(dtype, torch.dtype):
        return dtype
    if dtype is None or str(dtype) == "auto":
        return torch.bfloat16 if torch.device(device).type == "cuda" else torch.float32
    name = str(dtype).removeprefix("torch.")
    if name not in DTYPES:
        raise InputError(N_("dtype {dtype!r} is not one of auto, {join}"),
                            dtype=dtype, join=', '.join(DTYPES))
    return DTYPES[name]


def free_memory(device: torch.device) -> tuple[int, int]:
    """(free bytes on the device, or 0 for the CPU; free host bytes)."""
    try:
        import psutil

        host = int(psutil.virtual_memory().available)
    except ImportError:  # pragma: no cover - psutil ships with the dev tools
        host = os.sysconf("SC_AVPHYS_PAGES") * os.sysconf("SC_PAGE_SIZE")
    gpu = torch.cuda.mem_get_info(device)[0] if device.type == "cuda" else 0
    return gpu, host
