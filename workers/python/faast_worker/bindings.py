"""Conversions between TypedData and Python values, chosen once per parameter at
function load time so that an invocation only calls the chosen converter."""
from __future__ import annotations

import collections.abc
import datetime
import json
import re
import typing
from typing import Any, Callable, Optional

import azure.functions as func

from . import shm
from .protos import pb

Decoder = Callable[["pb.TypedData"], Any]


class BindingError(Exception):
    """An input could not be converted for the function's parameter."""


def _shm_view(blob: "pb.BlobData") -> memoryview:
    ref = blob.shared_memory
    try:
        return shm.view(ref)
    except shm.ShmError as exc:
        what = f"blob '{blob.name}'" if blob.name else "blob"
        raise BindingError(f"{what} in shared memory segment '{ref.segment}': {exc}") from None


def _wait_filled(blob: "pb.BlobData") -> None:
    """A streamed input (still downloading) read whole: wait for all of it."""
    try:
        f = shm.fill(blob.shared_memory, blob.name)
    except shm.ShmError as exc:
        raise BindingError(str(exc)) from None
    if f is not None:
        f.wait(blob.shared_memory.length)


def blob_bytes(blob: "pb.BlobData") -> bytes:
    kind = blob.WhichOneof("content")
    if kind == "bytes" or kind is None:
        return blob.bytes
    _wait_filled(blob)
    view = _shm_view(blob)
    try:
        return view.tobytes()  # the one copy out of the mapping
    finally:
        view.release()


def blob_str(blob: "pb.BlobData") -> str:
    if blob.WhichOneof("content") != "shared_memory":
        return blob_bytes(blob).decode("utf-8")
    _wait_filled(blob)
    view = _shm_view(blob)
    try:
        return str(view, "utf-8")  # decoded straight from the mapping
    finally:
        view.release()


def http_body_bytes(body: "pb.TypedData") -> bytes:
    kind = body.WhichOneof("data")
    if kind == "bytes":
        return body.bytes
    if kind == "string":
        return body.string.encode("utf-8")
    if kind == "json":
        return body.json.encode("utf-8")
    if kind is None:
        return b""
    raise BindingError(f"unsupported HTTP body data: {kind}")


def to_http_request(td: "pb.TypedData") -> func.HttpRequest:
    h = td.http
    return func.HttpRequest(h.method, h.url, headers=h.headers, params=h.query,
                            route_params=h.params, body=http_body_bytes(h.body))


def to_input_stream(td: "pb.TypedData") -> func.InputStream:
    kind = td.WhichOneof("data")
    if kind == "blob":
        b = td.blob
        if b.WhichOneof("content") == "shared_memory":
            view = _shm_view(b)
            try:
                # Still downloading: the stream reads as far as the bytes have arrived.
                progress = shm.fill(b.shared_memory, b.name)
            except shm.ShmError as exc:
                raise BindingError(str(exc)) from None
            stream = func.InputStream(data=view, name=b.name or None, uri=b.uri or None,
                                      length=b.length or len(view), fill=progress)
            shm.current_scope().streams.append(stream)  # released when the invocation ends
            return stream
        data = blob_bytes(b)
        return func.InputStream(data=data, name=b.name or None, uri=b.uri or None,
                                length=b.length if b.length or not data else len(data))
    data = to_bytes(td)
    return func.InputStream(data=data, length=len(data))


def to_bytes(td: "pb.TypedData") -> bytes:
    kind = td.WhichOneof("data")
    if kind == "bytes":
        return td.bytes
    if kind == "blob":
        return blob_bytes(td.blob)
    if kind == "string":
        return td.string.encode("utf-8")
    if kind == "json":
        return td.json.encode("utf-8")
    if kind == "http":
        return http_body_bytes(td.http.body)
    raise BindingError(f"cannot convert {kind} data to bytes")


def to_str(td: "pb.TypedData") -> str:
    kind = td.WhichOneof("data")
    if kind == "string":
        return td.string
    if kind == "json":
        return td.json
    if kind == "blob":
        return blob_str(td.blob)
    return to_bytes(td).decode("utf-8")


def to_json(td: "pb.TypedData") -> Any:
    kind = td.WhichOneof("data")
    if kind == "json":
        return json.loads(td.json)
    if kind == "string":
        return json.loads(td.string)
    return json.loads(to_bytes(td))


