"""Shared-memory blob data (the cachelet): handshake, inputs mapped from segment files in
a /dev/shm directory, outputs written to new files there. Real worker, fake host."""
from __future__ import annotations

import json
import os
import re
import resource
import stat
from pathlib import Path

import pytest

from conftest import (FAILURE, IN, OUT, SHM_MIN_BYTES, SUCCESS, App, FakeHost, blob,
                      connect, http, pb, shm_blob, shm_capabilities, start_session,
                      worker_open_paths)

PAYLOAD_OFFSET = 4096
PAYLOAD = ("zero-copy żółw " * 100).encode()  # non-ASCII: str must decode UTF-8


def write_segment(directory: Path, name: str, payload: bytes, offset: int = PAYLOAD_OFFSET,
                  size: int = 3 * 4096) -> Path:
    """A slab-like segment file: filler bytes, payload at `offset`, more filler."""
    size = max(size, offset + len(payload))
    content = bytearray(b"\xee" * size)
    content[offset:offset + len(payload)] = payload
    path = directory / name
    path.write_bytes(bytes(content))
    return path


# ---- handshake ------------------------------------------------------------------------

def test_handshake_accepts_existing_directory(host: FakeHost, spawn, tmp_path: Path,
                                              shm_dir: Path) -> None:
    connect(host, spawn())
    init = host.init(tmp_path / "app", shm_capabilities(shm_dir))
    assert init.result.status == SUCCESS
    assert dict(init.capabilities) == {"concurrent": "1", "shared_memory": "1"}
    assert any("shared memory on" in log.message and str(shm_dir) in log.message
               for log in host.logs())


@pytest.mark.parametrize("caps, reason", [
    ({"shared_memory_dir": "/dev/shm/faast-does-not-exist-xyz"}, "does not exist"),
    ({"shared_memory_dir": "relative/dir"}, "not absolute"),
    ({"shared_memory_dir": ""}, "offered no shared_memory_dir"),
])
def test_handshake_declines_unusable_directory(host: FakeHost, spawn, tmp_path: Path,
                                               caps, reason) -> None:
    connect(host, spawn())
    offered = {"shared_memory": "1", "shared_memory_min_bytes": "1024", **caps}
    init = host.init(tmp_path / "app", offered)
    assert init.result.status == SUCCESS
    assert dict(init.capabilities) == {"concurrent": "1"}
    warnings = [log.message for log in host.logs() if log.level == pb.RpcLog.WARNING]
    assert any("shared memory declined" in m and reason in m for m in warnings), warnings


def test_declined_worker_still_rejects_shared_memory_input(host, spawn, tmp_path) -> None:
    s = start_session(host, spawn, App(tmp_path / "app"), capabilities={
        "shared_memory": "1", "shared_memory_dir": "/dev/shm/faast-does-not-exist-xyz"})
    s.add_function("F", """
        def main(req, doc: bytes) -> str:
            return "unreachable"
    """, bindings={"req": ("httpTrigger", IN), "doc": ("blob", IN), "$return": ("http", OUT)})
    out = s.call("F", req=http(), doc=shm_blob("s1", 0, 4))
    assert out.result.status == FAILURE
    assert "not negotiated" in out.result.exception.message


# ---- inputs ---------------------------------------------------------------------------

READER = """
    import json, mmap
    import azure.functions as func

    KEPT = {}

    def main(req, stream: func.InputStream, raw: bytes, text: str, auto) -> str:
        view = stream.getbuffer()
        info = {
            "is_memoryview": isinstance(view, memoryview),
            "readonly": view.readonly,
            "obj_is_mmap": isinstance(view.obj, mmap.mmap),
            "view_equals": bytes(view) == raw,
            "view_len": len(view),
            "length": stream.length,
            "name": stream.name,
            "auto_type": type(auto).__name__,
        }
        first = stream.read(10)
        rest = stream.read()
        info["read_parts"] = [len(first), len(rest)]
        info["read_equals"] = first + rest == raw
        info["read_type"] = type(rest).__name__
        info["auto_read_equals"] = auto.read() == raw
        info["text"] = text
        info["raw_hex"] = raw.hex()
        KEPT["stream"] = stream
        return json.dumps(info)
"""
READER_BINDINGS = {"req": ("httpTrigger", IN), "stream": ("blob", IN), "raw": ("blob", IN),
                   "text": ("blob", IN), "auto": ("blobTrigger", IN), "$return": ("http", OUT)}


