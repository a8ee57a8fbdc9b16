"""HttpRequest.form / .files (multipart/form-data and urlencoded bodies), the rest of the
azure-functions HttpRequest/HttpResponse surface, and what the worker makes of them."""
from __future__ import annotations

import io
import json
from typing import List, Optional, Tuple

import pytest

import conftest  # noqa: F401  (puts the worker directory on sys.path)
import azure.functions as func
from azure.functions._form import (FileStorage, FormDataError, ImmutableMultiDict, parse_multipart,
                                   parse_options_header)
from conftest import FAILURE, IN, OUT, SUCCESS, http

BOUNDARY = "----FaaSTBoundary7MA4YWxkTrZu0gW"
HTTP = {"req": ("httpTrigger", IN), "$return": ("http", OUT)}


def multipart(parts: List[Tuple[str, Optional[str], bytes, Optional[str]]],
              boundary: str = BOUNDARY, nl: bytes = b"\r\n") -> bytes:
    """(name, filename, content, content_type) parts as a browser encodes them."""
    out = []
    for name, filename, content, ctype in parts:
        out.append(b"--" + boundary.encode() + nl)
        disp = f'Content-Disposition: form-data; name="{name}"'
        if filename is not None:
            disp += f'; filename="{filename}"'
        out.append(disp.encode() + nl)
        if ctype is not None:
            out.append(f"Content-Type: {ctype}".encode() + nl)
        out.append(nl + content + nl)
    out.append(b"--" + boundary.encode() + b"--" + nl)
    return b"".join(out)


def form_request(body: bytes, content_type: str = f"multipart/form-data; boundary={BOUNDARY}"
                 ) -> func.HttpRequest:
    return func.HttpRequest("POST", "http://h/api/upload", headers={"Content-Type": content_type},
                            body=body)


# ---- multipart/form-data ----------------------------------------------------------

def test_one_file_is_a_file_storage_with_name_type_and_content() -> None:
    req = form_request(multipart([("file", "report.csv", b"a,b\r\n1,2\r\n", "text/csv")]))
    f = req.files["file"]
    assert isinstance(f, FileStorage)
    assert (f.filename, f.name, f.content_type, f.mimetype) == (
        "report.csv", "file", "text/csv", "text/csv")
    assert f.read() == b"a,b\r\n1,2\r\n"  # CRLF inside the content is content
    assert f.read() == b""
    f.seek(0)
    assert f.stream.read(3) == b"a,b" and f.tell() == 3
    assert dict(req.form) == {}
    assert bool(f) is True


def test_several_files_under_one_name_keep_their_order() -> None:
    req = form_request(multipart([
        ("docs", "a.txt", b"first", "text/plain"),
        ("docs", "b.bin", b"\x00\x01second", "application/octet-stream"),
        ("other", "c.txt", b"third", None),
    ]))
    docs = req.files.getlist("docs")
    assert [d.filename for d in docs] == ["a.txt", "b.bin"]
    assert [d.read() for d in docs] == [b"first", b"\x00\x01second"]
    assert req.files["docs"].filename == "a.txt"  # [] is the first
    assert req.files["other"].content_type is None and req.files["other"].mimetype == ""
    assert list(req.files) == ["docs", "other"] and len(req.files) == 2
    assert req.files.getlist("missing") == [] and req.files.get("missing") is None
    with pytest.raises(KeyError):
        req.files["missing"]


def test_fields_and_files_mixed_go_to_form_and_files() -> None:
    req = form_request(multipart([
        ("title", None, "Zürich – notes".encode(), None),
        ("upload", "n.txt", b"text", "text/plain"),
        ("tag", None, b"x", None),
        ("tag", None, b"y", None),
        ("empty", None, b"", None),
    ]))
    assert req.form["title"] == "Zürich – notes"
    assert req.form.getlist("tag") == ["x", "y"]
    assert req.form["empty"] == ""
    assert req.form.to_dict() == {"title": "Zürich – notes", "tag": "x", "empty": ""}
    assert req.form.to_dict(flat=False)["tag"] == ["x", "y"]
    assert list(req.form.items(multi=True))[1:3] == [("tag", "x"), ("tag", "y")]
    assert req.files["upload"].read() == b"text"
    assert "upload" not in req.form and "title" not in req.files
    with pytest.raises(TypeError):
        req.form["title"] = "changed"  # type: ignore[index]


