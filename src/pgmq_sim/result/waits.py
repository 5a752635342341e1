"""Where the server's time goes: the run's backends sampled from pg_stat_activity many times a
second, each sample put in one class. Shares of the samples in which a backend was in a transaction
are the wait profile a limit verdict reads. A lock wait is kept with its event (relation, tuple,
transactionid, advisory, ...), and, a few times a second while the run's sessions wait on locks,
the sessions that block them (pg_blocking_pids): whose, in what state, holding what on which object."""

from __future__ import annotations

import dataclasses
import math
import threading
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any

from pgmq_sim.model.facts import LockBlocker

# each class, and its name in words (the views' and the verdicts' label for it)
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


SLICES_MOST = 2048  # a run's wait slices at most: past it, adjacent pairs merge (a day's: 64 s each)


@dataclass(frozen=True)
class WaitSlices:
    """The run's wait samples by stretch of its clock: slice i holds the samples taken in
    [i * slice_s, (i + 1) * slice_s), so a stretch of the run (an episode) is judged by its own."""

    slice_s: int
    profiles: tuple[WaitProfile, ...]

    def between(self, from_s: float, to_s: float) -> WaitProfile | None:
        """The samples of the slices that lie in [from_s, to_s), a slice cut by an edge included;
        None where none was taken."""
        first, last = int(from_s // self.slice_s), math.ceil(to_s / self.slice_s)
        inside = [p for p in self.profiles[max(0, first) : max(0, last)] if p.ticks]
        if not inside:
            return None
        summed = _Samples()
        for profile in inside:
            summed.merge(_Samples.of(profile))
        return summed.profile()


class _Samples:
    """Samples added up: the whole run's, or one slice of it."""

    def __init__(self) -> None:
        self.ticks = 0
        self.counts: dict[str, int] = {}
        self.events: dict[str, int] = {}
        self.others: dict[str, int] = {}
        self.blockers: dict[tuple[int, str, bool, str, str, str, str], BlockerSeen] = {}

    def add(self, counts: Iterable[int], events: Mapping[str, int], others: Mapping[str, int]) -> None:
        self.ticks += 1
        for name, n in zip(WAIT_CLASSES, counts, strict=True):
            if n:
                self.counts[name] = self.counts.get(name, 0) + n
        for event, n in events.items():
            self.events[event] = self.events.get(event, 0) + n
        for event, n in others.items():
            self.others[event] = self.others.get(event, 0) + n

    def see(self, seen: BlockerSeen) -> None:
        before = self.blockers.get(seen.key)
        self.blockers[seen.key] = dataclasses.replace(
            seen, samples=seen.samples + (before.samples if before else 0)
        )

    @classmethod
    def of(cls, profile: WaitProfile) -> _Samples:
        samples = cls()
        samples.ticks = profile.ticks
        samples.counts, samples.events = dict(profile.counts), dict(profile.lock_events)
        samples.others = dict(profile.other_events)
        samples.blockers = {b.key: b for b in profile.blockers}
        return samples

    def merge(self, other: _Samples) -> None:
        self.ticks += other.ticks
        for mine, theirs in (
            (self.counts, other.counts),
            (self.events, other.events),
            (self.others, other.others),
        ):
            for name, n in theirs.items():
                mine[name] = mine.get(name, 0) + n
        for seen in other.blockers.values():
            self.see(seen)

    def profile(self) -> WaitProfile:
        return WaitProfile(
            self.ticks,
            tuple(sorted(self.counts.items())),
            tuple(sorted(self.events.items())),
            tuple(sorted(self.blockers.values(), key=lambda b: (-b.samples, b.pid))),
            tuple(sorted(self.others.items())),
        )


class WaitTally:
    """The run's samples so far, shared by the housekeeper that adds (on the run's loop) and the
    phases that read; by slice of the run's clock too, where a sample's time is given."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._whole = _Samples()
        self._slices: list[_Samples] = []
        self._slice_s = 1

    def add_counts(
        self,
        counts: Iterable[int],
        lock_events: Mapping[str, int],
        other_events: Mapping[str, int] | None = None,
        at_s: float | None = None,
    ) -> None:
        """One sample: backends per class (in WAIT_CLASSES' order), Lock waits per event, the other
        class's waits per type and event; `at_s`, when on the run's clock, its slice."""
        counts = tuple(counts)
        with self._lock:
            self._whole.add(counts, lock_events, other_events or {})
            if at_s is not None:
                self._slice(at_s).add(counts, lock_events, other_events or {})

    def blocked(self, blockers: Iterable[LockBlocker], at_s: float | None = None) -> None:
        """One sample of the sessions blocking the run's: each blocker once per object and mode."""
        with self._lock:
            once = {
                BlockerSeen(b.pid, b.application, b.state, b.ours, b.lock, b.target, b.mode, 1, b.database)
                for b in blockers
            }
            for seen in once:
                self._whole.see(seen)
                if at_s is not None:
                    self._slice(at_s).see(seen)

    def _slice(self, at_s: float) -> _Samples:
        index = max(0, int(at_s)) // self._slice_s
        while index >= SLICES_MOST:  # twice as long each: adjacent pairs merge
            pairs = [self._slices[i : i + 2] for i in range(0, len(self._slices), 2)]
            self._slices = [_merged(pair) for pair in pairs]
            self._slice_s *= 2
            index = max(0, int(at_s)) // self._slice_s
        while len(self._slices) <= index:
            self._slices.append(_Samples())
        return self._slices[index]

    def profile(self) -> WaitProfile:
        with self._lock:
            return self._whole.profile()

    def slices(self) -> WaitSlices:
        with self._lock:
            return WaitSlices(self._slice_s, tuple(s.profile() for s in self._slices))


def _merged(pair: list[_Samples]) -> _Samples:
    first = pair[0]
    for other in pair[1:]:
        first.merge(other)
    return first