def to_auto(td: "pb.TypedData") -> Any:
    """Unannotated parameter: the natural Python type of the data."""
    kind = td.WhichOneof("data")
    if kind == "http":
        return to_http_request(td)
    if kind == "blob":
        return to_input_stream(td)
    if kind == "bytes":
        return td.bytes
    if kind == "string":
        return td.string
    if kind == "json":
        return json.loads(td.json)
    return None


_FRACTION = re.compile(r"(\.\d{6})\d+")


def _meta_time(metadata: Any, key: str) -> Optional[datetime.datetime]:
    td = metadata.get(key) if metadata is not None else None
    if td is None or td.WhichOneof("data") is None:
        return None
    text = to_str(td).strip('"')
    # The host sends ISO 8601 with 7 fractional digits; datetime takes at most 6.
    text = _FRACTION.sub(r"\1", text).replace("Z", "+00:00")
    try:
        return datetime.datetime.fromisoformat(text)
    except ValueError:
        return None


def _meta_str(metadata: Any, key: str) -> Optional[str]:
    td = metadata.get(key) if metadata is not None else None
    if td is None or td.WhichOneof("data") is None:
        return None
    return to_str(td)


def to_queue_message(td: "pb.TypedData", metadata: Any = None) -> func.QueueMessage:
    """A queueTrigger's message with its metadata (the invocation's trigger metadata)."""
    count = _meta_str(metadata, "DequeueCount")
    return func.QueueMessage(
        id=_meta_str(metadata, "Id"),
        body=to_bytes(td),
        pop_receipt=_meta_str(metadata, "PopReceipt"),
        dequeue_count=int(count) if count is not None and count.isdigit() else None,
        expiration_time=_meta_time(metadata, "ExpirationTime"),
        insertion_time=_meta_time(metadata, "InsertionTime"),
        time_next_visible=_meta_time(metadata, "NextVisibleTime"),
    )


to_queue_message.with_metadata = True  # type: ignore[attr-defined]


def to_timer_request(td: "pb.TypedData") -> func.TimerRequest:
    """A timerTrigger's payload (JSON, as Azure's host sends it) for a func.TimerRequest parameter."""
    try:
        return func.TimerRequest._from_payload(to_json(td))
    except ValueError as e:
        raise BindingError(f"func.TimerRequest: {e}") from e


def _none_if_unset(decode: Decoder) -> Decoder:
    # Unset TypedData is null (e.g. a missing input blob) whatever the annotation.
    if getattr(decode, "with_metadata", False):
        def decoder_with_metadata(td: "pb.TypedData", metadata: Any = None) -> Any:
            if td.WhichOneof("data") is None:
                return None
            return decode(td, metadata)  # type: ignore[call-arg]
        decoder_with_metadata.__name__ = decode.__name__
        decoder_with_metadata.with_metadata = True  # type: ignore[attr-defined]
        return decoder_with_metadata

    def decoder(td: "pb.TypedData") -> Any:
        if td.WhichOneof("data") is None:
            return None
        return decode(td)
    decoder.__name__ = decode.__name__
    return decoder


_JSON_TYPES = (dict, list, int, float, bool)


def unwrap_optional(annotation: Any) -> Any:
    """Optional[X] -> X; other annotations unchanged."""
    if typing.get_origin(annotation) is typing.Union:
        args = [a for a in typing.get_args(annotation) if a is not type(None)]
        if len(args) == 1:
            return args[0]
    return annotation


def decoder_for(annotation: Any) -> Decoder:
    """Pick the converter for a parameter's (unwrapped) annotation."""
    ann = unwrap_optional(annotation)
    origin = typing.get_origin(ann) or ann
    if isinstance(origin, type):
        if issubclass(origin, func.HttpRequest):
            decode: Decoder = _http_only
        elif issubclass(origin, func.InputStream):
            decode = to_input_stream
        elif issubclass(origin, func.QueueMessage):
            decode = to_queue_message
        elif issubclass(origin, func.TimerRequest):
            decode = to_timer_request
        elif issubclass(origin, (bytes, bytearray)):
            decode = to_bytes
        elif issubclass(origin, str):
            decode = to_str
        elif issubclass(origin, _JSON_TYPES) or origin in (
                collections.abc.Mapping, collections.abc.Sequence):
            decode = to_json
        else:
            decode = to_auto
    else:
        decode = to_auto
    return _none_if_unset(decode)


