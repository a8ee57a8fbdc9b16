"""Form bodies of HTTP requests: multipart/form-data (RFC 7578, RFC 2046 delimiters)
and application/x-www-form-urlencoded, on the standard library alone.

`HttpRequest.form` and `HttpRequest.files` use it. The types mirror what the
azure-functions library hands out (werkzeug's `ImmutableMultiDict` and `FileStorage`):
`req.files['file'].read()`, `req.files.getlist('file')`, `req.form['field']`,
`req.form.getlist('tag')`.

The parser scans the body once with `bytes.find` (no copies of the body, no per-line
work), and a file's content is a read-only view of the request body: a 50 MB upload is
not copied until the function reads it. A malformed body raises `FormDataError` (a
`ValueError`, as the library raises) naming the part and what is wrong.
"""
from __future__ import annotations

import base64
import binascii
import collections.abc
import io
import os
import quopri
import re
import shutil
from typing import (Any, Callable, Dict, Iterable, Iterator, List, Mapping, Optional,
                    Tuple, Union)
from urllib.parse import parse_qsl, unquote

__all__ = ("FileStorage", "FormDataError", "ImmutableMultiDict", "parse_form",
           "parse_options_header")


class FormDataError(ValueError):
    """A form body that cannot be parsed. `part` is the 1-based number of the multipart
    part at fault (None when the fault is not in one part, e.g. the Content-Type)."""

    def __init__(self, message: str, part: Optional[int] = None) -> None:
        super().__init__(message)
        self.part = part


# ---- header values with parameters ------------------------------------------------

_TOKEN_END = frozenset(";,")


def _unquote(text: str, pos: int) -> Tuple[str, int]:
    """A quoted-string starting at text[pos] == '"'; returns (value, index after it).
    `\\"` and `\\\\` are escapes; any other backslash is kept, since browsers send Windows
    paths (C:\\dir\\a.txt) in filename parameters without escaping them."""
    out: List[str] = []
    i = pos + 1
    n = len(text)
    while i < n:
        c = text[i]
        if c == "\\" and i + 1 < n and text[i + 1] in '"\\':
            out.append(text[i + 1])
            i += 2
            continue
        if c == '"':
            return "".join(out), i + 1
        out.append(c)
        i += 1
    return "".join(out), n  # unterminated: the rest is the value, as browsers do


def _decode_ext_value(value: str) -> str:
    """RFC 8187 ext-value: charset'language'percent-encoded."""
    parts = value.split("'", 2)
    if len(parts) != 3:
        return unquote(value, "utf-8", "replace")
    charset = parts[0].strip() or "utf-8"
    try:
        return unquote(parts[2], charset, "replace")
    except LookupError:  # an unknown charset
        return unquote(parts[2], "utf-8", "replace")


_CONTINUATION = re.compile(r"^(.+)\*(\d+)(\*?)$")


def parse_options_header(value: Optional[str]) -> Tuple[str, Dict[str, str]]:
    """`text/plain; charset="utf-8"` -> ('text/plain', {'charset': 'utf-8'}).

    The main value is lower-cased, parameter names too. Quoted values, RFC 8187 `name*`
    values (`filename*=UTF-8''%E2%82%AC.txt`, which win over `filename`) and RFC 2231
    continuations (`name*0`, `name*1*`) are decoded."""
    if not value:
        return "", {}
    semi = value.find(";")
    main = (value if semi < 0 else value[:semi]).strip().lower()
    params: Dict[str, str] = {}
    extended: Dict[str, str] = {}
    pieces: Dict[str, List[Tuple[int, str, bool]]] = {}
    if semi < 0:
        return main, params
    text = value
    i = semi + 1
    n = len(text)
    while i < n:
        while i < n and (text[i] in " \t;"):
            i += 1
        if i >= n:
            break
        j = i
        while j < n and text[j] not in "=;":
            j += 1
        name = text[i:j].strip().lower()
        if j >= n or text[j] == ";":
            i = j  # a parameter without a value: ignored
            continue
        j += 1
        while j < n and text[j] in " \t":
            j += 1
        if j < n and text[j] == '"':
            val, j = _unquote(text, j)
            quoted = True
        else:
            k = j
            while k < n and text[k] not in _TOKEN_END:
                k += 1
            val, j = text[j:k].strip(), k
            quoted = False
        i = j
        if not name:
            continue
        m = _CONTINUATION.match(name)
        if m:
            pieces.setdefault(m.group(1), []).append(
                (int(m.group(2)), val, bool(m.group(3)) and not quoted))
        elif name.endswith("*"):
            extended[name[:-1]] = _decode_ext_value(val) if not quoted else val
        elif name not in params:
            params[name] = val
    for name, segs in pieces.items():
        segs.sort(key=lambda s: s[0])
        if segs[0][2]:  # name*0*=charset'lang'...: the first piece names the charset
            raw = "".join(v for _, v, _ in segs)
            extended.setdefault(name, _decode_ext_value(raw))
        else:
            params.setdefault(name, "".join(v for _, v, _ in segs))
    params.update(extended)
    return main, params


