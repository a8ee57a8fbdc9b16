"""Shared-memory blob data: the cachelet's files under /dev/shm, mapped by host and worker.

Negotiated at WorkerInitRequest (capabilities "shared_memory", "shared_memory_dir",
"shared_memory_min_bytes"). Then:

- Input: a BlobData whose content is `shared_memory` refers to <dir>/<segment>, bytes
  [offset, offset + length). The file is mapped read-only. Mappings are kept between
  invocations (at most MAX_MAPPINGS, least recently used dropped first) for slab segments
  ("s..."), and, when the host promised "shared_memory_release", for every segment but
  its temporary "t..." files: the host then says which files it deleted
  (SharedMemoryReleased) and the worker unmaps them, so a deleted file's memory is not
  held. Other segments are mapped for one invocation and unmapped when it ends, unless
  user code still holds a view of it; then the garbage collector unmaps it when the last
  view goes.
- Streamed input (capability "shared_memory_streaming"): a reference whose `progress` is set
  is still being read from storage into its extent. <dir>/<progress> is a progress record
  (bytes filled, state: filling / complete / failed, and a futex word the host wakes); `Fill.wait`
  blocks until the bytes a reader asks for are there, raising OSError (naming the blob) if the
  fill failed or stalled.
- Output: a blob output of at least `min_bytes` is written to a new file
  "w<pid>-<counter>" (O_EXCL, mode 0600) which the host takes over.
"""
from __future__ import annotations

import collections
import contextvars
import ctypes
import itertools
import logging
import mmap
import os
import stat
import threading
import time
from dataclasses import dataclass
from typing import Any, Dict, Iterable, List, Optional, Tuple

from . import shm_names

log = logging.getLogger("faast_worker.shm")

# The names themselves are defined in shm_names (the protocol's one definition in Python).
CAPABILITY = shm_names.SHARED_MEMORY_CAPABILITY
DIR_CAPABILITY = shm_names.DIRECTORY_CAPABILITY
MIN_BYTES_CAPABILITY = shm_names.MIN_BYTES_CAPABILITY
RELEASE_CAPABILITY = shm_names.RELEASE_CAPABILITY
STREAMING_CAPABILITY = shm_names.STREAMING_CAPABILITY
# A streamed input whose fill gains no byte for this long is given up (OSError): the host marks a
# fill that fails as failed at once, so this bounds only a host that stopped without saying so.
# Overridable with FAAST_STREAM_STALL_SECONDS (tests).
STALL_SECONDS = 120.0
# Used when the host offers shared memory without a (valid) threshold.
DEFAULT_MIN_BYTES = 1 << 20
# Segments kept mapped between invocations. A mapping costs address space, page tables and
# (Python < 3.13 keeps a duplicate) one file descriptor.
MAX_MAPPINGS = 128
SLAB_PREFIX = shm_names.SLAB_SEGMENT
TEMPORARY_PREFIX = shm_names.TEMPORARY

NOT_ENABLED = ("blob content arrived in shared memory, but shared memory was not "
               "negotiated with this worker (not offered by the host, or its directory "
               "was unusable)")


class ShmError(Exception):
    """A shared-memory reference cannot be resolved (the message names the segment)."""


@dataclass(frozen=True)
class Config:
    directory: str
    min_bytes: int
    keep_mappings: bool = False  # the host sends SharedMemoryReleased for files it deletes


_config: Optional[Config] = None


def config() -> Optional[Config]:
    """The negotiated configuration, or None if shared memory is off."""
    return _config


