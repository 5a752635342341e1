"""What the server's own views say about the run: sessions, locks, dead tuples, privileges."""

from __future__ import annotations

import time
from typing import Any

import psycopg

from pgmq_sim.db.connection import admin_connection, connect, limit_lock_waits, own_begin
from pgmq_sim.db.sessions import Sessions
from pgmq_sim.dsn import first_line
from pgmq_sim.model.census import CENSUS, CensusSetting, ServerCensus, SlotCensus, SlotHolder, TableOptions
from pgmq_sim.model.facts import ServerCounters, StallFacts, StatementCounters, TablePulse, lock_blocker
from pgmq_sim.model.timeouts import TIMEOUTS, UNIT_MS, ServerSetting, ServerTimeouts, shown_ms
from pgmq_sim.sqlfiles import statement

READ_ATTEMPTS = 3  # the timeouts' read, canceled by a statement_timeout shorter than it


class ServerViews:
    def __init__(self, sessions: Sessions) -> None:
        self.sessions = sessions

    @property
    def dsn(self) -> str:
        return self.sessions.dsn

    def ping(self) -> None:
        """A round trip on a new connection, not retried: raises if the server does not answer."""
        with self.sessions.connection() as conn:
            conn.execute(statement("server_clock")).fetchone()

    def pulse(self, tables: tuple[str, ...] = ("msg_queue",)) -> TablePulse:
        """The second's sample of the queue's tables and the server's sessions."""
        row = self.sessions.one("table_pulse", (list(tables),))
        assert row is not None
        dead, pid, application, xmin, xmin_age, serving, table_bytes, autovacuums = row
        return TablePulse(
            int(dead),
            None if pid is None else int(pid),
            str(application),
            None if xmin is None else str(xmin),
            None if xmin_age is None else int(xmin_age),
            int(serving),
            int(table_bytes),
            int(autovacuums),
        )

    def worker_backends(self) -> list[int]:
        """The backends of this run's workers, whichever process or host opened them."""
        return [int(r[0]) for r in self.sessions.all("worker_backends")]

    def producer_backends(self) -> list[int]:
        """The producer's backend, to inspect beside the workers' when it wrote nothing."""
        return [int(r[0]) for r in self.sessions.all("producer_backends")]

    def timeouts(self) -> ServerTimeouts:
        """The timeouts this role's sessions get in this database, and where each is set: read on a
        session of its own (the tool's own transactions set theirs locally). A statement_timeout
        shorter than the read itself (a new backend's first look at pg_settings takes a few ms)
        cancels it: it is read again, warm, and at last under the tool's own bound, from the
        settings' values at the session's start and the role's and database's catalog."""
        with connect(self.dsn, autocommit=True) as conn:  # no transaction for the role's timeouts to end
            rows = None
            for _ in range(READ_ATTEMPTS):
                try:
                    rows = conn.execute(statement("server_timeouts"), (list(TIMEOUTS),)).fetchall()
                    break
                except psycopg.errors.QueryCanceled:
                    continue
            if rows is None:
                conn.execute(own_begin(conn))
                rows = conn.execute(statement("server_timeouts_own"), (list(TIMEOUTS),)).fetchall()
                conn.execute("commit")
                rows = [(r[0], r[1], r[2], shown_ms(int(r[1]) * UNIT_MS.get(r[2] or "ms", 1)) if int(r[1])
                         else "0", *r[4:]) for r in rows]  # fmt: skip
        role, database = (str(rows[0][7]), str(rows[0][8])) if rows else ("", "")
        read = {str(r[0]): ServerSetting.read(str(r[0]), int(r[1]), r[2], str(r[3]), str(r[4]), r[5], r[6])
                for r in rows}  # fmt: skip
        return ServerTimeouts(role, database, tuple(read[n] for n in TIMEOUTS if n in read))

    def census(self, tables: tuple[str, ...]) -> ServerCensus:
        """The settings that shape the queue as this role's sessions get them, the queue tables' own
        options, who holds the connection slots and whether pg_stat_statements can be read: on a
        session of its own under the tool's bounds (none of them is a timeout the run's transactions
        set), and timed (read_ms: what the census cost)."""
        began = time.perf_counter()
        with admin_connection(self.dsn) as conn:
            rows = conn.execute(statement("census_settings"), (list(CENSUS), list(tables))).fetchall()
            slots = read_slots(conn)
            readable = "not installed in this database"
            if conn.execute(statement("census_statements")).fetchone() == (True,):
                try:
                    conn.execute(statement("census_statements_read")).fetchall()
                    readable = "readable"
                except psycopg.Error as exc:
                    readable = f"not readable: {first_line(exc)}"
        settings = [r for r in rows if r[5] is None]
        role, database = (str(settings[0][7]), str(settings[0][8])) if settings else ("", "")
        read = {str(r[0]): CensusSetting(str(r[0]), str(r[1]), str(r[2]), r[3], r[4]) for r in settings}
        return ServerCensus(
            role,
            database,
            tuple(read[n] for n in CENSUS if n in read),
            tuple(TableOptions(str(r[0]), tuple(r[5]), tuple(r[6])) for r in rows if r[5] is not None),
            slots,
            readable,
            (time.perf_counter() - began) * 1000,
        )

    def slots(self) -> SlotCensus:
        """Who holds the server's connection slots now."""
        return self.sessions.retrying(read_slots)

    def may_run_programs(self) -> bool:
        row = self.sessions.one("server_programs")
        return bool(row and row[0])

    def trigger_time(self, tables: tuple[str, ...]) -> tuple[tuple[str, int, float], ...]:
        """The queue tables' trigger functions: each one's calls and milliseconds so far."""
        rows = self.sessions.all("trigger_time", (list(tables),))
        return tuple((str(name), int(calls), float(ms)) for name, calls, ms in rows)

    def counters(self) -> ServerCounters:
        """The server's cumulative counters now (read twice, their difference is a cost)."""
        return self.sessions.retrying(read_counters)

    def stall_facts(self, our_pids: list[int], seed_table: bool = True) -> StallFacts:
        """What the stall diagnosis reads, in the order that keeps it from waiting: sessions
        blocking our workers first (the queue itself may be locked), then the queue (the seed's
        table: its groups' heads; a folder design's table is its own)."""

        def read(conn: psycopg.Connection) -> StallFacts:
            rows = conn.execute(statement("lock_blockers"), (our_pids,))
            # named as the server says: the diagnosis names a pooled backend by the pooler's address
            blocked = [lock_blocker(row, transaction_pooled=False) for row in rows]
            pending: list[tuple[Any, ...]] = []
            heads: list[tuple[Any, ...]] = []
            unlocked: set[int] = set()
            if seed_table:
                try:
                    pending = conn.execute(statement("pending_by_type")).fetchall()
                    heads = conn.execute(statement("group_heads")).fetchall()
                    head_ids = ([h[2] for h in heads],)
                    unlocked = {r[0] for r in conn.execute(statement("unlocked_heads"), head_ids)}
                except psycopg.errors.LockNotAvailable:
                    pending, heads, unlocked = [], [], set()
            conn.rollback()
            limit_lock_waits(conn)  # the next transaction is the tool's too: its bounds again
            holders = conn.execute(statement("lock_holders"), (our_pids,)).fetchall()
            facts = conn.execute(statement("connection_facts")).fetchone()
            return StallFacts(blocked, pending, heads, unlocked, holders, bool(facts and facts[2]))

        return self.sessions.retrying(read)