# ---- the multi-valued mapping -----------------------------------------------------

class ImmutableMultiDict(collections.abc.Mapping):
    """A read-only mapping of names to one or more values (werkzeug's
    `ImmutableMultiDict`): `d[key]` and `d.get(key)` give the first value,
    `d.getlist(key)` all of them, in the order they came."""

    __slots__ = ("_lists",)

    def __init__(self, pairs: Union[Iterable[Tuple[str, Any]], Mapping[str, Any], None] = None) -> None:
        lists: Dict[str, List[Any]] = {}
        if pairs is not None:
            items = pairs.items() if isinstance(pairs, collections.abc.Mapping) else pairs
            for key, value in items:
                lists.setdefault(key, []).append(value)
        self._lists = lists

    def __getitem__(self, key: str) -> Any:
        values = self._lists.get(key)
        if not values:
            raise KeyError(key)
        return values[0]

    def __iter__(self) -> Iterator[str]:
        return iter(self._lists)

    def __len__(self) -> int:
        return len(self._lists)

    def __contains__(self, key: object) -> bool:
        return key in self._lists

    def get(self, key: str, default: Any = None, type: Optional[Callable[[Any], Any]] = None) -> Any:  # noqa: A002
        """The first value; with `type`, converted (a value it refuses gives `default`)."""
        values = self._lists.get(key)
        if not values:
            return default
        if type is None:
            return values[0]
        try:
            return type(values[0])
        except (ValueError, TypeError):
            return default

    def getlist(self, key: str, type: Optional[Callable[[Any], Any]] = None) -> List[Any]:  # noqa: A002
        """Every value of `key` (an empty list if none); with `type`, the values it
        converts (the others are left out)."""
        values = self._lists.get(key, ())
        if type is None:
            return list(values)
        out = []
        for v in values:
            try:
                out.append(type(v))
            except (ValueError, TypeError):
                pass
        return out

    def items(self, multi: bool = False) -> Iterator[Tuple[str, Any]]:  # type: ignore[override]
        for key, values in self._lists.items():
            if multi:
                for v in values:
                    yield key, v
            else:
                yield key, values[0]

    def values(self) -> Iterator[Any]:  # type: ignore[override]
        return (values[0] for values in self._lists.values())

    def lists(self) -> Iterator[Tuple[str, List[Any]]]:
        return ((k, list(v)) for k, v in self._lists.items())

    def listvalues(self) -> Iterator[List[Any]]:
        return (list(v) for v in self._lists.values())

    def to_dict(self, flat: bool = True) -> Dict[str, Any]:
        if flat:
            return {k: v[0] for k, v in self._lists.items()}
        return {k: list(v) for k, v in self._lists.items()}

    def copy(self) -> "ImmutableMultiDict":
        return type(self)(self.items(multi=True))

    def __eq__(self, other: object) -> bool:
        if isinstance(other, ImmutableMultiDict):
            return self._lists == other._lists
        return collections.abc.Mapping.__eq__(self, other)

    __hash__ = None  # type: ignore[assignment]

    def __repr__(self) -> str:
        return f"{type(self).__name__}({list(self.items(multi=True))!r})"


# ---- uploaded files ---------------------------------------------------------------

