"""The tool's own operations on the queue: install it, follow the run's record, count and audit it."""

from __future__ import annotations

import contextlib
from collections.abc import Callable, Iterator
from datetime import datetime
from typing import Any, TypeVar

import psycopg
from psycopg import sql
from psycopg.types.json import Jsonb

from pgmq_sim.db.account import read_account
from pgmq_sim.db.audit import count_audit, load_pending
from pgmq_sim.db.batches import produced_count
from pgmq_sim.db.claims import ClaimColumnsError
from pgmq_sim.db.connection import ADMIN_LOCK_TIMEOUT_MS, is_connection_lost
from pgmq_sim.db.sessions import Sessions
from pgmq_sim.db.statements import NAMES, NOTIFY_FUNCTION, OWNED_COMMENT
from pgmq_sim.db.trial import before_schema, user_tables
from pgmq_sim.db.values import QueueShape
from pgmq_sim.designs.design import QueueDesign
from pgmq_sim.dsn import first_line
from pgmq_sim.errors import SimError, UsageError
from pgmq_sim.model.facts import AuditCounts, PreviousRun, TableHealth
from pgmq_sim.model.journeys import FreeSpans, Journey
from pgmq_sim.sqlfiles import statement

T = TypeVar("T")

RunRecord = tuple[str, int | None, bool, bool, dict[str, Any]]  # run_id, target, ordered, audited, settings


