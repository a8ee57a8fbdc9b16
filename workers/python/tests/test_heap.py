"""Heap memory a function frees leaves the worker (faast_worker/heap.py): measured from /proc with the real worker,
and the trimming rule on a statm file the test writes."""
from __future__ import annotations

import os
from pathlib import Path

import pytest

from conftest import SUCCESS, App, http, start_session
from faast_worker import heap

MIB = 1 << 20

# glibc's trap, as JupyterLess's cells fall into it: a freed 16 MiB block raises the mmap threshold to 16 MiB, so the
# next ten come from the heap, and small objects allocated above them keep the heap's top from being trimmed.
# Without a fixed threshold the worker keeps the 160 MiB resident after the invocation (measured: 164 MiB against 4).
ALLOCATING_FUNCTION = """
    MIB = 1 << 20
    kept = []

    def main(req) -> str:
        if req.params.get("warm"):
            return "0"
        first = bytearray(16 * MIB)
        del first
        blocks = [bytearray(16 * MIB) for _ in range(10)]
        kept.extend(bytearray(64) for _ in range(1000))
        total = sum(len(b) for b in blocks)
        del blocks
        return str(total)
"""


@pytest.fixture(autouse=True)
def trimming_on(monkeypatch):
    """The app setting the JupyterLess executor uses (the workers these tests start inherit the environment)."""
    monkeypatch.setenv("FAAST_PYTHON_HEAP_TRIM_MIB", "16")


def anonymous_rss(pid: int) -> int:
    with open(f"/proc/{pid}/status") as status:
        for line in status:
            if line.startswith("RssAnon:"):
                return int(line.split()[1]) * 1024
    raise AssertionError(f"/proc/{pid}/status has no RssAnon line")


def test_a_worker_returns_the_large_buffers_a_function_freed_to_the_system(session) -> None:
    session.add_function("Allocate", ALLOCATING_FUNCTION)
    # A first call that allocates nothing loads the function and what it imports, so the baseline includes them.
    assert session.call("Allocate", req=http(query={"warm": "1"})).result.status == SUCCESS
    before = anonymous_rss(session.worker.proc.pid)
    out = session.call("Allocate", req=http())
    assert out.result.status == SUCCESS, out.result.exception.message
    assert out.return_value.string == str(160 * MIB)
    after = anonymous_rss(session.worker.proc.pid)
    assert after - before < 32 * MIB, f"the worker kept {(after - before) / MIB:.0f} MiB of the 160 MiB it freed"


# Blocks under the mmap threshold with small ones kept between them (a heap fragmented as the C extensions leave it):
# freed, they are free chunks inside the heap, which glibc does not give back by itself. The kept blocks are 16 KiB so
# that they come from the heap's top, between the large ones, and not from older holes. Measured with trimming off
# (FAAST_PYTHON_HEAP_TRIM_MIB=0): the worker kept 188 MiB of 188 (sync) and 187 (async); with it, nothing.
FRAGMENTING_FUNCTION = """
    kept = []

    def main(req) -> str:
        if req.params.get("warm"):
            return "0"
        blocks = []
        for i in range(3000):
            blocks.append(bytearray(64 * 1024))
            if i % 50 == 49:
                kept.append(bytearray(16 * 1024))
        total = sum(len(b) for b in blocks)
        del blocks
        return str(total)
"""


def test_a_worker_trims_the_heap_a_function_left_free(host, spawn, tmp_path: Path) -> None:
    # One pool thread: the trim runs on it after the response is sent, so once the next invocation (on the same
    # thread) has answered, the trim is done; no waiting on a clock.
    session = start_session(host, spawn, App(tmp_path / "app"), env={"PYTHON_THREADPOOL_THREAD_COUNT": "1"})
    session.add_function("Fragment", FRAGMENTING_FUNCTION)
    assert session.call("Fragment", req=http(query={"warm": "1"})).result.status == SUCCESS
    before = anonymous_rss(session.worker.proc.pid)
    out = session.call("Fragment", req=http())
    assert out.result.status == SUCCESS, out.result.exception.message
    assert out.return_value.string == str(3000 * 64 * 1024)
    assert session.call("Fragment", req=http(query={"warm": "1"})).result.status == SUCCESS
    after = anonymous_rss(session.worker.proc.pid)
    assert after - before < 32 * MIB, f"the worker kept {(after - before) / MIB:.0f} MiB of the 188 MiB it freed"


