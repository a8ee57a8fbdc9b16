"""Streamed blob inputs (capability "shared_memory_streaming"): a large input that missed the
host's cache arrives while it is still being read from storage, with a progress record
(protos/shared-memory.json, "progressRecord"). Real worker, fake host playing the cachelet:
it writes the object's bytes and the progress record into real /dev/shm files."""
from __future__ import annotations

import ctypes
import hashlib
import json
import mmap
import os
import struct
import time
from pathlib import Path

import pytest

from conftest import (FAILURE, IN, OUT, SUCCESS, App, FakeHost, http, shm_blob,
                      shm_capabilities, start_session)

LENGTH = 3 << 20
FIRST = 1 << 20
DATA = os.urandom(LENGTH)
FILLING, COMPLETE, FAILED = 0, 1, 2


class Fill:
    """The host's side of one streamed input: an object file and its progress record."""

    def __init__(self, directory: Path, n: int, wakes: bool = False) -> None:
        self.segment, self.progress = f"l{n:06d}", f"p{n:06d}"
        with open(directory / self.segment, "wb") as f:
            f.truncate(LENGTH)
        with open(directory / self.progress, "wb") as f:
            f.truncate(16)
        self._data = open(directory / self.segment, "r+b")
        self._record = open(directory / self.progress, "r+b")
        self.data = mmap.mmap(self._data.fileno(), LENGTH)
        self.record = mmap.mmap(self._record.fileno(), 16)
        if wakes:  # a host that wakes waiters on the record's futex word (offset 12) instead of letting them poll
            self.record[12:16] = struct.pack("<i", 1)

    def wake(self) -> None:
        """Changes the wake word, then FUTEX_WAKE on it (x86-64: syscall 202, op 1), as the cachelet does."""
        word = struct.unpack("<i", self.record[12:16])[0] + 1
        self.record[12:16] = struct.pack("<i", word)
        address = ctypes.addressof(ctypes.c_char.from_buffer(self.record, 12))
        libc = ctypes.CDLL(None)
        libc.syscall.restype = ctypes.c_long
        libc.syscall(ctypes.c_long(202), ctypes.c_void_p(address), ctypes.c_int(1), ctypes.c_int(2 ** 31 - 1),
                     ctypes.c_void_p(None), ctypes.c_void_p(None), ctypes.c_int(0))

    def fill(self, upto: int) -> None:
        self.data[0:upto] = DATA[0:upto]  # the bytes first, then how far they go
        self.record[0:8] = struct.pack("<q", upto)

    def finish(self, state: int) -> None:
        self.record[8:12] = struct.pack("<i", state)

    def ref(self, name: str = "c/big.bin"):
        td = shm_blob(self.segment, 0, LENGTH, name=name)
        td.blob.shared_memory.progress = self.progress
        return td

    def close(self) -> None:
        self.data.close()
        self.record.close()
        self._data.close()
        self._record.close()


@pytest.fixture
def streaming(host: FakeHost, spawn, tmp_path: Path, shm_dir: Path):
    caps = {**shm_capabilities(shm_dir), "shared_memory_streaming": "1"}
    s = start_session(host, spawn, App(tmp_path / "app"), capabilities=caps)
    assert s.init is not None and s.init.capabilities.get("shared_memory_streaming") == "1"
    s.shm_dir = shm_dir  # type: ignore[attr-defined]
    return s


def wait_for(path: Path, what: str) -> None:
    deadline = time.monotonic() + 30
    while not path.exists():
        assert time.monotonic() < deadline, f"{what}: {path} never appeared"
        time.sleep(0.01)


STREAM_READER = """
    import hashlib, json, pathlib
    import azure.functions as func

    def main(req, stream: func.InputStream) -> str:
        first = stream.read({first})
        seen = stream._fill.state()  # the progress record as the first read left it
        pathlib.Path({marker!r}).write_text("started")  # the test completes the fill only after this
        h = hashlib.sha256(first)
        while True:
            chunk = stream.read1(1 << 20)
            if not chunk:
                break
            h.update(chunk)
        return json.dumps({{"sha256": h.hexdigest(), "first_state": seen[1], "first_filled": seen[0]}})
"""
BINDINGS = {"req": ("httpTrigger", IN), "stream": ("blob", IN), "$return": ("http", OUT)}


def test_a_function_reads_a_streamed_input_before_it_is_complete_and_gets_every_byte(streaming) -> None:
    marker = streaming.shm_dir / "started"
    streaming.add_function("Reader", STREAM_READER.format(first=FIRST, marker=str(marker)), bindings=BINDINGS)
    fill = Fill(streaming.shm_dir, 1)
    try:
        fill.fill(FIRST)
        inv = streaming.host.invoke("Reader", {"req": http(), "stream": fill.ref()})
        wait_for(marker, "the function's first read")
        for upto in range(FIRST, LENGTH + 1, 256 << 10):
            fill.fill(upto)
        fill.fill(LENGTH)
        fill.finish(COMPLETE)
        out = streaming.host.response(inv)
    finally:
        fill.close()
    assert out.result.status == SUCCESS, out.result.exception.message
    info = json.loads(out.return_value.string)
    assert info == {"sha256": hashlib.sha256(DATA).hexdigest(), "first_state": FILLING,
                    "first_filled": FIRST}