@pytest.mark.parametrize("segment", ["s-slab-1", "l-large-1"])
def test_input_from_segment_at_offset(shm_session, segment: str) -> None:
    write_segment(shm_session.shm_dir, segment, PAYLOAD)
    shm_session.add_function("Reader", READER, bindings=READER_BINDINGS)
    ref = shm_blob(segment, PAYLOAD_OFFSET, len(PAYLOAD), name="c/turtle.txt")
    out = shm_session.call("Reader", req=http(), stream=ref, raw=ref, text=ref, auto=ref)
    assert out.result.status == SUCCESS, out.result.exception.message
    info = json.loads(out.return_value.string)
    assert info.pop("raw_hex") == PAYLOAD.hex()
    assert info == {
        "is_memoryview": True, "readonly": True, "obj_is_mmap": True, "view_equals": True,
        "view_len": len(PAYLOAD), "length": len(PAYLOAD), "name": "c/turtle.txt",
        "auto_type": "InputStream", "read_parts": [10, len(PAYLOAD) - 10],
        "read_equals": True, "read_type": "bytes", "auto_read_equals": True,
        "text": PAYLOAD.decode("utf-8"),
    }


def test_input_stream_is_invalid_after_the_invocation(shm_session) -> None:
    write_segment(shm_session.shm_dir, "s1", PAYLOAD)
    shm_session.add_function("Reader", READER, bindings=READER_BINDINGS)
    shm_session.add_function("Later", """
        from Reader import KEPT

        def main(req) -> str:
            try:
                KEPT["stream"].read()
            except ValueError as exc:
                return "ValueError: " + str(exc)
            return "readable"
    """)
    ref = shm_blob("s1", PAYLOAD_OFFSET, len(PAYLOAD))
    assert shm_session.call("Reader", req=http(), stream=ref, raw=ref, text=ref,
                            auto=ref).result.status == SUCCESS
    out = shm_session.call("Later", req=http())
    assert out.result.status == SUCCESS, out.result.exception.message
    assert out.return_value.string.startswith("ValueError: ")
    assert "only during the invocation" in out.return_value.string


def test_inline_blob_still_works_with_shared_memory_on(shm_session) -> None:
    shm_session.add_function("Reader", READER, bindings=READER_BINDINGS)
    b = blob(PAYLOAD)
    out = shm_session.call("Reader", req=http(), stream=b, raw=b, text=b, auto=b)
    assert out.result.status == SUCCESS, out.result.exception.message
    info = json.loads(out.return_value.string)
    assert info["read_equals"] and info["view_equals"] and info["readonly"]
    assert not info["obj_is_mmap"]
    assert info["text"] == PAYLOAD.decode()


def test_empty_range_and_empty_segment(shm_session) -> None:
    (shm_session.shm_dir / "l-empty").write_bytes(b"")
    write_segment(shm_session.shm_dir, "s1", PAYLOAD)
    shm_session.add_function("Empty", """
        import azure.functions as func
        def main(req, a: func.InputStream, b: bytes) -> str:
            return repr((a.read(), len(a.getbuffer()), b))
    """, bindings={"req": ("httpTrigger", IN), "a": ("blob", IN), "b": ("blob", IN),
                   "$return": ("http", OUT)})
    out = shm_session.call("Empty", req=http(), a=shm_blob("l-empty", 0, 0),
                           b=shm_blob("s1", 100, 0))
    assert out.result.status == SUCCESS, out.result.exception.message
    assert out.return_value.string == "(b'', 0, b'')"


