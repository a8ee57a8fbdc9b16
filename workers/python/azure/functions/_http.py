from __future__ import annotations

import collections.abc
import http
import json
import types
from typing import Any, Dict, Iterable, Iterator, List, Mapping, Optional, Tuple, Union

from ._form import FileStorage, FormDataError, ImmutableMultiDict, parse_form


class HttpRequestHeaders(collections.abc.Mapping):
    """Read-only request headers with case-insensitive lookup."""

    __slots__ = ("_headers",)

    def __init__(self, source: Optional[Mapping[str, str]] = None) -> None:
        self._headers: Dict[str, str] = (
            {k.lower(): v for k, v in source.items()} if source else {})

    def __getitem__(self, key: str) -> str:
        return self._headers[key.lower()]

    def __contains__(self, key: object) -> bool:
        return isinstance(key, str) and key.lower() in self._headers

    def __iter__(self) -> Iterator[str]:
        return iter(self._headers)

    def __len__(self) -> int:
        return len(self._headers)

    def __repr__(self) -> str:
        return f"HttpRequestHeaders({self._headers!r})"


def _header_value(value: Any, params: Mapping[str, Any]) -> str:
    """`value; key=param; ...` (werkzeug's `add_header` parameters); a parameter that is
    not a token is quoted, `True` adds the key alone, `None` leaves it out."""
    text = value if isinstance(value, str) else str(value)
    for key, param in params.items():
        if param is None or param is False:
            continue
        key = key.replace("_", "-")
        if param is True:
            text += f"; {key}"
            continue
        param = str(param)
        if param and all(c.isalnum() or c in "!#$%&'*+-.^_`|~" for c in param) and param.isascii():
            text += f"; {key}={param}"
        else:
            escaped = param.replace("\\", "\\\\").replace('"', '\\"')
            text += f'; {key}="{escaped}"'
    return text


