"""Unit tests of the worker's azure.functions types."""
from __future__ import annotations

import http
import io
import json

import pytest

import conftest  # noqa: F401  (puts the worker directory on sys.path)
import azure.functions as func


def test_package_is_the_workers_copy() -> None:
    assert func.__file__.startswith(str(conftest.WORKER_DIR))


def test_http_request_basics() -> None:
    req = func.HttpRequest("post", "http://h/api/x?a=1",
                           headers={"Content-Type": "application/json", "X-Id": "9"},
                           params={"a": "1"}, route_params={"id": "x"},
                           body=b'{"k": [1, 2]}')
    assert req.method == "POST"
    assert req.url == "http://h/api/x?a=1"
    assert req.headers["content-type"] == "application/json"
    assert req.headers.get("X-ID") == "9" and "x-id" in req.headers
    assert req.headers.get("missing") is None
    assert dict(req.params) == {"a": "1"}
    assert req.route_params["id"] == "x"
    assert req.get_body() == b'{"k": [1, 2]}'
    assert req.get_json() == {"k": [1, 2]}


def test_http_request_mappings_are_read_only() -> None:
    req = func.HttpRequest("GET", "u", params={"a": "1"}, body=b"")
    with pytest.raises(TypeError):
        req.params["a"] = "2"  # type: ignore[index]
    with pytest.raises(TypeError):
        req.headers["x"] = "y"  # type: ignore[index]
    assert dict(req.route_params) == {} and len(req.headers) == 0


def test_http_request_body_str_and_bad_json() -> None:
    assert func.HttpRequest("GET", "u", body="é").get_body() == "é".encode()
    with pytest.raises(ValueError):
        func.HttpRequest("GET", "u", body=b"{nope").get_json()
    with pytest.raises(ValueError):
        func.HttpRequest("GET", "u", body=b"\xff\xfe").get_json()
    with pytest.raises(TypeError):
        func.HttpRequest("GET", "u", body=123)  # type: ignore[arg-type]


def test_http_response_defaults() -> None:
    resp = func.HttpResponse()
    assert resp.status_code == 200
    assert resp.get_body() == b""
    assert resp.mimetype == "text/plain" and resp.charset == "utf-8"
    assert dict(resp.headers) == {}


def test_http_response_body_and_options() -> None:
    resp = func.HttpResponse("ü", status_code=http.HTTPStatus.CREATED,
                             headers={"X-A": "1"}, mimetype="text/html", charset="latin-1")
    assert resp.status_code == 201
    assert resp.get_body() == "ü".encode("latin-1")
    assert resp.headers["x-a"] == "1"
    resp.headers["x-a"] = "2"
    resp.headers["X-B"] = "3"
    assert dict(resp.headers) == {"x-a": "2", "X-B": "3"}
    del resp.headers["X-A"]
    assert "x-a" not in resp.headers
    assert func.HttpResponse(bytearray(b"ab")).get_body() == b"ab"
    with pytest.raises(TypeError):
        func.HttpResponse(123)  # type: ignore[arg-type]
    with pytest.raises(TypeError):
        func.HttpResponse("x", 404)  # type: ignore[misc]  (status_code is keyword-only)


def test_input_stream() -> None:
    s = func.InputStream(data=b"line1\nline2\n", name="c/b", uri="http://b", length=12)
    assert isinstance(s, io.BufferedIOBase)
    assert (s.name, s.uri, s.length) == ("c/b", "http://b", 12)
    assert s.readable() and not s.seekable() and not s.writable()
    assert s.read(2) == b"li"
    assert s.readline() == b"ne1\n"
    assert list(s) == [b"line2\n"]
    assert s.read() == b""
    with pytest.raises(io.UnsupportedOperation):
        s.seek(0)


def test_out() -> None:
    out: func.Out[str] = func.Out()
    assert out.get() is None
    out.set("v")
    assert out.get() == "v"
    assert func.Out[bytes] is not None  # subscriptable like typing generics


def test_context() -> None:
    ctx = func.Context("inv-1", "Fn", "/app/Fn")
    assert (ctx.invocation_id, ctx.function_name, ctx.function_directory) == (
        "inv-1", "Fn", "/app/Fn")
    assert ctx.trace_context is None and ctx.retry_context is None
    ctx.thread_local_storage.invocation_id = "inv-1"
    assert func.Context("other", "F", "/").thread_local_storage.invocation_id == "inv-1"
    with pytest.raises(AttributeError):
        ctx.invocation_id = "x"  # type: ignore[misc]
    tc = func.TraceContext("00-abc-01", "k=v", {"a": "b"})
    rc = func.RetryContext(1, 3)
    ctx2 = func.Context("i", "f", "d", trace_context=tc, retry_context=rc)
    assert ctx2.trace_context.trace_parent == "00-abc-01"
    assert ctx2.retry_context.max_retry_count == 3


def test_json_roundtrip_of_request_json_helper() -> None:
    payload = {"a": [1, {"b": None}]}
    req = func.HttpRequest("PUT", "u", body=json.dumps(payload).encode())
    assert req.get_json() == payload
