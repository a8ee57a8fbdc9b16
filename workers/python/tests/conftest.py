"""Test harness: a fake FaaST host (an in-test gRPC server speaking worker.proto) that
starts the REAL worker.py as a subprocess and drives it."""
from __future__ import annotations

import asyncio
import itertools
import os
import queue
import shutil
import subprocess
import sys
import textwrap
import threading
import time
import uuid
from pathlib import Path
from typing import Any, Callable, Dict, Iterable, List, Optional, Tuple

import pytest

WORKER_DIR = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(WORKER_DIR))

import gen_proto  # noqa: E402

gen_proto.ensure()

import grpc  # noqa: E402

from faast_worker.protos import pb  # noqa: E402

PYTHON = "/usr/bin/python3"
WORKER_PY = WORKER_DIR / "worker.py"
IN, OUT = pb.BindingInfo.IN, pb.BindingInfo.OUT
SUCCESS, FAILURE, CANCELLED = (pb.StatusResult.SUCCESS, pb.StatusResult.FAILURE,
                               pb.StatusResult.CANCELLED)
TIMEOUT = 5.0


class FakeHost:
    """gRPC server on 127.0.0.1:<free port>, run on its own event-loop thread, with a
    blocking API for tests. One worker connection at a time."""

    def __init__(self) -> None:
        self.loop = asyncio.new_event_loop()
        self.thread = threading.Thread(target=self.loop.run_forever, daemon=True)
        self.thread.start()
        self.received: "queue.Queue[pb.StreamingMessage]" = queue.Queue()
        self.pending: List[pb.StreamingMessage] = []
        self.all_received: List[pb.StreamingMessage] = []
        self.connected = threading.Event()
        self.stream_ended = threading.Event()
        self._outbox: Optional[asyncio.Queue] = None
        self._ids = itertools.count(1)
        self.close_on_half_close = True
        self.port = self._call(self._start())

    def _call(self, coro: Any, timeout: float = TIMEOUT) -> Any:
        return asyncio.run_coroutine_threadsafe(coro, self.loop).result(timeout)

    async def _start(self) -> int:
        self.server = grpc.aio.server(options=[
            ("grpc.max_send_message_length", 64 << 20),
            ("grpc.max_receive_message_length", 64 << 20)])
        handler = grpc.method_handlers_generic_handler("faast.worker.v1.WorkerChannel", {
            "EventStream": grpc.stream_stream_rpc_method_handler(
                self._event_stream,
                request_deserializer=pb.StreamingMessage.FromString,
                response_serializer=pb.StreamingMessage.SerializeToString),
        })
        self.server.add_generic_rpc_handlers((handler,))
        port = self.server.add_insecure_port("127.0.0.1:0")
        await self.server.start()
        return port

    async def _event_stream(self, request_iterator: Any, context: Any) -> Any:
        self._outbox = asyncio.Queue()
        reader = asyncio.create_task(self._read(request_iterator))
        self.connected.set()
        try:
            while True:
                msg = await self._outbox.get()
                if msg is None:  # close_stream(): end the RPC from the host side
                    return
                yield msg
        finally:
            reader.cancel()

    async def _read(self, request_iterator: Any) -> None:
        try:
            async for msg in request_iterator:
                self.all_received.append(msg)
                self.received.put(msg)
        finally:
            self.stream_ended.set()
            # Like a real host: when the worker half-closes, end the RPC too.
            if self._outbox is not None and self.close_on_half_close:
                self._outbox.put_nowait(None)

    # ---- blocking API for tests ------------------------------------------------------

    def send(self, msg: pb.StreamingMessage) -> None:
        assert self._outbox is not None, "no worker connected"
        self.loop.call_soon_threadsafe(self._outbox.put_nowait, msg)

    def close_stream(self) -> None:
        self.loop.call_soon_threadsafe(self._outbox.put_nowait, None)

    def recv(self, match: Callable[[pb.StreamingMessage], bool],
             timeout: float = TIMEOUT) -> pb.StreamingMessage:
        """The first message (buffered or new) for which match() is true."""
        for i, msg in enumerate(self.pending):
            if match(msg):
                return self.pending.pop(i)
        deadline = time.monotonic() + timeout
        while True:
            remaining = deadline - time.monotonic()
            if remaining <= 0:
                kinds = [m.WhichOneof("content") for m in self.pending]
                raise AssertionError(f"no matching message within {timeout}s; pending: {kinds}")
            try:
                msg = self.received.get(timeout=remaining)
            except queue.Empty:
                continue
            if match(msg):
                return msg
            self.pending.append(msg)

    def recv_kind(self, kind: str, timeout: float = TIMEOUT) -> pb.StreamingMessage:
        return self.recv(lambda m: m.WhichOneof("content") == kind, timeout)

    def next_id(self, prefix: str) -> str:
        return f"{prefix}-{next(self._ids)}"

    def init(self, app_dir: Path,
             capabilities: Optional[Dict[str, str]] = None) -> pb.WorkerInitResponse:
        msg = pb.StreamingMessage(request_id=self.next_id("init"))
        msg.worker_init_request.host_version = "test"
        msg.worker_init_request.function_app_directory = str(app_dir)
        msg.worker_init_request.capabilities.update(capabilities or {})
        self.send(msg)
        reply = self.recv(lambda m: m.request_id == msg.request_id)
        return reply.worker_init_response

    def reload(self, app_dir: Path, env: Dict[str, str],
               capabilities: Optional[Dict[str, str]] = None
               ) -> pb.FunctionEnvironmentReloadResponse:
        """Specialise the worker to the app in app_dir (FunctionEnvironmentReloadRequest)."""
        msg = pb.StreamingMessage(request_id=self.next_id("reload"))
        req = msg.function_environment_reload_request
        req.function_app_directory = str(app_dir)
        req.environment_variables.update(env)
        req.capabilities.update(capabilities or {})
        self.send(msg)
        reply = self.recv(lambda m: m.request_id == msg.request_id)
        return reply.function_environment_reload_response

    def load(self, function_id: str, name: str, directory: Path, script_file: Path,
             bindings: Dict[str, Tuple[str, int]], entry_point: str = "") -> pb.FunctionLoadResponse:
        msg = pb.StreamingMessage(request_id=self.next_id("load"))
        req = msg.function_load_request
        req.function_id = function_id
        md = req.metadata
        md.name, md.directory, md.script_file, md.entry_point = (
            name, str(directory), str(script_file), entry_point)
        for bname, (btype, direction) in bindings.items():
            md.bindings[bname].type = btype
            md.bindings[bname].direction = direction
        self.send(msg)
        reply = self.recv(lambda m: m.request_id == msg.request_id)
        return reply.function_load_response

    def invoke(self, function_id: str, inputs: Dict[str, pb.TypedData],
               invocation_id: Optional[str] = None,
               metadata: Optional[Dict[str, pb.TypedData]] = None) -> str:
        msg = pb.StreamingMessage()
        req = msg.invocation_request
        req.invocation_id = invocation_id or self.next_id("inv")
        req.function_id = function_id
        for name, data in inputs.items():
            req.input_data.add(name=name).data.CopyFrom(data)
        for name, data in (metadata or {}).items():
            req.trigger_metadata[name].CopyFrom(data)
        self.send(msg)
        return req.invocation_id

    def response(self, invocation_id: str, timeout: float = TIMEOUT) -> pb.InvocationResponse:
        return self.recv(lambda m: m.WhichOneof("content") == "invocation_response"
                         and m.invocation_response.invocation_id == invocation_id,
                         timeout).invocation_response

    def logs(self, invocation_id: Optional[str] = None) -> List[pb.RpcLog]:
        """RpcLogs received so far (optionally only those of one invocation)."""
        self._drain()
        return [m.rpc_log for m in self.all_received if m.WhichOneof("content") == "rpc_log"
                and (invocation_id is None or m.rpc_log.invocation_id == invocation_id)]

    def _drain(self) -> None:
        while True:
            try:
                self.pending.append(self.received.get_nowait())
            except queue.Empty:
                return

    def terminate(self, grace_period_ms: int) -> None:
        msg = pb.StreamingMessage()
        msg.worker_terminate.grace_period_ms = grace_period_ms
        self.send(msg)

    def cancel(self, invocation_id: str) -> None:
        msg = pb.StreamingMessage()
        msg.invocation_cancel.invocation_id = invocation_id
        self.send(msg)

    def close(self) -> None:
        if not self.thread.is_alive():
            return
        try:
            self._call(self.server.stop(0))
        finally:
            self.loop.call_soon_threadsafe(self.loop.stop)
            self.thread.join(TIMEOUT)


