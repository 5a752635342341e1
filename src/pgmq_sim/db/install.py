"""Installing a queue design: its tables, the tool's journal and run record, the wake-up trigger and
the workers' functions in one transaction, then the claim tried once and rolled back."""

from __future__ import annotations

import contextlib
from collections.abc import Callable, Iterator
from typing import Any

import psycopg
from psycopg import sql
from psycopg.types.json import Jsonb

from pgmq_sim.db.claims import ClaimColumnsError
from pgmq_sim.db.connection import ADMIN_LOCK_TIMEOUT_MS, is_connection_lost
from pgmq_sim.db.sessions import Sessions
from pgmq_sim.db.statements import OWNED_COMMENT
from pgmq_sim.db.trial import before_schema, user_tables
from pgmq_sim.designs.design import QueueDesign
from pgmq_sim.dsn import first_line
from pgmq_sim.errors import LockBusy, UsageError
from pgmq_sim.sqlfiles import statement

RunRecord = tuple[str, int | None, bool, bool, dict[str, Any]]  # run_id, target, ordered, audited, settings


class QueueInstall:
    """The install's side of QueueDatabase: nothing here runs once the run has started."""

    sessions: Sessions

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


def _execute(conn: psycopg.Connection, text: str, what: str, fix: str) -> None:
    """One step of the install: a lock held elsewhere or a broken statement is one line."""
    try:
        conn.execute(text.encode())  # bytes: a file's % and {} are not placeholders
    except psycopg.errors.LockNotAvailable:
        conn.rollback()
        raise LockBusy(
            f"{what} waited {ADMIN_LOCK_TIMEOUT_MS / 1000:g} s for a lock another session holds on"
            " the queue; end that session's transaction and run again"
        ) from None
    except psycopg.Error as exc:
        conn.rollback()
        if is_connection_lost(exc, conn.closed):
            raise
        raise UsageError(f"{what} failed on the server: {first_line(exc)}; {fix}") from None
