from __future__ import annotations

import io
from typing import Optional


class InputStream(io.BufferedIOBase):
    """A read-only, non-seekable file-like view of an input blob."""

    def __init__(self, *, data: bytes, name: Optional[str] = None,
                 uri: Optional[str] = None, length: Optional[int] = None) -> None:
        super().__init__()
        self._io = io.BytesIO(data)
        self._name = name
        self._uri = uri
        self._length = length

    @property
    def name(self) -> Optional[str]:
        """The blob's name, "container/path/to/blob"."""
        return self._name

    @property
    def length(self) -> Optional[int]:
        """The blob's size in bytes."""
        return self._length

    @property
    def uri(self) -> Optional[str]:
        """The blob's primary location URI."""
        return self._uri

    def read(self, size: Optional[int] = -1) -> bytes:
        return self._io.read(size)

    def read1(self, size: Optional[int] = -1) -> bytes:
        return self._io.read1(size)

    def readinto(self, buffer) -> int:  # type: ignore[override]
        return self._io.readinto(buffer)

    def readable(self) -> bool:
        return True

    def seekable(self) -> bool:
        return False

    def writable(self) -> bool:
        return False

    def __repr__(self) -> str:
        return f"<azure.functions.InputStream name={self._name!r} length={self._length!r}>"
