"""The one place that speaks SQL to the queue: named operations over the tool's statements.

`QueueDatabase` is the tool's own side (install, produce, inspect, audit). It opens a
connection per operation instead of holding one idle through the run, so an
`idle_session_timeout`, a proxy or a restart cannot take the report with it, and it
retries an operation whose connection was lost until the reconnect deadline.
`ClaimSession` is a worker's side: claim, complete, fail, abandon, on one connection.
"""

from __future__ import annotations

import contextlib
import random
import threading
import time
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import Any, TypeVar

import psycopg
from psycopg import sql
from psycopg.pq import TransactionStatus
from psycopg.types.json import Jsonb

from pgmq_sim.errors import SimError, UsageError
from pgmq_sim.server import APPLICATION_NAME, first_line
from pgmq_sim.settings import QUEUE_TYPES
from pgmq_sim.sqlfiles import ClaimStrategy, SqlSource, statement

T = TypeVar("T")
ADMIN_LOCK_TIMEOUT_MS = 3_000
CONNECT_TIMEOUT_S = 5
TRIAL_CLAIM = "pgmq_sim_trial_claim"
Row = tuple[int, str, str, int, datetime]

# Lost connections, restarts, fail-overs: worth a new connection. Anything else is a real error.
LOST = (psycopg.OperationalError, psycopg.InterfaceError)


def is_connection_lost(exc: BaseException, conn: psycopg.Connection | None = None) -> bool:
    """A lost session, not a bad statement: the connection is gone or the server is going away."""
    if isinstance(
        exc, psycopg.errors.AdminShutdown | psycopg.errors.CrashShutdown | psycopg.errors.CannotConnectNow
    ):
        return True
    if isinstance(exc, psycopg.errors.QueryCanceled | psycopg.errors.LockNotAvailable):
        return False
    if isinstance(exc, psycopg.errors.IdleSessionTimeout | psycopg.errors.IdleInTransactionSessionTimeout):
        return True
    if conn is not None and conn.closed:
        return isinstance(exc, psycopg.Error)
    return isinstance(exc, LOST) and getattr(exc, "sqlstate", None) in (None, "08000", "08003", "08006")


class Backoff:
    """The waits between attempts to reach a lost server: doubling from `first` up to `cap`
    (with jitter when given an rng, so many workers do not knock at once), until `timeout`
    has passed or `stop` is set. Every reconnecting loop of the tool waits through one."""

    def __init__(
        self,
        timeout: float,
        stop: threading.Event,
        first: float = 0.05,
        cap: float = 2.0,
        rng: random.Random | None = None,
    ) -> None:
        self._deadline = time.monotonic() + timeout
        self._stop = stop
        self._delay = first
        self._cap = cap
        self._rng = rng

    def wait(self) -> bool:
        """Wait before the next attempt; False when the deadline or a stop says to give up."""
        if time.monotonic() + self._delay > self._deadline:
            return False
        if self._stop.wait(self._delay * (1 + self._rng.random()) if self._rng else self._delay):
            return False
        self._delay = min(self._delay * 2, self._cap)
        return True


def prepare_claim(name: str, wrapped_claim_sql: str) -> str:
    """PREPARE for a claim: its one parameter, the queue type, is declared text."""
    return f"prepare {name}(text) as {wrapped_claim_sql}"


@dataclass(frozen=True)
class PreviousRun:
    """What a run that used these tables left: its record in pgmq_sim_run."""

    run_id: str
    started_at: datetime
    finished_at: datetime | None
    outcome: str
    target: int
    produced: int
    ordered: bool
    audited: bool
    settings: str

    @property
    def finished(self) -> bool:
        return self.finished_at is not None


@dataclass(frozen=True)
class TableHealth:
    live_tuples: int
    dead_tuples: int
    autovacuum_runs: int
    autoanalyze_runs: int
    table_bytes: int
    index_bytes: int

    def as_json(self) -> dict[str, int]:
        return {
            "live_tuples": self.live_tuples,
            "dead_tuples": self.dead_tuples,
            "autovacuum_runs": self.autovacuum_runs,
            "autoanalyze_runs": self.autoanalyze_runs,
            "size_bytes": self.table_bytes,
            "index_bytes": self.index_bytes,
        }


