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
from psycopg import sql
from psycopg.pq import TransactionStatus
from psycopg_pool import ConnectionPool

from pgmq_sim.errors import SimError
from pgmq_sim.runlog import RunLog
from pgmq_sim.settings import WorkTime
from pgmq_sim.sqlfiles import prepare_claim
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


class QueueSession:
    """A worker's connection, speaking in two round trips per message.

    The claim and the completion are prepared once on the server; each message then
    takes "begin; execute claim" and "execute complete; commit", half the round trips
    of issuing BEGIN, claim, completion and COMMIT one by one. The connection is in
    autocommit mode, so these explicit statements are the only transaction control.
    """

    CLAIM = "pgmq_sim_claim"
    COMPLETE = "pgmq_sim_complete"

    def __init__(self, conn: psycopg.Connection, plan: WorkerPlan, queue_type: str, worker: str) -> None:
        conn.autocommit = True
        conn.prepare_threshold = None  # every message's text differs; the server holds the plans
        self._conn = conn
        self._cursor = conn.cursor()
        self._audited = plan.audited
        self._cursor.execute("deallocate all")
        self._cursor.execute(prepare_claim(self.CLAIM, plan.claim_sql))
        self._cursor.execute(f"prepare {self.COMPLETE} as {plan.complete_sql}")
        # Quoting is the costliest Python step per message: quote fixed values once.
        self._claim_text = f"begin; execute {self.CLAIM}({self._literal(queue_type)})"
        self._worker = self._literal(worker)
        self._quoted_types: dict[str, str] = {}

    def _literal(self, value: object) -> str:
        return sql.Literal(value).as_string(self._conn)

    def _quoted_type(self, queue_type: str) -> str:
        quoted = self._quoted_types.get(queue_type)
        if quoted is None:
            quoted = self._quoted_types[queue_type] = self._literal(queue_type)
        return quoted

    def claim(self) -> tuple | None:
        """Open the message's transaction and claim; None (transaction ended) if nothing is free."""
        cursor = self._cursor
        cursor.execute(self._claim_text)
        cursor.nextset()
        rows = cursor.fetchall()
        if len(rows) > 1:  # the rest would be marked taken and never processed
            raise SimError(f"the claim query returned {len(rows)} rows; it must claim one message (limit 1)")
        if not rows:
            cursor.execute("commit")
            return None
        return rows[0]

    def complete(self, row: tuple) -> tuple | None:
        """Complete the claimed message and commit; returns the completion's row."""
        msg_id, queue_type, order_id, claimed_at = row
        if self._audited:
            # claimed_at is the server's own timestamptz; its ISO form carries the offset
            claimed = f"'{claimed_at.isoformat()}'::timestamptz"
            args = (
                f"{int(msg_id)}, {self._quoted_type(queue_type)}, {int(order_id)}, {self._worker}, {claimed}"
            )
        else:
            args = str(int(msg_id))
        self._cursor.execute(f"execute {self.COMPLETE}({args}); commit")
        return self._cursor.fetchone()

    def abandon(self) -> None:
        """Roll back whatever is open: the message goes back to the queue."""
        if self._conn.info.transaction_status != TransactionStatus.IDLE:
            self._cursor.execute("rollback")


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
        self._conn: psycopg.Connection | None = None
        self._handed_off = False

    def cancel(self) -> None:
        """Cancel the query this worker waits on, from another thread (psycopg allows it)."""
        if self._conn is not None:
            self._conn.cancel_safe(timeout=2)

    def run(self) -> None:
        try:
            with self._pool.connection() as conn:
                self.backend_pid = conn.info.backend_pid
                self._conn = conn
                session = QueueSession(conn, self._plan, self.stats.queue_type, self.stats.name)
                try:
                    while not self._halt.is_set() and self._handle_one(session):
                        pass
                finally:
                    session.abandon()
        except BaseException as exc:  # reported to the run, which stops with one line
            if not self._halt.is_set():
                self._on_error(exc)

    def _handle_one(self, session: QueueSession) -> bool:
        """Claim and process at most one message; False when the run is stopping mid-message."""
        stats = self.stats
        plan = self._plan
        token = self._wakeup.token(stats.queue_type)
        started = time.perf_counter()
        row = session.claim()
        claimed = time.perf_counter()
        stats.claim.record_ms((claimed - started) * 1000)
        if row is None:
            stats.empty_claims += 1
            if self._handed_off:
                # Right after a commit, an empty claim is often a race with another worker
                # over the head this worker just freed: claim once more before waiting.
                self._handed_off = False
            else:
                self._wakeup.wait(stats.queue_type, token)
            return True
        self._handed_off = True
        work_s = self._rng.uniform(plan.work.min_ms, plan.work.max_ms) / 1000
        if work_s > 0 and self._halt.wait(work_s):
            return False
        worked = time.perf_counter()
        done_row = session.complete(row)
        committed = time.perf_counter()
        stats.complete.record_ms((committed - worked) * 1000)
        done_at = datetime.now(UTC)
        msg_id, queue_type, order_id, claimed_at = row
        added = done_row[0] if done_row else None
        e2e_ms = (done_at - added).total_seconds() * 1000 if added else None
        stats.record_processed(plan.clock(), e2e_ms, committed - started, worked - claimed)
        self._counter.add()
        self._log.message(stats.name, queue_type, msg_id, order_id, added, claimed_at, done_at)
        return True
