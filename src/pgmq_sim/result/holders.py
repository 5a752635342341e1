"""Who held the locks a claim may skip or wait on, sampled twice a second while the run goes (the
lock census, sql/lock_census.sql): sessions outside the run holding advisory locks, strong locks on
the queue's tables or rows of them, each with when it was first and last seen; and what the run's
own workers held, so a claim that locks more rows than it returns shows in numbers. Hidden time is
read against it (verdicts/hidden)."""

from __future__ import annotations

import statistics
import threading
from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any

from pgmq_sim.model.facts import LockBlocker, LockSample
from pgmq_sim.model.identity import Whose

SHOWN = 5  # holders outside the run kept, most samples first


@dataclass(frozen=True)
class HolderSeen:
    """A session outside the run's workers seen holding locks, over the samples it was seen in."""

    pid: int
    application: str
    state: str  # the last seen ('' where the role may not see it)
    first_s: float  # on the run's clock
    last_s: float
    samples: int
    advisory_max: int
    rows_max: int
    relation: str  # the last relation lock seen ('' for none)
    xact_s_max: float
    blocked: str = ""  # the run's sessions it was seen blocking (their application names)
    database: str = ""  # its database when not the run's
    blocking_on: str = ""  # what the run's sessions waited for ('the notification queue', a table)

    def as_json(self) -> dict[str, Any]:
        return dict(self.__dict__) | {"first_s": round(self.first_s, 2), "last_s": round(self.last_s, 2)}


@dataclass(frozen=True)
class LockCensus:
    """The census over the run: its samples, who outside the workers held locks, what the workers
    held per sample (sessions holding anything, their rows and advisory locks summed), and the
    server's clock against the run's (seconds to subtract from a server epoch for the run's clock)."""

    samples: int
    rows_samples: int  # samples in which the queue's rows were counted (its tables small enough)
    holders: tuple[HolderSeen, ...] = ()
    worker_holdings: int = 0  # a worker's session seen holding rows or advisory locks, once a sample
    worker_rows: int = 0
    worker_advisory: int = 0
    worker_rows_max: int = 0
    server_offset_s: float | None = None
    pool_holdings: int = 0  # behind a transaction pooler: the run's pool's connections seen holding

    @property
    def rows_per_worker(self) -> float:
        return self.worker_rows / self.worker_holdings if self.worker_holdings else 0.0

    @property
    def advisory_per_worker(self) -> float:
        return self.worker_advisory / self.worker_holdings if self.worker_holdings else 0.0

    def as_json(self) -> dict[str, Any]:
        return {
            "samples": self.samples,
            "rows_samples": self.rows_samples,
            "holders": [h.as_json() for h in self.holders],
            "worker_holdings": self.worker_holdings,
            "rows_per_worker": round(self.rows_per_worker, 2),
            "advisory_per_worker": round(self.advisory_per_worker, 2),
            "worker_rows_max": self.worker_rows_max,
            "pool_holdings": self.pool_holdings,
        }


class LockCensusTally:
    """The census so far: the housekeeper adds (on the run's loop), the phases read."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._samples = 0
        self._rows_samples = 0
        self._holders: dict[tuple[int, str], HolderSeen] = {}
        self._holdings = self._rows = self._advisory = self._rows_max = 0
        self._pool_holdings = 0  # a server connection of the run's pool seen holding, whose not known
        self._offsets: list[float] = []

    def add(self, at_s: float, sample: LockSample) -> None:
        with self._lock:
            self._samples += 1
            self._rows_samples += sample.rows_counted
            if len(self._offsets) < 1000:
                self._offsets.append(sample.server_epoch - at_s)
            for held in sample.held:
                rows = held.rows or 0
                if held.worker:
                    if rows or held.advisory:
                        self._holdings += 1
                        self._rows += rows
                        self._advisory += held.advisory
                        self._rows_max = max(self._rows_max, rows)
                    continue
                if held.whose != Whose.OUTSIDE:  # the run's own, or its pool's: never a holder outside it
                    if held.whose == Whose.POOL and (rows or held.advisory or held.relation):
                        self._pool_holdings += 1
                    continue
                if rows or held.advisory or held.relation:
                    self._see(held.pid, held.application, held.state, at_s, held.xact_s, held.advisory, rows,
                              held.relation)  # fmt: skip

    def blocked(self, at_s: float, blockers: Iterable[LockBlocker]) -> None:
        """The wait sampler's blockers (sql/lock_blockers.sql): a session outside the run seen blocking
        the run's sessions holds what they waited for, whatever it is (a parent row, a table)."""
        with self._lock:
            for b in blockers:
                if not b.ours:
                    self._see(b.pid, b.application, b.state, at_s, b.xact_s, blocked=b.waiter,
                              database=b.database, blocking_on=b.target)  # fmt: skip

    def _see(
        self,
        pid: int,
        application: str,
        state: str,
        at_s: float,
        xact_s: float,
        advisory: int = 0,
        rows: int = 0,
        relation: str = "",
        blocked: str = "",
        database: str = "",
        blocking_on: str = "",
    ) -> None:
        before = self._holders.get((pid, application))
        self._holders[(pid, application)] = HolderSeen(
            pid,
            application,
            state or (before.state if before else ""),
            before.first_s if before else at_s,
            max(at_s, before.last_s if before else at_s),
            (before.samples if before else 0) + 1,
            max(advisory, before.advisory_max if before else 0),
            max(rows, before.rows_max if before else 0),
            relation or (before.relation if before else ""),
            max(xact_s, before.xact_s_max if before else 0.0),
            _union(before.blocked if before else "", blocked),
            database or (before.database if before else ""),
            blocking_on or (before.blocking_on if before else ""),
        )

    def census(self) -> LockCensus:
        with self._lock:
            holders = sorted(self._holders.values(), key=lambda h: (-h.samples, h.pid))[:SHOWN]
            return LockCensus(
                self._samples,
                self._rows_samples,
                tuple(holders),
                self._holdings,
                self._rows,
                self._advisory,
                self._rows_max,
                statistics.median(self._offsets) if self._offsets else None,
                self._pool_holdings,
            )


def _union(seen: str, more: str) -> str:
    """Two lists of application names ('a, b'), as one, in order, each once."""
    names = [n for n in (seen.split(", ") + more.split(", ")) if n]
    return ", ".join(dict.fromkeys(names))
