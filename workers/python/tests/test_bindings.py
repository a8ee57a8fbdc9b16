"""Unit tests of the TypedData <-> Python conversions (in-process, no gRPC)."""
from __future__ import annotations

import json
from typing import Dict, List, Optional

import pytest

import conftest  # noqa: F401
import azure.functions as func
from faast_worker import bindings
from faast_worker.protos import pb


def td(**kw) -> pb.TypedData:
    return pb.TypedData(**kw)


@pytest.mark.parametrize("annotation, data, expected", [
    (None, td(string="s"), "s"),
    (None, td(bytes=b"b"), b"b"),
    (None, td(json='{"a": 1}'), {"a": 1}),
    (str, td(json='{"a": 1}'), '{"a": 1}'),
    (str, td(bytes="é".encode()), "é"),
    (bytes, td(string="é"), "é".encode()),
    (dict, td(string='{"a": 1}'), {"a": 1}),
    (Dict[str, int], td(bytes=b'{"a": 1}'), {"a": 1}),
    (List[int], td(json="[1]"), [1]),
    (Optional[str], td(string="x"), "x"),
    (Optional[bytes], td(), None),
    (func.InputStream, td(), None),
])
def test_decoders(annotation, data, expected) -> None:
    assert bindings.decoder_for(annotation)(data) == expected


def test_http_decoder_and_body_kinds() -> None:
    data = td()
    data.http.method = "get"
    data.http.body.string = '{"x": 1}'
    req = bindings.decoder_for(func.HttpRequest)(data)
    assert req.method == "GET" and req.get_json() == {"x": 1}
    with pytest.raises(bindings.BindingError):
        bindings.decoder_for(func.HttpRequest)(td(string="not http"))


def test_shared_memory_blob_is_rejected_without_negotiation() -> None:
    data = td()
    data.blob.shared_memory.segment = "s"
    for ann in (None, bytes, str, func.InputStream):
        with pytest.raises(bindings.BindingError, match="shared memory was not negotiated"):
            bindings.decoder_for(ann)(data)


@pytest.mark.parametrize("value, field, expected", [
    ("s", "string", "s"),
    (b"b", "bytes", b"b"),
    (bytearray(b"ba"), "bytes", b"ba"),
    (memoryview(b"mv"), "bytes", b"mv"),
    ({"a": 1}, "json", '{"a": 1}'),
    ([1, 2], "json", "[1, 2]"),
    (3.5, "json", "3.5"),
    (True, "json", "true"),
    (func.InputStream(data=b"stream"), "bytes", b"stream"),
])
def test_encoders(value, field, expected) -> None:
    out = pb.TypedData()
    bindings.encode_into(out, value)
    assert out.WhichOneof("data") == field
    assert getattr(out, field) == expected


def test_encode_none_leaves_data_unset() -> None:
    out = pb.TypedData()
    bindings.encode_into(out, None)
    assert out.WhichOneof("data") is None


def test_encode_http_response() -> None:
    out = pb.TypedData()
    bindings.encode_into(out, func.HttpResponse(json.dumps([1]), status_code=404,
                                                mimetype="application/json",
                                                headers={"X-Trace": "t"}))
    assert out.http.status_code == 404
    assert dict(out.http.headers) == {"X-Trace": "t", "Content-Type": "application/json"}
    assert out.http.body.bytes == b"[1]"
    # An explicit content-type header wins over mimetype/charset.
    out = pb.TypedData()
    bindings.encode_into(out, func.HttpResponse("x", headers={"content-type": "text/csv"}))
    assert dict(out.http.headers) == {"content-type": "text/csv"}


def test_encode_unsupported_type() -> None:
    with pytest.raises(TypeError, match="cannot convert a value of type set"):
        bindings.encode_into(pb.TypedData(), {1})


def test_queue_message_decoder_without_metadata_has_only_the_body() -> None:
    decode = bindings.decoder_for(func.QueueMessage)
    msg = decode(td(string="hello"), {})
    assert msg.get_body() == b"hello" and msg.id is None and msg.dequeue_count is None
    assert decode(td(), {}) is None
    with pytest.raises(ValueError):
        msg.get_json()


def test_timer_request_decoder_reads_azures_payload() -> None:
    decode = bindings.decoder_for(func.TimerRequest)
    status = {"Last": "2026-11-28T17:00:00+00:00", "Next": "2026-11-28T17:05:00+00:00",
              "LastUpdated": "2026-11-28T17:00:00+00:00"}
    payload = {"Schedule": {"AdjustForDST": True}, "ScheduleStatus": status, "IsPastDue": True}
    timer = decode(td(json=json.dumps(payload)))
    assert isinstance(timer, func.TimerRequest)
    assert timer.past_due is True
    assert timer.schedule_status == status
    assert timer.schedule == {"AdjustForDST": True}
    timer = decode(td(json='{"Schedule":{"AdjustForDST":true},"ScheduleStatus":null,"IsPastDue":false}'))
    assert timer.past_due is False and timer.schedule_status is None
    assert decode(td()) is None


def test_timer_request_decoder_refuses_a_payload_that_is_not_azures() -> None:
    decode = bindings.decoder_for(func.TimerRequest)
    with pytest.raises(bindings.BindingError, match="func.TimerRequest: a timer payload is a JSON object"):
        decode(td(json="[1, 2]"))
    with pytest.raises(bindings.BindingError, match="IsPastDue is a bool"):
        decode(td(json='{"IsPastDue": "yes"}'))
