"""Invocations against the real worker: bindings, results, concurrency, errors, logs."""
from __future__ import annotations

import json
import time

from conftest import (CANCELLED, FAILURE, IN, OUT, SUCCESS, App, blob, http, pb,
                      start_session, typed)

HTTP = {"req": ("httpTrigger", IN), "$return": ("http", OUT)}


def test_http_request_to_http_response(session) -> None:
    session.add_function("Http", """
        import json
        import azure.functions as func

        def main(req: func.HttpRequest) -> func.HttpResponse:
            body = req.get_json()
            info = {
                "method": req.method,
                "url": req.url,
                "name": req.params.get("name"),
                "id": req.route_params["id"],
                "ua": req.headers.get("user-agent"),
                "has_ct": "CONTENT-TYPE" in req.headers,
                "sum": body["a"] + body["b"],
            }
            return func.HttpResponse(json.dumps(info), status_code=201,
                                     headers={"X-Custom": "yes"},
                                     mimetype="application/json")
    """, bindings=HTTP)
    out = session.call("Http", req=http(
        "post", "http://localhost/api/items/7?name=bob",
        headers={"User-Agent": "pytest", "Content-Type": "application/json"},
        query={"name": "bob"}, params={"id": "7"}, body=b'{"a": 2, "b": 3}'))
    assert out.result.status == SUCCESS, out.result.exception.message
    resp = out.return_value.http
    assert resp.status_code == 201
    assert resp.headers["X-Custom"] == "yes"
    assert resp.headers["Content-Type"] == "application/json"
    assert json.loads(resp.body.bytes) == {
        "method": "POST", "url": "http://localhost/api/items/7?name=bob", "name": "bob",
        "id": "7", "ua": "pytest", "has_ct": True, "sum": 5}


def test_http_text_response_gets_charset_and_default_status(session) -> None:
    session.add_function("Text", """
        import azure.functions as func
        def main(req: func.HttpRequest) -> func.HttpResponse:
            return func.HttpResponse("héllo")
    """, bindings=HTTP)
    resp = session.call("Text", req=http()).return_value.http
    assert resp.status_code == 200
    assert resp.headers["Content-Type"] == "text/plain; charset=utf-8"
    assert resp.body.bytes == "héllo".encode()


def test_http_get_json_bad_body_raises_value_error(session) -> None:
    session.add_function("BadJson", """
        import azure.functions as func
        def main(req: func.HttpRequest) -> func.HttpResponse:
            try:
                req.get_json()
            except ValueError as exc:
                return func.HttpResponse("bad json", status_code=400)
            return func.HttpResponse("ok")
    """, bindings=HTTP)
    resp = session.call("BadJson", req=http("POST", body=b"{nope")).return_value.http
    assert resp.status_code == 400 and resp.body.bytes == b"bad json"


def test_http_response_via_out_parameter(session) -> None:
    session.add_function("OutHttp", """
        import azure.functions as func
        def main(req: func.HttpRequest, res: func.Out[func.HttpResponse]) -> None:
            res.set(func.HttpResponse(b"via out", status_code=202))
    """, bindings={"req": ("httpTrigger", IN), "res": ("http", OUT)})
    out = session.call("OutHttp", req=http())
    assert out.result.status == SUCCESS, out.result.exception.message
    assert not out.HasField("return_value")
    [res] = out.output_data
    assert res.name == "res"
    assert res.data.http.status_code == 202 and res.data.http.body.bytes == b"via out"


def test_blob_input_as_input_stream(session) -> None:
    session.add_function("BlobStream", """
        import azure.functions as func
        def main(req, doc: func.InputStream) -> str:
            head = doc.read(3)
            rest = doc.read()
            return f"{doc.name}|{doc.length}|{doc.uri}|{head!r}|{rest!r}|{doc.seekable()}"
    """, bindings={"req": ("httpTrigger", IN), "doc": ("blob", IN), "$return": ("http", OUT)})
    out = session.call("BlobStream", req=http(), doc=blob(b"hello world"))
    assert out.result.status == SUCCESS, out.result.exception.message
    assert out.return_value.string == (
        "c/b.txt|11|http://blobs/c/b.txt|b'hel'|b'lo world'|False")