class QueueDatabase:
    def __init__(self, sessions: Sessions, shape: QueueShape | None = None) -> None:
        self.sessions = sessions
        self.shape = shape or QueueShape()

    # -- before the run -------------------------------------------------------------------

    def connection_budget(self) -> tuple[int, int | None]:
        """(connections the server will still accept from this role, the role's own limit left)."""
        row = self.sessions.one("connection_budget")
        assert row is not None
        return int(row[0]), None if row[1] is None else int(row[1])

    def server_clock(self) -> datetime:
        row = self.sessions.one("server_clock")
        assert row is not None
        return row[0]

    def tables(self) -> dict[str, tuple[bool, bool]]:
        """For each table a run replaces: (exists, created by this tool)."""
        return {name: (bool(exists), bool(ours)) for name, exists, ours in self.sessions.all("owned_tables")}

    def functions(self) -> dict[str, tuple[bool, bool]]:
        """For each function a run may replace: (exists, made by this tool)."""
        names = [*NAMES, NOTIFY_FUNCTION]
        rows = self.sessions.all("owned_functions", (names,))
        return {name: (bool(e), bool(ours)) for name, e, ours in rows}

    def previous_run(self) -> PreviousRun | None:
        """The last run's record; ask only when `tables()` says pgmq_sim_run exists."""
        row = self.sessions.one("run_record")
        return PreviousRun(*row) if row else None

    def install(
        self,
        design: QueueDesign,
        *,
        audited: bool,
        notify: bool,
        retrying: bool,
        record: RunRecord,
        try_claim: Callable[[psycopg.Connection], None],
        functions: Callable[[psycopg.Connection], list[str]],
        keyed: bool = False,
        types: tuple[str, ...] = ("type1",),
        bystander: bool = False,
    ) -> tuple[str, ...]:
        """Create the queue, the design's additions, the journal, the run record and the wake-up
        trigger in one transaction, then try the claim once (`try_claim`, as the workers will run
        it) and roll it back: a broken file changes nothing. Returned: the queue's tables."""
        with self.sessions.connection() as conn:
            if design.seed_table:
                tables = self._seed_table(conn, design, retrying)
            else:
                tables = self._own_tables(conn, design, keyed, types)
            _execute(conn, statement("run_table"), "run record table", "check the user may create tables")
            run_id, target, ordered, _, settings = record
            conn.execute(statement("run_start"), (run_id, target, ordered, audited, Jsonb(settings)))
            if audited:
                _execute(conn, statement("journal"), "journal table", "check the user may create tables")
                _execute(conn, statement("mark_journal"), "journal table", "check the schema")
                if design.seed_table and not retrying:  # the latency account reads it (empty here)
                    _execute(
                        conn,
                        statement("failures_table"),
                        "failures table",
                        "check the user may create tables",
                    )
            else:  # a journal left by an earlier run would describe that run, not this one
                _execute(conn, statement("drop_journal"), "journal table", "check the user may drop it")
            if notify:
                trigger = statement("notify_trigger") if design.seed_table else design.notify
                assert trigger is not None  # the settings refused notify without the design's notify.sql
                text = trigger if isinstance(trigger, str) else trigger.text
                _execute(conn, text, "notify trigger", "check the user may create triggers")
            if bystander:
                _execute(
                    conn, statement("bystander_schema"), "bystander table", "check the user may create tables"
                )
            with _claim_refused(conn, design):
                made = functions(conn)  # the workers' statements, where sessions are not kept
            for ddl in made:
                _execute(conn, ddl, "the workers' functions", "check the user may create functions")
            try:
                with _claim_refused(conn, design), conn.transaction(force_rollback=True):
                    try_claim(conn)
            except ClaimColumnsError as exc:
                conn.rollback()
                raise UsageError(
                    f"claim query {design.claim} {exc}; it must return msg_id, queue_type and order_id"
                    " (name them so: `returning id as msg_id, ...`)"
                ) from None
            conn.commit()
            return tables

    def _seed_table(self, conn: psycopg.Connection, design: QueueDesign, retrying: bool) -> tuple[str, ...]:
        schema = design.schema
        steps = [
            (statement("drop_own_queue"), "dropping the last run's queue", "check the user may drop it"),
            (schema.text, f"schema file {schema}", "fix the SQL or pass -schema FILE"),
        ]
        if design.extra_schema:
            steps.append((design.extra_schema.text, f"design '{design.name}' schema", "fix its schema.sql"))
        if retrying:
            steps.append(
                (statement("retry_columns"), "attempt columns", "the schema's msg_queue must be the seed's")
            )
            steps.append((statement("failures_table"), "failures table", "check the user may create tables"))
        steps.append((statement("mark_tables"), "marking the queue table", "check the schema"))
        for text, what, fix in steps:
            _execute(conn, text, what, fix)
        return ("public.msg_queue",)

    def _own_tables(
        self, conn: psycopg.Connection, design: QueueDesign, keyed: bool, types: tuple[str, ...]
    ) -> tuple[str, ...]:
        """A folder's schema (after what it requires), its new tables marked as this tool's, and the
        tool's log and failures."""
        before_schema(conn, design.requires, types)
        before = user_tables(conn)
        _execute(conn, design.schema.text, f"schema.sql of {design.folder}", "fix the SQL")
        created = sorted(name for oid, (name, _) in user_tables(conn).items() if oid not in before)
        for name in created:
            schema_name, _, table = name.partition(".")
            conn.execute(
                sql.SQL("comment on table {} is {}").format(
                    sql.Identifier(schema_name, table), sql.Literal(OWNED_COMMENT)
                )
            )
        _execute(conn, statement("failures_table"), "failures table", "check the user may create tables")
        _execute(conn, statement("enqueue_log"), "the enqueue log", "check the user may create tables")
        if keyed:
            _execute(
                conn, statement("enqueue_log_keyed"), "the enqueue log", "check the user may create tables"
            )
        return tuple(created)

    def seed_schema_has_payload(self, design: QueueDesign) -> bool:
        """Whether the seed table's schema (and the design's additions) makes a payload column: tried
        in a transaction rolled back, so -payload-bytes is refused before anything changes."""
        with self.sessions.connection() as conn:
            try:
                conn.execute(f"set local lock_timeout = {ADMIN_LOCK_TIMEOUT_MS}")
                _execute(
                    conn, statement("drop_own_queue"), "the last run's queue", "check the user may drop it"
                )
                _execute(
                    conn,
                    design.schema.text,
                    f"schema file {design.schema}",
                    "fix the SQL or pass -schema FILE",
                )
                if design.extra_schema:
                    _execute(
                        conn, design.extra_schema.text, f"design '{design.name}' schema", "fix its schema.sql"
                    )
                row = conn.execute(statement("has_payload")).fetchone()
                return bool(row and row[0])
            finally:
                if not conn.closed:
                    conn.rollback()

    def pgq_ticker(self) -> tuple[str, int]:
        """The run's database, and how many sessions of others run PgQ's ticker in it."""
        row = self.sessions.one("pgq_ticker")
        assert row is not None
        return str(row[0]), int(row[1])

    def pgq_queue_settings(self) -> dict[str, dict[str, float]]:
        """Each run queue's ticker settings (max count, max lag and idle period in seconds)."""
        rows = self.sessions.all("pgq_queue_settings")
        names = ("ticker_max_count", "ticker_max_lag_s", "ticker_idle_period_s")
        return {str(r[0]): dict(zip(names, (float(v) for v in r[1:]), strict=True)) for r in rows}

    def track_statements(self) -> None:
        """On a server of the tool's own: per-statement cost from pg_stat_statements (preloaded)."""
        self.sessions.write("create_pg_stat_statements")

    # -- during and after the run ---------------------------------------------------------

    def produced(self, journal: bool) -> int:
        """Messages whose write committed: the run record's count, or the highest msg_id that landed."""
        logged = not self.shape.seed_table
        return self.sessions.retrying(lambda conn: produced_count(conn, journal, logged))

    def analyze(self) -> None:
        """Committed: in the tool's transaction the statistics would roll back with it."""

        def run(conn: psycopg.Connection) -> None:
            conn.execute(sql.SQL("analyze {}").format(sql.SQL(", ").join(_identifiers(self.shape.tables))))
            conn.commit()

        self.sessions.retrying(run)

    def finish_run(self, outcome: str, produced: int) -> None:
        self.sessions.write("run_finish", (outcome, produced))

    def remaining(self) -> int:
        """Messages not yet completed, counted on the server (a folder design's, by its pending.sql
        or else from the tool's own tables)."""
        if self.shape.seed_table:
            row = self.sessions.one("remaining_messages")
        elif self.shape.pending_sql is not None:

            def count(conn: psycopg.Connection) -> tuple[Any, ...] | None:
                with conn.transaction(force_rollback=True):
                    load_pending(conn, self.shape)
                    return conn.execute(statement("pending_count")).fetchone()

            row = self.sessions.retrying(count)
        else:
            row = self.sessions.one("remaining_logged")
        return int(row[0]) if row else 0

    def journaled_per_worker(self, workers: list[str]) -> dict[str, int]:
        """Completions each named worker committed, from the journal (a lost process's last ones)."""
        return {str(name): int(count) for name, count in self.sessions.all("journal_per_worker", (workers,))}

    def recover(self, owner_timeout_s: float) -> list[tuple[int | str, str, bool]]:
        """Return to pending the messages whose owner stopped its heartbeat or whose lease expired
        (a folder design: what its recover.sql returns, each a lease that passed)."""
        if not self.shape.seed_table:
            text = self.shape.recover_sql
            if text is None:
                return []

            def run(conn: psycopg.Connection) -> list[tuple[int | str, str, bool]]:
                rows = conn.execute(text.encode()).fetchall()
                conn.commit()
                return [(r[0] if isinstance(r[0], int) else str(r[0]), "", True) for r in rows]

            return self.sessions.retrying(run)
        rows = self.sessions.write("recover_split", (owner_timeout_s,))
        return [(int(m), str(o), bool(e)) for m, o, e in rows]

    def e2e_by_priority(self) -> dict[int, dict[str, float]]:
        """End-to-end percentiles per priority level (a folder design's, audited run)."""
        rows = self.sessions.all("e2e_by_priority")
        return {
            int(level): {
                name: round(float(v), 2) for name, v in zip(("p50", "p95", "p99"), values, strict=True)
            }
            for level, values in rows
        }

    def table_health(self) -> TableHealth:
        """The queue's tables at the end: live rows counted exactly, the rest from the views."""

        def read(conn: psycopg.Connection) -> TableHealth:
            live = 0
            for name in _identifiers(self.shape.tables):
                row = conn.execute(sql.SQL("select count(*) from {}").format(name)).fetchone()
                live += int(row[0]) if row else 0
            row = conn.execute(statement("table_health"), (list(self.shape.tables),)).fetchone()
            assert row is not None
            return TableHealth(live, *(int(v) for v in row))

        return self.sessions.retrying(read)

    def account(
        self,
        ordered: bool,
        free_at_end: list[tuple[str, str]],
        consume: Callable[[float, Iterator[Journey], Iterator[FreeSpans]], T],
    ) -> T | None:
        """The latency account's facts from the journal, handed to `consume` as they stream (see
        db/account.read_account); None where nothing was journaled."""
        return self.sessions.retrying(lambda conn: read_account(conn, ordered, free_at_end, consume))

    def group_blocking(self) -> list[tuple[str, int, int, float]]:
        """Per group: failed attempts and seconds its head kept the group waiting for a retry."""
        return [(str(t), int(o), int(n), float(b)) for t, o, n, b in self.sessions.all("group_blocking")]

    def audit_counts(self, expected: int, show: int, retrying: bool = False) -> AuditCounts:
        """What the journal, the queue and the tool's records say, counted on the server, with the
        evidence a failed audit's cause is read from."""
        return self.sessions.retrying(lambda conn: count_audit(conn, self.shape, expected, show, retrying))


@contextlib.contextmanager
def _claim_refused(conn: psycopg.Connection, design: QueueDesign) -> Iterator[None]:
    """The claim the server refused, in one line with its message (nothing changed: rolled back)."""
    try:
        yield
    except psycopg.Error as exc:
        conn.rollback()
        if is_connection_lost(exc, conn.closed):
            raise
        raise UsageError(f"claim query {design.claim} failed on the server: {first_line(exc)}") from None


def _identifiers(names: tuple[str, ...]) -> list[sql.Composable]:
    return [sql.Identifier(*name.split(".", 1)) for name in names]


def _execute(conn: psycopg.Connection, text: str, what: str, fix: str) -> None:
    """One step of the install: a lock held elsewhere or a broken statement is one line."""
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
        if is_connection_lost(exc, conn.closed):
            raise
        raise UsageError(f"{what} failed on the server: {first_line(exc)}; {fix}") from None
