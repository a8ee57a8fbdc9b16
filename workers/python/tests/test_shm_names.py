"""The Python worker's shared-memory names are the protocol's: protos/shared-memory.json,
against which the host (C#) and the Node worker check theirs too."""
from __future__ import annotations

import json
import sys
from pathlib import Path

WORKER_DIR = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(WORKER_DIR))

from faast_worker import shm, shm_names  # noqa: E402

SPEC = json.loads((WORKER_DIR.parent.parent / "protos" / "shared-memory.json").read_text(encoding="utf-8"))


def test_directory_and_file_prefixes_are_the_specs():
    files = SPEC["files"]
    assert shm_names.ROOT == SPEC["root"]
    assert shm_names.INSTANCE_DIRECTORY_PREFIX == SPEC["instanceDirectory"]["prefix"]
    assert (shm_names.SLAB_SEGMENT, shm_names.LARGE_OBJECT, shm_names.TEMPORARY) == (
        files["slabSegment"], files["largeObject"], files["temporary"])
    assert shm_names.HOST_NUMBER_DIGITS == files["hostNumberDigits"]
    assert shm_names.WORKER_OUTPUT == files["workerOutput"]["prefix"]
    assert shm_names.PROGRESS == files["progress"]


def test_the_progress_record_layout_is_the_specs():
    record = SPEC["progressRecord"]
    assert (shm_names.PROGRESS_SIZE, shm_names.PROGRESS_FILLED_OFFSET, shm_names.PROGRESS_STATE_OFFSET,
            shm_names.PROGRESS_WAKE_OFFSET) == (
        record["size"], record["filledOffset"], record["stateOffset"], record["wakeOffset"])
    assert (shm_names.FILLING, shm_names.COMPLETE, shm_names.FAILED) == (
        record["states"]["filling"], record["states"]["complete"], record["states"]["failed"])


def test_capability_names_are_the_specs():
    caps = SPEC["capabilities"]
    assert (shm_names.SHARED_MEMORY_CAPABILITY, shm_names.DIRECTORY_CAPABILITY,
            shm_names.MIN_BYTES_CAPABILITY, shm_names.RELEASE_CAPABILITY) == (
        caps["sharedMemory"], caps["directory"], caps["minBytes"], caps["release"])
    assert shm_names.STREAMING_CAPABILITY == caps["streaming"]


def test_worker_output_files_are_named_as_the_spec_says():
    for example in SPEC["files"]["workerOutput"]["examples"]:
        assert shm_names.worker_output_file(example["pid"], example["counter"]) == example["name"]
    assert SPEC["files"]["workerOutput"]["format"] == "w{pid}-{counter}"


def test_the_shared_memory_module_uses_the_names_module():
    # shm.py keeps its historical names for its callers; their values come from shm_names only.
    assert (shm.CAPABILITY, shm.DIR_CAPABILITY, shm.MIN_BYTES_CAPABILITY, shm.RELEASE_CAPABILITY) == (
        shm_names.SHARED_MEMORY_CAPABILITY, shm_names.DIRECTORY_CAPABILITY,
        shm_names.MIN_BYTES_CAPABILITY, shm_names.RELEASE_CAPABILITY)
    assert (shm.SLAB_PREFIX, shm.TEMPORARY_PREFIX) == (shm_names.SLAB_SEGMENT, shm_names.TEMPORARY)