class WorkerProcess:
    """The real worker.py, started as the FaaST host would start it."""

    def __init__(self, host: FakeHost, app_dir: Path, log_dir: Path,
                 env: Optional[Dict[str, str]] = None, worker_id: str = "w-test",
                 preexec_fn: Optional[Callable[[], None]] = None) -> None:
        self.worker_id = worker_id
        self.stderr_path = log_dir / f"{worker_id}.stderr"
        full_env = dict(os.environ)
        full_env.update(env or {})
        with open(self.stderr_path, "wb") as err:
            self.proc = subprocess.Popen(
                [PYTHON, str(WORKER_PY), "--host", "127.0.0.1", "--port", str(host.port),
                 "--worker-id", worker_id],
                cwd=app_dir, env=full_env, stdin=subprocess.DEVNULL,
                stdout=err, stderr=err, preexec_fn=preexec_fn)

    def stderr(self) -> str:
        return self.stderr_path.read_text(errors="replace")

    def wait(self, timeout: float) -> int:
        return self.proc.wait(timeout)

    def kill(self) -> None:
        if self.proc.poll() is None:
            self.proc.kill()
            self.proc.wait(TIMEOUT)


class App:
    """A function app directory the tests write sample functions into."""

    def __init__(self, root: Path) -> None:
        self.root = root
        root.mkdir(parents=True, exist_ok=True)

    def write(self, relpath: str, code: str) -> Path:
        path = self.root / relpath
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(textwrap.dedent(code))
        return path


