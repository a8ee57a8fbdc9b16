from __future__ import annotations

import datetime
import json
from typing import Any, Optional, Union


class QueueMessage:
    """A queue message: what a queueTrigger function receives (with the message's
    metadata), and what it may set on a queue output binding (`func.Out[func.QueueMessage]`,
    or a list of them for several messages).

    Mirrors the documented surface of azure.functions.QueueMessage."""

    def __init__(self, *, id: Optional[str] = None,
                 body: Optional[Union[str, bytes]] = None,
                 pop_receipt: Optional[str] = None,
                 dequeue_count: Optional[int] = None,
                 expiration_time: Optional[datetime.datetime] = None,
                 insertion_time: Optional[datetime.datetime] = None,
                 time_next_visible: Optional[datetime.datetime] = None) -> None:
        self._id = id
        self._body = self._as_bytes(body)
        self._pop_receipt = pop_receipt
        self._dequeue_count = dequeue_count
        self._expiration_time = expiration_time
        self._insertion_time = insertion_time
        self._time_next_visible = time_next_visible

    @staticmethod
    def _as_bytes(body: Optional[Union[str, bytes]]) -> bytes:
        if body is None:
            return b""
        if isinstance(body, str):
            return body.encode("utf-8")
        if isinstance(body, (bytes, bytearray, memoryview)):
            return bytes(body)
        raise TypeError(f"a queue message body is str or bytes, not {type(body).__name__}")

    @property
    def id(self) -> Optional[str]:
        """The message's id, as the queue service assigned it."""
        return self._id

    @property
    def dequeue_count(self) -> Optional[int]:
        """How many times the message has been taken from the queue (this time included)."""
        return self._dequeue_count

    @property
    def expiration_time(self) -> Optional[datetime.datetime]:
        return self._expiration_time

    @property
    def insertion_time(self) -> Optional[datetime.datetime]:
        return self._insertion_time

    @property
    def time_next_visible(self) -> Optional[datetime.datetime]:
        return self._time_next_visible

    @property
    def pop_receipt(self) -> Optional[str]:
        return self._pop_receipt

    def get_body(self) -> bytes:
        """The message's content as bytes."""
        return self._body

    def get_json(self) -> Any:
        """The message's content parsed as JSON (ValueError if it is not JSON)."""
        return json.loads(self._body.decode("utf-8"))

    def __repr__(self) -> str:
        return (f"<azure.functions.QueueMessage id={self._id!r} "
                f"dequeue_count={self._dequeue_count!r} body_length={len(self._body)}>")
