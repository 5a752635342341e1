"""Where the server's time goes: the run's backends sampled from pg_stat_activity many times a
second, each sample put in one class. Shares of the samples in which a backend was in a transaction
are the wait profile a limit verdict reads. A lock wait is kept with its event (relation, tuple,
transactionid, advisory, ...), and, a few times a second while the run's sessions wait on locks,
the sessions that block them (pg_blocking_pids): whose, in what state, holding what on which object."""

from __future__ import annotations

import dataclasses
import threading
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any

from pgmq_sim.model.facts import NOTIFY_QUEUE, LockBlocker
from pgmq_sim.model.identity import Whose

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
WAIT_CLASSES = ("cpu", "locks", "wal-flush", "io", "lwlock", "client", "other")  # a sample's columns


def classify(state: str | None, wait_type: str, wait_event: str) -> str | None:
    """A backend's class in one sample; None when it is outside any transaction (idle). The
    reference the sampler's query (sql/wait_counts.sql) mirrors on the server."""
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


def notify_lock_note(target: str) -> str:
    """What a lock on the notification queue means, said wherever one is named."""
    if target != NOTIFY_QUEUE:
        return ""
    return " (every notifying commit on the server takes this lock, whatever its database)"


ROW_LOCKS = ("tuple", "transactionid")  # a row another transaction holds (locked, or being changed)


@dataclass(frozen=True)
class BlockerSeen:
    """A session seen blocking the run's sessions, in how many samples of the blockers."""

    pid: int
    application: str
    state: str  # the last seen ('' where the role may not see it)
    ours: bool
    lock: str
    target: str
    mode: str
    samples: int
    database: str = ""  # its database when not the run's

    @property
    def key(self) -> tuple[int, str, bool, str, str, str, str]:
        return self.pid, self.application, self.ours, self.lock, self.target, self.mode, self.database

    def text(self) -> str:
        """e.g. pid 4242 (report job; outside the run; idle in transaction) holding ExclusiveLock
        on msg_queue."""
        pooled = self.application.endswith(Whose.POOL)  # model/identity said so in its name
        whose = "" if pooled else "the run's own" if self.ours else "outside the run"
        where = f"in database {self.database}" if self.database else ""
        about = "; ".join(
            p for p in (self.application or "no application_name", whose, where, self.state) if p
        )
        said = (
            f"pid {self.pid} ({about}) holding {self.mode} on {self.target}"
            if self.mode
            else f"pid {self.pid} ({about}) ahead in the queue for {self.target}"
        )
        return said + notify_lock_note(self.target)

    def as_json(self) -> dict[str, Any]:
        return dict(self.__dict__)


