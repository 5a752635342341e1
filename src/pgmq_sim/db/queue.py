"""The tool's own operations on the queue: install it, follow the run's record, count and audit it."""

from __future__ import annotations

from collections.abc import Callable
from datetime import datetime
from typing import Any

import psycopg
from psycopg.types.json import Jsonb

from pgmq_sim.db.batches import produced_count
from pgmq_sim.db.connection import ADMIN_LOCK_TIMEOUT_MS, is_connection_lost
from pgmq_sim.db.sessions import Sessions
from pgmq_sim.db.statements import CLAIM, COMPLETE, FAIL, JOURNAL, NOTIFY_FUNCTION, TAKE
from pgmq_sim.dsn import first_line
from pgmq_sim.errors import SimError, UsageError
from pgmq_sim.model.facts import AuditCounts, PreviousRun, TableHealth
from pgmq_sim.sqlfiles import ClaimStrategy, SqlSource, statement

RunRecord = tuple[str, int | None, bool, bool, dict[str, Any]]  # run_id, target, ordered, audited, settings


class QueueDatabase:
    def __init__(self, sessions: Sessions) -> None:
        self.sessions = sessions

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
        names = [CLAIM, COMPLETE, TAKE, FAIL, JOURNAL, NOTIFY_FUNCTION]
        rows = self.sessions.all("owned_functions", (names,))
        return {name: (bool(e), bool(ours)) for name, e, ours in rows}

    def previous_run(self) -> PreviousRun | None:
        """The last run's record; ask only when `tables()` says pgmq_sim_run exists."""
        row = self.sessions.one("run_record")
        return PreviousRun(*row) if row else None

    def install(
        self,
        schema: SqlSource,
        strategy: ClaimStrategy,
        *,
        audited: bool,
        notify: bool,
        retrying: bool,
        record: RunRecord,
        try_claim: Callable[[psycopg.Connection], None],
        functions: list[str],
        payload: bool = False,
        bystander: bool = False,
    ) -> None:
        """Create the queue, the strategy's additions, the journal, the run record and the wake-up
        trigger in one transaction, then try the claim once (`try_claim`, as the workers will run
        it) and roll it back: a broken file changes nothing."""
        with self.sessions.connection() as conn:
            steps = [(schema.text, f"schema file {schema}", "fix the SQL or pass -schema FILE")]
            if strategy.schema:
                steps.append(
                    (strategy.schema.text, f"strategy '{strategy.name}' schema", "fix its schema.sql")
                )
            if retrying:
                steps.append(
                    (
                        statement("retry_schema"),
                        "attempt columns",
                        "the schema's msg_queue must be the seed's",
                    )
                )
            steps += [
                (statement("mark_tables"), "marking the queue table", "check the schema"),
                (statement("run_table"), "run record table", "check the user may create tables"),
            ]
            for text, what, fix in steps:
                _execute(conn, text, what, fix)
            if payload and not conn.execute(statement("has_payload")).fetchone()[0]:  # type: ignore[index]
                conn.rollback()
                raise UsageError(
                    f"-payload-bytes needs a payload column in msg_queue, and schema file {schema} has none;"
                    " add one (payload bytea) or drop -payload-bytes"
                )
            run_id, target, ordered, _, settings = record
            conn.execute(statement("run_start"), (run_id, target, ordered, audited, Jsonb(settings)))
            if audited:
                _execute(conn, statement("journal"), "journal table", "check the user may create tables")
                _execute(conn, statement("mark_journal"), "journal table", "check the schema")
            else:  # a journal left by an earlier run would describe that run, not this one
                _execute(conn, statement("drop_journal"), "journal table", "check the user may drop it")
            if notify:
                _execute(
                    conn, statement("notify_trigger"), "notify trigger", "check the user may create triggers"
                )
            if bystander:
                _execute(
                    conn, statement("bystander_schema"), "bystander table", "check the user may create tables"
                )
            for ddl in functions:  # the workers' statements, where sessions are not kept
                _execute(conn, ddl, "the workers' functions", "check the user may create functions")
            try:
                with conn.transaction(force_rollback=True):
                    try_claim(conn)
            except psycopg.Error as exc:
                conn.rollback()
                raise UsageError(
                    f"claim query {strategy.claim} failed on the server: {first_line(exc)};"
                    " fix it (it must return msg_id, queue_type, order_id) or pass -next-msg FILE"
                ) from None
            conn.commit()

    def track_statements(self) -> None:
        """On a server of the tool's own: per-statement cost from pg_stat_statements (preloaded)."""
        self.sessions.write("create_pg_stat_statements")

    # -- during and after the run ---------------------------------------------------------

    def produced(self, journal: bool) -> int:
        """Messages whose write committed: the run record's count, or the highest msg_id that landed."""
        return self.sessions.retrying(lambda conn: produced_count(conn, journal))

    def analyze(self) -> None:
        """Committed: in the tool's transaction the statistics would roll back with it."""
        self.sessions.write("analyze_queue")

    def finish_run(self, outcome: str, produced: int) -> None:
        self.sessions.write("run_finish", (outcome, produced))

    def remaining(self) -> int:
        """Messages not yet completed, counted on the server."""
        row = self.sessions.one("remaining_messages")
        return int(row[0]) if row else 0

    def journaled_per_worker(self, workers: list[str]) -> dict[str, int]:
        """Completions each named worker committed, from the journal (a lost process's last ones)."""
        return {str(name): int(count) for name, count in self.sessions.all("journal_per_worker", (workers,))}

    def recover(self, owner_timeout_s: float) -> list[tuple[int, str, bool]]:
        """Return to pending the messages whose owner stopped its heartbeat or whose lease expired."""
        rows = self.sessions.write("recover_split", (owner_timeout_s,))
        return [(int(m), str(o), bool(e)) for m, o, e in rows]

    def table_health(self) -> TableHealth:
        row = self.sessions.one("table_health")
        assert row is not None
        return TableHealth(*(int(v) for v in row))

    def group_blocking(self) -> list[tuple[str, int, int, float]]:
        """Per group: failed attempts and seconds its head kept the group waiting for a retry."""
        return [(str(t), int(o), int(n), float(b)) for t, o, n, b in self.sessions.all("group_blocking")]

    def audit_counts(self, expected: int, show: int, retrying: bool = False) -> AuditCounts:
        suffix = "_retry" if retrying else ""

        def read(conn: psycopg.Connection) -> AuditCounts:
            row = conn.execute(statement("audit_counts" + suffix), (expected,)).fetchone()
            assert row is not None
            processed, duplicates, missing, left_behind, *retries = row
            duplicate_ids = [r[0] for r in conn.execute(statement("audit_duplicates"), (show,))]
            missing_ids = [r[0] for r in conn.execute(statement("audit_missing" + suffix), (expected, show))]
            violations = [r[0] for r in conn.execute(statement("audit_order"))]
            return AuditCounts(
                processed,
                duplicates,
                missing,
                left_behind,
                tuple(duplicate_ids),
                tuple(missing_ids),
                tuple(violations[:show]),
                len(violations),
                *retries,
            )

        return self.sessions.retrying(read)


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
