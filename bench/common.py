"""Timing helpers: medians of several runs, with min and max, on the device named."""

from __future__ import annotations

import statistics
import time
from collections.abc import Callable

import torch


def sync(device) -> None:
    if str(device).startswith("cuda"):
        torch.cuda.synchronize()


def timeit(fn: Callable[[], object], repeat: int = 5, warmup: int = 1, device="cpu") -> dict:
    """Median/min/max wall seconds of fn() over `repeat` runs after `warmup` runs."""
    for _ in range(warmup):
        fn()
    sync(device)
    times = []
    for _ in range(repeat):
        t0 = time.perf_counter()
        fn()
        sync(device)
        times.append(time.perf_counter() - t0)
    return {"median": statistics.median(times), "min": min(times), "max": max(times),
            "runs": repeat}


def ratio_row(name: str, ours: dict, peer: dict, peer_name: str, device, target=None,
              **extra) -> dict:
    """One table row: our median over the peer's median, measured in the same run."""
    r = ours["median"] / peer["median"] if peer["median"] > 0 else float("nan")
    row = {"name": name, "ours_s": ours["median"], "ours_min_s": ours["min"],
           "ours_max_s": ours["max"], "peer": peer_name, "peer_s": peer["median"],
           "ratio": r, "device": str(device), "target": target}
    if target is not None:
        row["meets_target"] = bool(r <= target)
    row.update(extra)
    return row
