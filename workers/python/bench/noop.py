#!/usr/bin/python3
"""No-op invocation throughput of one worker process.

A minimal in-process fake host (grpc.aio server passing pre-serialized bytes, so the
host side costs little) starts the real worker.py, loads a no-op HTTP function and
keeps --window invocations in flight. Reports invocations/s (wall clock) and the
worker's CPU time per invocation (utime+stime from /proc/<pid>/stat).

    /usr/bin/python3 workers/python/bench/noop.py [--count 20000] [--window 64] [--kind sync|async]
"""
from __future__ import annotations

import argparse
import asyncio
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

WORKER_DIR = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(WORKER_DIR))

import grpc  # noqa: E402

from faast_worker.protos import pb  # noqa: E402

FUNCTIONS = {
    "sync": "import azure.functions as func\n\n"
            "def main(req: func.HttpRequest) -> func.HttpResponse:\n"
            "    return func.HttpResponse('ok')\n",
    "async": "import azure.functions as func\n\n"
             "async def main(req: func.HttpRequest) -> func.HttpResponse:\n"
             "    return func.HttpResponse('ok')\n",
}


def cpu_seconds(pid: int) -> float:
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def invocation_bytes(i: int) -> bytes:
    msg = pb.StreamingMessage()
    req = msg.invocation_request
    req.invocation_id = f"inv-{i}"
    req.function_id = "noop"
    h = req.input_data.add(name="req").data.http
    h.method, h.url = "GET", "http://localhost/api/noop"
    h.headers["user-agent"] = "bench"
    h.headers["accept"] = "*/*"
    return msg.SerializeToString()


async def bench(args: argparse.Namespace) -> None:
    app = Path(tempfile.mkdtemp(prefix="faast-bench-"))
    (app / "noop").mkdir()
    (app / "noop" / "__init__.py").write_text(FUNCTIONS[args.kind])
    requests = [invocation_bytes(i) for i in range(args.count + args.warmup)]
    done = asyncio.Event()
    result: dict = {}

    async def event_stream(request_iterator, context):
        worker_pid = result["pid"]
        out: asyncio.Queue = asyncio.Queue()

        async def reader() -> None:
            # Handshake replies are parsed; invocation responses are only counted.
            received = 0
            first = args.warmup
            async for raw in request_iterator:
                if "ready" not in result:
                    msg = pb.StreamingMessage.FromString(raw)
                    kind = msg.WhichOneof("content")
                    if kind == "start_stream":
                        init = pb.StreamingMessage(request_id="init")
                        init.worker_init_request.function_app_directory = str(app)
                        out.put_nowait(init.SerializeToString())
                    elif kind == "worker_init_response":
                        load = pb.StreamingMessage(request_id="load")
                        lr = load.function_load_request
                        lr.function_id = "noop"
                        md = lr.metadata
                        md.name, md.directory = "noop", str(app / "noop")
                        md.script_file = str(app / "noop" / "__init__.py")
                        md.bindings["req"].type = "httpTrigger"
                        md.bindings["$return"].type = "http"
                        md.bindings["$return"].direction = pb.BindingInfo.OUT
                        out.put_nowait(load.SerializeToString())
                    elif kind == "function_load_response":
                        assert msg.function_load_response.result.status == pb.StatusResult.SUCCESS
                        result["ready"] = True
                        for r in requests[:args.window]:
                            out.put_nowait(r)
                        result["next"] = args.window
                    continue
                received += 1
                if received == first:
                    result["t0"] = time.perf_counter()
                    result["cpu0"] = cpu_seconds(worker_pid)
                nxt = result["next"]
                if nxt < len(requests):
                    out.put_nowait(requests[nxt])
                    result["next"] = nxt + 1
                if received == len(requests):
                    result["t1"] = time.perf_counter()
                    result["cpu1"] = cpu_seconds(worker_pid)
                    result["last"] = raw
                    terminate = pb.StreamingMessage()
                    terminate.worker_terminate.grace_period_ms = 1000
                    out.put_nowait(terminate.SerializeToString())
                    done.set()

        task = asyncio.create_task(reader())
        try:
            while True:
                item = await out.get()
                yield item
        finally:
            task.cancel()

    server = grpc.aio.server(options=[("grpc.max_receive_message_length", 256 << 20)])
    server.add_generic_rpc_handlers((grpc.method_handlers_generic_handler(
        "faast.worker.v1.WorkerChannel",
        {"EventStream": grpc.stream_stream_rpc_method_handler(event_stream)}),))
    port = server.add_insecure_port("127.0.0.1:0")
    await server.start()
    proc = subprocess.Popen([sys.executable if sys.executable == "/usr/bin/python3" else "/usr/bin/python3",
                             str(WORKER_DIR / "worker.py"), "--host", "127.0.0.1",
                             "--port", str(port), "--worker-id", "bench"], cwd=app)
    result["pid"] = proc.pid
    try:
        await asyncio.wait_for(done.wait(), timeout=300)
    finally:
        proc.kill()
        proc.wait()
        await server.stop(0)
    last = pb.StreamingMessage.FromString(result["last"]).invocation_response
    assert last.result.status == pb.StatusResult.SUCCESS, last
    n = args.count
    wall = result["t1"] - result["t0"]
    cpu = result["cpu1"] - result["cpu0"]
    print(f"{args.kind} no-op HTTP function, window {args.window}: {n} invocations in "
          f"{wall:.2f} s = {n / wall:,.0f} inv/s; worker CPU {cpu:.2f} s = "
          f"{cpu / n * 1e6:.0f} us/invocation (cpus: {os.cpu_count()})")


def main() -> None:
    p = argparse.ArgumentParser()
    p.add_argument("--count", type=int, default=20000)
    p.add_argument("--warmup", type=int, default=1000)
    p.add_argument("--window", type=int, default=64)
    p.add_argument("--kind", choices=sorted(FUNCTIONS), default="sync")
    asyncio.run(bench(p.parse_args()))


if __name__ == "__main__":
    main()