def test_blob_input_unannotated_is_input_stream(session) -> None:
    session.add_function("BlobAuto", """
        def main(req, doc):
            return type(doc).__name__ + ":" + doc.read().decode()
    """, bindings={"req": ("httpTrigger", IN), "doc": ("blob", IN), "$return": ("http", OUT)})
    out = session.call("BlobAuto", req=http(), doc=blob(b"abc"))
    assert out.return_value.string == "InputStream:abc"


def test_blob_input_as_bytes_and_str(session) -> None:
    session.add_function("BlobTyped", """
        def main(req, raw: bytes, text: str) -> str:
            return f"{type(raw).__name__}={raw!r} {type(text).__name__}={text}"
    """, bindings={"req": ("httpTrigger", IN), "raw": ("blob", IN), "text": ("blob", IN),
                   "$return": ("http", OUT)})
    out = session.call("BlobTyped", req=http(), raw=blob(b"\x00\x01"), text=blob("żółw".encode()))
    assert out.return_value.string == "bytes=b'\\x00\\x01' str=żółw"


def test_missing_blob_is_none(session) -> None:
    session.add_function("BlobMissing", """
        from typing import Optional
        import azure.functions as func
        def main(req, doc: Optional[func.InputStream], raw: bytes) -> str:
            return f"{doc is None} {raw is None}"
    """, bindings={"req": ("httpTrigger", IN), "doc": ("blob", IN), "raw": ("blob", IN),
                   "$return": ("http", OUT)})
    out = session.call("BlobMissing", req=http(), doc=pb.TypedData(), raw=pb.TypedData())
    assert out.result.status == SUCCESS, out.result.exception.message
    assert out.return_value.string == "True True"


def test_shared_memory_blob_without_negotiation_fails_clearly(session) -> None:
    session.add_function("BlobShm", """
        def main(req, doc: bytes) -> str:
            return "unreachable"
    """, bindings={"req": ("httpTrigger", IN), "doc": ("blob", IN), "$return": ("http", OUT)})
    td = pb.TypedData()
    td.blob.name = "c/big"
    td.blob.shared_memory.segment = "seg1"
    td.blob.shared_memory.length = 10
    out = session.call("BlobShm", req=http(), doc=td)
    assert out.result.status == FAILURE
    message = out.result.exception.message
    assert "shared memory was not negotiated" in message
    assert "'doc'" in message and "'seg1'" in message


def test_typed_data_scalars(session) -> None:
    session.add_function("Scalars", """
        def main(req, b, s, j, j_as_str: str, s_as_bytes: bytes, j_dict: dict) -> dict:
            return {"b": b.hex(), "s": s, "j": j, "j_as_str": j_as_str,
                    "s_as_bytes": s_as_bytes.decode(), "j_dict": j_dict,
                    "types": [type(x).__name__ for x in (b, s, j, j_as_str, s_as_bytes)]}
    """, bindings={"req": ("httpTrigger", IN), "b": ("x", IN), "s": ("x", IN), "j": ("x", IN),
                   "j_as_str": ("x", IN), "s_as_bytes": ("x", IN), "j_dict": ("x", IN),
                   "$return": ("x", OUT)})
    out = session.call("Scalars", req=http(), b=typed(bytes=b"\xff"), s=typed(string="txt"),
                       j=typed(json="[1, 2]"), j_as_str=typed(json='{"k": 1}'),
                       s_as_bytes=typed(string="abc"), j_dict=typed(json='{"k": 2}'))
    assert out.result.status == SUCCESS, out.result.exception.message
    assert json.loads(out.return_value.json) == {
        "b": "ff", "s": "txt", "j": [1, 2], "j_as_str": '{"k": 1}', "s_as_bytes": "abc",
        "j_dict": {"k": 2}, "types": ["bytes", "str", "list", "str", "bytes"]}


