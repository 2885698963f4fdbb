"""A bound on the accelerator memory that traces kept by the app's caches may hold.

A lazy trace keeps q, k, v on the model's device so that views are computed there. The app
keeps up to dozens of traces in its caches; on a GPU they must not pile up. Each backend owns
one ``DeviceBudget``: every trace it makes is admitted; when the traces still alive hold more
than ``limit`` bytes on the device, the oldest are moved to host memory (``to_host``), where
they stay fully readable. Only weak references are kept: a trace the caches drop is freed as
usual, and nothing captured is reachable through the budget.
"""

from __future__ import annotations

import threading
import weakref
from collections import OrderedDict

DEFAULT_LIMIT = 4 << 30  # 4 GiB of captured tensors per model on the device


class DeviceBudget:
    def __init__(self, limit: int = DEFAULT_LIMIT):
        self.limit = int(limit)
        self._traces: OrderedDict[int, weakref.ref] = OrderedDict()
        self._lock = threading.Lock()

    def admit(self, trace) -> None:
        """Register a new trace (newest last) and move the oldest to the host while over."""
        if trace.device_bytes() == 0:
            return
        with self._lock:
            key = id(trace)
            self._traces[key] = weakref.ref(trace, lambda _ref, k=key: self._forget(k))
            self._traces.move_to_end(key)
            alive = [(k, r()) for k, r in list(self._traces.items())]
            alive = [(k, t) for k, t in alive if t is not None]
            total = sum(t.device_bytes() for _, t in alive)
            for k, t in alive[:-1]:  # never the trace just made
                if total <= self.limit:
                    break
                total -= t.device_bytes()
                t.to_host()
                self._traces.pop(k, None)

    def _forget(self, key: int) -> None:
        self._traces.pop(key, None)

    def device_bytes(self) -> int:
        with self._lock:
            alive = [r() for r in list(self._traces.values())]
        return sum(t.device_bytes() for t in alive if t is not None)