def negotiate(capabilities: Dict[str, str]) -> Tuple[Optional[Config], str]:
    """Decide on the host's offer: (config or None, a message saying why)."""
    if capabilities.get(CAPABILITY) != "1":
        return None, ""
    directory = capabilities.get(DIR_CAPABILITY, "")
    if not directory:
        return None, f"shared memory declined: the host offered no {DIR_CAPABILITY}"
    if not os.path.isabs(directory):
        return None, f"shared memory declined: {DIR_CAPABILITY} '{directory}' is not absolute"
    if not os.path.isdir(directory):
        return None, f"shared memory declined: directory '{directory}' does not exist"
    if not os.access(directory, os.R_OK | os.W_OK | os.X_OK):
        return None, f"shared memory declined: directory '{directory}' is not accessible"
    raw = capabilities.get(MIN_BYTES_CAPABILITY, "")
    note = ""
    try:
        min_bytes = int(raw) if raw.isdecimal() else -1
    except ValueError:
        min_bytes = -1
    if min_bytes < 0:
        min_bytes = DEFAULT_MIN_BYTES
        note = f" ({MIN_BYTES_CAPABILITY}={raw!r} is not a decimal number; using the default)"
    cfg = Config(directory, min_bytes, capabilities.get(RELEASE_CAPABILITY) == "1")
    return cfg, (f"shared memory on: directory '{directory}', outputs of at least "
                 f"{min_bytes} bytes go through it"
                 f"{', mappings kept between invocations' if cfg.keep_mappings else ''}{note}")


def configure(cfg: Optional[Config]) -> None:
    global _config
    with _mapped_lock:
        if _config != cfg:
            for name in list(_mapped):
                _mapped.pop(name).close()
        _config = cfg


# ---- input -----------------------------------------------------------------------

class _Mapping:
    __slots__ = ("mm", "size", "ino")

    def __init__(self, mm: Optional[mmap.mmap], size: int, ino: int) -> None:
        self.mm, self.size, self.ino = mm, size, ino

    def view(self, segment: str, offset: int, length: int) -> memoryview:
        if offset < 0 or length < 0 or offset + length > self.size:
            raise ShmError(f"range [{offset}, {offset + length}) is outside segment "
                           f"'{segment}' ({self.size} bytes)")
        if self.mm is None:  # empty file: mmap cannot map it
            return memoryview(b"")
        return memoryview(self.mm)[offset:offset + length]

    def close(self) -> None:
        if self.mm is not None:
            try:
                self.mm.close()
            except BufferError:  # user code still holds a view: GC unmaps it later
                pass


def check_segment_name(segment: str) -> None:
    if not segment or "/" in segment or ".." in segment or "\0" in segment or segment == ".":
        raise ShmError(f"invalid segment name {segment!r}")


def _open(cfg: Config, segment: str, populate: bool = True) -> _Mapping:
    path = os.path.join(cfg.directory, segment)
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NOFOLLOW | os.O_CLOEXEC)
    except FileNotFoundError:
        raise ShmError(f"segment '{segment}' not found in '{cfg.directory}'") from None
    except OSError as exc:
        raise ShmError(f"cannot open segment '{segment}' in '{cfg.directory}': "
                       f"{exc.strerror or exc}") from None
    try:
        st = os.fstat(fd)
        if not stat.S_ISREG(st.st_mode):
            raise ShmError(f"segment '{segment}' in '{cfg.directory}' is not a regular file")
        # mmap keeps its own duplicate of the descriptor until the mapping is closed.
        # MAP_POPULATE maps every page in one call instead of one fault per 4 KiB on first touch.
        # Not for an input still filling: populating every page of a 256 MiB extent up front took
        # the streamed read's first byte from ~80 to ~280 ms (bench/streamed-inputs); its pages are
        # touched as the bytes arrive instead.
        flags = _MAP_FLAGS if populate else mmap.MAP_SHARED
        mm = mmap.mmap(fd, 0, flags=flags, prot=mmap.PROT_READ) if st.st_size else None
    except OSError as exc:
        raise ShmError(f"cannot map segment '{segment}' in '{cfg.directory}': "
                       f"{exc.strerror or exc}") from None
    finally:
        os.close(fd)
    return _Mapping(mm, st.st_size, st.st_ino)


_MAP_FLAGS = mmap.MAP_SHARED | getattr(mmap, "MAP_POPULATE", 0)

_mapped_lock = threading.Lock()
_mapped: "collections.OrderedDict[str, _Mapping]" = collections.OrderedDict()