LARGE = 1 << 20


def test_large_segment_is_unmapped_after_the_invocation(shm_session) -> None:
    large = write_segment(shm_session.shm_dir, "l-big-1", os.urandom(LARGE), offset=0)
    slab = write_segment(shm_session.shm_dir, "s-slab-1", PAYLOAD)
    shm_session.add_function("Sum", """
        import azure.functions as func
        def main(req, big: func.InputStream, small: func.InputStream) -> str:
            data = big.read()
            view = big.getbuffer()   # a view the function drops before returning
            assert bytes(view[:16]) == data[:16]
            return f"{len(data)} {len(small.read())}"
    """, bindings={"req": ("httpTrigger", IN), "big": ("blob", IN), "small": ("blob", IN),
                   "$return": ("http", OUT)})
    out = shm_session.call("Sum", req=http(), big=shm_blob("l-big-1", 0, LARGE),
                           small=shm_blob("s-slab-1", PAYLOAD_OFFSET, len(PAYLOAD)))
    assert out.result.status == SUCCESS, out.result.exception.message
    assert out.return_value.string == f"{LARGE} {len(PAYLOAD)}"
    # The response is sent after the invocation's mappings are closed.
    paths = worker_open_paths(shm_session.worker.proc.pid)
    assert not [p for p in paths if str(large) in p], "the 'l' segment is still mapped or open"
    # The slab stays mapped for later invocations.
    assert [p for p in paths if str(slab) in p], "the 's' segment should stay mapped"


def test_large_segment_held_by_user_view_is_unmapped_when_released(shm_session) -> None:
    large = write_segment(shm_session.shm_dir, "l-held-1", os.urandom(LARGE), offset=0)
    shm_session.add_function("Hold", """
        import azure.functions as func
        HELD = []
        def main(req, big: func.InputStream) -> str:
            HELD.append(big.getbuffer())
            return "held"
    """, bindings={"req": ("httpTrigger", IN), "big": ("blob", IN), "$return": ("http", OUT)})
    shm_session.add_function("Drop", """
        from Hold import HELD
        def main(req) -> str:
            HELD.clear()
            return "dropped"
    """)
    out = shm_session.call("Hold", req=http(), big=shm_blob("l-held-1", 0, LARGE))
    assert out.result.status == SUCCESS, out.result.exception.message
    pid = shm_session.worker.proc.pid
    assert [p for p in worker_open_paths(pid) if str(large) in p], \
        "a view user code keeps must stay mapped"
    assert shm_session.call("Drop", req=http()).result.status == SUCCESS
    assert not [p for p in worker_open_paths(pid) if str(large) in p]


@pytest.fixture
def keeping_session(host: FakeHost, spawn, tmp_path: Path, shm_dir: Path):
    """A worker whose host promised SharedMemoryReleased: it keeps its mappings."""
    caps = {**shm_capabilities(shm_dir), "shared_memory_release": "1"}
    s = start_session(host, spawn, App(tmp_path / "app"), capabilities=caps)
    assert s.init is not None and dict(s.init.capabilities) == {
        "concurrent": "1", "shared_memory": "1", "shared_memory_release": "1"}
    s.shm_dir = shm_dir  # type: ignore[attr-defined]
    s.add_function("Len", """
        import azure.functions as func
        def main(req, big: func.InputStream) -> str:
            return str(len(big.read()))
    """, bindings={"req": ("httpTrigger", IN), "big": ("blob", IN), "$return": ("http", OUT)})
    return s


def mapped(session, path: Path) -> bool:
    return any(str(path) in p for p in worker_open_paths(session.worker.proc.pid))


