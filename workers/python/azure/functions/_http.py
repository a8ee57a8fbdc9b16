from __future__ import annotations

import collections.abc
import http
import json
import types
from typing import Any, Dict, Iterator, Mapping, Optional, Tuple, Union


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


class HttpResponseHeaders(collections.abc.MutableMapping):
    """Response headers: case-insensitive keys; the casing last used to set a header
    is the one sent."""

    __slots__ = ("_items",)

    def __init__(self, source: Optional[Mapping[str, str]] = None) -> None:
        self._items: Dict[str, Tuple[str, str]] = {}
        if source:
            for k, v in source.items():
                self[k] = v

    def __getitem__(self, key: str) -> str:
        return self._items[key.lower()][1]

    def __setitem__(self, key: str, value: str) -> None:
        self._items[key.lower()] = (key, value)

    def __delitem__(self, key: str) -> None:
        del self._items[key.lower()]

    def __contains__(self, key: object) -> bool:
        return isinstance(key, str) and key.lower() in self._items

    def __iter__(self) -> Iterator[str]:
        return (k for k, _ in self._items.values())

    def __len__(self) -> int:
        return len(self._items)

    def add_header(self, key: str, value: str) -> None:
        """Set a header (kept for compatibility with the werkzeug-based original;
        a repeated header replaces the earlier value here)."""
        self[key] = value

    def __repr__(self) -> str:
        return f"HttpResponseHeaders({dict(self._items.values())!r})"


class HttpResponse:
    """An HTTP response.

    :param body: optional str (encoded with `charset`) or bytes.
    :param status_code: defaults to 200; an http.HTTPStatus is accepted.
    :param headers: optional mapping of response headers.
    :param mimetype: defaults to 'text/plain'.
    :param charset: defaults to 'utf-8'.
    """

    def __init__(self, body: Optional[Union[str, bytes, bytearray]] = None, *,
                 status_code: Optional[Union[int, http.HTTPStatus]] = None,
                 headers: Optional[Mapping[str, str]] = None,
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
    :param body: request body bytes (a str is UTF-8 encoded).
    """

    # Headers and params are converted on first access: most functions read few of them.
    __slots__ = ("_method", "_url", "_raw_headers", "_headers", "_raw_params",
                 "_params", "_raw_route_params", "_route_params", "_body")

    def __init__(self, method: str, url: str, *,
                 headers: Optional[Mapping[str, str]] = None,
                 params: Optional[Mapping[str, str]] = None,
                 route_params: Optional[Mapping[str, str]] = None,
                 body: Union[bytes, str]) -> None:
        if isinstance(body, str):
            body = body.encode("utf-8")
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

    def get_body(self) -> bytes:
        return self._body

    def get_json(self) -> Any:
        """The body parsed as JSON; raises ValueError when it is not valid JSON."""
        return json.loads(self._body.decode("utf-8"))

    def __repr__(self) -> str:
        return f"<azure.functions.HttpRequest method={self.method!r} url={self._url!r}>"