@dataclass(frozen=True)
class AuditCounts:
    processed: int
    duplicates: int
    missing: int
    left_behind: int
    duplicate_ids: tuple[int, ...]
    missing_ids: tuple[int, ...]
    order_violation_ids: tuple[int, ...]
    order_violations: int
    dead_lettered: int = 0
    redelivered: int = 0
    attempts: int = 0
    failed_attempts: int = 0


class QueueDatabase:
    """The tool's own connection to the queue, opened per operation."""

    def __init__(
        self, dsn: str, reconnect_timeout: float = 60.0, stop: threading.Event | None = None
    ) -> None:
        self._dsn = dsn
        self._reconnect_timeout = reconnect_timeout
        self._stop = stop or threading.Event()

    @property
    def dsn(self) -> str:
        return self._dsn

    @contextlib.contextmanager
    def _connection(self) -> Iterator[psycopg.Connection]:
        conn = psycopg.connect(
            self._dsn,
            application_name=APPLICATION_NAME,
            connect_timeout=CONNECT_TIMEOUT_S,
            cursor_factory=psycopg.RawCursor,  # the statements use $1 placeholders
            # a lock held elsewhere must not hang the schema, the diagnosis or the audit
            options=f"-c lock_timeout={ADMIN_LOCK_TIMEOUT_MS}",
        )
        try:
            yield conn
        finally:
            conn.close()

    def _retrying(self, operation: Callable[[psycopg.Connection], T]) -> T:
        """Run an idempotent operation on a fresh connection; a lost connection is retried with
        backoff until the reconnect deadline, anything else raises."""
        backoff = Backoff(self._reconnect_timeout, self._stop, first=0.1)
        while True:
            try:
                with self._connection() as conn:
                    return operation(conn)
            except psycopg.Error as exc:
                if not is_connection_lost(exc) or not backoff.wait():
                    raise

    # -- before the run -------------------------------------------------------------------

    def connection_budget(self) -> tuple[int, int | None]:
        """(connections the server will still accept from this role, the role's own limit left)."""

        def read(conn: psycopg.Connection) -> tuple[int, int | None]:
            row = conn.execute(statement("connection_budget")).fetchone()
            assert row is not None
            return int(row[0]), None if row[1] is None else int(row[1])

        return self._retrying(read)

    def server_clock(self) -> datetime:
        def read(conn: psycopg.Connection) -> datetime:
            row = conn.execute(statement("server_clock")).fetchone()
            assert row is not None
            return row[0]

        return self._retrying(read)

    def remaining(self) -> int:
        """Messages not yet completed, counted on the server."""

        def read(conn: psycopg.Connection) -> int:
            row = conn.execute(statement("remaining_messages")).fetchone()
            return int(row[0]) if row else 0

        return self._retrying(read)

    def journaled_per_worker(self, workers: list[str]) -> dict[str, int]:
        """Completions each named worker committed, from the journal (a lost process's last ones)."""

        def read(conn: psycopg.Connection) -> dict[str, int]:
            rows = conn.execute(statement("journal_per_worker"), (workers,)).fetchall()
            return {str(name): int(count) for name, count in rows}

        return self._retrying(read)

    def tables(self) -> dict[str, tuple[bool, bool]]:
        """For each table a run replaces: (exists, created by this tool)."""

        def read(conn: psycopg.Connection) -> dict[str, tuple[bool, bool]]:
            rows = conn.execute(statement("owned_tables")).fetchall()
            return {name: (bool(exists), bool(ours)) for name, exists, ours in rows}

        return self._retrying(read)

    def previous_run(self) -> PreviousRun | None:
        """The last run's record; ask only when `tables()` says pgmq_sim_run exists."""

        def read(conn: psycopg.Connection) -> PreviousRun | None:
            row = conn.execute(statement("run_record")).fetchone()
            return PreviousRun(*row) if row else None

        return self._retrying(read)

    def install(
        self,
        schema: SqlSource,
        strategy: ClaimStrategy,
        audited: bool,
        notify: bool,
        record: tuple[str, int, bool, bool, dict[str, Any]],
        retrying: bool = False,
    ) -> None:
        """Create the queue, the strategy's additions, the journal, the run record and the
        wake-up trigger in one transaction, then try the claim once and roll back: a broken
        file changes nothing."""
        with self._connection() as conn:
            self._execute(conn, schema.text, f"schema file {schema}", "fix the SQL or pass -schema FILE")
            if strategy.schema:
                self._execute(
                    conn, strategy.schema.text, f"strategy '{strategy.name}' schema", "fix its schema.sql"
                )
            if retrying:
                self._execute(
                    conn,
                    statement("retry_schema"),
                    "attempt columns",
                    "the schema's msg_queue must be the seed's",
                )
            self._execute(conn, statement("mark_tables"), "marking the queue table", "check the schema")
            self._execute(
                conn, statement("run_table"), "run record table", "check the user may create tables"
            )
            run_id, target, ordered, _, settings = record
            conn.execute(statement("run_start"), (run_id, target, ordered, audited, Jsonb(settings)))
            if audited:
                self._execute(conn, statement("journal"), "journal table", "check the user may create tables")
                self._execute(conn, statement("mark_journal"), "journal table", "check the schema")
            else:  # a journal left by an earlier run would describe that run, not this one
                self._execute(conn, statement("drop_journal"), "journal table", "check the user may drop it")
            if notify:
                self._execute(
                    conn, statement("notify_trigger"), "notify trigger", "check the user may create triggers"
                )
            try:  # prepared exactly as the workers prepare it, run, rolled back
                conn.execute(prepare_claim(TRIAL_CLAIM, strategy.wrapped_claim_sql))
                with conn.transaction(force_rollback=True):
                    conn.execute(f"execute {TRIAL_CLAIM}('{QUEUE_TYPES[0]}')").fetchall()
            except psycopg.Error as exc:
                conn.rollback()
                raise UsageError(
                    f"claim query {strategy.claim} failed on the server: {first_line(exc)};"
                    " fix it (it must return msg_id, queue_type, order_id) or pass -next-msg FILE"
                ) from None
            conn.commit()

    @staticmethod
    def _execute(conn: psycopg.Connection, text: str, what: str, fix: str) -> None:
        try:
            conn.execute(text.encode())  # bytes: a file's % and {} are not placeholders
        except psycopg.errors.LockNotAvailable:
            conn.rollback()
            raise SimError(
                f"{what} waited {ADMIN_LOCK_TIMEOUT_MS / 1000:g} s for a lock another session holds on"
                " the queue; end that session's transaction and run again"
            ) from None
        except psycopg.Error as exc:
            conn.rollback()
            if is_connection_lost(exc, conn):
                raise
            raise UsageError(f"{what} failed on the server: {first_line(exc)}; {fix}") from None

    # -- after producing ------------------------------------------------------------------

    def produced(self) -> int:
        """Messages whose batch committed, from the run record."""
        return self._retrying(produced_count)

    def analyze(self) -> None:
        self._retrying(lambda conn: conn.execute(statement("analyze_queue")) and None)

    def finish_run(self, outcome: str) -> None:
        def write(conn: psycopg.Connection) -> None:
            conn.execute(statement("run_finish"), (outcome,))
            conn.commit()

        self._retrying(write)

    # -- inspecting -----------------------------------------------------------------------

    def table_health(self) -> TableHealth:
        def read(conn: psycopg.Connection) -> TableHealth:
            row = conn.execute(statement("table_health")).fetchone()
            assert row is not None
            return TableHealth(*(int(v) for v in row))

        return self._retrying(read)

    def audit_counts(self, expected: int, show: int, retrying: bool = False) -> AuditCounts:
        suffix = "_retry" if retrying else ""

        def read(conn: psycopg.Connection) -> AuditCounts:
            cur = psycopg.RawCursor(conn)
            row = cur.execute(statement("audit_counts" + suffix), (expected,)).fetchone()
            assert row is not None
            processed, duplicates, missing, left_behind, *retries = row
            duplicate_ids = tuple(r[0] for r in cur.execute(statement("audit_duplicates"), (show,)))
            missing_ids = tuple(
                r[0] for r in cur.execute(statement("audit_missing" + suffix), (expected, show))
            )
            violations = [r[0] for r in cur.execute(statement("audit_order"))]
            return AuditCounts(
                processed,
                duplicates,
                missing,
                left_behind,
                duplicate_ids,
                missing_ids,
                tuple(violations[:show]),
                len(violations),
                *retries,
            )

        return self._retrying(read)

    def group_blocking(self) -> list[tuple[str, int, int, float]]:
        """Per group: failed attempts and seconds its head kept the group waiting for a retry."""
        return self._retrying(lambda conn: [tuple(r) for r in conn.execute(statement("group_blocking"))])

    def recover(self) -> list[tuple[int, str, bool]]:
        """Return to pending the messages whose owner is gone or whose lease expired."""

        def write(conn: psycopg.Connection) -> list[tuple[int, str, bool]]:
            rows = conn.execute(statement("recover_split")).fetchall()
            conn.commit()
            return [(int(m), str(o), bool(e)) for m, o, e in rows]

        return self._retrying(write)

    def pulse(self) -> tuple[int, int | None, str, float]:
        """Dead tuples now, and who holds the oldest snapshot (pid, application, seconds)."""

        def read(conn: psycopg.Connection) -> tuple[int, int | None, str, float]:
            row = conn.execute(statement("table_pulse")).fetchone()
            assert row is not None
            return int(row[0]), row[1], str(row[2]), float(row[3])

        return self._retrying(read)

    def worker_backends(self) -> list[int]:
        """The backends of this run's workers, whichever process or host opened them."""
        return self._retrying(lambda conn: [int(r[0]) for r in conn.execute(statement("worker_backends"))])

    def terminate(self, pids: list[int]) -> int:
        """End these backends (a fault the run injects into itself)."""
        row = self._retrying(lambda conn: conn.execute(statement("terminate_backends"), (pids,)).fetchone())
        return int(row[0]) if row else 0

    def may_run_programs(self) -> bool:
        row = self._retrying(lambda conn: conn.execute(statement("server_programs")).fetchone())
        return bool(row and row[0])

    def crash_restart(self) -> None:
        """Kill one backend with SIGKILL through COPY TO PROGRAM: the postmaster then resets every
        session, as after a crash. The caller checked the role may run programs."""
        with contextlib.suppress(psycopg.Error), self._connection() as conn:
            conn.execute(statement("crash_backend").format(pid=int(conn.info.backend_pid)))

    def hold(self, what: str, seconds: float, stop: threading.Event) -> None:
        """Hold a snapshot (what='hold_snapshot') or an exclusive lock on the queue ('lock_queue')
        in an open transaction for `seconds`, or until the run stops."""
        with self._connection() as conn:
            if what == "hold_snapshot":
                conn.execute("set transaction isolation level repeatable read")
            conn.execute(f"set lock_timeout = {int(max(seconds, 1) * 1000)}")
            conn.execute(statement(what))
            stop.wait(seconds)
            conn.rollback()

    def stall_facts(self, our_pids: list[int]) -> StallFacts:
        """What the stall diagnosis reads, in the order that keeps it from waiting: sessions
        blocking our workers first (the queue itself may be locked), then the queue."""

        def read(conn: psycopg.Connection) -> StallFacts:
            cur = psycopg.RawCursor(conn)
            blocked = cur.execute(statement("blocked_sessions"), (our_pids,)).fetchall()
            try:
                pending = cur.execute(statement("pending_by_type")).fetchall()
                heads = cur.execute(statement("group_heads")).fetchall()
                unlocked = {r[0] for r in cur.execute(statement("unlocked_heads"), ([h[2] for h in heads],))}
                conn.rollback()
            except psycopg.errors.LockNotAvailable:
                conn.rollback()
                pending, heads, unlocked = [], [], set()
            holders = cur.execute(statement("lock_holders"), (our_pids,)).fetchall()
            return StallFacts(blocked, pending, heads, unlocked, holders)

        return self._retrying(read)

    def ping(self) -> None:
        """A round trip on a new connection: raises if the server does not answer."""
        with self._connection() as conn:
            conn.execute(statement("server_clock")).fetchone()


