"""The worker side of the EventStream: dials the host, answers its requests and runs
invocations concurrently (async functions as tasks, sync ones on a thread pool)."""
from __future__ import annotations

import asyncio
import functools
import logging
import os
import threading
from dataclasses import dataclass
from typing import Any, Dict, Optional, Tuple, Union

import grpc

from . import __version__, heap, indexer, invoker, loader, logs, shm
from .pool import ContextCopyingExecutor, Job, SyncPool
from .protos import FAILURE, METHOD, SUCCESS, StreamingMessage, pb

log = logging.getLogger("faast_worker.channel")

PARENT_CHECK_INTERVAL_S = 0.5
CONNECT_TIMEOUT_S = float(os.environ.get("FAAST_WORKER_CONNECT_TIMEOUT", "30"))
# After WorkerTerminate: how long to wait for the host to close its side of the stream.
CLOSE_WAIT_S = 0.5
# The host starts Python workers with malloc tuned to keep a grown heap between
# invocations (see WorkerOptions.PythonMallocTunables); after this long with nothing
# running, the worker gives the free part of its heap back to the OS.
IDLE_TRIM_S = float(os.environ.get("FAAST_WORKER_IDLE_TRIM_S", "1"))

# invocation id -> (function, its task or pool future)
Inflight = Tuple[loader.FunctionInfo, Union[asyncio.Task, Job]]


@dataclass(frozen=True)
class Options:
    host: str
    port: int
    worker_id: str
    max_message_length: int
    threads: int
    debug_logging: bool
    parent_pid: int


