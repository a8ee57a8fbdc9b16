"""Routes `logging` records to the host as RpcLog messages.

Records are attributed to the invocation whose code emitted them through a ContextVar
(set around each invocation; asyncio tasks and asyncio.to_thread carry it along), or,
for threads a function starts itself, through context.thread_local_storage.invocation_id.
"""
from __future__ import annotations

import contextvars
import logging
import sys
import traceback
from typing import Callable, Optional, Tuple

from azure.functions._context import _thread_local_storage

from .protos import pb

# (invocation_id, category) of the code running now; None outside any function.
CURRENT: contextvars.ContextVar[Optional[Tuple[str, str]]] = contextvars.ContextVar(
    "faast_invocation", default=None)

_LEVELS = (
    (logging.CRITICAL, pb.RpcLog.CRITICAL),
    (logging.ERROR, pb.RpcLog.ERROR),
    (logging.WARNING, pb.RpcLog.WARNING),
    (logging.INFO, pb.RpcLog.INFORMATION),
    (logging.DEBUG, pb.RpcLog.DEBUG),
)


def rpc_level(levelno: int) -> int:
    for threshold, level in _LEVELS:
        if levelno >= threshold:
            return level
    return pb.RpcLog.TRACE


def user_category(function_name: str) -> str:
    return f"Function.{function_name}.User"


def safe_str(exc: BaseException) -> str:
    try:
        return str(exc)
    except Exception:  # a user exception whose __str__ itself fails
        return f"<{type(exc).__name__}.__str__ failed>"


def exception_proto(exc: BaseException, source: str, skip_frames: int = 0) -> "pb.RpcException":
    """RpcException for exc: message "<Type>: <msg>", stack trace without the first
    skip_frames frames (the worker's own call site)."""
    tb = exc.__traceback__
    for _ in range(skip_frames):
        if tb is not None and tb.tb_next is not None:
            tb = tb.tb_next
    return pb.RpcException(
        source=source,
        message=f"{type(exc).__name__}: {safe_str(exc)}",
        stack_trace="".join(traceback.format_exception(type(exc), exc, tb)),
    )


def make_log(invocation_id: str, category: str, level: int, message: str,
             exception: Optional["pb.RpcException"] = None) -> "pb.StreamingMessage":
    msg = pb.StreamingMessage()
    log = msg.rpc_log
    log.invocation_id = invocation_id
    log.category = category
    log.level = level
    log.message = message
    if exception is not None:
        log.exception.CopyFrom(exception)
    return msg


class RpcLogHandler(logging.Handler):
    """Turns log records into RpcLog messages handed to `send` (thread-safe)."""

    def __init__(self, lookup_category: Callable[[str], Optional[str]]) -> None:
        super().__init__()
        self.send: Optional[Callable[["pb.StreamingMessage"], None]] = None
        self._lookup_category = lookup_category

    def emit(self, record: logging.LogRecord) -> None:
        send = self.send
        if send is None:
            return
        try:
            current = CURRENT.get()
            if current is None:
                inv_id = getattr(_thread_local_storage, "invocation_id", None)
                category = self._lookup_category(inv_id) if inv_id else None
                current = (inv_id, category) if category else ("", record.name)
            exception = None
            if record.exc_info and record.exc_info[1] is not None:
                exception = exception_proto(record.exc_info[1], record.name)
            send(make_log(current[0], current[1], rpc_level(record.levelno),
                          self.format(record), exception))
        except Exception:  # a broken log record must never break the function
            self.handleError(record)


def configure(handler: RpcLogHandler, debug: bool) -> None:
    root = logging.getLogger()
    root.setLevel(logging.DEBUG if debug else logging.INFO)
    root.addHandler(handler)
    # The worker's own warnings also go to stderr: they matter most when the
    # channel (and so RpcLog) is down.
    err = logging.StreamHandler(sys.stderr)
    err.setLevel(logging.WARNING)
    err.setFormatter(logging.Formatter("faast-python-worker[%(process)d] %(levelname)s: %(message)s"))
    logging.getLogger("faast_worker").addHandler(err)