def write_batch(conn: psycopg.Connection, rows: Sequence[Row], produced_after: int) -> None:
    """COPY one batch and raise the run's produced count in the same transaction: all or none."""
    with conn.transaction(), conn.cursor() as cur:
        with cur.copy(statement("copy_messages")) as copy:
            for row in rows:
                copy.write_row(row)
        cur.execute(statement("run_produced"), (produced_after,))


def produced_count(conn: psycopg.Connection) -> int:
    """Messages whose batch committed (the run record's count)."""
    with conn.transaction():
        row = conn.execute(statement("run_produced_count")).fetchone()
    return int(row[0]) if row else 0


@dataclass(frozen=True)
class StallFacts:
    blocked: list[tuple[Any, ...]]
    pending_by_type: list[tuple[Any, ...]]
    heads: list[tuple[Any, ...]]
    unlocked_heads: set[int]
    lock_holders: list[tuple[Any, ...]]


def connect_worker(dsn: str, name: str | None = None) -> psycopg.Connection:
    """A worker's own connection: bounded connect, keepalives so a dead peer is noticed; its
    application_name carries the worker's name, so faults and diagnoses find it on any host."""
    return psycopg.connect(
        dsn,
        application_name=APPLICATION_NAME + (f" {name}" if name else ""),
        connect_timeout=CONNECT_TIMEOUT_S,
        cursor_factory=psycopg.RawCursor,
        keepalives=1,
        keepalives_idle=5,
        keepalives_interval=2,
        keepalives_count=3,
    )


