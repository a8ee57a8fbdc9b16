from __future__ import annotations

from typing import Generic, Optional, TypeVar

T = TypeVar("T")


class Out(Generic[T]):
    """An output binding parameter: the function calls set(); the worker reads get()
    after the call. A value of None means "not set" (no output is written)."""

    __slots__ = ("_value",)

    def __init__(self) -> None:
        self._value: Optional[T] = None

    def set(self, val: T) -> None:
        self._value = val

    def get(self) -> T:
        return self._value  # type: ignore[return-value]

    def __repr__(self) -> str:
        return f"<azure.functions.Out value={self._value!r}>"
