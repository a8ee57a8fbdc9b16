from __future__ import annotations

import io
from typing import Any, Optional, Union

_RELEASED = ("this InputStream's content was in shared memory, which is valid only "
             "during the invocation; read it (or copy it) before the function returns")


class InputStream(io.BufferedIOBase):
    """A read-only, non-seekable file-like view of an input blob.

    `data` is the blob's bytes, or a read-only buffer over them (the FaaST worker passes
    a memoryview over a shared-memory mapping for blobs from the runtime's cache).

    A large blob that missed the runtime's cache may still be downloading when the
    function starts (cache.streamThreshold): `read`/`readinto` then return as soon as the
    bytes they ask for have arrived, `read1` returns what has arrived (at least one byte),
    and `getbuffer` waits for the whole blob. If the download fails, the read raises
    OSError naming the blob.
    """

    def __init__(self, *, data: Union[bytes, memoryview], name: Optional[str] = None,
                 uri: Optional[str] = None, length: Optional[int] = None,
                 fill: Any = None) -> None:
        super().__init__()
        # The worker's progress record of a streamed input (wait(end) -> bytes available), or None.
        self._fill = fill
        if isinstance(data, bytes):
            self._bytes: Optional[bytes] = data
            self._io: Optional[io.BytesIO] = io.BytesIO(data)
            self._view: Optional[memoryview] = None
        else:
            view = memoryview(data)
            if view.ndim != 1 or view.format not in ("B", "b", "c"):
                view = view.cast("B")
            self._bytes = None
            self._io = None
            self._view = view.toreadonly()
            self._pos = 0
        self._released = False
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

    def getbuffer(self) -> memoryview:
        """The whole blob as a read-only memoryview, without copying it.

        For a blob delivered through shared memory the view maps the runtime's cache
        directly: it is valid only during the invocation (afterwards the memory may hold
        other data). Copy what must outlive the invocation (`bytes(view)`)."""
        if self._io is not None:
            return memoryview(self._bytes)  # type: ignore[arg-type]
        view = self._live_view()
        if self._fill is not None:
            self._fill.wait(len(view))
        return view[:]  # a new view over the same memory

    def _live_view(self) -> memoryview:
        if self._released:
            raise ValueError(_RELEASED)
        return self._view  # type: ignore[return-value]

    def read(self, size: Optional[int] = -1) -> bytes:
        if self._io is not None:
            return self._io.read(size)
        view = self._live_view()
        pos = self._pos
        end = len(view) if size is None or size < 0 else min(len(view), pos + size)
        if end <= pos:
            return b""
        if self._fill is not None:
            self._fill.wait(end)
        self._pos = end
        return view[pos:end].tobytes()

    def read1(self, size: Optional[int] = -1) -> bytes:
        if self._io is not None:
            return self._io.read1(size)
        if self._fill is not None:
            view = self._live_view()
            pos = self._pos
            if pos < len(view):
                # What has arrived, at least one byte: a consumer of chunks keeps pace with the download.
                available = self._fill.wait(pos + 1)
                if size is None or size < 0 or pos + size > available:
                    size = available - pos
        return self.read(size)

    def readinto(self, buffer) -> int:  # type: ignore[override]
        if self._io is not None:
            return self._io.readinto(buffer)
        view = self._live_view()
        target = memoryview(buffer).cast("B")
        pos = self._pos
        n = max(0, min(len(target), len(view) - pos))
        if self._fill is not None and n > 0:
            self._fill.wait(pos + n)
        target[:n] = view[pos:pos + n]
        self._pos = pos + n
        return n

    def readable(self) -> bool:
        return True

    def seekable(self) -> bool:
        return False

    def writable(self) -> bool:
        return False

    def _release(self) -> None:
        """The worker calls this when the invocation ends (shared-memory content only)."""
        if self._view is not None and not self._released:
            self._released = True
            try:
                self._view.release()
            except BufferError:  # something still exports it: GC releases it later
                pass

    def __repr__(self) -> str:
        return f"<azure.functions.InputStream name={self._name!r} length={self._length!r}>"
