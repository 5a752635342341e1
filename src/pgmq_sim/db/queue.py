"""The tool's own operations on the queue: install it, follow the run's record, count and audit it."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from datetime import datetime
from typing import Any, TypeVar

import psycopg
from psycopg import sql

from pgmq_sim.db.account import read_account
from pgmq_sim.db.audit import count_audit, load_pending
from pgmq_sim.db.batches import produced_count, settle
from pgmq_sim.db.install import QueueInstall
from pgmq_sim.db.sessions import Sessions
from pgmq_sim.db.statements import NAMES, NOTIFY_FUNCTION
from pgmq_sim.db.values import Message, QueueShape
from pgmq_sim.db.windows import ClosedWindow, WindowRead, closed_windows, journal_rows_through, read_rest
from pgmq_sim.model.facts import AuditCounts, PreviousRun, TableHealth
from pgmq_sim.model.journeys import FreeSpans, Journey
from pgmq_sim.sqlfiles import statement

T = TypeVar("T")


class QueueDatabase(QueueInstall):
    """The tool's own statements on the queue: before the run, its record, its counts and audit."""

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

    def foreign_owners(self, names: list[str]) -> list[tuple[str, str, str]]:
        """Of these tables and functions of the tool's, those another role owns: (name, owner,
        'table' or 'function')."""
        return [(str(n), str(o), str(k)) for n, o, k in self.sessions.all("foreign_owners", (names,))]

    def previous_run(self) -> PreviousRun | None:
        """The last run's record; ask only when `tables()` says pgmq_sim_run exists."""
        row = self.sessions.one("run_record")
        return PreviousRun(*row) if row else None

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

    def settle(self, cut_off: list[Message], journal: bool) -> list[int]:
        """The enqueues the run's end cut off in flight that did not land, below one that did, written
        now (db/batches.settle): their ids."""
        return self.sessions.retrying(lambda conn: settle(conn, cut_off, journal))

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

    def account_between(
        self,
        ordered: bool,
        free_at_end: list[tuple[str, str]],
        consume: Callable[[float, Iterator[Journey], Iterator[FreeSpans]], T],
        window: tuple[float, float],
    ) -> T | None:
        """The account of the messages enqueued in `window` (the server's epoch), by the same
        statements over a view of the journal that holds them alone."""
        lo, hi = (float(t) for t in window)

        def read(conn: psycopg.Connection) -> T | None:
            conn.execute(statement("journal_window").format(lo=repr(lo), hi=repr(hi)).encode())
            return read_account(conn, ordered, free_at_end, consume)

        return self.sessions.retrying(read)

    def group_blocking(self) -> list[tuple[str, int, int, float]]:
        """Per group: failed attempts and seconds its head kept the group waiting for a retry."""
        return [(str(t), int(o), int(n), float(b)) for t, o, n, b in self.sessions.all("group_blocking")]

    def audit_rest(self, after: int, expected: int, show: int, retrying: bool) -> WindowRead:
        """The audit of what the live audit's closed windows (1..after) left (db/windows.read_rest)."""
        return self.sessions.retrying(
            lambda conn: read_rest(conn, self.shape, after, expected, show, retrying)
        )

    def closed_windows(self, run_id: str) -> tuple[list[ClosedWindow], int]:
        """The live audit's closed windows of the run, and the journal's rows of their msg_ids now."""

        def read(conn: psycopg.Connection) -> tuple[list[ClosedWindow], int]:
            windows = closed_windows(conn, run_id)
            return windows, journal_rows_through(conn, windows[-1].hi) if windows else 0

        return self.sessions.retrying(read)

    def audit_counts(self, expected: int, show: int, retrying: bool = False) -> AuditCounts:
        """What the journal, the queue and the tool's records say, counted on the server, with the
        evidence a failed audit's cause is read from."""
        return self.sessions.retrying(lambda conn: count_audit(conn, self.shape, expected, show, retrying))


def _identifiers(names: tuple[str, ...]) -> list[sql.Composable]:
    return [sql.Identifier(*name.split(".", 1)) for name in names]