def was_completed(conn: psycopg.Connection, msg_id: int, worker: str | None) -> bool | None:
    """Did this worker's completion of msg_id commit? Asked after a commit's answer was lost.

    With the journal the answer is exact (its row names the worker). Without it, a message
    still pending did not complete; a completed one may have been completed by another
    worker after ours rolled back, so the answer is None: unknown."""
    cur = psycopg.RawCursor(conn)
    if worker is not None:
        row = cur.execute(statement("journaled_by"), (msg_id, worker)).fetchone()
        return bool(row and row[0])
    row = cur.execute(statement("completed_message"), (msg_id,)).fetchone()
    return None if row and row[0] else False


@dataclass(frozen=True)
class Claimed:
    msg_id: int
    queue_type: str
    order_id: int
    claimed_at: datetime
    attempt: int = 1


@dataclass(frozen=True)
class SessionPlan:
    """What a worker's session prepares: the claim and the completion, and for leases and
    retries (`mode` single-with-retries or split) the attempt bookkeeping."""

    claim_sql: str
    delmsg: bool
    audited: bool
    mode: str = "basic"  # basic | single (with attempts) | split
    lease_s: float = 30.0
    max_attempts: int = 1
    backoff_ms: float = 0.0

    @property
    def complete_sql(self) -> str:
        kind = ("complete_split_" if self.mode == "split" else "complete_") + (
            "delete" if self.delmsg else "mark"
        )
        return statement(kind + ("_audited" if self.audited else ""))