def _kept_view(cfg: Config, segment: str, offset: int, length: int, populate: bool = True) -> memoryview:
    # The view is made under the lock, so that a concurrent release cannot unmap the
    # segment between lookup and view (a released mapping with live views stays mapped).
    with _mapped_lock:
        m = _mapped.get(segment)
        if m is None:
            _prune(cfg)
            m = _open(cfg, segment, populate)
            _mapped[segment] = m
        else:
            _mapped.move_to_end(segment)
            if offset >= 0 and length >= 0 and offset + length > m.size:
                # Beyond the mapping: map it again in case the host grew the file.
                _mapped.pop(segment).close()
                m = _mapped[segment] = _open(cfg, segment, populate)
        return m.view(segment, offset, length)


def _prune(cfg: Config) -> None:
    """Before mapping a new segment: unmap those whose file is gone (needed only without
    release messages), and the least recently used ones beyond MAX_MAPPINGS - 1."""
    if not cfg.keep_mappings:
        for name, m in list(_mapped.items()):
            try:
                gone = os.stat(os.path.join(cfg.directory, name)).st_ino != m.ino
            except OSError:
                gone = True
            if gone:
                _mapped.pop(name).close()
    while len(_mapped) >= MAX_MAPPINGS:
        _mapped.popitem(last=False)[1].close()


def release(segments: Iterable[str]) -> None:
    """The host deleted these files: unmap them (views still held are unmapped by the GC)."""
    with _mapped_lock:
        for name in segments:
            m = _mapped.pop(name, None)
            if m is not None:
                m.close()


def mapped_names() -> List[str]:
    with _mapped_lock:
        return list(_mapped)


class Scope:
    """What one invocation mapped: closed when it ends."""

    __slots__ = ("mappings", "streams", "fills")

    def __init__(self) -> None:
        self.mappings: Dict[str, _Mapping] = {}
        self.streams: List[Any] = []
        self.fills: List[Any] = []

    def view(self, cfg: Config, segment: str, offset: int, length: int,
             populate: bool = True) -> memoryview:
        m = self.mappings.get(segment)
        if m is None:
            m = self.mappings[segment] = _open(cfg, segment, populate)
        return m.view(segment, offset, length)

    def close(self) -> None:
        for s in self.streams:
            s._release()  # InputStreams over shared memory: invalid after the invocation
        for m in self.mappings.values():
            m.close()
        for f in self.fills:
            f.close()
        self.fills.clear()
        self.streams.clear()
        self.mappings.clear()


# The running invocation's Scope (None until it maps something); see end_invocation().
SCOPE: contextvars.ContextVar[Optional[Scope]] = contextvars.ContextVar(
    "faast_shm_scope", default=None)


def current_scope() -> Scope:
    scope = SCOPE.get()
    if scope is None:
        scope = Scope()
        SCOPE.set(scope)
    return scope


def end_invocation() -> None:
    """Called when an invocation ends, in its context: unmap what it mapped."""
    scope = SCOPE.get()
    if scope is not None:
        SCOPE.set(None)
        scope.close()


def view(ref: Any) -> memoryview:
    """A read-only memoryview of a SharedMemoryRef's bytes, valid during the invocation."""
    cfg = _config
    if cfg is None:
        raise ShmError(NOT_ENABLED)
    segment = ref.segment
    check_segment_name(segment)
    populate = not getattr(ref, "progress", "")
    if segment.startswith(SLAB_PREFIX) or (cfg.keep_mappings and not segment.startswith(TEMPORARY_PREFIX)):
        return _kept_view(cfg, segment, ref.offset, ref.length, populate)
    return current_scope().view(cfg, segment, ref.offset, ref.length, populate)


# ---- streamed input ----------------------------------------------------------------

