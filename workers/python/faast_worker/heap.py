"""Large freed heap blocks go back to the operating system at once.

glibc's malloc serves a block of 128 KiB or more with its own mmap and unmaps it when freed, but the first time such
a block is freed it raises that threshold to the block's size (up to 32 MiB on 64 bits), and from then on blocks of
up to that size come from the heap, where a freed one stays resident until everything above it is freed too. A
function that builds, pickles and copies large buffers (JupyterLess loading and saving a session's DataFrames) then
leaves hundreds of MiB behind in a worker that is idle: measured in the Table 5 scenario of docs/jupyterless.md, the
worker that had run the 192 MB column's cells kept 281 MiB anonymous memory against 88 MiB for its idle sibling (an
executor cell run in one process: 448 MiB resident after it, 83 MiB after malloc_trim). The memory daemon sees that
memory as heap it cannot evict, and the instance's memory cgroup charges it. Fixing the threshold (mallopt
M_MMAP_THRESHOLD, which also stops glibc moving the trim threshold) keeps every large block mmapped, so freeing it
unmaps it; the cost is a page fault per page of each new large block instead of reusing heap pages.

The threshold is glibc's initial one, 128 KiB, unless MALLOC_MMAP_THRESHOLD_ is set in the worker's environment:
glibc applied that value when the process started, and it is left alone.
"""
from __future__ import annotations

import ctypes
import os
import sys
from typing import Optional

M_MMAP_THRESHOLD = -3  # glibc's malloc.h
DEFAULT_MMAP_THRESHOLD = 128 * 1024
ENVIRONMENT_VARIABLE = "MALLOC_MMAP_THRESHOLD_"


def fix_mmap_threshold() -> Optional[int]:
    """Fixes glibc's mmap threshold (see the module's docstring); returns the threshold set, or None when nothing
    was set (not Linux, not glibc, or MALLOC_MMAP_THRESHOLD_ given)."""
    if not sys.platform.startswith("linux") or ENVIRONMENT_VARIABLE in os.environ:
        return None
    try:
        mallopt = ctypes.CDLL(None).mallopt
    except (OSError, AttributeError):
        return None  # no mallopt: not glibc
    mallopt.argtypes = [ctypes.c_int, ctypes.c_int]
    mallopt.restype = ctypes.c_int
    # mallopt returns 1 on success; musl's is a stub returning 0 (its malloc unmaps large frees anyway).
    return DEFAULT_MMAP_THRESHOLD if mallopt(M_MMAP_THRESHOLD, DEFAULT_MMAP_THRESHOLD) == 1 else None