class ClaimSession:
    """A worker's connection, speaking in as few round trips per message as it can.

    The statements are prepared once on the server; a message then takes "begin; execute
    claim" and "execute complete; commit", half the round trips of issuing BEGIN, claim,
    completion and COMMIT one by one. With retries one more trip counts the attempt (and,
    split, commits the claim). The connection is in autocommit mode, so these explicit
    statements are the only transaction control.
    """

    CLAIM = "pgmq_sim_claim"
    COMPLETE = "pgmq_sim_complete"
    TAKE = "pgmq_sim_take"
    FAIL = "pgmq_sim_fail"

    def __init__(self, conn: psycopg.Connection, plan: SessionPlan, queue_type: str, worker: str) -> None:
        conn.autocommit = True
        conn.prepare_threshold = None  # every message's text differs; the server holds the plans
        self._conn = conn
        self._cursor = conn.cursor()
        self._plan = plan
        cursor = self._cursor
        cursor.execute("deallocate all")
        cursor.execute(prepare_claim(self.CLAIM, plan.claim_sql))
        cursor.execute(f"prepare {self.COMPLETE} as {plan.complete_sql}")
        if plan.mode != "basic":
            cursor.execute(f"prepare {self.TAKE} as {statement('take_' + plan.mode)}")
            cursor.execute(f"prepare {self.FAIL} as {statement('fail_attempt')}")
        # Quoting is the costliest Python step per message: quote fixed values once.
        self._claim_text = f"begin; execute {self.CLAIM}({self._literal(queue_type)})"
        self._worker = self._literal(worker)
        self._owner = self._literal(f"{worker}:{conn.info.backend_pid}")
        self._quoted_types: dict[str, str] = {}

    @property
    def backend_pid(self) -> int:
        return self._conn.info.backend_pid

    def _literal(self, value: object) -> str:
        return sql.Literal(value).as_string(self._conn)

    def _quoted_type(self, queue_type: str) -> str:
        quoted = self._quoted_types.get(queue_type)
        if quoted is None:
            quoted = self._quoted_types[queue_type] = self._literal(queue_type)
        return quoted

    def claim(self) -> Claimed | None:
        """Claim one message; None (transaction ended) if nothing is free. Basic and single
        modes leave the transaction open; split mode has committed the claim."""
        cursor = self._cursor
        cursor.execute(self._claim_text)
        cursor.nextset()
        rows = cursor.fetchall()
        if len(rows) > 1:  # the rest would be marked taken and never processed
            raise SimError(f"the claim query returned {len(rows)} rows; it must claim one message (limit 1)")
        if not rows:
            cursor.execute("commit")  # a rollback would drop the prepared statements
            return None
        msg_id, queue_type, order_id, claimed_at = rows[0]
        plan = self._plan
        if plan.mode == "basic":
            return Claimed(msg_id, queue_type, order_id, claimed_at)
        if plan.mode == "single":
            cursor.execute(f"execute {self.TAKE}({int(msg_id)}); savepoint work")
        else:
            cursor.execute(f"execute {self.TAKE}({int(msg_id)}, {self._owner}, {plan.lease_s!r}); commit")
        row = cursor.fetchone()
        assert row is not None
        return Claimed(msg_id, queue_type, order_id, claimed_at, int(row[0]))

    def complete(self, claimed: Claimed) -> tuple[datetime | None, datetime | None]:
        """Complete the claimed message and commit; returns its time_added and the server's
        clock at completion (so latency never mixes two machines' clocks), or (None, None)
        if no row was completed (split: this worker no longer owns it)."""
        plan = self._plan
        if plan.audited:
            # claimed_at is the server's own timestamptz; its ISO form carries the offset
            args = (
                f"{int(claimed.msg_id)}, {self._quoted_type(claimed.queue_type)}, {int(claimed.order_id)},"
                f" {self._worker}, '{claimed.claimed_at.isoformat()}'::timestamptz, {int(claimed.attempt)}"
            )
            if plan.mode == "split":
                args += f", {self._owner}"
        else:
            args = str(int(claimed.msg_id)) + (f", {self._owner}" if plan.mode == "split" else "")
        text = f"execute {self.COMPLETE}({args}); commit"
        if plan.mode == "split":
            text = "begin; " + text
            self._cursor.execute(text)
            self._cursor.nextset()
        else:
            self._cursor.execute(text)
        row = self._cursor.fetchone()
        return (row[0], row[1]) if row else (None, None)

    def fail(self, claimed: Claimed, error: str) -> bool | None:
        """Record a failed attempt and commit: True if it made the message a dead letter,
        None if this worker no longer owned it (split). In single mode the work's changes
        roll back to the savepoint taken after the claim; the bookkeeping commits."""
        plan = self._plan
        owner = self._owner if plan.mode == "split" else "null"
        call = (
            f"execute {self.FAIL}({int(claimed.msg_id)}, {self._worker},"
            f" '{claimed.claimed_at.isoformat()}'::timestamptz, {self._literal(error)},"
            f" {int(plan.max_attempts)}, {plan.backoff_ms!r}, {owner})"
        )
        before = "rollback to savepoint work; " if plan.mode == "single" else "begin; "
        self._cursor.execute(f"{before}{call}; commit")
        self._cursor.nextset()
        row = self._cursor.fetchone()
        return bool(row[0]) if row else None

    def abandon(self) -> None:
        """Roll back whatever is open: the message goes back to the queue."""
        if not self._conn.closed and self._conn.info.transaction_status != TransactionStatus.IDLE:
            self._cursor.execute("rollback")