class _BodySlice(io.BufferedIOBase):
    """A read-only, seekable stream over body[start:end], without copying the body."""

    def __init__(self, data: bytes, start: int = 0, end: Optional[int] = None) -> None:
        super().__init__()
        self._data = data
        self._start = start
        self._end = len(data) if end is None else end
        self._pos = start

    def readable(self) -> bool:
        return True

    def seekable(self) -> bool:
        return True

    def _check(self) -> None:
        if self.closed:
            raise ValueError("I/O operation on closed file.")

    def read(self, size: Optional[int] = -1) -> bytes:
        self._check()
        stop = self._end if size is None or size < 0 else min(self._end, self._pos + size)
        if self._pos == self._start and stop == self._end and self._start == 0 \
                and self._end == len(self._data):
            self._pos = stop
            return self._data  # the whole of an immutable bytes object: no copy
        out = self._data[self._pos:stop]
        self._pos = max(self._pos, stop)
        return out

    read1 = read

    def readinto(self, b: Any) -> int:
        self._check()
        view = memoryview(b).cast("B")
        n = min(len(view), self._end - self._pos)
        if n <= 0:
            return 0
        view[:n] = memoryview(self._data)[self._pos:self._pos + n]
        self._pos += n
        return n

    def readline(self, size: Optional[int] = -1) -> bytes:
        self._check()
        stop = self._end if size is None or size < 0 else min(self._end, self._pos + size)
        nl = self._data.find(b"\n", self._pos, stop)
        stop = stop if nl < 0 else nl + 1
        out = self._data[self._pos:stop]
        self._pos = max(self._pos, stop)
        return out

    def seek(self, offset: int, whence: int = io.SEEK_SET) -> int:
        self._check()
        if whence == io.SEEK_SET:
            pos = self._start + offset
        elif whence == io.SEEK_CUR:
            pos = self._pos + offset
        elif whence == io.SEEK_END:
            pos = self._end + offset
        else:
            raise ValueError(f"invalid whence ({whence})")
        if pos < self._start:
            raise ValueError(f"negative seek position {pos - self._start}")
        self._pos = pos
        return pos - self._start

    def tell(self) -> int:
        self._check()
        return self._pos - self._start

    def getbuffer(self) -> memoryview:
        """A zero-copy read-only view of the whole content."""
        self._check()
        return memoryview(self._data)[self._start:self._end]

    def getvalue(self) -> bytes:
        self._check()
        return self._data[self._start:self._end]


class FileStorage:
    """An uploaded file (werkzeug's `FileStorage`): `filename`, `name` (the form field),
    `content_type`, `mimetype`, `headers`, `stream`, `read()`, `save(dst)`; other
    attributes (`seek`, `tell`, `readline`, iteration) are the stream's."""

    def __init__(self, stream: Optional[Any] = None, filename: Optional[str] = None,
                 name: Optional[str] = None, content_type: Optional[str] = None,
                 content_length: Optional[int] = None,
                 headers: Optional[Mapping[str, str]] = None) -> None:
        self.name = name
        self.stream = stream if stream is not None else io.BytesIO()
        if filename is None:
            filename = getattr(stream, "name", None)
            if isinstance(filename, bytes):
                filename = os.fsdecode(filename)
            if not isinstance(filename, str) or (filename.startswith("<") and filename.endswith(">")):
                filename = None
        self.filename = filename
        # Imported here: _http imports this module.
        from ._http import HttpRequestHeaders
        hdrs = dict(headers) if headers else {}
        if content_type is not None:
            hdrs["Content-Type"] = content_type
        if content_length is not None:
            hdrs["Content-Length"] = str(content_length)
        self.headers = HttpRequestHeaders(hdrs)

    @property
    def content_type(self) -> Optional[str]:
        """The part's Content-Type header as sent (None if it had none)."""
        return self.headers.get("content-type")

    @property
    def content_length(self) -> int:
        """The part's Content-Length header (0 if it had none, as werkzeug)."""
        try:
            return int(self.headers.get("content-length", 0))
        except ValueError:
            return 0

    @property
    def mimetype(self) -> str:
        """The Content-Type without parameters, lower-cased ('' if none)."""
        return parse_options_header(self.content_type)[0]

    @property
    def mimetype_params(self) -> Dict[str, str]:
        return parse_options_header(self.content_type)[1]

    def read(self, size: int = -1) -> bytes:
        return self.stream.read(size)

    def save(self, dst: Union[str, "os.PathLike[str]", Any], buffer_size: int = 16384) -> None:
        """Writes the (rest of the) content to a path or a binary file object; a path's
        file is closed afterwards, a file object is left open."""
        if isinstance(dst, (str, bytes, os.PathLike)):
            with open(dst, "wb") as out:
                shutil.copyfileobj(self.stream, out, buffer_size)
        else:
            shutil.copyfileobj(self.stream, dst, buffer_size)

    def close(self) -> None:
        try:
            self.stream.close()
        except Exception:  # noqa: BLE001 - closing is best effort, as werkzeug
            pass

    def __bool__(self) -> bool:
        return bool(self.filename)

    def __getattr__(self, name: str) -> Any:
        # Only reached for attributes FileStorage lacks: the stream's (seek, tell, ...).
        if name == "stream":
            raise AttributeError(name)
        return getattr(self.stream, name)

    def __iter__(self) -> Iterator[bytes]:
        return iter(self.stream)

    def __repr__(self) -> str:
        return f"<{type(self).__name__}: {self.filename!r} ({self.content_type!r})>"


