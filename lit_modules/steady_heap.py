"""Keep freed tensor memory in the process (glibc malloc): no page faults in the steady state of a run.

With glibc's defaults a CPU training step allocates its activations partly as fresh pages: buffers above
the mmap threshold (128 KiB at first, then moving with what was freed) are mmap'd and unmapped each step,
and a heap top above the trim threshold is handed back to the kernel, so the next step faults it in again
and the kernel zeroes it. A tiny run kept faulting 700-1,500 pages per step for its whole 300 steps (34 ms
a step) and none after its first 100 with the thresholds fixed below (32 ms); the forward-only bench rows
read 1.00 or 1.17 for the same model from one process to the next, depending on that history.

`steady_heap()` fixes the mmap threshold at glibc's largest (32 MiB on 64-bit: smaller buffers come from
the heap, and the threshold no longer moves) and trims only a free top above 1 GiB. A process keeps up to
that much freed memory for its next step instead of returning it. Addresses change, values do not:
torch's CPU allocator aligns every buffer to 64 bytes either way, so losses are bit-identical (the golden
histories run with it). A user's own `MALLOC_MMAP_THRESHOLD_` / `MALLOC_TRIM_THRESHOLD_` win; other libcs
(macOS, musl) and preloaded allocators (jemalloc, tcmalloc) are left alone.
"""

from __future__ import annotations

import ctypes
import ctypes.util
import os
import sys

MMAP_THRESHOLD = 32 << 20  # glibc's maximum on 64-bit (HEAP_MAX_SIZE / 2): larger values are refused
TRIM_THRESHOLD = 1 << 30
USER_SETTINGS = ("MALLOC_MMAP_THRESHOLD_", "MALLOC_TRIM_THRESHOLD_")
_M_TRIM_THRESHOLD, _M_MMAP_THRESHOLD = -1, -3  # glibc's malloc.h

_state: str | None = None


def _glibc() -> ctypes.CDLL | None:
    if not sys.platform.startswith("linux"):
        return None
    try:
        libc = ctypes.CDLL(ctypes.util.find_library("c") or "libc.so.6")
        libc.gnu_get_libc_version  # absent from musl
        return libc
    except (OSError, AttributeError):
        return None


def _set_thresholds() -> str:
    chosen = [name for name in USER_SETTINGS if name in os.environ]
    if chosen:
        return f"left as set: {', '.join(chosen)}"
    if any(a in os.environ.get("LD_PRELOAD", "") for a in ("jemalloc", "tcmalloc", "mimalloc")):
        return "left alone: another allocator is preloaded"
    libc = _glibc()
    if libc is None:
        return "left alone: not glibc"
    if libc.mallopt(_M_MMAP_THRESHOLD, MMAP_THRESHOLD) == 1 and libc.mallopt(_M_TRIM_THRESHOLD, TRIM_THRESHOLD) == 1:
        return f"steady: mmap threshold {MMAP_THRESHOLD >> 20} MiB, trim threshold {TRIM_THRESHOLD >> 30} GiB"
    return "left alone: mallopt refused"


def steady_heap() -> str:
    """Fix glibc's thresholds once per process; returns what was done, in words (also on later calls)."""
    global _state
    if _state is None:
        _state = _set_thresholds()
    return _state