def test_out_bytes_and_str_outputs(session) -> None:
    session.add_function("Outs", """
        import azure.functions as func
        def main(req: func.HttpRequest, raw: func.Out[bytes], text: func.Out[str],
                 unset: func.Out[str], plain) -> str:
            raw.set(b"\\x01\\x02")
            text.set("written")
            plain.set({"n": 1})
            return "ok"
    """, bindings={"req": ("httpTrigger", IN), "raw": ("blob", OUT), "text": ("blob", OUT),
                   "unset": ("blob", OUT), "plain": ("blob", OUT), "$return": ("http", OUT)})
    out = session.call("Outs", req=http())
    assert out.result.status == SUCCESS, out.result.exception.message
    outputs = {o.name: o.data for o in out.output_data}
    assert set(outputs) == {"raw", "text", "plain"}  # `unset` was never set
    assert outputs["raw"].bytes == b"\x01\x02"
    assert outputs["text"].string == "written"
    assert json.loads(outputs["plain"].json) == {"n": 1}
    assert out.return_value.string == "ok"


def test_return_values_by_type(session) -> None:
    session.add_function("Returns", """
        def main(req, kind: str):
            return {"str": "text", "bytes": b"\\x00raw", "bytearray": bytearray(b"ba"),
                    "json": {"a": [1, 2.5, True, None]}, "list": [1, 2], "int": 7,
                    "none": None}[kind]
    """, bindings={"req": ("httpTrigger", IN), "kind": ("x", IN), "$return": ("blob", OUT)})

    def ret(kind: str) -> pb.TypedData:
        out = session.call("Returns", req=http(), kind=typed(string=kind))
        assert out.result.status == SUCCESS, out.result.exception.message
        return out.return_value

    assert ret("str").string == "text"
    assert ret("bytes").bytes == b"\x00raw"
    assert ret("bytearray").bytes == b"ba"
    assert json.loads(ret("json").json) == {"a": [1, 2.5, True, None]}
    assert json.loads(ret("list").json) == [1, 2]
    assert json.loads(ret("int").json) == 7
    assert ret("none").WhichOneof("data") is None


def test_return_value_ignored_without_return_binding(session) -> None:
    session.add_function("NoReturn", """
        def main(req):
            return "ignored"
    """, bindings={"req": ("httpTrigger", IN)})
    out = session.call("NoReturn", req=http())
    assert out.result.status == SUCCESS
    assert not out.HasField("return_value")


def test_unconvertible_return_value_fails(session) -> None:
    session.add_function("BadReturn", """
        def main(req):
            return object()
    """)
    out = session.call("BadReturn", req=http())
    assert out.result.status == FAILURE
    assert "cannot convert a value of type object" in out.result.exception.message


def test_sync_and_async_functions(session) -> None:
    session.add_function("Sync", """
        import threading
        def main(req) -> str:
            return "sync on " + threading.current_thread().name
    """)
    session.add_function("Async", """
        import asyncio, threading
        async def main(req) -> str:
            await asyncio.sleep(0)
            return "async on " + threading.current_thread().name
    """)
    sync = session.call("Sync", req=http()).return_value.string
    asyn = session.call("Async", req=http()).return_value.string
    assert sync.startswith("sync on faast-fn")  # a pool thread, not the event loop
    assert asyn == "async on MainThread"


def test_missing_parameter_binding_fails(session) -> None:
    session.add_function("NeedsMore", """
        def main(req, other: str, optional: str = "dflt") -> str:
            return other + optional
    """)
    out = session.call("NeedsMore", req=http())
    assert out.result.status == FAILURE
    message = out.result.exception.message
    assert "'NeedsMore'" in message and "'other'" in message and "no input binding" in message