# ---- multipart/form-data ----------------------------------------------------------

# RFC 2046 §5.1.1: 1 to 70 characters, these only, not ending in a space.
_BOUNDARY = re.compile(r"[0-9A-Za-z'()+_,\-./:=? ]{0,69}[0-9A-Za-z'()+_,\-./:=?]")


def _describe(part: int, name: Optional[str], filename: Optional[str]) -> str:
    text = f"part {part}"
    if name is not None:
        text += f" (name {name!r}" + (f", filename {filename!r})" if filename is not None else ")")
    return text


def _decode_text(raw: bytes) -> str:
    try:
        return raw.decode("utf-8")
    except UnicodeDecodeError:
        return raw.decode("latin-1")


def _part_headers(block: bytes, part: int) -> Dict[str, str]:
    headers: Dict[str, str] = {}
    last: Optional[str] = None
    # Lines end in CRLF or LF only (str.splitlines would also split at U+2028 and the like,
    # which a UTF-8 filename may hold).
    for line in _decode_text(block).split("\n"):
        if line.endswith("\r"):
            line = line[:-1]
        if not line:
            continue
        if line[0] in " \t":  # obsolete line folding: continues the previous header
            if last is None:
                raise FormDataError(
                    f"malformed multipart/form-data body: {_describe(part, None, None)}: "
                    f"its headers begin with a continuation line {line.strip()!r}", part)
            headers[last] += " " + line.strip()
            continue
        colon = line.find(":")
        if colon <= 0:
            raise FormDataError(
                f"malformed multipart/form-data body: {_describe(part, None, None)}: "
                f"malformed header line {line!r} (expected 'Name: value')", part)
        last = line[:colon].strip().lower()
        headers[last] = line[colon + 1:].strip()
    return headers


def _decode_transfer(content: bytes, encoding: str, part: int, name: str,
                     filename: Optional[str]) -> bytes:
    try:
        if encoding == "base64":
            # MIME base64 has line breaks; any other character outside the alphabet is an error.
            return base64.b64decode(b"".join(content.split()), validate=True)
        return quopri.decodestring(content)
    except (binascii.Error, ValueError) as exc:
        raise FormDataError(
            f"malformed multipart/form-data body: {_describe(part, name, filename)}: "
            f"invalid {encoding} content ({exc})", part) from None


