"""A worker: claim one message of its type, do the work, complete it, commit.

Claim, work and completion share one transaction, so a message another worker
has in flight stays locked (and, for the ordered claims, blocks the rest of its
group) until it commits.
"""

from __future__ import annotations

import random
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass
from datetime import UTC, datetime

import psycopg
from psycopg_pool import ConnectionPool

from pgmq_sim.runlog import RunLog
from pgmq_sim.settings import WorkTime
from pgmq_sim.stats import WorkerStats
from pgmq_sim.wakeup import Wakeup


class ProcessedCounter:
    """Messages committed as processed, across workers; sets `done` at the target."""

    def __init__(self, target: int, done: threading.Event) -> None:
        self._lock = threading.Lock()
        self._count = 0
        self._target = target
        self._done = done

    def add(self) -> None:
        with self._lock:
            self._count += 1
            if self._count >= self._target:
                self._done.set()

    @property
    def count(self) -> int:
        return self._count


@dataclass(frozen=True)
class WorkerPlan:
    """What every worker shares: the statements, the work time and the run's clock."""

    claim_sql: str
    complete_sql: str
    audited: bool
    work: WorkTime
    clock: Callable[[], float]


class Worker(threading.Thread):
    def __init__(
        self,
        stats: WorkerStats,
        plan: WorkerPlan,
        pool: ConnectionPool,
        wakeup: Wakeup,
        log: RunLog,
        counter: ProcessedCounter,
        stop: threading.Event,
        on_error: Callable[[BaseException], None],
        rng: random.Random,
    ) -> None:
        super().__init__(name=stats.name, daemon=True)
        self.stats = stats
        self._plan = plan
        self._pool = pool
        self._wakeup = wakeup
        self._log = log
        self._counter = counter
        self._halt = stop
        self._on_error = on_error
        self._rng = rng
        self.backend_pid: int | None = None

    def run(self) -> None:
        try:
            with self._pool.connection() as conn:
                self.backend_pid = conn.info.backend_pid
                cursor = psycopg.RawCursor(conn)
                while not self._halt.is_set():
                    if not self._handle_one(conn, cursor):
                        break
                conn.rollback()
        except BaseException as exc:  # reported to the run, which stops with one line
            if not self._halt.is_set():
                self._on_error(exc)

    def _handle_one(self, conn: psycopg.Connection, cursor: psycopg.RawCursor) -> bool:
        """Claim and process at most one message; False when the run is stopping mid-message."""
        stats = self.stats
        plan = self._plan
        token = self._wakeup.token(stats.queue_type)
        started = time.perf_counter()
        cursor.execute(plan.claim_sql, (stats.queue_type,))
        row = cursor.fetchone()
        claimed = time.perf_counter()
        stats.claim.record_ms((claimed - started) * 1000)
        if row is None:
            # Commit, not roll back: nothing changed, and psycopg drops its prepared
            # statements (DEALLOCATE ALL) on every rollback.
            conn.commit()
            stats.empty_claims += 1
            self._wakeup.wait(stats.queue_type, token)
            return True
        msg_id, queue_type, order_id, claimed_at = row
        work_s = self._rng.uniform(plan.work.min_ms, plan.work.max_ms) / 1000
        if work_s > 0 and self._halt.wait(work_s):
            conn.rollback()
            return False
        worked = time.perf_counter()
        if plan.audited:
            params: tuple = (msg_id, queue_type, order_id, stats.name, claimed_at)
        else:
            params = (msg_id,)
        cursor.execute(plan.complete_sql, params)
        done_row = cursor.fetchone()
        conn.commit()
        committed = time.perf_counter()
        stats.complete.record_ms((committed - worked) * 1000)
        done_at = datetime.now(UTC)
        added = done_row[0] if done_row else None
        e2e_ms = (done_at - added).total_seconds() * 1000 if added else None
        stats.record_processed(plan.clock(), e2e_ms, committed - started, worked - claimed)
        self._counter.add()
        self._log.message(stats.name, queue_type, msg_id, order_id, added, claimed_at, done_at)
        return True
