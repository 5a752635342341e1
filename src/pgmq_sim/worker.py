"""A worker: claim one message of its type, do the work, complete it, commit.

Claim, work and completion share one transaction, so a message another worker
has in flight stays locked (and, for the ordered claims, blocks the rest of its
group) until it commits. `WorkerLoop` is the one code path every runner uses: a
thread here, a Locust user in another process or on another host.

A worker whose connection dies gets a new one, with backoff, until the reconnect
deadline; the server rolled back its message, which whoever claims it next
processes. A commit whose answer never came is in doubt: the journal says whether
it landed before the message is counted.
"""

from __future__ import annotations

import random
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass

import psycopg

from pgmq_sim.errors import ServerLostError
from pgmq_sim.queue import (
    Backoff,
    Claimed,
    ClaimSession,
    SessionPlan,
    connect_worker,
    is_connection_lost,
    was_completed,
)
from pgmq_sim.runlog import RunLog
from pgmq_sim.server import reason
from pgmq_sim.settings import WorkTime
from pgmq_sim.stats import Timeline, WorkerStats
from pgmq_sim.threads import RunThread
from pgmq_sim.wakeup import Wakeup

RECONNECT_FIRST_S = 0.05
RECONNECT_MAX_S = 2.0


class ProcessedCounter:
    """Messages committed as processed, across workers; sets `done` at the target.

    A completion whose commit outcome is unknown and could not be checked (no journal)
    is counted apart, so the run can ask the database before it calls itself done."""

    def __init__(self, target: int, done: threading.Event) -> None:
        self._lock = threading.Lock()
        self._count = 0
        self._in_doubt = 0
        self._target = target
        self._done = done

    def add(self) -> None:
        with self._lock:
            self._count += 1
            if self._count >= self._target:
                self._done.set()

    def add_in_doubt(self) -> None:
        with self._lock:
            self._in_doubt += 1

    @property
    def count(self) -> int:
        return self._count

    @property
    def in_doubt(self) -> int:
        return self._in_doubt


@dataclass(frozen=True)
class WorkerPlan:
    """What every worker shares: the server, the statements, the work and the run's clock."""

    dsn: str
    session: SessionPlan
    work: WorkTime
    reconnect_timeout: float
    clock: Callable[[], float]
    fail_rate: float = 0.0