def read_slots(conn: psycopg.Connection) -> SlotCensus:
    rows = conn.execute(statement("census_slots")).fetchall()
    holders = tuple(
        SlotHolder(str(app), str(role), int(n), int(hidden)) for app, role, n, hidden, *_ in rows if n
    )
    return SlotCensus(holders, str(rows[0][4]), bool(rows[0][5]))


DATABASE_COUNTERS = (
    "xact_commit",
    "xact_rollback",
    "blks_read",
    "blks_hit",
    "tup_inserted",
    "tup_updated",
    "tup_deleted",
    "tup_returned",
    "tup_fetched",
)


def parse_lsn(text: str) -> int:
    """'16/B374D848' -> a byte position."""
    high, _, low = text.partition("/")
    return (int(high, 16) << 32) + int(low, 16)


def read_counters(conn: psycopg.Connection) -> ServerCounters:
    row = conn.execute(statement("server_counters")).fetchone()
    assert row is not None
    lsn, has_wal, has_io, has_statements, *database = row
    wal = io = None
    if has_wal:
        wal_row = conn.execute(statement("wal_counters")).fetchone()
        wal = dict(zip(("records", "fpi", "bytes"), map(int, wal_row or (0, 0, 0)), strict=True))
    if has_io:
        io_row = conn.execute(statement("io_counters")).fetchone()
        io = dict(zip(("reads", "writes", "extends", "hits", "fsyncs"), map(int, io_row or ()), strict=True))
    statements, note = (
        None,
        None if has_statements else "pg_stat_statements is not installed in this database",
    )
    if has_statements:
        try:
            with conn.transaction():
                rows = conn.execute(statement("statement_counters")).fetchall()
            statements = {
                int(queryid): StatementCounters(str(q), int(c), float(t), int(r), int(h), int(b), int(w or 0))
                for queryid, q, c, t, r, h, b, w in rows
            }
        except psycopg.Error as exc:  # installed but not preloaded, or hidden from this role
            note = f"pg_stat_statements could not be read: {first_line(exc)}"
    return ServerCounters(
        parse_lsn(str(lsn)),
        dict(zip(DATABASE_COUNTERS, map(int, database), strict=True)),
        wal,
        io,
        statements,
        note,
    )
