"""Issue 20, "hand-written where a maintained library fits": the Python worker's multipart parser
(azure/functions/_form.py) against Debian's python3-multipart 0.0.5 (the `multipart` module), both on the
same bodies in the same process, rounds alternating. `--tests` runs the worker's form tests with
`parse_multipart` swapped for an adapter over the library, to see which behaviours it keeps.

    /usr/bin/python3 bench/libs/form_compare.py            # speed
    /usr/bin/python3 bench/libs/form_compare.py --tests    # correctness on the existing tests
"""
import io
import os
import statistics
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "..", "workers", "python"))

import multipart as lib  # noqa: E402  Debian's python3-multipart
from azure.functions import _form  # noqa: E402

_ours = _form.parse_multipart


def parse_with_library(body, boundary, charset="utf-8"):
    """(fields, files) as _form.parse_multipart returns them, parsed by the library's MultipartParser.
    The part's Content-Disposition is read with the library's parse_options_header; what the library
    does not check (a missing close delimiter, a part without name) is not added here: the point is
    what the library itself does."""
    if not boundary:
        raise _form.FormDataError("no boundary")
    parts = []
    state = {}

    def on_part_begin():
        state["headers"] = {}
        state["data"] = bytearray()
        state["field"] = bytearray()
        state["value"] = bytearray()

    def on_part_data(data, start, end):
        state["data"] += data[start:end]

    def on_header_field(data, start, end):
        state["field"] += data[start:end]

    def on_header_value(data, start, end):
        state["value"] += data[start:end]

    def on_header_end():
        state["headers"][state["field"].decode("latin-1").lower()] = state["value"].decode("utf-8", "replace")
        state["field"] = bytearray()
        state["value"] = bytearray()

    def on_part_end():
        parts.append((state["headers"], bytes(state["data"])))

    try:
        parser = lib.MultipartParser(boundary, callbacks={
            "on_part_begin": on_part_begin, "on_part_data": on_part_data, "on_part_end": on_part_end,
            "on_header_field": on_header_field, "on_header_value": on_header_value,
            "on_header_end": on_header_end})
        parser.write(body)
        parser.finalize()
    except lib.exceptions.FormParserError as e:
        raise _form.FormDataError(str(e)) from e
    fields, files = [], []
    for headers, data in parts:
        kind, params = lib.multipart.parse_options_header(headers.get("content-disposition", ""))
        params = {k.decode(): v.decode("utf-8", "replace") for k, v in params.items()}
        name, filename = params.get("name"), params.get("filename")
        if filename is not None:
            files.append((name, _form.FileStorage(io.BytesIO(data), filename=filename, name=name, headers=headers)))
        else:
            fields.append((name, data.decode(charset, "replace")))
    return fields, files


def make_body(total, boundary="----faastBoundary7MA4YWxkTrZu0gW"):
    """A browser-like form: three text fields and one file filling the rest."""
    head = b"".join(
        f"--{boundary}\r\nContent-Disposition: form-data; name=\"f{i}\"\r\n\r\nvalue {i}\r\n".encode()
        for i in range(3))
    file_head = (f"--{boundary}\r\nContent-Disposition: form-data; name=\"file\"; filename=\"a.bin\"\r\n"
                 f"Content-Type: application/octet-stream\r\n\r\n").encode()
    tail = f"\r\n--{boundary}--\r\n".encode()
    size = max(0, total - len(head) - len(file_head) - len(tail))
    content = (os.urandom(4096) * (size // 4096 + 1))[:size].replace(b"\r\n--", b"\r\n-x")
    return head + file_head + content + tail, boundary


def time_one(fn, body, boundary, repeat):
    t0 = time.perf_counter()
    for _ in range(repeat):
        fields, files = fn(body, boundary)
        for _, f in files:
            f.read()  # the function reads the upload: the library copied it already, ours copies now
    return (time.perf_counter() - t0) / repeat


def speed():
    print(f"load {os.getloadavg()}")
    for label, size, repeat in (("1 KiB", 1024, 2000), ("1 MiB", 1 << 20, 20), ("64 MiB", 64 << 20, 1)):
        body, boundary = make_body(size)
        a, b = _ours(body, boundary), parse_with_library(body, boundary)
        assert [x for x in a[0]] == [x for x in b[0]] and a[1][0][1].read() == b[1][0][1].read(), label
        ours, theirs = [], []
        for _ in range(5):  # alternating rounds: the machine is shared
            ours.append(time_one(_ours, body, boundary, repeat))
            theirs.append(time_one(parse_with_library, body, boundary, repeat))
        fmt = lambda xs: f"median {statistics.median(xs)*1e3:.3f} ms (range {min(xs)*1e3:.3f}-{max(xs)*1e3:.3f})"
        print(f"{label:7} ours     {fmt(ours)}")
        print(f"{label:7} library  {fmt(theirs)}  ratio {statistics.median(theirs)/statistics.median(ours):.1f}x")


def tests():
    import pytest
    _form.parse_multipart = parse_with_library
    sys.exit(pytest.main(["-q", "-p", "no:cacheprovider",
                          os.path.join(HERE, "..", "..", "workers", "python", "tests", "test_http_forms.py")]))


if __name__ == "__main__":
    tests() if "--tests" in sys.argv else speed()