class WorkerLoop:
    """One queue worker's life: connect, then claim-work-complete, reconnecting when lost."""

    def __init__(
        self,
        stats: WorkerStats,
        plan: WorkerPlan,
        wakeup: Wakeup,
        log: RunLog,
        counter: ProcessedCounter,
        timeline: Timeline,
        stop: threading.Event,
        rng: random.Random,
    ) -> None:
        self.stats = stats
        self._plan = plan
        self._wakeup = wakeup
        self._log = log
        self._counter = counter
        self._timeline = timeline
        self._halt = stop
        self._rng = rng
        self._session: ClaimSession | None = None
        self._conn: psycopg.Connection | None = None
        self._handed_off = False
        self._in_doubt: tuple[str, Claimed] | None = None  # (complete | fail, message) sent, no answer
        self._interrupt = threading.Event()  # ends the work early: a stop, or a crash to simulate
        self._crash_requested = False
        self.backend_pid: int | None = None

    def interrupt(self) -> None:
        """Cut the work short (the run is stopping); the message rolls back or stays in progress."""
        self._interrupt.set()

    def crash(self) -> None:
        """Die mid-work without cleaning up (a fault the run injects): the connection closes with
        the message claimed; in split mode it stays in progress until recovery."""
        self._crash_requested = True
        self._interrupt.set()

    @property
    def connection(self) -> psycopg.Connection | None:
        """The connection in use now, for a cancel from another thread."""
        return self._conn

    def run(self) -> None:
        """Until the run stops: every message this worker can claim."""
        try:
            while not self._halt.is_set():
                self.step()
        finally:
            self.close()

    def step(self) -> None:
        """Handle at most one message, or ride out a lost connection."""
        try:
            if self._session is None:
                self._open()
            assert self._session is not None
            self._handle_one(self._session)
        except psycopg.Error as exc:
            if self._halt.is_set() or not is_connection_lost(exc, self._conn):
                raise
            self._lost(exc)

    def close(self) -> None:
        session, conn = self._session, self._conn
        self._session = self._conn = None
        if conn is not None:
            try:
                if session is not None:
                    session.abandon()
            except psycopg.Error:
                pass
            conn.close()

    def _open(self) -> None:
        """Connect (retrying while the server is away), prepare, and settle a commit in doubt."""
        first = self.backend_pid is None
        backoff = Backoff(
            self._plan.reconnect_timeout, self._halt, RECONNECT_FIRST_S, RECONNECT_MAX_S, self._rng
        )
        while True:
            try:
                conn = connect_worker(self._plan.dsn, self.stats.name)
                break
            except psycopg.Error as exc:
                if first or not is_connection_lost(exc):
                    raise
                if not backoff.wait():
                    if self._halt.is_set():
                        raise
                    raise ServerLostError(
                        f"worker {self.stats.name} could not reconnect within"
                        f" {self._plan.reconnect_timeout:g} s (-reconnect-timeout):"
                        f" {reason(exc, self._plan.dsn)}"
                    ) from None
        try:
            self._conn = conn
            self._session = ClaimSession(conn, self._plan.session, self.stats.queue_type, self.stats.name)
            self.backend_pid = self._session.backend_pid
            if not first:
                self.stats.reconnects += 1
                self._log.event(f"worker {self.stats.name} reconnected (backend pid {self.backend_pid})")
            if self._in_doubt is not None:
                self._settle(conn, self._in_doubt)
        except BaseException:
            self.close()
            raise

    def _settle(self, conn: psycopg.Connection, doubt: tuple[str, Claimed]) -> None:
        """Count a completion whose commit answer was lost only if the journal has it. A failure's
        bookkeeping in doubt may have made a dead letter: the run asks the server at the end. The
        doubt stays until answered: a connection lost while asking asks again after reconnecting."""
        kind, claimed = doubt
        landed = None
        if kind == "complete":
            landed = was_completed(
                conn, claimed.msg_id, self.stats.name if self._plan.session.audited else None
            )
        self._in_doubt = None
        if landed is None:
            self._counter.add_in_doubt()
            self._log.event(f"worker {self.stats.name}: msg_id {claimed.msg_id} {kind} outcome unknown")
        elif landed:
            self.stats.record_processed(None, 0.0, 0.0)
            self._timeline.processed(self._plan.clock(), None)
            self._counter.add()
            self._log.event(f"worker {self.stats.name}: msg_id {claimed.msg_id} had committed")

    def _lost(self, exc: BaseException) -> None:
        self.stats.connections_lost += 1
        self._log.event(
            f"worker {self.stats.name} lost its connection: {reason(exc, self._plan.dsn)}; reconnecting"
        )
        self.close()

    def _handle_one(self, session: ClaimSession) -> None:
        stats = self.stats
        plan = self._plan
        token = self._wakeup.token(stats.queue_type)
        started = time.perf_counter()
        claimed = session.claim()
        claim_done = time.perf_counter()
        stats.claim.record_ms((claim_done - started) * 1000)
        if claimed is None:
            stats.empty_claims += 1
            if self._handed_off:
                # Right after a commit, an empty claim is often a race with another worker
                # over the head this worker just freed: claim once more before waiting.
                self._handed_off = False
            else:
                self._wakeup.wait(stats.queue_type, token)
            return
        self._handed_off = True
        work_s = self._rng.uniform(plan.work.min_ms, plan.work.max_ms) / 1000
        interrupted = self._interrupt.wait(work_s) if work_s > 0 else self._interrupt.is_set()
        if interrupted or self._halt.is_set():
            if self._crash_requested:
                self._crash()
            return  # stopping mid-message: close() rolls it back
        worked = time.perf_counter()
        if plan.fail_rate and self._rng.random() < plan.fail_rate:
            self._fail(session, claimed, claim_done, worked)
            return
        self._in_doubt = ("complete", claimed)
        added, done_at = session.complete(claimed)
        self._in_doubt = None
        committed = time.perf_counter()
        stats.complete.record_ms((committed - worked) * 1000)
        if done_at is None and plan.session.mode == "split":
            stats.lost_ownership += 1  # recovered while we worked: another worker has it now
            self._log.event(
                f"worker {stats.name}: msg_id {claimed.msg_id} was recovered from it; not completed"
            )
            return
        # server clock from time_added to the completion, plus the commit as measured here
        e2e_ms = None
        if added and done_at:
            e2e_ms = ((done_at - added).total_seconds() + committed - worked) * 1000
        stats.record_processed(e2e_ms, committed - started, worked - claim_done)
        self._timeline.processed(plan.clock(), e2e_ms)
        self._counter.add()
        self._log.message(
            stats.name,
            claimed.queue_type,
            claimed.msg_id,
            claimed.order_id,
            added,
            claimed.claimed_at,
            done_at,
        )

    def _fail(self, session: ClaimSession, claimed: Claimed, claim_done: float, worked: float) -> None:
        """The work failed: record the attempt (and maybe the dead letter) and move on."""
        stats = self.stats
        error = f"simulated failure of attempt {claimed.attempt}"
        self._in_doubt = ("fail", claimed)
        dead = session.fail(claimed, error)
        self._in_doubt = None
        stats.busy_s += time.perf_counter() - claim_done
        stats.work_s += worked - claim_done
        if dead is None:
            stats.lost_ownership += 1
            return
        stats.failed_attempts += 1
        self._log.event(
            f"failed worker={stats.name} type={claimed.queue_type} msg_id={claimed.msg_id}"
            f" order_id={claimed.order_id} attempt={claimed.attempt}" + (" dead-letter" if dead else "")
        )
        if dead:
            stats.dead_lettered += 1
            self._counter.add()  # finished: the run ends when every message is processed or dead

    def _crash(self) -> None:
        self._crash_requested = False
        self._interrupt.clear()
        self.stats.crashes += 1
        self._log.event(f"worker {self.stats.name} crashed mid-work (injected); a new one takes its place")
        conn, self._session, self._conn = self._conn, None, None
        if conn is not None:
            conn.close()  # no rollback, no completion: the server ends the session's transaction


class Worker(RunThread):
    """A worker on a thread of this process."""

    def __init__(self, loop: WorkerLoop, stop: threading.Event, on_error: Callable[[BaseException], None]):
        super().__init__(loop.stats.name, stop, on_error)
        self.loop = loop

    def connection(self) -> psycopg.Connection | None:
        return self.loop.connection

    def body(self) -> None:
        self.loop.run()