class _Futex:
    """FUTEX_WAIT on a word of a shared file mapping, through libc's syscall() (ctypes releases the
    GIL for the call). The word is mapped a second time with libc's mmap, because a Python mmap
    does not give its address; a shared futex is keyed by file and offset, so either mapping is
    the same futex as the host's."""

    _NUMBERS = {"x86_64": 202, "aarch64": 98, "arm64": 98, "riscv64": 98, "loongarch64": 98}

    def __init__(self) -> None:
        self.number = self._NUMBERS.get(os.uname().machine, 0)
        libc = ctypes.CDLL(None, use_errno=True)
        self._syscall = libc.syscall
        self._syscall.restype = ctypes.c_long
        self._mmap = libc.mmap
        self._mmap.restype = ctypes.c_void_p
        self._mmap.argtypes = [ctypes.c_void_p, ctypes.c_size_t, ctypes.c_int, ctypes.c_int,
                               ctypes.c_int, ctypes.c_long]
        self._munmap = libc.munmap
        self._munmap.argtypes = [ctypes.c_void_p, ctypes.c_size_t]

    def map(self, fd: int, size: int) -> Optional[int]:
        address = self._mmap(None, size, mmap.PROT_READ, mmap.MAP_SHARED, fd, 0)
        return None if address in (None, ctypes.c_void_p(-1).value) else address

    def unmap(self, address: int, size: int) -> None:
        self._munmap(address, size)

    def wait(self, address: int, value: int, seconds: float) -> None:
        """Sleeps while the word at `address` holds `value`, at most `seconds` (returns at once
        if it no longer does; a signal or a spurious wake-up returns early too)."""
        ts = _Timespec(int(seconds), int((seconds % 1) * 1e9))
        self._syscall(ctypes.c_long(self.number), ctypes.c_void_p(address), ctypes.c_int(0),
                      ctypes.c_int(value), ctypes.byref(ts), ctypes.c_void_p(None), ctypes.c_int(0))


class _Timespec(ctypes.Structure):
    _fields_ = [("tv_sec", ctypes.c_long), ("tv_nsec", ctypes.c_long)]


def _load_futex() -> Optional[_Futex]:
    try:
        f = _Futex()
    except (OSError, AttributeError):
        return None
    return f if f.number else None


_futex = _load_futex()


class Fill:
    """The progress record of an input still being read from storage (SharedMemoryRef.progress)."""

    __slots__ = ("_mm", "_blob", "_length", "_done", "_stall", "_word")

    def __init__(self, mm: mmap.mmap, blob: str, length: int, word: Optional[int] = None) -> None:
        self._mm = mm
        # The address of the record's wake word in a second mapping (None: poll).
        self._word = word
        self._blob = blob
        self._length = length
        self._done = False
        raw = os.environ.get("FAAST_STREAM_STALL_SECONDS", "")
        try:
            self._stall = float(raw) if raw else STALL_SECONDS
        except ValueError:
            self._stall = STALL_SECONDS

    def state(self) -> Tuple[int, int]:
        """(bytes filled, state) as the host last published them."""
        mm = self._mm
        # State first: once it says complete, every byte is there whatever "filled" read.
        state = int.from_bytes(mm[shm_names.PROGRESS_STATE_OFFSET:shm_names.PROGRESS_STATE_OFFSET + 4], "little")
        filled = int.from_bytes(mm[shm_names.PROGRESS_FILLED_OFFSET:shm_names.PROGRESS_FILLED_OFFSET + 8], "little")
        return filled, state

    def _wake_word(self) -> int:
        o = shm_names.PROGRESS_WAKE_OFFSET
        return int.from_bytes(self._mm[o:o + 4], "little")

    def wait(self, end: int) -> int:
        """Blocks until the first `end` bytes are final; returns how many are (at least `end`,
        or the whole length). Raises OSError naming the blob if the fill failed or stalled."""
        if self._done:
            return self._length
        end = min(end, self._length)
        delay = 0.0001
        last = -1
        since = 0.0
        while True:
            # The wake word before the record: a wake after this load changes it, so the futex wait
            # below returns at once instead of missing it.
            word = self._wake_word() if self._word is not None else 0
            filled, state = self.state()
            if state == shm_names.COMPLETE:
                self._done = True
                return self._length
            if filled >= end:
                return filled
            if state == shm_names.FAILED:
                raise OSError(f"blob '{self._blob}': reading it from storage failed after {filled} "
                              f"of {self._length} bytes; its content is incomplete")
            now = time.monotonic()
            if filled != last:
                last, since = filled, now
            elif now - since > self._stall:
                raise OSError(f"blob '{self._blob}': no bytes arrived for {self._stall:g} s after "
                              f"{filled} of {self._length}; the download was abandoned")
            if word and _futex is not None and self._word is not None:
                # The host wakes the word after every few MiB and when the state changes (its wake
                # step): no polling. Polling every 0.1-1 ms made a 256 MiB download ~1.9x slower on
                # two cores (bench/streamed-inputs). The timeout only bounds the stall check.
                _futex.wait(self._word, word, max(0.01, self._stall / 4))
                continue
            # A host that does not wake (word 0): poll, backing off to 1 ms.
            time.sleep(delay)
            delay = min(delay * 2, 0.001)

    def close(self) -> None:
        if self._word is not None and _futex is not None:
            _futex.unmap(self._word - shm_names.PROGRESS_WAKE_OFFSET, shm_names.PROGRESS_SIZE)
            self._word = None
        try:
            self._mm.close()
        except BufferError:
            pass