def test_context_parameter(session) -> None:
    session.add_function("Ctx", """
        import azure.functions as func
        def main(req, context: func.Context) -> str:
            return "|".join([context.invocation_id, context.function_name,
                             context.function_directory, str(context.trace_context)])
    """)
    session.add_function("CtxByAnnotation", """
        import azure.functions as func
        async def main(req, c: func.Context) -> str:
            return c.invocation_id
    """)
    inv = session.host.invoke("Ctx", {"req": http()}, "inv-ctx-1")
    out = session.host.response(inv)
    assert out.return_value.string == (
        f"inv-ctx-1|Ctx|{session.app.root / 'Ctx'}|None")
    inv = session.host.invoke("CtxByAnnotation", {"req": http()}, "inv-ctx-2")
    assert session.host.response(inv).return_value.string == "inv-ctx-2"


def test_async_invocations_run_concurrently(session) -> None:
    # Each invocation waits until the other has started: both finish only if they overlap.
    session.add_function("MeetAsync", """
        import asyncio
        arrived = 0
        async def main(req) -> str:
            global arrived
            arrived += 1
            for _ in range(500):
                if arrived >= 2:
                    return "met"
                await asyncio.sleep(0.01)
            return "alone"
    """)
    ids = [session.host.invoke("MeetAsync", {"req": http()}) for _ in range(2)]
    for inv in ids:
        out = session.host.response(inv)
        assert out.result.status == SUCCESS
        assert out.return_value.string == "met"


def test_sync_invocations_run_concurrently_in_thread_pool(session) -> None:
    # A barrier of two: each sync invocation passes only if the other runs at the same time.
    session.add_function("MeetSync", """
        import threading
        barrier = threading.Barrier(2, timeout=5)
        def main(req) -> str:
            barrier.wait()
            return "met"
    """)
    session.add_function("Quick", """
        async def main(req) -> str:
            return "quick"
    """)
    first = session.host.invoke("MeetSync", {"req": http()})
    # The event loop stays free while a sync function blocks its thread.
    assert session.call("Quick", req=http()).return_value.string == "quick"
    second = session.host.invoke("MeetSync", {"req": http()})
    for inv in (first, second):
        out = session.host.response(inv)
        assert out.result.status == SUCCESS
        assert out.return_value.string == "met"


def test_thread_pool_size_from_environment(host, spawn, tmp_path) -> None:
    s = start_session(host, spawn, App(tmp_path / "app"),
                      env={"PYTHON_THREADPOOL_THREAD_COUNT": "1"})
    s.add_function("SleepOne", """
        import time
        def main(req) -> str:
            time.sleep(0.3)
            return "ok"
    """)
    started = time.monotonic()
    ids = [host.invoke("SleepOne", {"req": http()}) for _ in range(2)]
    for inv in ids:
        assert host.response(inv).result.status == SUCCESS
    assert time.monotonic() - started >= 0.6  # one thread: the two ran one after the other


def test_exception_gives_failure_stack_trace_and_error_log(session) -> None:
    session.add_function("Boom", """
        def helper():
            raise ValueError("bad input 42")

        def main(req):
            helper()
    """)
    inv = session.host.invoke("Boom", {"req": http()})
    out = session.host.response(inv)
    assert out.result.status == FAILURE
    ex = out.result.exception
    assert ex.source == "Boom"
    assert ex.message == "ValueError: bad input 42"
    script = str(session.app.root / "Boom" / "__init__.py")
    assert script in ex.stack_trace and "in helper" in ex.stack_trace
    assert "faast_worker" not in ex.stack_trace  # the worker's own frames are trimmed
    errors = [log for log in session.host.logs(inv) if log.level == pb.RpcLog.ERROR]
    assert errors and "bad input 42" in errors[0].message
    assert errors[0].exception.message == "ValueError: bad input 42"