def test_with_release_messages_a_large_segment_stays_mapped_until_released(keeping_session) -> None:
    s = keeping_session
    large = write_segment(s.shm_dir, "l000007", os.urandom(LARGE), offset=0)
    for _ in range(2):  # the second invocation reuses the mapping
        out = s.call("Len", req=http(), big=shm_blob("l000007", 0, LARGE))
        assert out.result.status == SUCCESS, out.result.exception.message
        assert out.return_value.string == str(LARGE)
    assert mapped(s, large), "the mapping should be kept for the next invocation"
    large.unlink()  # what the host does before it says so
    assert mapped(s, large), "a deleted file stays mapped until the host says it is gone"
    s.host.send(pb.StreamingMessage(shared_memory_released=pb.SharedMemoryReleased(
        segments=["l000007", "l-never-mapped"])))
    # Messages are handled in order: once this invocation answers, the release was handled.
    assert s.call("Len", req=http(), big=blob(b"abc")).return_value.string == "3"
    assert not mapped(s, large), "released: the mapping (and its memory) must be gone"


def test_with_release_messages_temporary_files_are_still_unmapped_at_once(keeping_session) -> None:
    s = keeping_session
    temporary = write_segment(s.shm_dir, "t000001", os.urandom(LARGE), offset=0)
    out = s.call("Len", req=http(), big=shm_blob("t000001", 0, LARGE))
    assert out.result.status == SUCCESS, out.result.exception.message
    assert not mapped(s, temporary), "a per-invocation file must not outlive the invocation"


def test_release_is_ignored_for_files_never_mapped(keeping_session) -> None:
    s = keeping_session
    s.host.send(pb.StreamingMessage(shared_memory_released=pb.SharedMemoryReleased(
        segments=["l999999"])))
    assert s.call("Len", req=http(), big=blob(b"abcd")).return_value.string == "4"
    assert not [log for log in s.host.logs() if log.level >= pb.RpcLog.WARNING]


BAD_REFS = [
    ("../escape", 0, 4, "invalid segment name"),
    ("sub/seg", 0, 4, "invalid segment name"),
    ("..", 0, 4, "invalid segment name"),
    ("", 0, 4, "invalid segment name"),
    ("l-missing", 0, 4, "not found"),
    ("s1", PAYLOAD_OFFSET, 10 * 4096, "outside segment 's1'"),
    ("s1", -1, 4, "outside segment 's1'"),
    ("s1", 0, -4, "outside segment 's1'"),
    ("l-link", 0, 4, "cannot open segment 'l-link'"),  # symlink: not followed
    ("l-dir", 0, 4, "not a regular file"),              # a directory
]


@pytest.mark.parametrize("segment, offset, length, expected", BAD_REFS)
@pytest.mark.parametrize("annotation", ["func.InputStream", "bytes", "str"])
def test_bad_segment_or_range_fails_naming_binding(shm_session, segment, offset, length,
                                                   expected, annotation) -> None:
    d = shm_session.shm_dir
    write_segment(d, "s1", PAYLOAD)
    (d / "l-link").symlink_to(d / "s1")
    (d / "l-dir").mkdir()
    shm_session.add_function("Bad", f"""
        import azure.functions as func
        def main(req, cached: {annotation}) -> str:
            return "unreachable"
    """, bindings={"req": ("httpTrigger", IN), "cached": ("blob", IN),
                   "$return": ("http", OUT)})
    out = shm_session.call("Bad", req=http(), cached=shm_blob(segment, offset, length))
    assert out.result.status == FAILURE
    message = out.result.exception.message
    assert "'cached'" in message and f"segment '{segment}'" in message, message
    assert expected in message, message
    # The worker carries on.
    out = shm_session.call("Bad", req=http(), cached=blob(b"ok"))
    assert out.result.status == SUCCESS


def test_segment_deleted_after_reference_fails(shm_session) -> None:
    path = write_segment(shm_session.shm_dir, "l-gone", PAYLOAD)
    shm_session.add_function("Gone", """
        def main(req, doc: bytes) -> str:
            return str(len(doc))
    """, bindings={"req": ("httpTrigger", IN), "doc": ("blob", IN), "$return": ("http", OUT)})
    path.unlink()
    out = shm_session.call("Gone", req=http(), doc=shm_blob("l-gone", 0, len(PAYLOAD)))
    assert out.result.status == FAILURE
    assert "'doc'" in out.result.exception.message
    assert "segment 'l-gone' not found" in out.result.exception.message


