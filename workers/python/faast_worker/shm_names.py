"""The shared-memory naming protocol between the host and this worker, in one place.

The host (C#: FaaST.Cachelet.Memory.SharedMemoryNames) and the Node worker
(lib/shm-names.js) define the same names; all three are checked against
protos/shared-memory.json by a test in each language (here: tests/test_shm_names.py).
"""
from __future__ import annotations

# Instance directories: ROOT/faast-<app>-<pid> (the host names them; a worker is told its
# directory in the handshake).
ROOT = "/dev/shm"
INSTANCE_DIRECTORY_PREFIX = "faast-"

# Files of an instance directory. The host's own are a prefix and a number: slab segments,
# large objects (adopted outputs among them) and temporary files (objects larger than the
# cache, peer transfers spilled to a file).
SLAB_SEGMENT = "s"
LARGE_OBJECT = "l"
TEMPORARY = "t"
# Progress records of inputs streamed while they download (see PROGRESS_* below).
PROGRESS = "p"
HOST_NUMBER_DIGITS = 6
# A worker writes each large output to a new file of its own: w<pid>-<counter>.
WORKER_OUTPUT = "w"

# Capabilities of the handshake (WorkerInitRequest / WorkerInitResponse).
SHARED_MEMORY_CAPABILITY = "shared_memory"
DIRECTORY_CAPABILITY = "shared_memory_dir"
MIN_BYTES_CAPABILITY = "shared_memory_min_bytes"
RELEASE_CAPABILITY = "shared_memory_release"
STREAMING_CAPABILITY = "shared_memory_streaming"

# A progress record (protos/shared-memory.json, "progressRecord"): int64 bytes filled at 0,
# int32 state at 8, int32 wake word at 12 (a futex; 0: the host does not wake, poll), little-endian.
PROGRESS_SIZE = 16
PROGRESS_FILLED_OFFSET = 0
PROGRESS_STATE_OFFSET = 8
PROGRESS_WAKE_OFFSET = 12
FILLING, COMPLETE, FAILED = 0, 1, 2


def worker_output_file(pid: int, counter: int) -> str:
    """The file a worker writes its counter-th large output to."""
    return f"{WORKER_OUTPUT}{pid}-{counter}"