def parse_multipart(body: bytes, boundary: str, charset: str = "utf-8"
                    ) -> Tuple[List[Tuple[str, str]], List[Tuple[str, FileStorage]]]:
    """(fields, files) of a multipart/form-data body, in body order."""
    if not boundary:
        raise FormDataError("malformed multipart/form-data request: the Content-Type header "
                            "has no boundary parameter")
    if not _BOUNDARY.fullmatch(boundary):
        raise FormDataError(f"malformed multipart/form-data request: the boundary {boundary!r} "
                            f"in the Content-Type header is not a valid boundary (RFC 2046: 1 to "
                            f"70 letters, digits and '()+_,-./:=? )")
    dash = b"--" + boundary.encode("ascii")
    delim = b"\n" + dash
    n = len(body)
    fields: List[Tuple[str, str]] = []
    files: List[Tuple[str, FileStorage]] = []

    # The first delimiter: at the start, or after a preamble that ends in a line break.
    if body.startswith(dash):
        pos = 0
    else:
        i = body.find(delim)
        if i < 0:
            raise FormDataError(
                f"malformed multipart/form-data body: no boundary line "
                f"'--{boundary}' (the boundary of the Content-Type header) in the "
                f"{n}-byte body", None)
        pos = i + 1
    part = 0
    while True:
        after = pos + len(dash)
        if body.startswith(b"--", after):
            break  # the close delimiter; what follows is the epilogue, ignored
        j = after
        while j < n and body[j] in b" \t":  # transport padding
            j += 1
        if body.startswith(b"\r\n", j):
            start = j + 2
        elif body.startswith(b"\n", j):
            start = j + 1
        elif j >= n:
            raise FormDataError(
                f"malformed multipart/form-data body: it ends after the boundary line "
                f"following part {part} without the closing '--{boundary}--' "
                f"(a truncated upload?)", part + 1)
        else:
            raise FormDataError(
                f"malformed multipart/form-data body: the boundary line before part "
                f"{part + 1} is followed by {bytes(body[j:j + 16])!r} instead of a line break",
                part + 1)
        part += 1

        # The part ends at the next delimiter line (its line break belongs to the delimiter);
        # searched from the line break that ended this boundary line, so that a part with no
        # headers and no content is seen as such.
        k = body.find(delim, start - 1)
        while k >= 0:
            f = k + len(delim)
            if body.startswith(b"--", f) or f >= n or body[f] in b" \t\r\n":
                break
            k = body.find(delim, k + 1)  # the boundary followed by more characters: content
        limit = n if k < 0 else k + 1
        # The part's headers end at its first empty line; searched within the part only,
        # so that many parts cost one pass over the body.
        if body.startswith(b"\r\n", start):
            head_end, content_start = start, start + 2
        elif body.startswith(b"\n", start):
            head_end, content_start = start, start + 1
        else:
            a = body.find(b"\r\n\r\n", start, limit)
            b = body.find(b"\n\n", start, limit)
            if a >= 0 and (b < 0 or a <= b):
                head_end, content_start = a, a + 4
            elif b >= 0:
                head_end, content_start = b, b + 2
            else:
                head_end = content_start = -1
        if head_end < 0:
            raise FormDataError(
                f"malformed multipart/form-data body: {_describe(part, None, None)}: "
                f"its headers are not ended by an empty line", part)
        headers = _part_headers(body[start:head_end], part)
        disposition = headers.get("content-disposition")
        if disposition is None:
            raise FormDataError(
                f"malformed multipart/form-data body: {_describe(part, None, None)}: "
                f"no Content-Disposition header", part)
        kind, params = parse_options_header(disposition)
        name = params.get("name")
        filename = params.get("filename")
        if kind != "form-data":
            raise FormDataError(
                f"malformed multipart/form-data body: {_describe(part, name, filename)}: "
                f"Content-Disposition is {kind!r}, not 'form-data'", part)
        if name is None:
            raise FormDataError(
                f"malformed multipart/form-data body: {_describe(part, None, filename)}: "
                f"its Content-Disposition has no name parameter", part)
        if k < 0:
            raise FormDataError(
                f"malformed multipart/form-data body: {_describe(part, name, filename)}: "
                f"the body ends inside this part, without the closing '--{boundary}--' "
                f"(a truncated upload?)", part)
        end = k - 1 if k > content_start and body[k - 1] == 0x0D else k
        if end < content_start:
            end = content_start
        encoding = headers.get("content-transfer-encoding", "").strip().lower()
        if encoding in ("base64", "quoted-printable"):
            data: bytes = _decode_transfer(body[content_start:end], encoding, part, name, filename)
            lo, hi = 0, len(data)
        else:
            data, lo, hi = body, content_start, end
        if filename is not None:
            files.append((name, FileStorage(_BodySlice(data, lo, hi), filename=filename,
                                            name=name, headers=headers)))
        else:
            field_charset = parse_options_header(headers.get("content-type"))[1].get(
                "charset", charset)
            raw = data[lo:hi]
            try:
                text = raw.decode(field_charset, "replace")
            except LookupError:
                text = raw.decode("utf-8", "replace")
            fields.append((name, text))
        pos = k + 1
    return fields, files


def parse_form(body: bytes, content_type: Optional[str]
               ) -> Tuple[ImmutableMultiDict, ImmutableMultiDict]:
    """(form, files) of a request body by its Content-Type; both empty for a body that
    is neither multipart/form-data nor application/x-www-form-urlencoded."""
    mimetype, params = parse_options_header(content_type)
    charset = params.get("charset", "utf-8")
    if mimetype == "multipart/form-data":
        fields, files = parse_multipart(body, params.get("boundary", ""), charset)
        return ImmutableMultiDict(fields), ImmutableMultiDict(files)
    if mimetype == "application/x-www-form-urlencoded":
        try:
            text = body.decode(charset, "replace")
        except LookupError:
            charset = "utf-8"
            text = body.decode(charset, "replace")
        pairs = parse_qsl(text, keep_blank_values=True, encoding=charset, errors="replace")
        return ImmutableMultiDict(pairs), ImmutableMultiDict()
    return ImmutableMultiDict(), ImmutableMultiDict()