def test_slab_grown_after_mapping_is_mapped_again(shm_session) -> None:
    path = write_segment(shm_session.shm_dir, "s-grow", PAYLOAD, size=2 * 4096)
    shm_session.add_function("One", """
        def main(req, doc: bytes) -> bytes:
            return doc
    """, bindings={"req": ("httpTrigger", IN), "doc": ("blob", IN), "$return": ("http", OUT)})
    out = shm_session.call("One", req=http(), doc=shm_blob("s-grow", PAYLOAD_OFFSET, len(PAYLOAD)))
    assert out.return_value.bytes == PAYLOAD
    with open(path, "ab") as f:  # the host appends to the slab
        f.write(b"\x00" * 8192 + b"tail")
    end = path.stat().st_size
    out = shm_session.call("One", req=http(), doc=shm_blob("s-grow", end - 4, 4))
    assert out.result.status == SUCCESS, out.result.exception.message
    assert out.return_value.bytes == b"tail"


@pytest.mark.parametrize("segment", ["s-shared", "l-shared"])
@pytest.mark.parametrize("kind", ["sync", "async"])
def test_two_invocations_read_the_same_segment_at_once(shm_session, segment, kind) -> None:
    write_segment(shm_session.shm_dir, segment, PAYLOAD)
    if kind == "sync":
        code = """
            import threading
            import azure.functions as func
            BOTH = threading.Barrier(2, timeout=10)
            def main(req, doc: func.InputStream) -> str:
                view = doc.getbuffer()
                BOTH.wait()          # both invocations hold a view of the segment now
                first = bytes(view)
                BOTH.wait()
                return str(first == doc.read())
        """
    else:
        code = """
            import asyncio
            import azure.functions as func
            ARRIVED = []
            GO = None
            async def main(req, doc: func.InputStream) -> str:
                global GO
                if GO is None:
                    GO = asyncio.Event()
                view = doc.getbuffer()
                ARRIVED.append(1)
                if len(ARRIVED) % 2 == 0:
                    GO.set()
                await asyncio.wait_for(GO.wait(), 10)   # both are in flight here
                return str(bytes(view) == doc.read())
        """
    shm_session.add_function("Twice", code, bindings={
        "req": ("httpTrigger", IN), "doc": ("blob", IN), "$return": ("http", OUT)})
    ref = shm_blob(segment, PAYLOAD_OFFSET, len(PAYLOAD))
    ids = [shm_session.host.invoke("Twice", {"req": http(), "doc": ref}) for _ in range(2)]
    for inv in ids:
        out = shm_session.host.response(inv, timeout=15)
        assert out.result.status == SUCCESS, out.result.exception.message
        assert out.return_value.string == "True"
    if segment.startswith("l"):
        paths = worker_open_paths(shm_session.worker.proc.pid)
        assert not [p for p in paths if segment in p]


def test_many_slabs_keep_a_bounded_number_mapped(shm_session) -> None:
    from faast_worker import shm
    shm_session.add_function("One", """
        def main(req, doc: bytes) -> str:
            return str(len(doc))
    """, bindings={"req": ("httpTrigger", IN), "doc": ("blob", IN), "$return": ("http", OUT)})
    names = [f"s-{i}" for i in range(shm.MAX_MAPPINGS + 4)]
    for name in names:
        write_segment(shm_session.shm_dir, name, PAYLOAD)
        out = shm_session.call("One", req=http(), doc=shm_blob(name, PAYLOAD_OFFSET, len(PAYLOAD)))
        assert out.return_value.string == str(len(PAYLOAD))
    # A slab the host deleted is unmapped when the next one is mapped.
    (shm_session.shm_dir / names[-1]).unlink()
    write_segment(shm_session.shm_dir, "s-next", PAYLOAD)
    assert shm_session.call("One", req=http(), doc=shm_blob(
        "s-next", PAYLOAD_OFFSET, len(PAYLOAD))).result.status == SUCCESS
    paths = worker_open_paths(shm_session.worker.proc.pid)
    mapped = {n for n in names + ["s-next"]
              if any(p.split("/")[-1].split(" ")[0] == n for p in paths)}
    assert len(mapped) <= shm.MAX_MAPPINGS
    assert "s-next" in mapped and names[-1] not in mapped and names[0] not in mapped


