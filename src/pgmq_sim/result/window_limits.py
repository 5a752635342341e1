"""The limit window by window, as the run went: each window of the run's clock judged from its own
edges (engine/limit_watch), the windows of one limit in a row kept as one stretch, so a day at 10 s
windows keeps its changes of limit, not its 8,640 windows. What a live view shows is the last
window's limit; what the run keeps is the stretches."""

from __future__ import annotations

import threading
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any


@dataclass(frozen=True)
class WindowLimit:
    """One window's limit: its resource and its evidence, judged from its own figures."""

    from_s: float  # on the run's clock
    to_s: float
    resource: str
    evidence: str
    p99_ms: float | None  # the end-to-end p99 of the messages completed in it


@dataclass(frozen=True)
class LimitStretch:
    """Windows in a row of one limit: its time, how many windows, and the evidence of its worst
    window (the highest p99; the first where none completed a message)."""

    from_s: float
    to_s: float
    windows: int
    resource: str
    evidence: str
    p99_ms: float | None

    @property
    def seconds(self) -> float:
        return self.to_s - self.from_s

    def joined(self, window: WindowLimit) -> LimitStretch:
        worse = window.p99_ms is not None and (self.p99_ms is None or window.p99_ms > self.p99_ms)
        return LimitStretch(
            self.from_s,
            window.to_s,
            self.windows + 1,
            self.resource,
            window.evidence if worse else self.evidence,
            window.p99_ms if worse else self.p99_ms,
        )

    @classmethod
    def of(cls, window: WindowLimit) -> LimitStretch:
        return cls(window.from_s, window.to_s, 1, window.resource, window.evidence, window.p99_ms)

    def as_json(self) -> dict[str, Any]:
        return {
            "from_s": round(self.from_s, 3),
            "to_s": round(self.to_s, 3),
            "windows": self.windows,
            "resource": self.resource,
            "evidence": self.evidence,
            "p99_ms": None if self.p99_ms is None else round(self.p99_ms, 3),
        }


def usual(stretches: Sequence[LimitStretch]) -> str | None:
    """The limit of most of the run's time, over its windows."""
    seconds: dict[str, float] = {}
    for stretch in stretches:
        seconds[stretch.resource] = seconds.get(stretch.resource, 0.0) + stretch.seconds
    return max(seconds, key=lambda resource: seconds[resource]) if seconds else None


class WindowLimitTally:
    """Appended by the watch (the main thread), read by the live views (their own threads)."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._last: WindowLimit | None = None
        self._stretches: list[LimitStretch] = []

    def add(self, window: WindowLimit) -> None:
        with self._lock:
            self._last = window
            if self._stretches and self._stretches[-1].resource == window.resource:
                self._stretches[-1] = self._stretches[-1].joined(window)
            else:
                self._stretches.append(LimitStretch.of(window))

    def last(self) -> WindowLimit | None:
        with self._lock:
            return self._last

    def stretches(self) -> tuple[LimitStretch, ...]:
        with self._lock:
            return tuple(self._stretches)
