"""What the enqueue side measured: every enqueue timed from its due time to its commit, as the
application's request waits for it, and split into where that time went. The client's parts are
measured per message (waiting for a free producer session; waiting for its group's earlier enqueue
to commit, as an application that keeps a key's order must); the server's round trip (the statement
and its commit) is split again by what the producer's own sessions were seen doing in the wait
samples (result/waits): a lock, and whose, the WAL flush of the commit, the statement on CPU.

Memory does not grow with messages: the latency is an HDR histogram, and the parts are summed per
latency bucket (sixteen to a doubling), so the slowest 1% is read from the top buckets.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any

from pgmq_sim.result.histogram import LatencyHistogram
from pgmq_sim.result.waits import WaitProfile

# an enqueue's times on the run's clock: sent, committed, ready (nothing of its group in flight), due
EnqueueTimes = tuple[float, float, float, float]
CLIENT_PARTS = ("session", "group", "server")  # measured per enqueue, in this order
PART_NAMES = {
    "session": "waiting for a free producer session",
    "group": "waiting for its group's earlier enqueue to commit",
    "server": "the round trip of the statement and its commit",
}
SERVER_PARTS = {  # the producer's sessions' wait classes (result/waits), as parts of an enqueue
    "cpu": "the statement on the server's CPU",
    "locks": "waiting for a lock",
    "wal-flush": "the commit's WAL flush",
    "io": "reading data files",
    "lwlock": "waiting for an LWLock",
    "client": "the server waiting for the client",
    "other": "other server waits",
}
SLOWEST_SHARE = 0.01  # the cohort the account explains beside the whole


def _bucket(total_ms: float) -> int:
    """Sixteen buckets to a doubling of the latency (its microseconds' bit length, and the four bits
    after the leading one): integer arithmetic, on every enqueue's path."""
    us = int(total_ms * 1000) + 1
    length = us.bit_length()
    return (length << 4) | ((us << 4 >> (length - 1)) & 15)


class EnqueueTally:
    """Written by the producer's sessions on the run's loop, read by the phases on the main thread."""

    def __init__(self) -> None:
        self.latency = LatencyHistogram()  # due time to commit
        self.round_trip = LatencyHistogram()  # the statement and its commit
        self._buckets: dict[int, list[float]] = {}  # latency bucket: [count, session s, group s, server s]

    def add(self, enqueues: Iterable[EnqueueTimes]) -> dict[int, LatencyHistogram]:
        """Enqueues committed: each one's parts summed in its latency's bucket, its round trip
        recorded, and its latency recorded once, in the second it committed in (returned, for the
        timeline), those seconds merged into the run's. On the run's loop only: the readers copy (a
        dict's copy and a histogram's are atomic under the GIL), so no lock is taken here."""
        seconds: dict[int, LatencyHistogram] = {}
        round_trip, buckets = self.round_trip, self._buckets
        for sent, committed, ready, due in enqueues:
            total_ms = (committed - due) * 1000
            second = int(committed) if committed > 0 else 0
            latency = seconds.get(second)
            if latency is None:
                latency = seconds[second] = LatencyHistogram()
            latency.record_ms(total_ms)
            server_s = committed - sent
            round_trip.record_ms(server_s * 1000)
            key = _bucket(total_ms)
            sums = buckets.get(key)
            if sums is None:
                sums = buckets[key] = [0, 0.0, 0.0, 0.0]
            sums[0] += 1
            sums[1] += sent - ready  # waiting for a free session
            sums[2] += ready - due  # waiting for its group's earlier enqueue
            sums[3] += server_s
        for latency in seconds.values():
            self.latency.merge(latency)
        return seconds

    def copy(self) -> EnqueueTally:
        """A snapshot, for a window's edges (a phase, a sweep's step)."""
        other = EnqueueTally()
        other.latency.merge(self.latency)
        other.round_trip.merge(self.round_trip)
        other._buckets = {k: list(v) for k, v in self._buckets.copy().items()}
        return other

    def as_data(self) -> dict[str, Any]:
        """Plain data, for a worker process's report (a spread run's enqueues merge exactly)."""
        return {
            "latency": self.latency.encode(),
            "round_trip": self.round_trip.encode(),
            "buckets": [[key, *sums] for key, sums in self._buckets.copy().items()],
        }

    @classmethod
    def from_data(cls, data: dict[str, Any]) -> EnqueueTally:
        tally = cls()
        tally.latency = LatencyHistogram.decode(data["latency"])
        tally.round_trip = LatencyHistogram.decode(data["round_trip"])
        tally._buckets = {int(row[0]): [float(v) for v in row[1:]] for row in data["buckets"]}
        return tally

    def become_sum(self, parts: list[EnqueueTally]) -> None:
        """The master's tally of a spread run: the sum of every producing process's latest (each
        attribute swapped whole: a reader's copy sees the old sum or the new)."""
        whole = EnqueueTally()
        for part in parts:
            whole.latency.merge(part.latency)
            whole.round_trip.merge(part.round_trip)
            for key, sums in part._buckets.items():
                into = whole._buckets.setdefault(key, [0, 0.0, 0.0, 0.0])
                whole._buckets[key] = [a + b for a, b in zip(into, sums, strict=True)]
        self.latency, self.round_trip, self._buckets = whole.latency, whole.round_trip, whole._buckets

    def minus(self, earlier: EnqueueTally) -> EnqueueTally:
        """What was recorded since `earlier` (a copy taken then)."""
        window = EnqueueTally()
        window.latency = self.latency.minus(earlier.latency)
        window.round_trip = self.round_trip.minus(earlier.round_trip)
        for key, sums in self._buckets.copy().items():
            then = earlier._buckets.get(key, [0, 0.0, 0.0, 0.0])
            if sums[0] > then[0]:
                window._buckets[key] = [a - b for a, b in zip(sums, then, strict=True)]
        return window

    def account(
        self,
        sessions: int,
        batch: int,
        waits: WaitProfile | None,
        triggers: tuple[tuple[str, int, float], ...] = (),
        triggers_untimed: str | None = None,
        runners: tuple[tuple[str, int, int], ...] = (),
    ) -> EnqueueAccount | None:
        """The account of every enqueue so far and of the slowest 1%; None when nothing was enqueued
        while the run went (a prefill)."""
        if not self.latency.count:
            return None
        ranked = sorted(self._buckets.copy().items(), reverse=True)
        whole = [sum(v[i] for _, v in ranked) for i in range(4)]
        slowest = [0.0] * 4
        for _, sums in ranked:
            if slowest[0] >= SLOWEST_SHARE * whole[0]:
                break
            slowest = [a + b for a, b in zip(slowest, sums, strict=True)]
        return EnqueueAccount(
            sessions=sessions,
            batch=batch,
            count=int(whole[0]),
            latency_ms=self.latency.percentiles_ms(),
            round_trip_ms=self.round_trip.percentiles_ms(),
            parts_s=dict(zip(CLIENT_PARTS, whole[1:], strict=True)),
            slowest_count=int(slowest[0]),
            slowest_parts_s=dict(zip(CLIENT_PARTS, slowest[1:], strict=True)),
            waits=waits,
            triggers=triggers,
            triggers_untimed=triggers_untimed if triggers and not any(c for _, c, _ in triggers) else None,
            runners=runners,
        )