# ---- outputs --------------------------------------------------------------------------

WRITER = """
    import azure.functions as func

    def main(req, at: func.Out[bytes], below: func.Out[bytes], text: func.Out[str],
             view: func.Out[bytes], queue: func.Out[bytes], res: func.Out[func.HttpResponse]) -> bytes:
        n = int(req.route_params["n"])
        at.set(b"a" * n)
        below.set(b"b" * (n - 1))
        text.set("ż" * (n // 2))            # n bytes in UTF-8
        view.set(memoryview(bytearray(b"v" * n)))
        queue.set(b"q" * n)                 # not a blob binding: inline
        res.set(func.HttpResponse(b"h" * n))  # HTTP: always inline
        return b"r" * (n + 1)
"""
WRITER_BINDINGS = {"req": ("httpTrigger", IN), "at": ("blob", OUT), "below": ("blob", OUT),
                   "text": ("blob", OUT), "view": ("blob", OUT), "queue": ("queue", OUT),
                   "res": ("http", OUT), "$return": ("blob", OUT)}


def shm_output_file(session, td: pb.TypedData) -> Path:
    assert td.WhichOneof("data") == "blob", td
    assert td.blob.WhichOneof("content") == "shared_memory", td
    ref = td.blob.shared_memory
    assert ref.offset == 0
    assert re.fullmatch(rf"w{session.worker.proc.pid}-\d+", ref.segment), ref.segment
    path = session.shm_dir / ref.segment
    st = path.stat()
    assert stat.S_IMODE(st.st_mode) == 0o600
    assert st.st_size == ref.length == td.blob.length
    return path


