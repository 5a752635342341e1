"""Where the server's time goes: the run's backends sampled from pg_stat_activity many times a
second, each sample put in one class. Shares of the samples in which a backend was in a transaction
are the wait profile a limit verdict reads."""

from __future__ import annotations

import threading
from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any

# each class, and what it says in words
CLASSES = {
    "cpu": "on CPU",
    "locks": "Lock (waiting on another transaction's row or lock)",
    "wal-flush": "WAL flush (a commit waiting for its WAL to reach the disk)",
    "io": "IO (data files)",
    "lwlock": "LWLock (buffers, shared memory)",
    "client": "idle in transaction (waiting for the client: the work, the network, the pooler)",
    "other": "other waits",
}
WAL_WAITS = {("LWLock", "WALWrite"), ("IO", "WALSync"), ("IO", "WALWrite"), ("IO", "WALInitSync")}


def classify(state: str | None, wait_type: str, wait_event: str) -> str | None:
    """A backend's class in one sample; None when it is outside any transaction (idle)."""
    if state == "active":
        if not wait_type:
            return "cpu"
        if wait_type == "Lock":
            return "locks"
        if (wait_type, wait_event) in WAL_WAITS:
            return "wal-flush"
        if wait_type == "IO":
            return "io"
        if wait_type == "LWLock":
            return "lwlock"
        return "client" if wait_type == "Client" else "other"
    if state is not None and state.startswith("idle in transaction"):
        return "client"
    return None


@dataclass(frozen=True)
class WaitProfile:
    """Backend-samples per class over a window, and the sampling ticks in it."""

    ticks: int
    counts: tuple[tuple[str, int], ...] = ()

    @property
    def busy(self) -> int:
        return sum(n for _, n in self.counts)

    def share(self, name: str) -> float:
        busy = self.busy
        return dict(self.counts).get(name, 0) / busy if busy else 0.0

    @property
    def backends_busy(self) -> float:
        """Backends in a transaction at once, on average."""
        return self.busy / self.ticks if self.ticks else 0.0

    def minus(self, earlier: WaitProfile) -> WaitProfile:
        before = dict(earlier.counts)
        counts = tuple((name, n - before.get(name, 0)) for name, n in self.counts)
        return WaitProfile(self.ticks - earlier.ticks, tuple((k, n) for k, n in counts if n > 0))

    def shares(self) -> dict[str, float]:
        return {name: round(self.share(name), 3) for name, _ in sorted(self.counts, key=lambda c: -c[1])}

    def text(self) -> str:
        if not self.busy:
            return "no backend was seen in a transaction"
        parts = [
            f"{CLASSES.get(name, name)} {share:.0%}" for name, share in self.shares().items() if share >= 0.01
        ]
        return ", ".join(parts) + f" ({self.backends_busy:.1f} backends in a transaction on average)"

    def as_json(self) -> dict[str, Any]:
        return {"ticks": self.ticks, "backends_busy": round(self.backends_busy, 2), "shares": self.shares()}


class WaitTally:
    """The run's samples so far, shared by the housekeeper that adds and the phases that read."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._ticks = 0
        self._counts: dict[str, int] = {}

    def add(self, rows: Iterable[tuple[str | None, str, str]]) -> None:
        with self._lock:
            self._ticks += 1
            for state, wait_type, wait_event in rows:
                name = classify(state, wait_type, wait_event)
                if name is not None:
                    self._counts[name] = self._counts.get(name, 0) + 1

    def profile(self) -> WaitProfile:
        with self._lock:
            return WaitProfile(self._ticks, tuple(sorted(self._counts.items())))