def test_a_50_mb_file_with_boundary_like_lines_inside_is_a_view_of_the_body_not_a_copy() -> None:
    big = bytes(range(256)) * (50 * 1024 * 1024 // 256)
    # Lines of CRLF and '--' inside the content, as binary files have.
    big = b"\r\n--" + BOUNDARY[:10].encode() + big[20:]
    body = multipart([("meta", None, b"m", None), ("file", "big.bin", big, None),
                      ("after", None, b"z", None)])
    req = form_request(body)
    f = req.files["file"]
    assert req.form.to_dict() == {"meta": "m", "after": "z"}
    view = f.stream.getbuffer()  # a view of the request body itself
    assert view.obj is req.get_body()
    assert len(view) == len(big) and view == big
    assert f.read(10) == big[:10] and f.read() == big[10:]


def test_many_small_parts_cost_one_pass() -> None:
    parts = [(f"f{i}", None, b"v" * 10, None) for i in range(20000)]
    req = form_request(multipart(parts))
    assert len(req.form) == 20000 and req.form["f19999"] == "v" * 10


def test_the_boundary_followed_by_other_characters_is_content_not_a_delimiter() -> None:
    tricky = b"head\r\n--" + BOUNDARY.encode() + b"X not a delimiter\r\n--" + BOUNDARY.encode() + b"_nor this"
    req = form_request(multipart([("f", "t.bin", tricky, None), ("k", None, b"v", None)]))
    assert req.files["f"].read() == tricky and req.form["k"] == "v"


def test_save_writes_to_a_path_and_to_a_file_object(tmp_path) -> None:
    req = form_request(multipart([("file", "x.bin", b"\x00payload\xff", None)]))
    f = req.files["file"]
    f.save(tmp_path / "out.bin")
    assert (tmp_path / "out.bin").read_bytes() == b"\x00payload\xff"
    f.seek(0)
    sink = io.BytesIO()
    f.save(sink)
    assert sink.getvalue() == b"\x00payload\xff" and not sink.closed


def test_filename_star_and_quoted_and_unquoted_parameters() -> None:
    body = (
        f"--{BOUNDARY}\r\n"
        "Content-Disposition: form-data; name=a; filename=plain.txt\r\n\r\n1\r\n"
        f"--{BOUNDARY}\r\n"
        "Content-Disposition: form-data; name=\"b\"; filename=\"fallback.txt\"; "
        "filename*=UTF-8''%E2%82%AC%20rates.txt\r\n\r\n2\r\n"
        f"--{BOUNDARY}\r\n"
        'content-disposition: FORM-DATA; NAME="c"; filename="semi;colon \\"q\\".txt"\r\n\r\n3\r\n'
        f"--{BOUNDARY}\r\n"
        'Content-Disposition: form-data; name="d"; filename="C:\\Users\\me\\d.txt"\r\n\r\n4\r\n'
        f"--{BOUNDARY}\r\n"
        "Content-Disposition: form-data; name=\"e\"; filename=\"żółw\u2028\x0c.txt\"\r\n\r\n5\r\n"
        f"--{BOUNDARY}--\r\n").encode("utf-8")
    req = form_request(body)
    assert req.files["a"].filename == "plain.txt"
    assert req.files["b"].filename == "€ rates.txt"
    assert req.files["c"].filename == 'semi;colon "q".txt'
    assert req.files["d"].filename == "C:\\Users\\me\\d.txt"
    assert req.files["e"].filename == "żółw\u2028\x0c.txt"  # browsers send raw UTF-8


def test_quoted_boundary_preamble_epilogue_padding_and_lf_only_lines() -> None:
    inner = multipart([("k", None, b"v", None), ("f", "a", b"data", None)], nl=b"\n")
    body = b"This is the preamble.\n" + inner.replace(
        f"--{BOUNDARY}\n".encode(), f"--{BOUNDARY}  \n".encode()) + b"epilogue, ignored"
    req = form_request(body, f'multipart/form-data; boundary="{BOUNDARY}"; charset=utf-8')
    assert req.form["k"] == "v" and req.files["f"].read() == b"data"


def test_a_field_with_its_own_charset_and_a_base64_part() -> None:
    body = (
        f"--{BOUNDARY}\r\n"
        "Content-Disposition: form-data; name=\"latin\"\r\n"
        "Content-Type: text/plain; charset=iso-8859-1\r\n\r\n").encode() + "café".encode("latin-1") + (
        f"\r\n--{BOUNDARY}\r\n"
        "Content-Disposition: form-data; name=\"f\"; filename=\"b64.bin\"\r\n"
        "Content-Transfer-Encoding: base64\r\n\r\naGVsbG8=\r\n"
        f"--{BOUNDARY}--\r\n").encode()
    req = form_request(body)
    assert req.form["latin"] == "café"
    assert req.files["f"].read() == b"hello"


def test_an_empty_file_field_as_browsers_send_it() -> None:
    req = form_request(multipart([("file", "", b"", "application/octet-stream")]))
    f = req.files["file"]
    assert f.filename == "" and f.read() == b"" and bool(f) is False


@pytest.mark.parametrize("body, content_type, expected", [
    (None, "multipart/form-data", "has no boundary parameter"),
    (None, "multipart/form-data; boundary=" + "x" * 71, "is not a valid boundary"),
    (b"no boundary anywhere", None, f"no boundary line '--{BOUNDARY}'"),
    (f"--{BOUNDARY}\r\nContent-Disposition: form-data; name=\"a\"\r\n\r\nvalue".encode(), None,
     "part 1 (name 'a'): the body ends inside this part"),
    (f"--{BOUNDARY}\r\nContent-Disposition: form-data; name=\"a\"\r\n\r\nv\r\n--{BOUNDARY}\r\n"
     f"Content-Disposition: form-data; name=\"f\"; filename=\"x.bin\"\r\n\r\ntrunc".encode(), None,
     "part 2 (name 'f', filename 'x.bin'): the body ends inside this part"),
    (f"--{BOUNDARY}\r\nContent-Type: text/plain\r\n\r\nv\r\n--{BOUNDARY}--\r\n".encode(), None,
     "part 1: no Content-Disposition header"),
    (f"--{BOUNDARY}\r\nContent-Disposition: form-data; filename=\"a.txt\"\r\n\r\nv\r\n"
     f"--{BOUNDARY}--\r\n".encode(), None, "part 1: its Content-Disposition has no name parameter"),
    (f"--{BOUNDARY}\r\nContent-Disposition: attachment; name=\"a\"\r\n\r\nv\r\n"
     f"--{BOUNDARY}--\r\n".encode(), None, "part 1 (name 'a'): Content-Disposition is 'attachment'"),
    (f"--{BOUNDARY}\r\nContent-Disposition: form-data; name=\"a\"\r\n\r\nv\r\n--{BOUNDARY}\r\n"
     f"this line is not a header\r\n\r\nv\r\n--{BOUNDARY}--\r\n".encode(), None,
     "part 2: malformed header line 'this line is not a header'"),
    (f"--{BOUNDARY}\r\nContent-Disposition: form-data; name=\"a\"\r\n--{BOUNDARY}--\r\n".encode(),
     None, "part 1: its headers are not ended by an empty line"),
    (f"--{BOUNDARY}\r\nContent-Disposition: form-data; name=\"a\"\r\n\r\nv\r\n--{BOUNDARY}".encode(),
     None, "without the closing"),
    (f"--{BOUNDARY}garbage\r\n".encode(), None, "instead of a line break"),
    (f"--{BOUNDARY}\r\nContent-Disposition: form-data; name=\"f\"; filename=\"a\"\r\n"
     f"Content-Transfer-Encoding: base64\r\n\r\n@@@\r\n--{BOUNDARY}--\r\n".encode(), None,
     "part 1 (name 'f', filename 'a'): invalid base64 content"),
])
def test_a_malformed_body_raises_a_value_error_naming_the_part(body, content_type, expected) -> None:
    req = form_request(body or b"x", content_type or f"multipart/form-data; boundary={BOUNDARY}")
    with pytest.raises(ValueError) as info:
        req.files
    assert isinstance(info.value, FormDataError)
    assert expected in str(info.value), str(info.value)
    with pytest.raises(ValueError) as again:  # every access, form included, says the same
        req.form
    assert str(again.value) == str(info.value)


def test_parse_multipart_reports_the_part_number() -> None:
    body = multipart([("a", None, b"1", None)]).replace(b"name=\"a\"", b"nam=\"a\"")
    with pytest.raises(FormDataError) as info:
        parse_multipart(body, BOUNDARY)
    assert info.value.part == 1


def test_parse_options_header() -> None:
    assert parse_options_header('Text/HTML; Charset="UTF-8"; q=0.5') == (
        "text/html", {"charset": "UTF-8", "q": "0.5"})
    assert parse_options_header("attachment; filename*0*=UTF-8''%E2%82%AC; filename*1=.txt") == (
        "attachment", {"filename": "€.txt"})
    assert parse_options_header("") == ("", {})
    assert parse_options_header("form-data; name") == ("form-data", {})


# ---- application/x-www-form-urlencoded and other bodies ---------------------------

def test_urlencoded_form() -> None:
    req = form_request(b"name=J%C3%B6rg+Smith&tag=a&tag=b&empty=&flag",
                       "application/x-www-form-urlencoded")
    assert req.form["name"] == "Jörg Smith"
    assert req.form.getlist("tag") == ["a", "b"]
    assert req.form["empty"] == "" and req.form["flag"] == ""
    assert len(req.files) == 0


def test_other_bodies_have_an_empty_form_and_no_files() -> None:
    req = form_request(b'{"a": 1}', "application/json")
    assert len(req.form) == 0 and len(req.files) == 0
    assert func.HttpRequest("GET", "u", body=b"").form == ImmutableMultiDict()


# ---- the rest of the HttpRequest / HttpResponse surface ---------------------------

def test_request_surface() -> None:
    req = func.HttpRequest("get", "http://h/api/x?a=1&b=2", headers={"X-Multi": "a, b"},
                           params={"a": "1", "b": "2"}, route_params={"id": "9"}, body=None)
    assert req.method == "GET" and req.url == "http://h/api/x?a=1&b=2"
    assert req.headers["x-multi"] == "a, b" and req.headers.get("X-MULTI") == "a, b"
    assert req.params == {"a": "1", "b": "2"} and req.route_params == {"id": "9"}
    assert req.get_body() == b""  # None is an empty body (the library's own test idiom)
    with pytest.raises(ValueError, match="empty"):
        req.get_json()
    with pytest.raises(ValueError, match="does not contain valid JSON data"):
        func.HttpRequest("POST", "u", body=b"{nope").get_json()
    with pytest.raises(ValueError, match="does not contain valid JSON data"):
        func.HttpRequest("POST", "u", body=b'"\xff"').get_json()
    assert func.HttpRequest("POST", "u", body='{"a": 1}', body_type="string").get_json() == {"a": 1}
    assert func.HttpRequest("POST", "u", body=bytearray(b"ab")).get_body() == b"ab"


def test_response_headers_carry_several_values_of_one_name() -> None:
    resp = func.HttpResponse("ok", headers={"X-A": "1"})
    resp.headers.add("Set-Cookie", "a=1; Path=/")
    resp.headers.add("set-cookie", "b=2; HttpOnly")
    resp.headers.add_header("Content-Disposition", "attachment", filename="a b.txt")
    assert resp.headers["SET-COOKIE"] == "a=1; Path=/"
    assert resp.headers.getlist("Set-Cookie") == ["a=1; Path=/", "b=2; HttpOnly"]
    assert resp.headers.get_all("set-cookie") == ["a=1; Path=/", "b=2; HttpOnly"]
    assert resp.headers["content-disposition"] == 'attachment; filename="a b.txt"'
    assert len(resp.headers) == 4
    resp.headers["Set-Cookie"] = "only=1"  # assignment replaces every value
    assert resp.headers.getlist("set-cookie") == ["only=1"]
    assert resp.headers.pop("x-a") == "1" and "X-A" not in resp.headers
    assert resp.headers.setdefault("X-B", "2") == "2" and resp.headers.setdefault("x-b", "3") == "2"
    del resp.headers["not-there"]  # as werkzeug: nothing to remove is not an error
    assert func.HttpResponse(headers=[("Link", "<a>"), ("Link", "<b>")]).headers.getlist("link") == [
        "<a>", "<b>"]


def test_response_defaults_and_status() -> None:
    import http as http_status
    resp = func.HttpResponse(status_code=http_status.HTTPStatus.NO_CONTENT, mimetype="application/json")
    assert resp.status_code == 204 and isinstance(resp.status_code, int)
    assert resp.mimetype == "application/json" and resp.charset == "utf-8"
    assert resp.get_body() == b""


# ---- through the real worker ------------------------------------------------------

UPLOAD = """
    import json
    import azure.functions as func

    def main(req: func.HttpRequest) -> func.HttpResponse:
        files = [{"field": k, "filename": f.filename, "size": len(f.read()), "type": f.content_type}
                 for k, fs in req.files.lists() for f in fs]
        return func.HttpResponse(json.dumps({"fields": req.form.to_dict(flat=False), "files": files}),
                                 mimetype="application/json")
"""


def test_the_worker_hands_multipart_uploads_to_the_function(session) -> None:
    session.add_function("Upload", UPLOAD, bindings=HTTP)
    body = multipart([("note", None, b"hi", None), ("f", "a.txt", b"abc", "text/plain"),
                      ("f", "b.txt", b"defg", "text/plain")])
    out = session.call("Upload", req=http("POST", headers={
        "content-type": f"multipart/form-data; boundary={BOUNDARY}"}, body=body))
    assert out.result.status == SUCCESS, out.result.exception.message
    assert json.loads(out.return_value.http.body.bytes) == {
        "fields": {"note": ["hi"]},
        "files": [{"field": "f", "filename": "a.txt", "size": 3, "type": "text/plain"},
                  {"field": "f", "filename": "b.txt", "size": 4, "type": "text/plain"}]}


def test_a_malformed_upload_the_function_leaves_uncaught_is_answered_400(session) -> None:
    session.add_function("Upload", UPLOAD, bindings=HTTP)
    body = multipart([("f", "a.txt", b"abc", None)])[:-30]  # truncated
    out = session.call("Upload", req=http("POST", headers={
        "content-type": f"multipart/form-data; boundary={BOUNDARY}"}, body=body))
    assert out.result.status == SUCCESS, out.result.exception.message
    resp = out.return_value.http
    assert resp.status_code == 400
    assert b"part 1 (name 'f', filename 'a.txt')" in resp.body.bytes
    [warning] = [log for log in session.host.logs(out.invocation_id) if log.level == 3]
    assert "answered 400" in warning.message and "Upload" in warning.message
    assert "req.files" in warning.exception.stack_trace  # where the function read it


def test_a_malformed_upload_with_a_named_http_output_is_answered_400_there(session) -> None:
    session.add_function("UploadOut", """
        import azure.functions as func
        def main(req: func.HttpRequest, res: func.Out[func.HttpResponse]) -> None:
            res.set(func.HttpResponse(str(len(req.form))))
    """, bindings={"req": ("httpTrigger", IN), "res": ("http", OUT)})
    out = session.call("UploadOut", req=http("POST", headers={
        "content-type": "multipart/form-data"}, body=b"x"))
    assert out.result.status == SUCCESS, out.result.exception.message
    [res] = out.output_data
    assert res.name == "res" and res.data.http.status_code == 400
    assert b"has no boundary parameter" in res.data.http.body.bytes


def test_a_malformed_upload_in_a_function_without_an_http_output_fails_it(session) -> None:
    session.add_function("NoHttpOut", """
        import azure.functions as func
        def main(req: func.HttpRequest) -> str:
            return str(len(req.files))
    """, bindings={"req": ("httpTrigger", IN), "$return": ("blob", OUT)})
    out = session.call("NoHttpOut", req=http("POST", headers={
        "content-type": "multipart/form-data"}, body=b"x"))
    assert out.result.status == FAILURE
    assert "has no boundary parameter" in out.result.exception.message


def test_several_set_cookie_headers_reach_the_host_one_each(session) -> None:
    session.add_function("Cookies", """
        import azure.functions as func
        def main(req: func.HttpRequest) -> func.HttpResponse:
            resp = func.HttpResponse("ok", headers={"X-A": "1"})
            resp.headers.add("Set-Cookie", "a=1; Path=/")
            resp.headers.add("Set-Cookie", "b=2; Secure")
            resp.headers.add("Link", "<a>")
            resp.headers.add("link", "<b>")
            return resp
    """, bindings=HTTP)
    out = session.call("Cookies", req=http())
    assert out.result.status == SUCCESS, out.result.exception.message
    h = out.return_value.http
    assert list(h.set_cookies) == ["a=1; Path=/", "b=2; Secure"]
    assert "Set-Cookie" not in h.headers and "set-cookie" not in h.headers
    assert h.headers["Link"] == "<a>, <b>" and "link" not in h.headers
    assert h.headers["X-A"] == "1"
