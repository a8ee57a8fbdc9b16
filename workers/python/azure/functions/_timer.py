from __future__ import annotations

from typing import Any, Mapping, Optional


class TimerRequest:
    """What a timerTrigger function receives: whether this run is past due (the host was
    down or busy at the scheduled time), the schedule status the host keeps when
    useMonitor is on ({"Last", "Next", "LastUpdated"}), and the schedule.

    Mirrors the documented surface of azure.functions.TimerRequest."""

    def __init__(self, *, past_due: bool = False,
                 schedule_status: Optional[Mapping[str, Any]] = None,
                 schedule: Optional[Mapping[str, Any]] = None) -> None:
        self._past_due = past_due
        self._schedule_status = schedule_status
        self._schedule = schedule

    @property
    def past_due(self) -> bool:
        return self._past_due

    @property
    def schedule_status(self) -> Optional[Mapping[str, Any]]:
        return self._schedule_status

    @property
    def schedule(self) -> Optional[Mapping[str, Any]]:
        return self._schedule

    @classmethod
    def _from_payload(cls, payload: Any) -> "TimerRequest":
        """The host's timer payload, {"Schedule": ..., "ScheduleStatus": ... or null,
        "IsPastDue": bool}, as Azure's host sends it."""
        if not isinstance(payload, Mapping):
            raise ValueError(f"a timer payload is a JSON object, not {type(payload).__name__}")
        past_due = payload.get("IsPastDue", False)
        if not isinstance(past_due, bool):
            raise ValueError(f"a timer payload's IsPastDue is a bool, not {past_due!r}")
        return cls(past_due=past_due, schedule_status=payload.get("ScheduleStatus"),
                   schedule=payload.get("Schedule"))