def fill(ref: Any, blob: str) -> Optional[Fill]:
    """The progress record of a streamed reference (None when it is complete), mapped for the
    invocation and closed when it ends."""
    name = ref.progress
    if not name:
        return None
    cfg = _config
    if cfg is None:
        raise ShmError(NOT_ENABLED)
    check_segment_name(name)
    path = os.path.join(cfg.directory, name)
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NOFOLLOW | os.O_CLOEXEC)
    except OSError as exc:
        raise ShmError(f"progress record '{name}' of blob '{blob}' cannot be opened in "
                       f"'{cfg.directory}': {exc.strerror or exc}") from None
    try:
        st = os.fstat(fd)
        if not stat.S_ISREG(st.st_mode) or st.st_size < shm_names.PROGRESS_SIZE:
            raise ShmError(f"progress record '{name}' of blob '{blob}' in '{cfg.directory}' is "
                           f"not a {shm_names.PROGRESS_SIZE}-byte regular file")
        mm = mmap.mmap(fd, shm_names.PROGRESS_SIZE, flags=mmap.MAP_SHARED, prot=mmap.PROT_READ)
        base = _futex.map(fd, shm_names.PROGRESS_SIZE) if _futex is not None else None
    finally:
        os.close(fd)
    f = Fill(mm, blob, ref.length, None if base is None else base + shm_names.PROGRESS_WAKE_OFFSET)
    current_scope().fills.append(f)
    return f


# ---- output ----------------------------------------------------------------------

_counter = itertools.count(1)


def write(data: Any) -> Optional[str]:
    """Write data (a bytes-like object) to a new file in the directory; returns its name,
    or None (after logging a warning) if that failed and the value should go inline."""
    cfg = _config
    if cfg is None:
        return None
    pid = os.getpid()
    for _attempt in range(100):
        name = shm_names.worker_output_file(pid, next(_counter))
        path = os.path.join(cfg.directory, name)
        try:
            fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW
                         | os.O_CLOEXEC, 0o600)
        except FileExistsError:  # left over by an earlier process with this pid
            continue
        except OSError as exc:
            log.warning("writing a %d-byte output to shared memory failed (%s); "
                        "sending it inline", len(data), exc.strerror or exc)
            return None
        try:
            try:
                os.fchmod(fd, 0o600)  # exactly 0600 whatever the umask
                view = memoryview(data)
                total, written = view.nbytes, 0
                while written < total:
                    written += os.write(fd, view[written:])
            finally:
                os.close(fd)
        except OSError as exc:
            try:
                os.unlink(path)
            except OSError:
                pass
            log.warning("writing a %d-byte output to shared memory file '%s' failed (%s); "
                        "sending it inline", len(data), path, exc.strerror or exc)
            return None
        return name
    log.warning("no free output file name in '%s'; sending the output inline", cfg.directory)
    return None


def discard(names: List[str]) -> None:
    """Delete output files that will not be handed to the host after all."""
    cfg = _config
    if cfg is None:
        return
    for name in names:
        try:
            os.unlink(os.path.join(cfg.directory, name))
        except OSError:
            pass
