"""Process-wide allocator setting for traces on the CPU.

A trace keeps several (heads x N x N) float32 tensors per block: 4 MB each for 4 heads at
512 tokens. glibc malloc serves blocks that large with a fresh mmap and unmaps them when
they are freed, so every new trace touches fresh pages and the kernel zero-fills each 4 KB
page on first use: about 17,000 page faults for one all-hook-point trace of the bench's
encoder-decoder at 512 tokens, which made that capture cost twice the uncaptured forward.

``reuse_freed_memory()`` asks glibc to serve such blocks from the heap and to keep freed
ones there for the next trace (mallopt M_MMAP_THRESHOLD / M_TRIM_THRESHOLD). The faults per
trace drop to a few dozen. The price: up to ``keep_mb`` of freed memory stays with the
process instead of going back to the OS, which a server that traces all day reuses anyway.
Elsewhere (macOS, Windows, musl) it does nothing and says so.
"""

from __future__ import annotations

import ctypes
import ctypes.util
import sys

M_TRIM_THRESHOLD = -1
M_MMAP_THRESHOLD = -3
MAX_MMAP_THRESHOLD_MB = 32  # glibc refuses more on 64-bit (HEAP_MAX_SIZE / 2)

_applied: dict[str, int] | None = None


def reuse_freed_memory(block_mb: int = MAX_MMAP_THRESHOLD_MB, keep_mb: int = 256) -> bool:
    """Serve blocks up to block_mb from the heap and keep up to keep_mb freed at its top.
    Idempotent; -> whether glibc took the settings."""
    global _applied
    wanted = {"block_mb": min(int(block_mb), MAX_MMAP_THRESHOLD_MB), "keep_mb": int(keep_mb)}
    if _applied == wanted:
        return True
    if not sys.platform.startswith("linux"):
        return False
    try:
        libc = ctypes.CDLL(ctypes.util.find_library("c") or "libc.so.6")
        mallopt = libc.mallopt
    except (OSError, AttributeError):  # not glibc
        return False
    mallopt.argtypes, mallopt.restype = [ctypes.c_int, ctypes.c_int], ctypes.c_int
    ok = bool(mallopt(M_MMAP_THRESHOLD, wanted["block_mb"] << 20)) and \
        bool(mallopt(M_TRIM_THRESHOLD, wanted["keep_mb"] << 20))
    if ok:
        _applied = wanted
    return ok


def applied() -> dict[str, int] | None:
    """The settings in force in this process (None: the allocator's own defaults)."""
    return None if _applied is None else dict(_applied)
