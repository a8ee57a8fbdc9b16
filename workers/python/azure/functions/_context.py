from __future__ import annotations

import threading
from typing import Any, Dict, Optional

# One thread-local shared by every invocation, as in Azure Functions: a thread the
# function starts can set `context.thread_local_storage.invocation_id` so that its
# `logging` calls are attributed to the invocation.
_thread_local_storage = threading.local()


class TraceContext:
    """Distributed-tracing context (W3C traceparent/tracestate)."""

    def __init__(self, trace_parent: str = "", trace_state: str = "",
                 attributes: Optional[Dict[str, str]] = None) -> None:
        self._trace_parent = trace_parent
        self._trace_state = trace_state
        self._attributes = dict(attributes or {})

    @property
    def trace_parent(self) -> str:
        return self._trace_parent

    @property
    def trace_state(self) -> str:
        return self._trace_state

    @property
    def attributes(self) -> Dict[str, str]:
        return self._attributes


class RetryContext:
    """Retry state of an invocation (retry policies)."""

    def __init__(self, retry_count: int = 0, max_retry_count: int = 0,
                 exception: Any = None) -> None:
        self._retry_count = retry_count
        self._max_retry_count = max_retry_count
        self._exception = exception

    @property
    def retry_count(self) -> int:
        return self._retry_count

    @property
    def max_retry_count(self) -> int:
        return self._max_retry_count

    @property
    def exception(self) -> Any:
        return self._exception


class Context:
    """Function invocation context, passed to a parameter named `context`."""

    __slots__ = ("_invocation_id", "_function_name", "_function_directory",
                 "_trace_context", "_retry_context")

    def __init__(self, invocation_id: str, function_name: str, function_directory: str,
                 trace_context: Optional[TraceContext] = None,
                 retry_context: Optional[RetryContext] = None) -> None:
        self._invocation_id = invocation_id
        self._function_name = function_name
        self._function_directory = function_directory
        self._trace_context = trace_context
        self._retry_context = retry_context

    @property
    def invocation_id(self) -> str:
        return self._invocation_id

    @property
    def function_name(self) -> str:
        return self._function_name

    @property
    def function_directory(self) -> str:
        return self._function_directory

    @property
    def trace_context(self) -> Optional[TraceContext]:
        return self._trace_context

    @property
    def retry_context(self) -> Optional[RetryContext]:
        return self._retry_context

    @property
    def thread_local_storage(self) -> threading.local:
        return _thread_local_storage

    def __repr__(self) -> str:
        return (f"<azure.functions.Context function_name={self._function_name!r} "
                f"invocation_id={self._invocation_id!r}>")