class HttpResponseHeaders(collections.abc.MutableMapping):
    """Response headers as werkzeug's `Headers`, which the azure-functions library uses:
    an ordered list of (name, value) pairs with case-insensitive names, so that a header
    can be sent several times (`add('Set-Cookie', ...)` twice).

    `h[name]` / `h.get(name)` give the first value, `h.getlist(name)` all of them;
    `h[name] = v` (or `set`) replaces every value; `add` / `add_header` append;
    `keys()`, `values()`, `items()` and `len()` count every pair. Each `Set-Cookie`
    value becomes a header of its own; other repeated headers are sent as one
    comma-separated header (RFC 9110 §5.3)."""

    __slots__ = ("_list",)

    def __init__(self, source: Union[Mapping[str, Any], Iterable[Tuple[str, Any]], None] = None) -> None:
        self._list: List[Tuple[str, str]] = []
        if source:
            self.extend(source)

    @staticmethod
    def _str(value: Any) -> str:
        return value if isinstance(value, str) else str(value)

    def __getitem__(self, key: str) -> str:
        low = key.lower()
        for k, v in self._list:
            if k.lower() == low:
                return v
        raise KeyError(key)

    def get(self, key: str, default: Any = None, type: Optional[Any] = None) -> Any:  # noqa: A002
        try:
            value = self[key]
        except KeyError:
            return default
        if type is None:
            return value
        try:
            return type(value)
        except (ValueError, TypeError):
            return default

    def getlist(self, key: str, type: Optional[Any] = None) -> List[Any]:  # noqa: A002
        low = key.lower()
        values = [v for k, v in self._list if k.lower() == low]
        if type is None:
            return values
        out = []
        for v in values:
            try:
                out.append(type(v))
            except (ValueError, TypeError):
                pass
        return out

    def get_all(self, name: str) -> List[str]:
        """Every value of `name` (as `getlist`)."""
        return self.getlist(name)

    def set(self, _key: str, _value: Any, **params: Any) -> None:
        """Replaces every value of the header with one, in the place of the first."""
        value = _header_value(_value, params) if params else self._str(_value)
        low = _key.lower()
        out: List[Tuple[str, str]] = []
        placed = False
        for k, v in self._list:
            if k.lower() == low:
                if not placed:
                    out.append((_key, value))
                    placed = True
            else:
                out.append((k, v))
        if not placed:
            out.append((_key, value))
        self._list = out

    def __setitem__(self, key: str, value: Any) -> None:
        self.set(key, value)

    def setdefault(self, key: str, default: Any = None) -> Any:  # type: ignore[override]
        if key in self:
            return self[key]
        self.set(key, default)
        return self[key]

    def add(self, _key: str, _value: Any, **params: Any) -> None:
        """Appends a value; the header's earlier values stay."""
        self._list.append((_key, _header_value(_value, params) if params else self._str(_value)))

    def add_header(self, _key: str, _value: Any, **params: Any) -> None:
        """As `add` (the name of the standard library's `email.message` method)."""
        self.add(_key, _value, **params)

    def extend(self, *args: Any, **kwargs: Any) -> None:
        """Appends the pairs of a mapping or an iterable of pairs (and keywords)."""
        for source in args:
            if isinstance(source, HttpResponseHeaders):
                items: Iterable[Tuple[str, Any]] = source.items()
            elif isinstance(source, collections.abc.Mapping):
                items = source.items()
            else:
                items = source
            for k, v in items:
                self.add(k, v)
        for k, v in kwargs.items():
            self.add(k, v)

    def __delitem__(self, key: str) -> None:
        """Removes every value of the header (a header that is not there: nothing)."""
        low = key.lower()
        self._list = [(k, v) for k, v in self._list if k.lower() != low]

    def remove(self, key: str) -> None:
        del self[key]

    def pop(self, key: str, *default: Any) -> Any:  # type: ignore[override]
        """Removes the header and returns its first value."""
        try:
            value = self[key]
        except KeyError:
            if default:
                return default[0]
            raise
        del self[key]
        return value

    def __contains__(self, key: object) -> bool:
        if not isinstance(key, str):
            return False
        low = key.lower()
        return any(k.lower() == low for k, _ in self._list)

    def __iter__(self) -> Iterator[str]:
        return (k for k, _ in self._list)

    def __len__(self) -> int:
        return len(self._list)

    def keys(self) -> List[str]:  # type: ignore[override]
        return [k for k, _ in self._list]

    def values(self) -> List[str]:  # type: ignore[override]
        return [v for _, v in self._list]

    def items(self) -> List[Tuple[str, str]]:  # type: ignore[override]
        return list(self._list)

    def clear(self) -> None:
        self._list = []

    def copy(self) -> "HttpResponseHeaders":
        return HttpResponseHeaders(self._list)

    def __eq__(self, other: object) -> bool:
        if isinstance(other, HttpResponseHeaders):
            return self._list == other._list
        return collections.abc.Mapping.__eq__(self, other)

    __hash__ = None  # type: ignore[assignment]

    def __repr__(self) -> str:
        return f"HttpResponseHeaders({self._list!r})"


class HttpResponse:
    """An HTTP response.

    :param body: optional str (encoded with `charset`) or bytes.
    :param status_code: defaults to 200; an http.HTTPStatus is accepted.
    :param headers: optional mapping (or list of pairs) of response headers.
    :param mimetype: defaults to 'text/plain'.
    :param charset: defaults to 'utf-8'.
    """

    def __init__(self, body: Optional[Union[str, bytes, bytearray]] = None, *,
                 status_code: Optional[Union[int, http.HTTPStatus]] = None,
                 headers: Union[Mapping[str, Any], Iterable[Tuple[str, Any]], None] = None,
                 mimetype: Optional[str] = None,
                 charset: Optional[str] = None) -> None:
        if status_code is None:
            status_code = 200
        self._status_code = int(status_code)
        self._mimetype = "text/plain" if mimetype is None else mimetype
        self._charset = "utf-8" if charset is None else charset
        self._headers = HttpResponseHeaders(headers)
        self._body = b"" if body is None else self._encode_body(body)

    def _encode_body(self, body: Any) -> bytes:
        if isinstance(body, str):
            return body.encode(self._charset)
        if isinstance(body, (bytes, bytearray)):
            return bytes(body)
        raise TypeError(
            f"response is expected to be either of str, bytes, or bytearray, "
            f"got {type(body).__name__}")

    @property
    def status_code(self) -> int:
        return self._status_code

    @property
    def mimetype(self) -> str:
        return self._mimetype

    @property
    def charset(self) -> str:
        return self._charset

    @property
    def headers(self) -> HttpResponseHeaders:
        return self._headers

    def get_body(self) -> bytes:
        return self._body

    def __repr__(self) -> str:
        return f"<azure.functions.HttpResponse status_code={self._status_code}>"


_EMPTY: Mapping[str, str] = types.MappingProxyType({})