def test_async_exception_and_worker_survives(session) -> None:
    session.add_function("AsyncBoom", """
        async def main(req):
            raise KeyError("k")
    """)
    session.add_function("Exit", """
        import sys
        def main(req):
            sys.exit(3)
    """)
    out = session.call("AsyncBoom", req=http())
    assert out.result.status == FAILURE and out.result.exception.message == "KeyError: 'k'"
    out = session.call("Exit", req=http())
    assert out.result.status == FAILURE and "SystemExit" in out.result.exception.message
    assert session.worker.proc.poll() is None


def test_logging_inside_functions_becomes_rpc_log(session) -> None:
    session.add_function("Logs", """
        import asyncio, logging, threading
        import azure.functions as func

        def in_thread(context):
            context.thread_local_storage.invocation_id = context.invocation_id
            logging.getLogger("mine").warning("from my own thread")

        async def main(req, context: func.Context) -> str:
            logging.info("info from %s", "async")
            await asyncio.to_thread(logging.error, "from to_thread")
            await asyncio.get_running_loop().run_in_executor(None, logging.info, "from executor")
            t = threading.Thread(target=in_thread, args=(context,))
            t.start(); t.join()
            logging.debug("debug is filtered by default")
            return "ok"
    """)
    session.add_function("SyncLogs", """
        import logging
        def main(req) -> str:
            logging.getLogger("lib").warning("sync warning")
            return "ok"
    """)
    inv = session.host.invoke("Logs", {"req": http()})
    assert session.host.response(inv).result.status == SUCCESS
    logs = {log.message: log for log in session.host.logs(inv)}
    assert set(logs) == {"info from async", "from to_thread", "from executor",
                         "from my own thread"}
    assert logs["info from async"].level == pb.RpcLog.INFORMATION
    assert logs["from to_thread"].level == pb.RpcLog.ERROR
    assert logs["from my own thread"].level == pb.RpcLog.WARNING
    assert all(log.category == "Function.Logs.User" for log in logs.values())

    inv2 = session.host.invoke("SyncLogs", {"req": http()})
    assert session.host.response(inv2).result.status == SUCCESS
    [log] = session.host.logs(inv2)
    assert (log.message, log.level, log.category) == (
        "sync warning", pb.RpcLog.WARNING, "Function.SyncLogs.User")


def test_logs_precede_the_response_and_module_logs_are_worker_level(session) -> None:
    session.add_function("ModLog", """
        import logging
        logging.warning("loading module")
        def main(req) -> str:
            logging.warning("invoked")
            return "ok"
    """)
    inv = session.host.invoke("ModLog", {"req": http()})
    session.host.response(inv)
    kinds = [(m.WhichOneof("content"), m.rpc_log.message) for m in session.host.all_received
             if m.rpc_log.invocation_id == inv or m.invocation_response.invocation_id == inv]
    assert kinds == [("rpc_log", "invoked"), ("invocation_response", "")]
    [load_log] = [log for log in session.host.logs() if log.message == "loading module"]
    assert load_log.invocation_id == ""
    assert load_log.category == "Function.ModLog.User"


def test_cancel_async_invocation(session) -> None:
    session.add_function("Cancellable", """
        import asyncio
        async def main(req) -> str:
            await asyncio.sleep(30)
            return "finished"
    """)
    inv = session.host.invoke("Cancellable", {"req": http()})
    time.sleep(0.1)
    session.host.cancel(inv)
    out = session.host.response(inv)
    assert out.result.status == CANCELLED
    # Cancelling an unknown or finished invocation is harmless.
    session.host.cancel("no-such-invocation")
    session.host.cancel(inv)
    session.add_function("After", """
        def main(req) -> str:
            return "alive"
    """)
    assert session.call("After", req=http()).return_value.string == "alive"


def test_cancel_sync_invocation_is_ignored_once_running(session) -> None:
    session.add_function("SyncRun", """
        import time
        def main(req) -> str:
            time.sleep(0.2)
            return "finished"
    """)
    inv = session.host.invoke("SyncRun", {"req": http()})
    time.sleep(0.05)
    session.host.cancel(inv)
    out = session.host.response(inv)
    assert out.result.status == SUCCESS and out.return_value.string == "finished"


