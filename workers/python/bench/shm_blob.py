#!/usr/bin/python3
"""Blob input/output through shared memory vs inline bytes, per invocation.

A minimal in-process fake host (grpc.aio, requests pre-serialized so the host side costs
little) offers shared memory in a fresh /dev/shm directory, starts the real worker.py and
runs invocations one at a time (send, wait for the response), timing each from sending the
request to receiving the response. For each size:

  in  inline  the blob inline in BlobData.bytes; the function calls InputStream.read()
  in  shm-l   the blob in an "l" segment file (mapped and unmapped per invocation); read()
  in  shm-s   the blob at offset 4096 of an "s" slab segment (mapping cached); read()
  in  view-l  as shm-l, but the function only takes getbuffer() (zero copy) and touches
              one byte per page, so the pages are mapped in
  out inline  the function sets an output of that size, sent inline (a non-blob binding)
  out shm     the same through a blob binding (threshold 0): written to a new file (the
              bench deletes it after timing the invocation; the host would adopt it)

    /usr/bin/python3 workers/python/bench/shm_blob.py [--sizes 65536,1048576,67108864] [--reps N]
"""
from __future__ import annotations

import argparse
import asyncio
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Dict, List

WORKER_DIR = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(WORKER_DIR))

import grpc  # noqa: E402

from faast_worker.protos import pb  # noqa: E402

READ = """
import azure.functions as func

def main(req: func.HttpRequest, data: func.InputStream) -> str:
    return str(len(data.read()))
"""
VIEW = """
import azure.functions as func

def main(req: func.HttpRequest, data: func.InputStream) -> str:
    view = data.getbuffer()
    touched = sum(view[0:len(view):4096])   # one byte a page: map them in
    return str(len(view) + 0 * touched)
"""
WRITE = """
import azure.functions as func

BUFFERS = {}

def main(req: func.HttpRequest, out: func.Out[bytes]) -> str:
    n = int(req.route_params["n"])
    data = BUFFERS.get(n)
    if data is None:
        data = BUFFERS[n] = bytes(n)
    out.set(data)
    return "ok"
"""
# "writeq" is WRITE with a non-blob output binding: always inline, whatever the size.
FUNCTIONS = {"read": READ, "view": VIEW, "write": WRITE, "writeq": WRITE}


def http_input(req: pb.InvocationRequest, n: int = 0) -> None:
    h = req.input_data.add(name="req").data.http
    h.method, h.url = "GET", "http://localhost/api/bench"
    h.params["n"] = str(n)


def request(inv: str, function_id: str, blob_td: "pb.TypedData | None", n: int = 0) -> bytes:
    msg = pb.StreamingMessage()
    req = msg.invocation_request
    req.invocation_id = inv
    req.function_id = function_id
    http_input(req, n)
    if blob_td is not None:
        req.input_data.add(name="data").data.CopyFrom(blob_td)
    return msg.SerializeToString()


def inline_blob(content: bytes) -> pb.TypedData:
    td = pb.TypedData()
    td.blob.name, td.blob.length, td.blob.bytes = "bench/blob", len(content), content
    return td


def shm_blob(segment: str, offset: int, length: int) -> pb.TypedData:
    td = pb.TypedData()
    td.blob.name, td.blob.length = "bench/blob", length
    ref = td.blob.shared_memory
    ref.segment, ref.offset, ref.length, ref.version = segment, offset, length, '"v1"'
    return td


class Host:
    def __init__(self, app: Path, shm_dir: Path, min_bytes: int) -> None:
        self.app, self.shm_dir, self.min_bytes = app, shm_dir, min_bytes
        self.out: "asyncio.Queue[bytes]" = asyncio.Queue()
        self.waiting: Dict[str, "asyncio.Future"] = {}
        self.ready = asyncio.Event()
        self.loaded: List[str] = []

    async def event_stream(self, request_iterator, context):
        async def reader() -> None:
            async for raw in request_iterator:
                arrived = time.perf_counter()
                msg = pb.StreamingMessage.FromString(raw)
                kind = msg.WhichOneof("content")
                if kind == "start_stream":
                    init = pb.StreamingMessage(request_id="init")
                    wi = init.worker_init_request
                    wi.function_app_directory = str(self.app)
                    wi.capabilities.update({
                        "shared_memory": "1", "shared_memory_dir": str(self.shm_dir),
                        "shared_memory_min_bytes": str(self.min_bytes)})
                    self.out.put_nowait(init.SerializeToString())
                elif kind == "worker_init_response":
                    caps = msg.worker_init_response.capabilities
                    assert caps.get("shared_memory") == "1", caps
                    for name in FUNCTIONS:
                        self.out.put_nowait(load_request(self.app, name))
                elif kind == "function_load_response":
                    r = msg.function_load_response
                    assert r.result.status == pb.StatusResult.SUCCESS, r
                    self.loaded.append(r.function_id)
                    if len(self.loaded) == len(FUNCTIONS):
                        self.ready.set()
                elif kind == "invocation_response":
                    fut = self.waiting.pop(msg.invocation_response.invocation_id)
                    fut.set_result((arrived, msg.invocation_response))

        task = asyncio.create_task(reader())
        try:
            while True:
                yield await self.out.get()
        finally:
            task.cancel()

    async def invoke(self, inv: str, raw: bytes) -> "tuple[float, pb.InvocationResponse]":
        fut = asyncio.get_running_loop().create_future()
        self.waiting[inv] = fut
        t0 = time.perf_counter()
        self.out.put_nowait(raw)
        arrived, resp = await fut
        assert resp.result.status == pb.StatusResult.SUCCESS, resp.result.exception.message
        return arrived - t0, resp