class Session:
    """A connected, initialised worker plus the host driving it."""

    def __init__(self, host: FakeHost, worker: WorkerProcess, app: App) -> None:
        self.host, self.worker, self.app = host, worker, app
        self.init: Optional[pb.WorkerInitResponse] = None

    def add_function(self, name: str, code: str,
                     bindings: Optional[Dict[str, Tuple[str, int]]] = None,
                     script: str = "__init__.py", entry_point: str = "",
                     expect_success: bool = True) -> pb.FunctionLoadResponse:
        """Write <app>/<name>/<script> and load it as function id "<name>"."""
        path = self.app.write(f"{name}/{script}", code)
        if bindings is None:
            bindings = {"req": ("httpTrigger", IN), "$return": ("http", OUT)}
        resp = self.host.load(name, name, path.parent, path, bindings, entry_point)
        if expect_success:
            assert resp.result.status == SUCCESS, resp.result.exception.message
        return resp

    def call(self, function_id: str, timeout: float = TIMEOUT,
             metadata: Optional[Dict[str, pb.TypedData]] = None,
             **inputs: pb.TypedData) -> pb.InvocationResponse:
        return self.host.response(self.host.invoke(function_id, inputs, metadata=metadata), timeout)


@pytest.fixture
def host() -> Iterable[FakeHost]:
    h = FakeHost()
    yield h
    h.close()


@pytest.fixture
def spawn(host: FakeHost, tmp_path: Path) -> Iterable[Callable[..., WorkerProcess]]:
    """Start worker processes against `host`; all are killed at teardown."""
    started: List[WorkerProcess] = []

    def start(app_dir: Optional[Path] = None, env: Optional[Dict[str, str]] = None,
              preexec_fn: Optional[Callable[[], None]] = None) -> WorkerProcess:
        app_dir = app_dir or (tmp_path / "app")
        app_dir.mkdir(exist_ok=True)
        w = WorkerProcess(host, app_dir, tmp_path, env, worker_id=f"w-{len(started) + 1}",
                          preexec_fn=preexec_fn)
        started.append(w)
        return w

    yield start
    for w in started:
        w.kill()


def start_session(host: FakeHost, spawn: Callable[..., WorkerProcess], app: App,
                  env: Optional[Dict[str, str]] = None,
                  capabilities: Optional[Dict[str, str]] = None,
                  preexec_fn: Optional[Callable[[], None]] = None) -> Session:
    worker = spawn(app.root, env, preexec_fn)
    connect(host, worker)
    init = host.init(app.root, capabilities)
    assert init.result.status == SUCCESS
    session = Session(host, worker, app)
    session.init = init
    return session