class Worker:
    def __init__(self, options: Options) -> None:
        self.options = options
        self.functions: Dict[str, loader.FunctionInfo] = {}
        self.load_errors: Dict[str, str] = {}
        self.inflight: Dict[str, Inflight] = {}
        self.accepting = True
        self.terminating = False
        self.pool: SyncPool
        self.log_handler = logs.RpcLogHandler(self._category_of)
        # Set in run(), on the loop.
        self.loop: asyncio.AbstractEventLoop
        self.loop_thread = 0
        self.outbox: "asyncio.Queue[Any]"
        self.exit_code: "asyncio.Future[int]"
        self.idle: Optional[asyncio.Event] = None
        self.stream_closed: asyncio.Event
        self.call: Any = None
        self._background: set = set()  # strong refs: the loop only keeps weak ones
        self._idle_trim: Optional[asyncio.TimerHandle] = None

    # ---- lifecycle ---------------------------------------------------------------

    async def run(self) -> int:
        """Run until the worker should exit; returns the exit code."""
        self.loop = asyncio.get_running_loop()
        self.loop_thread = threading.get_ident()
        self.outbox = asyncio.Queue()
        self.exit_code = self.loop.create_future()
        self.stream_closed = asyncio.Event()
        # The heap is trimmed after a sync invocation's response is on its way (heap.py: ~10 ms for 190 MiB freed).
        self.pool = SyncPool(self.options.threads, self.loop, self._deliver_sync,
                             after_job=heap.after_invocation)
        self.loop.set_default_executor(ContextCopyingExecutor(thread_name_prefix="faast-default"))
        logs.configure(self.log_handler, self.options.debug_logging)
        self._spawn(self._watch_parent())

        opts = self.options
        channel = grpc.aio.insecure_channel(f"{opts.host}:{opts.port}", options=[
            ("grpc.max_send_message_length", opts.max_message_length),
            ("grpc.max_receive_message_length", opts.max_message_length),
            ("grpc.enable_http_proxy", 0),  # never route loopback traffic via a proxy
            # One long-lived stream: replaying it on a new stream would be wrong, and the
            # retry machinery would buffer every message until the host answers.
            ("grpc.enable_retries", 0),
            # Start with a large stream window instead of HTTP/2's 64 KiB, so a big blob
            # does not wait on window updates while BDP probing catches up.
            ("grpc.http2.lookahead_bytes", 16 * 1024 * 1024),
            ("grpc.primary_user_agent", f"faast-python-worker/{__version__}"),
        ])
        self._spawn(self._connect(channel))
        return await self.exit_code

    def _spawn(self, coro: Any) -> None:
        task = asyncio.create_task(coro)
        self._background.add(task)
        task.add_done_callback(self._background.discard)

    def finish(self, code: int) -> None:
        if not self.exit_code.done():
            self.exit_code.set_result(code)

    async def _connect(self, channel: grpc.aio.Channel) -> None:
        opts = self.options
        try:
            await asyncio.wait_for(channel.channel_ready(), CONNECT_TIMEOUT_S)
        except asyncio.TimeoutError:
            log.error("cannot connect to the host at %s:%s within %g s",
                      opts.host, opts.port, CONNECT_TIMEOUT_S)
            self.finish(1)
            return
        self.call = channel.stream_stream(
            METHOD,
            request_serializer=StreamingMessage.SerializeToString,
            response_deserializer=StreamingMessage.FromString,
        )()
        self.log_handler.send = self.send
        start = StreamingMessage()
        start.start_stream.worker_id = opts.worker_id
        self.outbox.put_nowait(start)
        self._spawn(self._writer())
        await self._reader()

    async def _watch_parent(self) -> None:
        # A worker must never outlive its host, even if the stream somehow stays up.
        parent = self.options.parent_pid
        while True:
            await asyncio.sleep(PARENT_CHECK_INTERVAL_S)
            if os.getppid() != parent:
                log.error("host process %d is gone; exiting", parent)
                self.finish(1)
                return

    # ---- stream I/O --------------------------------------------------------------

    def send(self, msg: Any) -> None:
        """Queue a message for the host; callable from any thread."""
        if threading.get_ident() == self.loop_thread:
            self.outbox.put_nowait(msg)
        else:
            try:
                self.loop.call_soon_threadsafe(self.outbox.put_nowait, msg)
            except RuntimeError:  # loop closed: the worker is exiting
                pass

    async def _writer(self) -> None:
        outbox, call = self.outbox, self.call
        try:
            while True:
                item = await outbox.get()
                if isinstance(item, asyncio.Future):  # flush marker
                    if not item.done():
                        item.set_result(None)
                    continue
                await call.write(item)
        except Exception as exc:  # the stream is broken
            if not self.terminating:
                log.error("writing to the host failed: %s", _short(exc))
                self.finish(1)

    async def _flush(self) -> None:
        marker = self.loop.create_future()
        self.outbox.put_nowait(marker)
        await marker

    async def _reader(self) -> None:
        call = self.call
        handlers = {
            "invocation_request": self._on_invocation,
            "invocation_cancel": self._on_cancel,
            "function_load_request": self._on_load,
            "worker_init_request": self._on_init,
            "function_environment_reload_request": self._on_environment_reload,
            "worker_terminate": self._on_terminate,
            "shared_memory_released": self._on_released,
            "functions_metadata_request": self._on_metadata,
        }
        try:
            while True:
                msg = await call.read()
                if msg is grpc.aio.EOF:
                    reason = "the host closed the stream"
                    break
                kind = msg.WhichOneof("content")
                handler = handlers.get(kind)  # type: ignore[arg-type]
                if handler is None:
                    log.warning("ignoring unexpected message %r from the host", kind)
                    continue
                try:
                    handler(msg)
                except Exception:
                    log.exception("failed to handle %s", kind)
        except Exception as exc:
            reason = f"the stream broke: {_short(exc)}"
        self.stream_closed.set()
        if not self.terminating:
            log.error("%s; exiting", reason)
            self.finish(1)

    # ---- host requests -----------------------------------------------------------

    def _on_init(self, msg: "pb.StreamingMessage") -> None:
        req = msg.worker_init_request
        loader.add_app_paths(req.function_app_directory or os.getcwd())
        out = StreamingMessage(request_id=msg.request_id)
        resp = out.worker_init_response
        resp.worker_version = __version__
        _negotiate(resp.capabilities, req.capabilities)
        resp.result.status = SUCCESS
        self.send(out)

    def _on_environment_reload(self, msg: "pb.StreamingMessage") -> None:
        """Specialise to an app (a standby worker, or one started for it, alike): take the
        app's environment and directory, size the thread pool from its settings, and
        negotiate its capabilities as at init. Comes before any function load."""
        req = msg.function_environment_reload_request
        out = StreamingMessage(request_id=msg.request_id)
        resp = out.function_environment_reload_response
        try:
            os.environ.clear()
            os.environ.update(req.environment_variables)
            if req.function_app_directory:
                os.chdir(req.function_app_directory)
                loader.add_app_paths(req.function_app_directory)
            from .main import thread_count  # reads PYTHON_THREADPOOL_THREAD_COUNT
            self.pool.resize(thread_count())
            logging.getLogger().setLevel(
                logging.DEBUG if os.environ.get("PYTHON_ENABLE_DEBUG_LOGGING", "").lower()
                in ("1", "true") else logging.INFO)
            _negotiate(resp.capabilities, req.capabilities)
            resp.result.status = SUCCESS
        except Exception as exc:
            log.exception("environment reload failed")
            resp.result.status = FAILURE
            resp.result.exception.CopyFrom(logs.exception_proto(exc, "faast-python-worker"))
            resp.result.exception.message = (
                f"environment reload to '{req.function_app_directory}' failed: "
                f"{type(exc).__name__}: {exc}")
        self.send(out)

    def _on_metadata(self, msg: "pb.StreamingMessage") -> None:
        """Worker indexing (Python v2): the functions function_app.py registers, or
        use_default_metadata_indexing for a function.json app (faast_worker/indexer.py)."""
        req = msg.functions_metadata_request
        out = StreamingMessage(request_id=msg.request_id)
        indexer.metadata_response(req.function_app_directory or os.getcwd(), out.function_metadata_response)
        resp = out.function_metadata_response
        if resp.result.status == FAILURE:
            self.send(logs.make_log("", "Worker.Indexing", pb.RpcLog.ERROR,
                                    f"Indexing the app failed: {resp.result.result}"))
        self.send(out)

    def _on_load(self, msg: "pb.StreamingMessage") -> None:
        req = msg.function_load_request
        name = req.metadata.name
        out = StreamingMessage(request_id=msg.request_id)
        resp = out.function_load_response
        resp.function_id = req.function_id
        # Logging done by the module at import time is labelled with the function.
        token = logs.CURRENT.set(("", logs.user_category(name)))
        try:
            fi = loader.load_function(req.function_id, req.metadata)
        except Exception as exc:
            if isinstance(exc, loader.FunctionLoadError):
                message, cause = str(exc), exc.__cause__ or exc
            else:
                message, cause = f"function '{name}': {type(exc).__name__}: {exc}", exc
            ex = logs.exception_proto(cause, name)
            ex.message = message
            self.load_errors[req.function_id] = message
            resp.result.status = FAILURE
            resp.result.exception.CopyFrom(ex)
            self.send(logs.make_log("", f"Function.{name}", pb.RpcLog.ERROR,
                                    f"Loading function failed: {message}", ex))
        else:
            self.functions[req.function_id] = fi
            self.load_errors.pop(req.function_id, None)
            resp.result.status = SUCCESS
        finally:
            logs.CURRENT.reset(token)
        self.send(out)

    def _on_released(self, msg: "pb.StreamingMessage") -> None:
        shm.release(msg.shared_memory_released.segments)

    def _on_invocation(self, msg: "pb.StreamingMessage") -> None:
        if self._idle_trim is not None:
            self._idle_trim.cancel()
            self._idle_trim = None
        req = msg.invocation_request
        inv_id = req.invocation_id
        fi = self.functions.get(req.function_id)
        if fi is None or not self.accepting:
            self._reject(req)
            return
        if fi.is_async:
            task = self.loop.create_task(invoker.run_async(fi, req))
            task.add_done_callback(functools.partial(self._async_done, inv_id, fi.name))
            self.inflight[inv_id] = (fi, task)
        else:
            self.inflight[inv_id] = (fi, self.pool.submit(invoker.run_sync, fi, req))

    def _deliver_sync(self, msgs: Tuple[Any, ...]) -> None:
        # The response is always last and carries the invocation id.
        self._complete(msgs[-1].invocation_response.invocation_id, msgs)

    def _async_done(self, inv_id: str, source: str, task: asyncio.Task) -> None:
        if task.cancelled():  # cancelled before the coroutine started
            msgs: Tuple[Any, ...] = (invoker.cancelled(inv_id, source),)
        else:
            msgs = task.result()
        self._complete(inv_id, msgs)

    def _complete(self, inv_id: str, msgs: Tuple[Any, ...]) -> None:
        self.inflight.pop(inv_id, None)
        put = self.outbox.put_nowait
        for m in msgs:
            put(m)
        if not self.inflight:
            if self.idle is not None:
                self.idle.set()
            if self._idle_trim is None and _malloc_trim is not None:
                self._idle_trim = self.loop.call_later(IDLE_TRIM_S, self._trim_heap)

    def _trim_heap(self) -> None:
        self._idle_trim = None
        if not self.inflight:
            _malloc_trim(0)  # type: ignore[misc]

    def _reject(self, req: "pb.InvocationRequest") -> None:
        if not self.accepting:
            text = "the worker is shutting down"
        elif req.function_id in self.load_errors:
            text = f"function failed to load: {self.load_errors[req.function_id]}"
        else:
            text = f"no function with id '{req.function_id}' is loaded"
        self.send(invoker.failure(req.invocation_id, pb.RpcException(
            source="faast-python-worker", message=text)))

    def _on_cancel(self, msg: "pb.StreamingMessage") -> None:
        inv_id = msg.invocation_cancel.invocation_id
        entry = self.inflight.get(inv_id)
        if entry is None:
            return
        running = entry[1]
        if isinstance(running, asyncio.Task):
            running.cancel()  # _async_done / run_async reply CANCELLED
        elif self.pool.cancel(running):  # sync and not started yet; a running one can't be stopped
            self._complete(inv_id, (invoker.cancelled(inv_id, "faast-python-worker"),))

    def _on_terminate(self, msg: "pb.StreamingMessage") -> None:
        if not self.terminating:
            self.terminating = True
            self.accepting = False
            self._spawn(self._terminate(msg.worker_terminate.grace_period_ms / 1000))

    async def _terminate(self, grace_s: float) -> None:
        if self.inflight:
            self.idle = asyncio.Event()
            try:
                await asyncio.wait_for(self.idle.wait(), max(grace_s, 0))
            except asyncio.TimeoutError:
                log.warning("%d invocation(s) still running after the grace period",
                            len(self.inflight))
        if not self.stream_closed.is_set():
            try:
                await asyncio.wait_for(self._flush(), CLOSE_WAIT_S)
                await asyncio.wait_for(self.call.done_writing(), CLOSE_WAIT_S)
                # Wait for the host's end of the stream, so that nothing we sent is lost.
                await asyncio.wait_for(self.stream_closed.wait(), CLOSE_WAIT_S)
            except Exception as exc:  # timeouts, or the stream broke meanwhile
                log.warning("closing the stream: %s", _short(exc))
        self.finish(0)

    # ---- logging -----------------------------------------------------------------

    def _category_of(self, invocation_id: str) -> Optional[str]:
        """Log category of a running invocation (for threads using thread_local_storage)."""
        entry = self.inflight.get(invocation_id)
        return entry[0].log_category if entry is not None else None


def _find_malloc_trim() -> Any:
    try:
        import ctypes
        return ctypes.CDLL(None).malloc_trim  # glibc
    except (OSError, AttributeError):
        return None


_malloc_trim = _find_malloc_trim()


def _short(exc: BaseException) -> str:
    if isinstance(exc, grpc.aio.AioRpcError):
        return f"{exc.code().name}: {exc.details()}"
    return f"{type(exc).__name__}: {exc}"


def _negotiate(answer, offered) -> None:
    """The worker's capabilities for what the host offers, at init and again at an environment
    reload (a standby worker learns the app's shared-memory directory only then)."""
    answer["concurrent"] = "1"
    cfg, why = shm.negotiate(dict(offered))
    shm.configure(cfg)
    if cfg is not None:
        answer[shm.CAPABILITY] = "1"
        if cfg.keep_mappings:
            answer[shm.RELEASE_CAPABILITY] = "1"
        if offered.get(shm.STREAMING_CAPABILITY) == "1":
            # InputStream reads a streamed input as it fills; bytes/str inputs wait for all of it.
            answer[shm.STREAMING_CAPABILITY] = "1"
        log.info("%s", why)
    elif why:
        log.warning("%s", why)