def load_request(app: Path, name: str) -> bytes:
    load = pb.StreamingMessage(request_id=f"load-{name}")
    lr = load.function_load_request
    lr.function_id = name
    md = lr.metadata
    md.name, md.directory, md.script_file = name, str(app / name), str(app / name / "__init__.py")
    md.bindings["req"].type = "httpTrigger"
    md.bindings["$return"].type = "http"
    md.bindings["$return"].direction = pb.BindingInfo.OUT
    if name.startswith("write"):
        md.bindings["out"].type = "blob" if name == "write" else "queue"
        md.bindings["out"].direction = pb.BindingInfo.OUT
    else:
        md.bindings["data"].type = "blob"
    return load.SerializeToString()


def fmt(samples: List[float]) -> str:
    ms = sorted(s * 1000 for s in samples)
    p10 = ms[len(ms) // 10]
    p90 = ms[min(len(ms) - 1, (len(ms) * 9) // 10)]
    return f"{statistics.median(ms):8.3f} ms  (p10 {p10:.3f}, p90 {p90:.3f}, n={len(ms)})"


async def bench(args: argparse.Namespace) -> None:
    sizes = [int(s) for s in args.sizes.split(",")]
    app = Path(tempfile.mkdtemp(prefix="faast-shm-bench-"))
    shm_dir = Path(tempfile.mkdtemp(prefix="faast-shm-bench-", dir="/dev/shm"))
    for name, code in FUNCTIONS.items():
        (app / name).mkdir()
        (app / name / "__init__.py").write_text(code)
    host = Host(app, shm_dir, args.min_bytes)
    server = grpc.aio.server(options=[("grpc.max_receive_message_length", 512 << 20),
                                      ("grpc.max_send_message_length", 512 << 20)])
    server.add_generic_rpc_handlers((grpc.method_handlers_generic_handler(
        "faast.worker.v1.WorkerChannel",
        {"EventStream": grpc.stream_stream_rpc_method_handler(host.event_stream)}),))
    port = server.add_insecure_port("127.0.0.1:0")
    await server.start()
    proc = subprocess.Popen(["/usr/bin/python3", str(WORKER_DIR / "worker.py"), "--host",
                             "127.0.0.1", "--port", str(port), "--worker-id", "bench",
                             "--max-message-length", str(512 << 20)], cwd=app)
    counter = 0
    try:
        await asyncio.wait_for(host.ready.wait(), 30)
        print(f"one sync worker, invocations one at a time, time from request sent to "
              f"response received; cpus {os.cpu_count()}")
        for n in sizes:
            reps = args.reps or (30 if n <= (4 << 20) else 8)
            content = os.urandom(n)
            (shm_dir / f"l-bench-{n}").write_bytes(content)
            slab = bytearray(4096 + n + 4096)
            slab[4096:4096 + n] = content
            (shm_dir / f"s-bench-{n}").write_bytes(bytes(slab))  # names are never reused
            del slab
            cases = {
                "in  inline  read()": ("read", inline_blob(content)),
                "in  shm-l   read()": ("read", shm_blob(f"l-bench-{n}", 0, n)),
                "in  shm-s   read()": ("read", shm_blob(f"s-bench-{n}", 4096, n)),
                "in  view-l  getbuffer()": ("view", shm_blob(f"l-bench-{n}", 0, n)),
            }
            for label, (fid, td) in cases.items():
                samples = []
                for i in range(reps + 2):  # the first two are warm-up
                    counter += 1
                    inv = f"i{counter}"
                    raw = request(inv, fid, td)
                    dt, resp = await host.invoke(inv, raw)
                    assert resp.return_value.string == str(n), resp
                    if i >= 2:
                        samples.append(dt)
                print(f"{n:>10} B  {label:<24} {fmt(samples)}")
            for label, fid in (("out inline", "writeq"), ("out shm   ", "write")):
                samples = []
                for i in range(reps + 2):
                    counter += 1
                    inv = f"o{counter}"
                    dt, resp = await host.invoke(inv, request(inv, fid, None, n))
                    data = resp.output_data[0].data
                    assert data.WhichOneof("data") == ("blob" if fid == "write" else "bytes")
                    if data.WhichOneof("data") == "blob":
                        os.unlink(shm_dir / data.blob.shared_memory.segment)
                    if i >= 2:
                        samples.append(dt)
                print(f"{n:>10} B  {label + ' set(bytes)':<24} {fmt(samples)}")
    finally:
        proc.kill()
        proc.wait()
        await server.stop(0)
        shutil.rmtree(shm_dir, ignore_errors=True)
        shutil.rmtree(app, ignore_errors=True)


def main() -> None:
    p = argparse.ArgumentParser()
    p.add_argument("--sizes", default="65536,262144,1048576,67108864")
    p.add_argument("--reps", type=int, default=0, help="timed invocations per case")
    p.add_argument("--min-bytes", type=int, default=0,
                   help="shared_memory_min_bytes offered (default 0: every blob output "
                        "goes through shared memory)")
    asyncio.run(bench(p.parse_args()))


if __name__ == "__main__":
    main()