@pytest.fixture
def session(host: FakeHost, spawn: Callable[..., WorkerProcess], tmp_path: Path) -> Session:
    return start_session(host, spawn, App(tmp_path / "app"))


# ---- shared memory (the cachelet's /dev/shm directory) ---------------------------------

SHM_MIN_BYTES = 1024


@pytest.fixture
def shm_dir() -> Iterable[Path]:
    """A fresh directory under /dev/shm, as the host would create for an app; removed after."""
    path = Path(f"/dev/shm/faast-pytest-{os.getpid()}-{uuid.uuid4().hex[:12]}")
    path.mkdir(mode=0o700)
    yield path
    shutil.rmtree(path, ignore_errors=True)


def shm_capabilities(directory: Path, min_bytes: int = SHM_MIN_BYTES) -> Dict[str, str]:
    return {"shared_memory": "1", "shared_memory_dir": str(directory),
            "shared_memory_min_bytes": str(min_bytes)}


@pytest.fixture
def shm_session(host: FakeHost, spawn: Callable[..., WorkerProcess], tmp_path: Path,
                shm_dir: Path) -> Session:
    """A worker that accepted shared memory in shm_dir (threshold SHM_MIN_BYTES)."""
    s = start_session(host, spawn, App(tmp_path / "app"),
                      capabilities=shm_capabilities(shm_dir))
    assert s.init is not None and s.init.capabilities.get("shared_memory") == "1"
    s.shm_dir = shm_dir  # type: ignore[attr-defined]
    return s


def shm_blob(segment: str, offset: int, length: int, name: str = "c/cached.bin",
             version: str = '"0x8D1"') -> pb.TypedData:
    """A BlobData whose content is a SharedMemoryRef, as the cachelet sends it."""
    td = pb.TypedData()
    td.blob.name, td.blob.uri, td.blob.length, td.blob.etag = (
        name, f"http://blobs/{name}", length, version)
    ref = td.blob.shared_memory
    ref.segment, ref.offset, ref.length, ref.version = segment, offset, length, version
    return td


def worker_open_paths(pid: int) -> List[str]:
    """Paths the process has open (fds) or mapped (/proc/<pid>/maps)."""
    paths = []
    fd_dir = Path(f"/proc/{pid}/fd")
    for fd in fd_dir.iterdir():
        try:
            paths.append(os.readlink(fd))
        except OSError:
            pass  # closed meanwhile
    for line in Path(f"/proc/{pid}/maps").read_text().splitlines():
        parts = line.split(None, 5)
        if len(parts) == 6:
            paths.append(parts[5])
    return paths


def connect(host: FakeHost, worker: Optional[WorkerProcess]) -> pb.StartStream:
    """Wait for the worker's StartStream; fail fast (with its stderr) if it dies."""
    deadline = time.monotonic() + 10
    while True:
        try:
            return host.recv_kind("start_stream", timeout=0.2).start_stream
        except AssertionError:
            if worker is not None and worker.proc.poll() is not None:
                raise AssertionError(f"worker exited with {worker.proc.returncode}:\n"
                                     f"{worker.stderr()}") from None
            if time.monotonic() > deadline:
                raise


# ---- TypedData builders ----------------------------------------------------------------

def http(method: str = "GET", url: str = "http://localhost/api/f", *,
         headers: Optional[Dict[str, str]] = None, query: Optional[Dict[str, str]] = None,
         params: Optional[Dict[str, str]] = None, body: Optional[bytes] = None) -> pb.TypedData:
    td = pb.TypedData()
    h = td.http
    h.method, h.url = method, url
    h.headers.update(headers or {})
    h.query.update(query or {})
    h.params.update(params or {})
    if body is not None:
        h.body.bytes = body
    return td


def blob(content: bytes, name: str = "c/b.txt", uri: str = "http://blobs/c/b.txt") -> pb.TypedData:
    td = pb.TypedData()
    td.blob.name, td.blob.uri, td.blob.length = name, uri, len(content)
    td.blob.bytes = content
    return td


def typed(**kw: Any) -> pb.TypedData:
    return pb.TypedData(**kw)
