"""Heap memory a function freed goes back to the operating system, not at the worker's exit.

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

That is not all of it: blocks under the threshold, and buffers grown by realloc from small beginnings, still come
from the heap, and glibc gives back only a free top of it. In the Table 5 run with the threshold fixed, the worker
that had summed the column still held a 225 MiB heap with 195 MiB of it free after the invocation (glibc's
mallinfo2), and malloc_trim took its anonymous memory from 282 MiB to 88 MiB. So after an invocation, once its
response is on its way (the sync pool's thread after handing the result to the loop; for an async function the loop's
next turn), the worker trims the heap (malloc_trim(0), which also releases free pages inside it) when the process's private resident memory
grew by more than FAAST_PYTHON_HEAP_TRIM_MIB (an app setting; unset or 0: no trimming but the idle one) since the last trim or its lowest
point since: a no-op invocation pays one read of /proc/self/statm (1.7 us, measured), and a trim costs 60-120 us on
a 13 MiB heap and ~10 ms on 190 MiB of free fragments (measured on this 2-core machine), paid only after an
invocation that left memory behind, and not by its response.
"""
from __future__ import annotations

import ctypes
import logging
import os
import sys
import threading
from typing import Callable, Optional

M_MMAP_THRESHOLD = -3  # glibc's malloc.h
DEFAULT_MMAP_THRESHOLD = 128 * 1024
ENVIRONMENT_VARIABLE = "MALLOC_MMAP_THRESHOLD_"
TRIM_VARIABLE = "FAAST_PYTHON_HEAP_TRIM_MIB"
# Off unless the app asks (its settings): the host's malloc tunables keep a grown heap while the worker is busy (a
# function that allocates 256 MB each call is not page-faulted 65,536 times again, WorkerOptions.PythonMallocTunables)
# and the worker trims after a second idle (channel.py). An app whose invocations leave large, irregular heaps behind
# while the instance's memory is shared with its cache (the JupyterLess executor: Faa$T Table 5) sets it to 16.
DEFAULT_TRIM_MIB = 0

log = logging.getLogger("faast.worker")


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


def trim_slack_bytes(environ: "os._Environ[str] | dict[str, str]" = os.environ) -> int:
    """FAAST_PYTHON_HEAP_TRIM_MIB in bytes (default 0: never trim). A value that is not a whole number of
    MiB is reported on stderr and the default used."""
    raw = environ.get(TRIM_VARIABLE, "")
    if not raw:
        return DEFAULT_TRIM_MIB << 20
    try:
        mib = int(raw)
        if mib < 0:
            raise ValueError(raw)
    except ValueError:
        print(f"faast-python-worker: ignoring {TRIM_VARIABLE}={raw!r} (a whole number of MiB, 0 for no trimming); "
              f"using {DEFAULT_TRIM_MIB}", file=sys.stderr)
        return DEFAULT_TRIM_MIB << 20
    return mib << 20


class HeapTrimmer:
    """Trims the C heap after an invocation that left more than `slack` bytes of private memory behind."""

    def __init__(self, slack: int, trim: Callable[[], object], statm: str = "/proc/self/statm") -> None:
        self._slack = slack
        self._trim = trim
        self._page = os.sysconf("SC_PAGE_SIZE")
        self._statm = os.open(statm, os.O_RDONLY | os.O_CLOEXEC)
        self._lock = threading.Lock()
        self._floor = self.private_bytes()
        self.trims = 0

    def private_bytes(self) -> int:
        """Resident memory that is not shared with other processes (statm: resident - shared pages)."""
        fields = os.pread(self._statm, 128, 0).split()
        return (int(fields[1]) - int(fields[2])) * self._page

    def after_invocation(self) -> None:
        # One trim at a time; an invocation ending while another trims leaves it to that one.
        if not self._lock.acquire(blocking=False):
            return
        try:
            now = self.private_bytes()
            if now - self._floor <= self._slack:
                self._floor = min(self._floor, now)
                return
            self._trim()
            self.trims += 1
            self._floor = self.private_bytes()
        finally:
            self._lock.release()


_trimmer: Optional[HeapTrimmer] = None


def start_trimming(environ: "os._Environ[str] | dict[str, str]" = os.environ) -> Optional[HeapTrimmer]:
    """Sets up trimming after invocations (see the module's docstring); None when it is off or not available (not
    Linux, not glibc)."""
    global _trimmer
    slack = trim_slack_bytes(environ)
    if slack == 0 or not sys.platform.startswith("linux"):
        return None
    try:
        malloc_trim = ctypes.CDLL(None).malloc_trim
    except (OSError, AttributeError):
        return None
    malloc_trim.argtypes = [ctypes.c_size_t]
    malloc_trim.restype = ctypes.c_int
    _trimmer = HeapTrimmer(slack, lambda: malloc_trim(0))
    return _trimmer


def after_invocation() -> None:
    """Called when an invocation has ended and its arguments and result are gone."""
    trimmer = _trimmer
    if trimmer is not None:
        trimmer.after_invocation()