def test_a_worker_trims_the_heap_an_async_function_left_free(session) -> None:
    # Async functions run on the worker's event loop; the trim runs there on the next turn after the response, so
    # the next invocation's answer comes after it.
    session.add_function("FragmentAsync", FRAGMENTING_FUNCTION.replace("def main(req)", "async def main(req)"))
    assert session.call("FragmentAsync", req=http(query={"warm": "1"})).result.status == SUCCESS
    before = anonymous_rss(session.worker.proc.pid)
    out = session.call("FragmentAsync", req=http())
    assert out.result.status == SUCCESS, out.result.exception.message
    assert session.call("FragmentAsync", req=http(query={"warm": "1"})).result.status == SUCCESS
    after = anonymous_rss(session.worker.proc.pid)
    assert after - before < 32 * MIB, f"the worker kept {(after - before) / MIB:.0f} MiB of the 188 MiB it freed"


def write_statm(path: Path, resident_pages: int, shared_pages: int) -> None:
    path.write_text(f"100000 {resident_pages} {shared_pages} 10 0 5000 0\n")


def test_the_heap_is_trimmed_only_after_growth_beyond_the_slack_from_the_lowest_point(tmp_path: Path) -> None:
    page = os.sysconf("SC_PAGE_SIZE")
    statm = tmp_path / "statm"
    write_statm(statm, 1000 + (100 * MIB) // page, 1000)  # 100 MiB private
    trims = []
    trimmer = heap.HeapTrimmer(16 * MIB, lambda: trims.append(1), str(statm))
    write_statm(statm, 1000 + (110 * MIB) // page, 1000)  # +10 MiB: within the slack
    trimmer.after_invocation()
    assert trims == []
    write_statm(statm, 1000 + (60 * MIB) // page, 1000)  # down to 60 MiB: the new lowest point
    trimmer.after_invocation()
    write_statm(statm, 1000 + (90 * MIB) // page, 1000)  # 90 MiB: under the first level, 30 MiB above the lowest
    trimmer.after_invocation()
    assert len(trims) == 1 and trimmer.trims == 1
    trimmer.after_invocation()  # the level after the trim is the new floor: no growth, no trim
    assert len(trims) == 1


def test_the_trim_slack_comes_from_faast_python_heap_trim_mib(capsys) -> None:
    assert heap.trim_slack_bytes({"FAAST_PYTHON_HEAP_TRIM_MIB": "64"}) == 64 * MIB
    assert heap.trim_slack_bytes({"FAAST_PYTHON_HEAP_TRIM_MIB": "0"}) == 0
    assert heap.trim_slack_bytes({"FAAST_PYTHON_HEAP_TRIM_MIB": "lots"}) == 0
    assert heap.trim_slack_bytes({}) == 0  # off unless the app asks
    assert "ignoring FAAST_PYTHON_HEAP_TRIM_MIB='lots'" in capsys.readouterr().err


def test_trimming_is_off_when_faast_python_heap_trim_mib_is_0() -> None:
    assert heap.start_trimming({"FAAST_PYTHON_HEAP_TRIM_MIB": "0"}) is None


def test_the_threshold_is_left_to_the_environment_when_malloc_mmap_threshold_is_set(monkeypatch) -> None:
    monkeypatch.setenv("MALLOC_MMAP_THRESHOLD_", "1048576")
    assert heap.fix_mmap_threshold() is None


def test_the_threshold_is_glibcs_initial_128_kib_by_default(monkeypatch) -> None:
    monkeypatch.delenv("MALLOC_MMAP_THRESHOLD_", raising=False)
    assert heap.fix_mmap_threshold() == 128 * 1024