@dataclass(frozen=True)
class EnqueueAccount:
    """The enqueue side of a run: its sessions, its latency, and where the time went."""

    sessions: int  # -producers
    batch: int  # -enqueue-batch: messages an enqueue transaction may carry
    count: int  # enqueues timed
    latency_ms: dict[str, float | None]  # due time to commit: p50, p95, p99, max
    round_trip_ms: dict[str, float | None]  # the statement and its commit
    parts_s: dict[str, float]  # every enqueue's time by part (CLIENT_PARTS), summed
    slowest_count: int  # the slowest 1% (whole latency buckets: at least 1%)
    slowest_parts_s: dict[str, float]
    waits: WaitProfile | None  # their samples: lock events, the blockers seen
    # the queue tables' trigger functions over the run (every write of the queue runs them): name,
    # calls, milliseconds, where the server timed them (pg_stat_user_functions); else why not
    triggers: tuple[tuple[str, int, float], ...] = ()
    triggers_untimed: str | None = None
    runners: tuple[tuple[str, int, int], ...] = ()  # spread over processes: runner, sessions, written

    @property
    def server_shares(self) -> dict[str, float] | None:
        """What the producer's sessions were seen doing while in a statement: each wait class's share
        of their samples (None: not sampled, or never seen in one)."""
        if self.waits is None or not self.waits.busy:
            return None
        return self.waits.shares()

    @staticmethod
    def shares(parts_s: dict[str, float]) -> dict[str, float]:
        total = sum(parts_s.values())
        return {name: (value / total if total else 0.0) for name, value in parts_s.items()}

    def split(self, parts_s: dict[str, float]) -> dict[str, float]:
        """A cohort's time in shares: the client's parts, and the server's round trip split by the
        producer's samples (`server:<class>`), what they do not cover left as `server`."""
        shares = self.shares(parts_s)
        server = shares.pop("server", 0.0)
        if self.server_shares:
            for name, share in self.server_shares.items():
                shares[f"server:{name}"] = server * share
        else:
            shares["server"] = server
        return shares

    def mean_ms(self, parts_s: dict[str, float], count: int) -> float:
        return sum(parts_s.values()) / count * 1000 if count else 0.0

    def part_text(self, name: str) -> str:
        """A part of split(), in words."""
        if name.startswith("server:"):
            return SERVER_PARTS.get(name[7:], name[7:])
        return PART_NAMES[name]

    def as_json(self) -> dict[str, Any]:
        def rounded(shares: dict[str, float]) -> dict[str, float]:
            return {k: round(v, 3) for k, v in sorted(shares.items(), key=lambda kv: -kv[1])}

        return {
            "sessions": self.sessions,
            "batch": self.batch,
            "count": self.count,
            "latency_ms": {k: None if v is None else round(v, 3) for k, v in self.latency_ms.items()},
            "round_trip_ms": {k: None if v is None else round(v, 3) for k, v in self.round_trip_ms.items()},
            "mean_ms": round(self.mean_ms(self.parts_s, self.count), 3),
            "parts": rounded(self.split(self.parts_s)),
            "slowest": {
                "count": self.slowest_count,
                "mean_ms": round(self.mean_ms(self.slowest_parts_s, self.slowest_count), 3),
                "parts": rounded(self.split(self.slowest_parts_s)),
            },
            "server_waits": None if self.waits is None else self.waits.as_json(),
            "triggers": [
                {
                    "function": n,
                    "calls": c,
                    "ms": round(ms, 3),
                    "ms_per_call": round(ms / c, 4) if c else None,
                }
                for n, c, ms in self.triggers
            ],
            "triggers_untimed": self.triggers_untimed,
            "runners": [
                {"runner": runner, "sessions": sessions, "written": written}
                for runner, sessions, written in self.runners
            ],
        }