def _http_only(td: "pb.TypedData") -> func.HttpRequest:
    kind = td.WhichOneof("data")
    if kind != "http":
        raise BindingError(f"expected http data for func.HttpRequest, got {kind}")
    return to_http_request(td)


def is_out_annotation(annotation: Any) -> bool:
    origin = typing.get_origin(annotation) or annotation
    return isinstance(origin, type) and issubclass(origin, func.Out)


def is_context_annotation(annotation: Any) -> bool:
    return isinstance(annotation, type) and issubclass(annotation, func.Context)


# ---- Python values -> TypedData -------------------------------------------------

def http_response_into(td: "pb.TypedData", resp: func.HttpResponse) -> None:
    h = td.http
    h.status_code = resp.status_code
    source = resp.headers
    if source:
        headers = h.headers
        names = {}  # lower-cased name -> the key it is sent under
        for k, v in source.items():
            v = v if isinstance(v, str) else str(v)
            low = k.lower()
            if low == "set-cookie":
                h.set_cookies.append(v)  # one header each: cookies cannot be comma-joined
                continue
            key = names.get(low)
            if key is None:
                names[low] = k
                headers[k] = v
            else:
                # A header added several times (HttpResponseHeaders.add) is sent as one
                # comma-separated list, which RFC 9110 §5.3 makes equivalent.
                headers[key] = f"{headers[key]}, {v}"
    if "content-type" not in source:
        mimetype = resp.mimetype
        h.headers["Content-Type"] = (f"{mimetype}; charset={resp.charset}"
                                     if mimetype.startswith("text/") else mimetype)
    body = resp.get_body()
    if body:
        h.body.bytes = body
    else:  # mark the body as present but empty
        h.body.bytes = b""


def encode_into(td: "pb.TypedData", value: Any) -> None:
    """Write value into td; None leaves td unset (null)."""
    if value is None:
        return
    if isinstance(value, str):
        td.string = value
    elif isinstance(value, bytes):
        td.bytes = value
    elif isinstance(value, func.HttpResponse):
        http_response_into(td, value)
    elif isinstance(value, func.QueueMessage):
        td.bytes = value.get_body()
    elif isinstance(value, (list, tuple)) and any(isinstance(v, func.QueueMessage) for v in value):
        # Several queue messages: a JSON array of their texts (the host sends one message per element).
        td.json = json.dumps([v.get_body().decode("utf-8") if isinstance(v, func.QueueMessage) else v
                              for v in value])
    elif isinstance(value, (bytearray, memoryview)):
        td.bytes = bytes(value)
    elif isinstance(value, _JSON_TYPES) or isinstance(value, tuple):
        td.json = json.dumps(value)
    elif callable(getattr(value, "read", None)):  # file-like, e.g. an InputStream
        encode_into(td, value.read())
    else:
        raise TypeError(f"cannot convert a value of type {type(value).__name__} "
                        f"to an output binding")


def encode_blob_output(td: "pb.TypedData", value: Any, written: "list") -> None:
    """Like encode_into, for a blob output binding: with shared memory on, a value of at
    least the negotiated size goes into a new file in the shared-memory directory and td
    refers to it (its name is appended to `written`); anything else is encoded inline."""
    cfg = shm.config()
    if cfg is None or value is None:
        encode_into(td, value)
        return
    if not isinstance(value, (str, bytes, bytearray, memoryview)) and callable(
            getattr(value, "read", None)):
        value = value.read()  # file-like, e.g. an InputStream
    if isinstance(value, str):
        # UTF-8 takes at most 4 bytes a character: skip the encoding for short strings.
        if len(value) * 4 < cfg.min_bytes:
            td.string = value
            return
        data: Any = value.encode("utf-8")
    elif isinstance(value, (bytes, bytearray)):
        data = value
    elif isinstance(value, memoryview):
        data = value if value.ndim == 1 and value.format in ("B", "b", "c") and \
            value.c_contiguous else value.tobytes()
    else:
        encode_into(td, value)
        return
    n = len(data)
    if n >= cfg.min_bytes:
        name = shm.write(data)
        if name is not None:
            written.append(name)
            blob = td.blob
            blob.length = n
            ref = blob.shared_memory
            ref.segment = name
            ref.offset = 0
            ref.length = n
            return
    if isinstance(value, str):
        td.string = value  # inline, as without shared memory
    else:
        encode_into(td, data)