def test_outputs_at_threshold_go_through_shared_memory(shm_session) -> None:
    shm_session.add_function("Writer", WRITER, bindings=WRITER_BINDINGS)
    n = SHM_MIN_BYTES
    out = shm_session.call("Writer", req=http(params={"n": str(n)}))
    assert out.result.status == SUCCESS, out.result.exception.message
    data = {o.name: o.data for o in out.output_data}
    assert shm_output_file(shm_session, data["at"]).read_bytes() == b"a" * n
    assert shm_output_file(shm_session, data["text"]).read_bytes() == ("ż" * (n // 2)).encode()
    assert shm_output_file(shm_session, data["view"]).read_bytes() == b"v" * n
    assert shm_output_file(shm_session, out.return_value).read_bytes() == b"r" * (n + 1)
    assert data["below"].WhichOneof("data") == "bytes" and data["below"].bytes == b"b" * (n - 1)
    assert data["queue"].WhichOneof("data") == "bytes" and data["queue"].bytes == b"q" * n
    assert data["res"].WhichOneof("data") == "http" and data["res"].http.body.bytes == b"h" * n
    # Every output file is new: names are never reused.
    names = {o.data.blob.shared_memory.segment for o in out.output_data
             if o.data.WhichOneof("data") == "blob"} | {out.return_value.blob.shared_memory.segment}
    assert len(names) == 4
    out2 = shm_session.call("Writer", req=http(params={"n": str(n)}))
    names2 = {o.data.blob.shared_memory.segment for o in out2.output_data
              if o.data.WhichOneof("data") == "blob"}
    assert len(names2) == 3 and not names & names2


def test_outputs_below_threshold_stay_inline(shm_session) -> None:
    shm_session.add_function("Writer", WRITER, bindings=WRITER_BINDINGS)
    n = SHM_MIN_BYTES // 2
    out = shm_session.call("Writer", req=http(params={"n": str(n)}))
    assert out.result.status == SUCCESS, out.result.exception.message
    data = {o.name: o.data for o in out.output_data}
    assert data["at"].bytes == b"a" * n
    assert data["text"].WhichOneof("data") == "string" and data["text"].string == "ż" * (n // 2)
    assert out.return_value.bytes == b"r" * (n + 1)
    assert not list(shm_session.shm_dir.iterdir())


def test_input_stream_passed_to_output(shm_session) -> None:
    big = os.urandom(4 * SHM_MIN_BYTES)
    write_segment(shm_session.shm_dir, "l-copy", big)
    shm_session.add_function("Copy", """
        import azure.functions as func
        def main(req, src: func.InputStream, dst: func.Out[func.InputStream]) -> None:
            dst.set(src)
    """, bindings={"req": ("httpTrigger", IN), "src": ("blob", IN), "dst": ("blob", OUT)})
    out = shm_session.call("Copy", req=http(), src=shm_blob("l-copy", PAYLOAD_OFFSET, len(big)))
    assert out.result.status == SUCCESS, out.result.exception.message
    assert shm_output_file(shm_session, out.output_data[0].data).read_bytes() == big


def test_failed_invocation_removes_its_output_files(shm_session) -> None:
    shm_session.add_function("Broken", """
        import azure.functions as func
        class Unwritable: pass
        def main(req, big: func.Out[bytes], bad: func.Out[bytes]) -> None:
            big.set(b"x" * 100000)
            bad.set(Unwritable())   # cannot be sent: the invocation fails after writing `big`
    """, bindings={"req": ("httpTrigger", IN), "big": ("blob", OUT), "bad": ("blob", OUT)})
    out = shm_session.call("Broken", req=http())
    assert out.result.status == FAILURE
    assert "cannot convert" in out.result.exception.message
    assert not list(shm_session.shm_dir.iterdir())


def test_output_falls_back_inline_when_the_directory_is_gone(shm_session) -> None:
    shm_session.add_function("Writer", WRITER, bindings=WRITER_BINDINGS)
    shm_session.shm_dir.rmdir()
    n = SHM_MIN_BYTES
    inv = shm_session.host.invoke("Writer", {"req": http(params={"n": str(n)})})
    out = shm_session.host.response(inv)
    assert out.result.status == SUCCESS, out.result.exception.message
    data = {o.name: o.data for o in out.output_data}
    assert data["at"].bytes == b"a" * n and out.return_value.bytes == b"r" * (n + 1)
    warnings = [log.message for log in shm_session.host.logs(inv)
                if log.level == pb.RpcLog.WARNING]
    assert any("sending it inline" in m for m in warnings), warnings


def _limit_file_size() -> None:
    # Files the worker writes may not grow beyond 64 KiB: a bigger write fails (EFBIG,
    # Python ignores SIGXFSZ) after a partial write, like a full /dev/shm would.
    resource.setrlimit(resource.RLIMIT_FSIZE, (64 * 1024, 64 * 1024))


def test_partially_written_output_is_removed_and_sent_inline(host, spawn, tmp_path,
                                                             shm_dir) -> None:
    s = start_session(host, spawn, App(tmp_path / "app"),
                      capabilities=shm_capabilities(shm_dir), preexec_fn=_limit_file_size)
    s.add_function("Big", """
        import azure.functions as func
        def main(req, big: func.Out[bytes]) -> None:
            big.set(b"y" * 200000)
    """, bindings={"req": ("httpTrigger", IN), "big": ("blob", OUT)})
    inv = host.invoke("Big", {"req": http()})
    out = host.response(inv)
    assert out.result.status == SUCCESS, out.result.exception.message
    assert out.output_data[0].data.bytes == b"y" * 200000
    assert not list(shm_dir.iterdir()), "the partial file must be removed"
    assert any(log.level == pb.RpcLog.WARNING and "sending it inline" in log.message
               for log in host.logs(inv))
