"""The one place that speaks SQL to the queue: named operations over the tool's statements.

`QueueDatabase` is the tool's own side (install, produce, inspect, audit). It opens a
connection per operation instead of holding one idle through the run, so an
`idle_session_timeout`, a proxy or a restart cannot take the report with it, and it
retries an operation whose connection was lost until the reconnect deadline.
`ClaimSession` is a worker's side: claim, complete, abandon, on one connection.
"""

from __future__ import annotations

import contextlib
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
TOOL_TABLES = ("msg_queue", "msg_journal", "pgmq_sim_run")
Row = tuple[int, str, str, int, datetime]

# Lost connections, restarts, fail-overs: worth a new connection. Anything else is a real error.
LOST = (psycopg.OperationalError, psycopg.InterfaceError)


def is_connection_lost(exc: BaseException, conn: psycopg.Connection | None = None) -> bool:
    """A lost session, not a bad statement: the connection is gone or the server is going away."""
    if isinstance(exc, psycopg.errors.AdminShutdown | psycopg.errors.CannotConnectNow):
        return True
    if isinstance(exc, psycopg.errors.QueryCanceled | psycopg.errors.LockNotAvailable):
        return False
    if isinstance(exc, psycopg.errors.IdleSessionTimeout | psycopg.errors.IdleInTransactionSessionTimeout):
        return True
    if conn is not None and conn.closed:
        return isinstance(exc, psycopg.Error)
    return isinstance(exc, LOST) and getattr(exc, "sqlstate", None) in (None, "08000", "08003", "08006")


def prepare_claim(name: str, wrapped_claim_sql: str) -> str:
    """PREPARE for a claim: its one parameter, the queue type, is declared text."""
    return f"prepare {name}(text) as {wrapped_claim_sql}"


def completion_statement(delmsg: bool, audited: bool) -> str:
    return statement(("complete_delete" if delmsg else "complete_mark") + ("_audited" if audited else ""))


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
        deadline = time.monotonic() + self._reconnect_timeout
        delay = 0.1
        while True:
            try:
                with self._connection() as conn:
                    return operation(conn)
            except psycopg.Error as exc:
                if not is_connection_lost(exc) or time.monotonic() + delay > deadline:
                    raise
                if self._stop.wait(delay):
                    raise
                delay = min(delay * 2, 2.0)

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
        def read(conn: psycopg.Connection) -> PreviousRun | None:
            row = conn.execute(statement("run_record")).fetchone()
            return PreviousRun(*row) if row else None

        if not self.tables()["pgmq_sim_run"][0]:
            return None
        return self._retrying(read)

    def install(
        self,
        schema: SqlSource,
        strategy: ClaimStrategy,
        audited: bool,
        notify: bool,
        record: tuple[str, int, bool, bool, dict[str, Any]],
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

    def audit_counts(self, expected: int, show: int) -> AuditCounts:
        def read(conn: psycopg.Connection) -> AuditCounts:
            cur = psycopg.RawCursor(conn)
            row = cur.execute(statement("audit_counts"), (expected,)).fetchone()
            assert row is not None
            processed, duplicates, missing, left_behind = row
            duplicate_ids = tuple(r[0] for r in cur.execute(statement("audit_duplicates"), (show,)))
            missing_ids = tuple(r[0] for r in cur.execute(statement("audit_missing"), (expected, show)))
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
            )

        return self._retrying(read)

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


def connect_worker(dsn: str) -> psycopg.Connection:
    """A worker's own connection: bounded connect, keepalives so a dead peer is noticed."""
    return psycopg.connect(
        dsn,
        application_name=APPLICATION_NAME,
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


class ClaimSession:
    """A worker's connection, speaking in two round trips per message.

    The claim and the completion are prepared once on the server; each message then
    takes "begin; execute claim" and "execute complete; commit", half the round trips
    of issuing BEGIN, claim, completion and COMMIT one by one. The connection is in
    autocommit mode, so these explicit statements are the only transaction control.
    """

    CLAIM = "pgmq_sim_claim"
    COMPLETE = "pgmq_sim_complete"

    def __init__(
        self,
        conn: psycopg.Connection,
        claim_sql: str,
        complete_sql: str,
        audited: bool,
        queue_type: str,
        worker: str,
    ) -> None:
        conn.autocommit = True
        conn.prepare_threshold = None  # every message's text differs; the server holds the plans
        self._conn = conn
        self._cursor = conn.cursor()
        self._audited = audited
        self._cursor.execute("deallocate all")
        self._cursor.execute(prepare_claim(self.CLAIM, claim_sql))
        self._cursor.execute(f"prepare {self.COMPLETE} as {complete_sql}")
        # Quoting is the costliest Python step per message: quote fixed values once.
        self._claim_text = f"begin; execute {self.CLAIM}({self._literal(queue_type)})"
        self._worker = self._literal(worker)
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
        """Open the message's transaction and claim; None (transaction ended) if nothing is free."""
        cursor = self._cursor
        cursor.execute(self._claim_text)
        cursor.nextset()
        rows = cursor.fetchall()
        if len(rows) > 1:  # the rest would be marked taken and never processed
            raise SimError(f"the claim query returned {len(rows)} rows; it must claim one message (limit 1)")
        if not rows:
            cursor.execute("commit")  # a rollback would drop the prepared statements
            return None
        return Claimed(*rows[0])

    def complete(self, claimed: Claimed) -> tuple[datetime | None, datetime | None]:
        """Complete the claimed message and commit; returns its time_added (None: no row) and
        the server's clock at completion, so latency never mixes two machines' clocks."""
        if self._audited:
            # claimed_at is the server's own timestamptz; its ISO form carries the offset
            args = (
                f"{int(claimed.msg_id)}, {self._quoted_type(claimed.queue_type)}, {int(claimed.order_id)},"
                f" {self._worker}, '{claimed.claimed_at.isoformat()}'::timestamptz"
            )
        else:
            args = str(int(claimed.msg_id))
        self._cursor.execute(f"execute {self.COMPLETE}({args}); commit")
        row = self._cursor.fetchone()
        return (row[0], row[1]) if row else (None, None)

    def abandon(self) -> None:
        """Roll back whatever is open: the message goes back to the queue."""
        if not self._conn.closed and self._conn.info.transaction_status != TransactionStatus.IDLE:
            self._cursor.execute("rollback")
