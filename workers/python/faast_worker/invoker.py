"""Runs one invocation: binds arguments, calls the function, builds the response.

The same code serves sync functions (on a pool thread) and async ones (in a task on
the event loop); everything here is per-invocation hot path, so it stays lean.
"""
from __future__ import annotations

import asyncio
import logging
from typing import Any, Dict, List, Tuple

import azure.functions as func
from azure.functions._form import FormDataError

from . import heap, loader, shm
from .bindings import BindingError, encode_blob_output, encode_into
from .logs import CURRENT, exception_proto, make_log
from .protos import CANCELLED, FAILURE, SUCCESS, pb

log = logging.getLogger("faast_worker.invoker")


def bind(fi: loader.FunctionInfo, req: "pb.InvocationRequest") -> Dict[str, Any]:
    inputs = {b.name: b.data for b in req.input_data}
    args: Dict[str, Any] = {}
    for p in fi.params:
        kind = p.kind
        if kind == loader.IN:
            td = inputs.get(p.name)
            if td is None:
                if p.has_default:
                    continue
                raise BindingError(
                    f"function '{fi.name}': parameter '{p.name}' has no input binding "
                    f"in this invocation and no default value")
            try:
                args[p.name] = (p.decode(td, req.trigger_metadata)  # type: ignore[misc,call-arg]
                                if p.with_metadata else p.decode(td))  # type: ignore[misc]
            except BindingError as exc:
                raise BindingError(f"function '{fi.name}': parameter '{p.name}': {exc}") from None
            except ValueError as exc:
                raise BindingError(
                    f"function '{fi.name}': parameter '{p.name}': cannot convert input: "
                    f"{type(exc).__name__}: {exc}") from None
        elif kind == loader.OUT:
            args[p.name] = func.Out()
        else:
            args[p.name] = func.Context(req.invocation_id, fi.name, fi.directory)
    return args


def success(fi: loader.FunctionInfo, invocation_id: str, args: Dict[str, Any],
            result: Any) -> "pb.StreamingMessage":
    msg = pb.StreamingMessage()
    resp = msg.invocation_response
    resp.invocation_id = invocation_id
    resp.result.status = SUCCESS
    blob_outputs = fi.blob_outputs
    written: List[str] = []  # shared-memory output files, handed to the host with msg
    try:
        if result is not None and fi.has_return:
            if "$return" in blob_outputs:
                encode_blob_output(resp.return_value, result, written)
            else:
                encode_into(resp.return_value, result)
        for name in fi.out_names:
            value = args[name].get()
            if value is not None:
                out = resp.output_data.add()
                out.name = name
                if name in blob_outputs:
                    encode_blob_output(out.data, value, written)
                else:
                    encode_into(out.data, value)
    except BaseException:
        if written:
            shm.discard(written)  # the invocation fails: nobody will take these over
        raise
    return msg


def failure(invocation_id: str, exception: "pb.RpcException",
            status: int = FAILURE) -> "pb.StreamingMessage":
    msg = pb.StreamingMessage()
    resp = msg.invocation_response
    resp.invocation_id = invocation_id
    resp.result.status = status
    resp.result.exception.CopyFrom(exception)
    return msg


def bad_request(fi: loader.FunctionInfo, invocation_id: str,
                exc: FormDataError) -> Tuple["pb.StreamingMessage", ...]:
    """A malformed form body the function did not handle (req.form / req.files raised):
    the client's fault, so the request is answered 400 with the parser's message (which
    names the part), and a WARNING log with the stack says where the function read it."""
    ex = exception_proto(exc, fi.name, skip_frames=1)
    text = (f"Executed '{fi.name}' (Bad request, Id={invocation_id}): answered 400: "
            f"{ex.message}")
    msg = pb.StreamingMessage()
    resp = msg.invocation_response
    resp.invocation_id = invocation_id
    resp.result.status = SUCCESS
    if fi.http_output == "$return":
        td = resp.return_value
    else:
        out = resp.output_data.add()
        out.name = fi.http_output
        td = out.data
    h = td.http
    h.status_code = 400
    h.headers["Content-Type"] = "text/plain; charset=utf-8"
    h.body.bytes = f"Bad request: {exc}".encode("utf-8")
    return (make_log(invocation_id, f"Function.{fi.name}", pb.RpcLog.WARNING, text, ex), msg)


def error_messages(fi: loader.FunctionInfo, invocation_id: str,
                   exc: BaseException) -> Tuple["pb.StreamingMessage", ...]:
    """The ERROR RpcLog and the FAILURE response for an exception; a malformed form body
    of an HTTP function's request: a 400 response (bad_request)."""
    if isinstance(exc, FormDataError) and fi.http_output is not None:
        return bad_request(fi, invocation_id, exc)
    if isinstance(exc, BindingError):
        ex = pb.RpcException(source=fi.name, message=str(exc))
    else:
        # Skip the first frame: it is the worker's call into the function.
        ex = exception_proto(exc, fi.name, skip_frames=1)
    text = f"Executed '{fi.name}' (Failed, Id={invocation_id}): {ex.message}"
    return (make_log(invocation_id, f"Function.{fi.name}", pb.RpcLog.ERROR, text, ex),
            failure(invocation_id, ex))


def cancelled(invocation_id: str, source: str) -> "pb.StreamingMessage":
    ex = pb.RpcException(source=source, message="invocation cancelled")
    return failure(invocation_id, ex, CANCELLED)


def run_sync(fi: loader.FunctionInfo, req: "pb.InvocationRequest") -> Tuple["pb.StreamingMessage", ...]:
    """Runs on a pool thread; returns the messages to send. The pool trims the heap after it (heap.py)."""
    invocation_id = req.invocation_id
    token = CURRENT.set((invocation_id, fi.log_category))
    try:
        args = bind(fi, req)
        result = fi.func(**args)
        return (success(fi, invocation_id, args, result),)
    except BaseException as exc:  # incl. SystemExit: a function must not end the worker
        return error_messages(fi, invocation_id, exc)
    finally:
        shm.end_invocation()
        CURRENT.reset(token)


async def run_async(fi: loader.FunctionInfo, req: "pb.InvocationRequest") -> Tuple["pb.StreamingMessage", ...]:
    """Runs as its own task (own context copy, so CURRENT needs no reset)."""
    try:
        return await _run_async(fi, req)
    finally:
        # The invocation's arguments and result are gone (its frame has returned). The trim waits for the next turn
        # of the loop, after the task's done callback has sent the response (heap.py).
        asyncio.get_running_loop().call_later(0, heap.after_invocation)


async def _run_async(fi: loader.FunctionInfo, req: "pb.InvocationRequest") -> Tuple["pb.StreamingMessage", ...]:
    invocation_id = req.invocation_id
    CURRENT.set((invocation_id, fi.log_category))
    try:
        args = bind(fi, req)
        result = await fi.func(**args)
        return (success(fi, invocation_id, args, result),)
    except asyncio.CancelledError:
        return (cancelled(invocation_id, fi.name),)
    except BaseException as exc:
        return error_messages(fi, invocation_id, exc)
    finally:
        shm.end_invocation()