def test_relative_import_within_function_package(session) -> None:
    session.app.write("shared/__init__.py", "")
    session.app.write("shared/util.py", """
        def shout(s):
            return s.upper()
    """)
    session.app.write("Rel/helper.py", """
        GREETING = "hello"
    """)
    session.add_function("Rel", """
        from . import helper
        from .helper import GREETING
        from shared.util import shout
        def main(req) -> str:
            return shout(helper.GREETING + " " + GREETING)
    """)
    out = session.call("Rel", req=http())
    assert out.result.status == SUCCESS, out.result.exception.message
    assert out.return_value.string == "HELLO HELLO"


def test_function_folder_named_like_stdlib_module(session) -> None:
    # A folder named "json" must not shadow the standard library's json module.
    session.app.write("json/helper.py", "VALUE = 5\n")
    session.add_function("json", """
        import json as stdlib_json
        from . import helper
        def main(req) -> str:
            return stdlib_json.dumps({"v": helper.VALUE})
    """)
    out = session.call("json", req=http())
    assert out.result.status == SUCCESS, out.result.exception.message
    assert out.return_value.string == '{"v": 5}'


def test_many_concurrent_invocations(session) -> None:
    session.add_function("Echo", """
        def main(req, n: str) -> str:
            return n
    """, bindings={"req": ("httpTrigger", IN), "n": ("x", IN), "$return": ("http", OUT)})
    session.add_function("EchoAsync", """
        async def main(req, n: str) -> str:
            return n
    """, bindings={"req": ("httpTrigger", IN), "n": ("x", IN), "$return": ("http", OUT)})
    ids = {}
    for i in range(200):
        fn = "Echo" if i % 2 else "EchoAsync"
        ids[session.host.invoke(fn, {"req": http(), "n": typed(string=str(i))})] = str(i)
    for inv, n in ids.items():
        out = session.host.response(inv)
        assert out.result.status == SUCCESS and out.return_value.string == n


def test_large_messages_above_grpc_default_limit(session) -> None:
    # 5 MiB each way: beyond gRPC's 4 MiB default, within the worker's 256 MiB.
    session.add_function("Big", """
        def main(req, data: bytes) -> bytes:
            return data[::-1]
    """, bindings={"req": ("httpTrigger", IN), "data": ("blob", IN), "$return": ("blob", OUT)})
    payload = bytes(range(256)) * (5 * 4096)
    out = session.call("Big", timeout=10, req=http(), data=blob(payload))
    assert out.result.status == SUCCESS, out.result.exception.message
    assert out.return_value.bytes == payload[::-1]


def test_app_vendored_azure_packages_coexist_with_azure_functions(host, spawn, tmp_path) -> None:
    # Packages the app brings (as `pip install --target .python_packages/...` would).
    app = App(tmp_path / "app")
    app.write(".python_packages/lib/site-packages/azure/vendored/__init__.py",
              "VALUE = 'vendored'\n")
    session = start_session(host, spawn, app)
    session.add_function("Vendored", """
        import azure.functions as func
        from azure.vendored import VALUE
        def main(req: func.HttpRequest) -> str:
            return VALUE + " " + func.__name__
    """)
    out = session.call("Vendored", req=http())
    assert out.result.status == SUCCESS, out.result.exception.message
    assert out.return_value.string == "vendored azure.functions"


def test_exception_with_broken_str_still_fails_cleanly(session) -> None:
    session.add_function("WeirdError", """
        class Weird(Exception):
            def __str__(self):
                raise RuntimeError("no str for you")

        def main(req):
            raise Weird()
    """)
    out = session.call("WeirdError", req=http())
    assert out.result.status == FAILURE
    assert out.result.exception.message.startswith("Weird: ")