def test_a_function_asleep_on_the_records_wake_word_reads_every_byte_as_the_host_wakes_it(
        host: FakeHost, spawn, tmp_path: Path, shm_dir: Path) -> None:
    assert os.uname().machine == "x86_64", "the fake host's futex number is x86-64's"
    # A stall bound of 400 s makes the worker's futex waits 100 s long: a wake it missed would leave
    # the invocation unanswered past the fake host's timeout, failing the test.
    caps = {**shm_capabilities(shm_dir), "shared_memory_streaming": "1"}
    s = start_session(host, spawn, App(tmp_path / "app"), env={"FAAST_STREAM_STALL_SECONDS": "400"}, capabilities=caps)
    marker = shm_dir / "started"
    s.add_function("Reader", STREAM_READER.replace("seen = stream._fill.state()", "seen = (stream._fill._word is not None, 0)")
                   .format(first=FIRST, marker=str(marker)), bindings=BINDINGS)
    fill = Fill(shm_dir, 5, wakes=True)
    try:
        fill.fill(FIRST)
        inv = host.invoke("Reader", {"req": http(), "stream": fill.ref()})
        wait_for(marker, "the function's first read")
        for upto in (2 << 20, LENGTH):
            fill.fill(upto)  # the host wakes after some writes, not after each
            fill.wake()
        fill.finish(COMPLETE)
        fill.wake()
        out = host.response(inv)
    finally:
        fill.close()
    assert out.result.status == SUCCESS, out.result.exception.message
    info = json.loads(out.return_value.string)
    # Here "first_filled" says whether the function's record had its futex mapping (it waited on the word).
    assert info == {"sha256": hashlib.sha256(DATA).hexdigest(), "first_state": 0, "first_filled": True}


def test_a_failed_fill_raises_an_os_error_naming_the_blob_in_the_function(streaming) -> None:
    marker = streaming.shm_dir / "started"
    streaming.add_function("Reader", STREAM_READER.format(first=FIRST, marker=str(marker)), bindings=BINDINGS)
    fill = Fill(streaming.shm_dir, 2)
    try:
        fill.fill(FIRST)
        inv = streaming.host.invoke("Reader", {"req": http(), "stream": fill.ref("c/broken.bin")})
        wait_for(marker, "the function's first read")
        fill.fill(FIRST + 4096)
        fill.finish(FAILED)
        out = streaming.host.response(inv)
    finally:
        fill.close()
    assert out.result.status == FAILURE
    message = out.result.exception.message
    assert "OSError" in message or "failed after" in message, message
    assert "c/broken.bin" in message and f"failed after {FIRST + 4096} of {LENGTH} bytes" in message, message


def test_a_stalled_fill_is_given_up_with_an_os_error(host: FakeHost, spawn, tmp_path: Path, shm_dir: Path) -> None:
    caps = {**shm_capabilities(shm_dir), "shared_memory_streaming": "1"}
    s = start_session(host, spawn, App(tmp_path / "app"), env={"FAAST_STREAM_STALL_SECONDS": "0.2"}, capabilities=caps)
    s.add_function("Whole", """
        import azure.functions as func

        def main(req, stream: func.InputStream) -> str:
            return str(len(stream.read()))
    """, bindings=BINDINGS)
    fill = Fill(shm_dir, 3)
    try:
        fill.fill(FIRST)  # and nothing more: the host stopped without saying so
        out = s.call("Whole", req=http(), stream=fill.ref("c/stalled.bin"))
    finally:
        fill.close()
    assert out.result.status == FAILURE
    assert "c/stalled.bin" in out.result.exception.message and "abandoned" in out.result.exception.message


def test_bytes_and_str_inputs_wait_for_the_whole_object(streaming) -> None:
    streaming.add_function("Whole", """
        import hashlib

        def main(req, raw: bytes, text: str) -> str:
            return hashlib.sha256(raw).hexdigest() + " " + str(len(text))
    """, bindings={"req": ("httpTrigger", IN), "raw": ("blob", IN), "text": ("blob", IN), "$return": ("http", OUT)})
    global DATA
    fill = Fill(streaming.shm_dir, 4)
    saved = DATA
    DATA = b"a" * LENGTH  # decodable as UTF-8
    try:
        fill.fill(FIRST)
        inv = streaming.host.invoke("Whole", {"req": http(), "raw": fill.ref(), "text": fill.ref()})
        fill.fill(LENGTH)
        fill.finish(COMPLETE)
        out = streaming.host.response(inv)
    finally:
        DATA = saved
        fill.close()
    assert out.result.status == SUCCESS, out.result.exception.message
    assert out.return_value.string == hashlib.sha256(b"a" * LENGTH).hexdigest() + f" {LENGTH}"