class HttpRequest:
    """An HTTP request.

    :param method: HTTP method name.
    :param url: full request URL.
    :param headers: request headers (case-insensitive lookup).
    :param params: query-string parameters.
    :param route_params: route parameters.
    :param body: request body bytes (a str is UTF-8 encoded; None is an empty body).
    :param body_type: how the body arrived ('bytes', 'string', 'json'); accepted for
        compatibility with the library's signature.

    `form` and `files` parse an application/x-www-form-urlencoded or multipart/form-data
    body on first access (both are empty for other bodies); a malformed body raises
    `ValueError` (a `FormDataError` naming the part). Left to the worker uncaught, it
    answers 400 with that message.
    """

    # Headers, params and the form are converted on first access: most functions read few of them.
    __slots__ = ("_method", "_url", "_raw_headers", "_headers", "_raw_params",
                 "_params", "_raw_route_params", "_route_params", "_body", "_form",
                 "_files", "_form_error")

    def __init__(self, method: str, url: str, *,
                 headers: Optional[Mapping[str, str]] = None,
                 params: Optional[Mapping[str, str]] = None,
                 route_params: Optional[Mapping[str, str]] = None,
                 body: Union[bytes, str, None],
                 body_type: Optional[str] = None) -> None:
        if isinstance(body, str):
            body = body.encode("utf-8")
        elif body is None:
            body = b""
        elif isinstance(body, (bytearray, memoryview)):
            body = bytes(body)
        elif not isinstance(body, bytes):
            raise TypeError(f"unexpected HTTP request body type: {type(body).__name__}")
        self._method = method
        self._url = url
        self._raw_headers = headers
        self._headers: Optional[HttpRequestHeaders] = None
        self._raw_params = params
        self._params: Optional[Mapping[str, str]] = None
        self._raw_route_params = route_params
        self._route_params: Optional[Mapping[str, str]] = None
        self._body = body
        self._form: Optional[ImmutableMultiDict] = None
        self._files: Optional[ImmutableMultiDict] = None
        self._form_error: Optional[FormDataError] = None

    @property
    def method(self) -> str:
        return self._method.upper()

    @property
    def url(self) -> str:
        return self._url

    @property
    def headers(self) -> HttpRequestHeaders:
        if self._headers is None:
            self._headers = HttpRequestHeaders(self._raw_headers)
            self._raw_headers = None
        return self._headers

    @property
    def params(self) -> Mapping[str, str]:
        """Query-string parameters (read-only)."""
        if self._params is None:
            raw = self._raw_params
            self._params = types.MappingProxyType(dict(raw)) if raw else _EMPTY
            self._raw_params = None
        return self._params

    @property
    def route_params(self) -> Mapping[str, str]:
        """Route parameters (read-only)."""
        if self._route_params is None:
            raw = self._raw_route_params
            self._route_params = types.MappingProxyType(dict(raw)) if raw else _EMPTY
            self._raw_route_params = None
        return self._route_params

    def _parse_form(self) -> None:
        if self._form is not None:
            return
        if self._form_error is not None:
            raise self._form_error  # the same error on every access
        try:
            self._form, self._files = parse_form(self._body, self.headers.get("content-type"))
        except FormDataError as exc:
            self._form_error = exc
            raise

    @property
    def form(self) -> ImmutableMultiDict:
        """The fields of a form body: `form['name']` (the first value),
        `form.getlist('name')` (every value); empty for other bodies."""
        self._parse_form()
        return self._form  # type: ignore[return-value]

    @property
    def files(self) -> ImmutableMultiDict:
        """The files of a multipart/form-data body, as `FileStorage` objects:
        `files['file'].read()`, `files.getlist('file')`; empty for other bodies."""
        self._parse_form()
        return self._files  # type: ignore[return-value]

    def get_body(self) -> bytes:
        return self._body

    def get_json(self) -> Any:
        """The body parsed as JSON; raises ValueError when it is not valid JSON."""
        if not self._body:
            raise ValueError("HTTP request body is empty: no JSON to parse")
        try:
            return json.loads(self._body.decode("utf-8"))
        except ValueError as exc:  # JSONDecodeError and UnicodeDecodeError are ValueErrors
            raise ValueError(f"HTTP request does not contain valid JSON data: {exc}") from exc

    def __repr__(self) -> str:
        return f"<azure.functions.HttpRequest method={self.method!r} url={self._url!r}>"