def test_cancel_queued_sync_invocation(host, spawn, tmp_path) -> None:
    # One pool thread: the second invocation waits in the queue and can be cancelled.
    s = start_session(host, spawn, App(tmp_path / "app"),
                      env={"PYTHON_THREADPOOL_THREAD_COUNT": "1"})
    s.add_function("Blocker", """
        import time
        def main(req) -> str:
            time.sleep(0.3)
            return "done"
    """)
    first = host.invoke("Blocker", {"req": http()})
    queued = host.invoke("Blocker", {"req": http()})
    time.sleep(0.05)
    host.cancel(queued)
    assert host.response(queued).result.status == CANCELLED
    assert host.response(first).result.status == SUCCESS
    # The pool keeps working after skipping the cancelled job.
    assert s.call("Blocker", req=http()).return_value.string == "done"


def test_http_body_sent_as_string_or_json(session) -> None:
    session.add_function("Body", """
        import azure.functions as func
        def main(req: func.HttpRequest) -> str:
            return repr(req.get_body()) + " " + repr(req.get_json())
    """)
    td = http("POST")
    td.http.body.string = '{"s": "é"}'
    assert session.call("Body", req=td).return_value.string == (
        repr('{"s": "é"}'.encode()) + " {'s': 'é'}")
    td = http("POST")
    td.http.body.json = "[1]"
    assert session.call("Body", req=td).return_value.string == "b'[1]' [1]"
    assert session.call("Body", req=http("POST")).result.status == FAILURE  # empty body: bad JSON


def test_queue_message_parameter_carries_body_and_metadata(session) -> None:
    session.add_function("OnQueue", """
        import json
        import azure.functions as func
        def main(msg: func.QueueMessage) -> str:
            return json.dumps({
                "id": msg.id, "body": msg.get_body().decode(), "json": msg.get_json(),
                "count": msg.dequeue_count, "receipt": msg.pop_receipt,
                "inserted": msg.insertion_time.isoformat(),
                "expires": msg.expiration_time.year,
                "visible": msg.time_next_visible is not None})
    """, bindings={"msg": ("queueTrigger", IN), "$return": ("blob", OUT)})
    out = session.call("OnQueue", msg=typed(json='{"name": "a"}'), metadata={
        "Id": typed(string="m-1"), "PopReceipt": typed(string="r-1"),
        "DequeueCount": typed(json="2"),
        "InsertionTime": typed(string="2026-11-25T10:00:00.1234567+00:00"),
        "ExpirationTime": typed(string="2026-12-02T10:00:00.0000000+00:00"),
        "NextVisibleTime": typed(string="2026-11-25T10:10:00.0000000+00:00")})
    assert out.result.status == SUCCESS, out.result.exception.message
    assert json.loads(out.return_value.string) == {
        "id": "m-1", "body": '{"name": "a"}', "json": {"name": "a"}, "count": 2,
        "receipt": "r-1", "inserted": "2026-11-25T10:00:00.123456+00:00", "expires": 2026,
        "visible": True}


def test_queue_outputs_one_message_several_and_queue_message_objects(session) -> None:
    session.add_function("ToQueues", """
        import typing
        import azure.functions as func
        def main(req: func.HttpRequest, one: func.Out[str], many: func.Out[typing.List[str]],
                 obj: func.Out[func.QueueMessage], objs: func.Out[typing.List[func.QueueMessage]]):
            one.set("first")
            many.set(["a", "b"])
            obj.set(func.QueueMessage(body="from an object"))
            objs.set([func.QueueMessage(body=b"x"), "y"])
            return "ok"
    """, bindings={"req": ("httpTrigger", IN), "one": ("queue", OUT), "many": ("queue", OUT),
                   "obj": ("queue", OUT), "objs": ("queue", OUT), "$return": ("http", OUT)})
    out = session.call("ToQueues", req=http())
    assert out.result.status == SUCCESS, out.result.exception.message
    outputs = {o.name: o.data for o in out.output_data}
    assert outputs["one"].string == "first"
    assert json.loads(outputs["many"].json) == ["a", "b"]
    assert outputs["obj"].bytes == b"from an object"
    assert json.loads(outputs["objs"].json) == ["x", "y"]