@dataclass(frozen=True)
class WaitProfile:
    """Backend-samples per class over a window, and the sampling ticks in it; the lock waits by event,
    and the blockers seen."""

    ticks: int
    counts: tuple[tuple[str, int], ...] = ()
    lock_events: tuple[tuple[str, int], ...] = ()  # Lock wait events (relation, tuple, ...), samples
    blockers: tuple[BlockerSeen, ...] = ()  # most samples first
    other_events: tuple[tuple[str, int], ...] = ()  # the other class's waits ('Timeout:PgSleep'), samples

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

    def lock_shares(self) -> dict[str, float]:
        """Each Lock wait event's share of the lock samples, most first."""
        total = sum(n for _, n in self.lock_events)
        ranked = sorted(self.lock_events, key=lambda e: -e[1])
        return {event: round(n / total, 3) for event, n in ranked} if total else {}

    def row_lock_share(self) -> float:
        shares = self.lock_shares()
        return sum(shares.get(event, 0.0) for event in ROW_LOCKS)

    @property
    def blocker_samples(self) -> int:
        return sum(b.samples for b in self.blockers)

    def minus(self, earlier: WaitProfile) -> WaitProfile:
        before, events, others = dict(earlier.counts), dict(earlier.lock_events), dict(earlier.other_events)
        seen = {b.key: b.samples for b in earlier.blockers}
        return WaitProfile(
            self.ticks - earlier.ticks,
            _positive((name, n - before.get(name, 0)) for name, n in self.counts),
            _positive((name, n - events.get(name, 0)) for name, n in self.lock_events),
            tuple(
                dataclasses.replace(b, samples=b.samples - seen.get(b.key, 0))
                for b in self.blockers
                if b.samples > seen.get(b.key, 0)
            ),
            _positive((name, n - others.get(name, 0)) for name, n in self.other_events),
        )

    def shares(self) -> dict[str, float]:
        return {name: round(self.share(name), 3) for name, _ in sorted(self.counts, key=lambda c: -c[1])}

    def text(self) -> str:
        if not self.busy:
            return "no backend was seen in a transaction"
        detail = {"locks": self.lock_text(), "other": self.other_text()}
        parts = [
            f"{CLASSES.get(name, name)} {share:.0%}" + (f" [{detail[name]}]" if detail.get(name) else "")
            for name, share in self.shares().items()
            if share >= 0.01
        ]
        return ", ".join(parts) + f" ({self.backends_busy:.1f} backends in a transaction on average)"

    def other_text(self) -> str:
        """e.g. 'Timeout:PgSleep 92%, IPC:SyncRep 8%' (each event's share of the other class's samples)."""
        total = sum(n for _, n in self.other_events)
        ranked = sorted(self.other_events, key=lambda e: -e[1])
        return ", ".join(f"{event} {n / total:.0%}" for event, n in ranked[:3]) if total else ""

    def lock_text(self) -> str:
        """e.g. 'Lock: relation 96%, tuple 4%'."""
        shares = self.lock_shares()
        return (
            "Lock: " + ", ".join(f"{event} {share:.0%}" for event, share in shares.items()) if shares else ""
        )

    def as_json(self) -> dict[str, Any]:
        return {
            "ticks": self.ticks,
            "backends_busy": round(self.backends_busy, 2),
            "shares": self.shares(),
            "lock_events": self.lock_shares(),
            "blockers": [b.as_json() for b in self.blockers],
            "other_events": dict(sorted(self.other_events, key=lambda e: -e[1])),
        }


def _positive(pairs: Iterable[tuple[str, int]]) -> tuple[tuple[str, int], ...]:
    return tuple((name, n) for name, n in pairs if n > 0)


class WaitTally:
    """The run's samples so far, shared by the housekeeper that adds (on the run's loop) and the
    phases that read."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._ticks = 0
        self._counts: dict[str, int] = {}
        self._events: dict[str, int] = {}
        self._others: dict[str, int] = {}
        self._blockers: dict[tuple[int, str, bool, str, str, str, str], BlockerSeen] = {}

    def add_counts(
        self,
        counts: Iterable[int],
        lock_events: Mapping[str, int],
        other_events: Mapping[str, int] | None = None,
    ) -> None:
        """One sample: backends per class (in WAIT_CLASSES' order), Lock waits per event, the other
        class's waits per type and event."""
        with self._lock:
            self._ticks += 1
            for name, n in zip(WAIT_CLASSES, counts, strict=True):
                if n:
                    self._counts[name] = self._counts.get(name, 0) + n
            for event, n in lock_events.items():
                self._events[event] = self._events.get(event, 0) + n
            for event, n in (other_events or {}).items():
                self._others[event] = self._others.get(event, 0) + n

    def blocked(self, blockers: Iterable[LockBlocker]) -> None:
        """One sample of the sessions blocking the run's: each blocker once per object and mode."""
        with self._lock:
            once = {
                BlockerSeen(b.pid, b.application, b.state, b.ours, b.lock, b.target, b.mode, 1, b.database)
                for b in blockers
            }
            for seen in once:
                before = self._blockers.get(seen.key)
                samples = before.samples + 1 if before else 1
                self._blockers[seen.key] = dataclasses.replace(seen, samples=samples)

    def profile(self) -> WaitProfile:
        with self._lock:
            return WaitProfile(
                self._ticks,
                tuple(sorted(self._counts.items())),
                tuple(sorted(self._events.items())),
                tuple(sorted(self._blockers.values(), key=lambda b: (-b.samples, b.pid))),
                tuple(sorted(self._others.items())),
            )
