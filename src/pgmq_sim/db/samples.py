"""The housekeeper's connection, on the run's event loop: the queue's pulse each second, split mode's
recovery, and the wait profile's samples (many a second, classified on the server). Each statement
has a bound: one that does not answer in time is cancelled and its answer drained (a gap in the
samples, not a stop), and a lost connection is opened again at the next tick."""

from __future__ import annotations

import time
from typing import Any

import psycopg
from psycopg import sql
from psycopg.pq.abc import PGresult

from pgmq_sim.db.connection import opened_async, own_limits
from pgmq_sim.db.values import QueueShape
from pgmq_sim.db.wire import Answer, Wire
from pgmq_sim.model.facts import HeldLocks, LockBlocker, LockSample, TablePulse, lock_blocker
from pgmq_sim.model.identity import WORKER, Whose, said, whose
from pgmq_sim.sqlfiles import statement

PULSE_TIMEOUT_S = 5.0
SAMPLE_TIMEOUT_S = 2.0
RECOVER_TIMEOUT_S = 5.0  # a round the queue's locks hold up is tried again at the next tick
BLOCKERS_EVERY_S = 0.25  # while the run's sessions wait on locks, who blocks them, this often at most
WAIT_COUNTS = "pgmq_sim_wait_counts"
LOCK_WAIT_MS = 100  # a statement of the queue's tables waits this long for a lock (a table lock held
# outside the run costs the pulse and the census's rows a gap, never the wait samples that see it)
CLASS_COLUMNS = 7  # wait_counts.sql's counts, in result/waits.WAIT_CLASSES' order


def text_of(result: PGresult, row: int, column: int) -> str:
    return (result.get_value(row, column) or b"").decode()


def int_array(values: list[int]) -> bytes:
    return ("{" + ",".join(map(str, values)) + "}").encode()


def text_array(values: tuple[str, ...]) -> bytes:
    return ("{" + ",".join(f'"{v}"' for v in values) + "}").encode()


Classes = tuple[tuple[int, ...], dict[str, int], dict[str, int]]  # per class, Lock waits, other waits


def _events(text: str) -> dict[str, int]:
    """'relation:3,tuple:1' read."""
    found: dict[str, int] = {}
    for item in filter(None, text.split(",")):
        event, _, count = item.rpartition(":")
        found[event] = int(count)
    return found


def _classes(r: PGresult, i: int) -> tuple[tuple[int, ...], dict[str, int], list[int], dict[str, int], bool]:
    """One row of wait_counts.sql: its sessions per class, Lock waits, waiting pids, other waits, and
    whether they are the producer's."""
    return (
        tuple(int(r.get_value(i, c) or 0) for c in range(CLASS_COLUMNS)),
        _events(text_of(r, i, CLASS_COLUMNS)),
        [int(pid) for pid in text_of(r, i, CLASS_COLUMNS + 1).split(",") if pid],
        _events(text_of(r, i, CLASS_COLUMNS + 2)),
        r.get_value(i, CLASS_COLUMNS + 3) == b"t",
    )


class WaitSample:
    """One sample of the run's sessions: backends per wait class, Lock waits per event, and the
    sessions blocking them when they were read in this sample; the producer's sessions apart too."""

    __slots__ = ("blockers", "counts", "lock_events", "other_events", "producer")

    def __init__(
        self,
        counts: tuple[int, ...],
        lock_events: dict[str, int],
        blockers: list[LockBlocker],
        other_events: dict[str, int] | None = None,
        producer: Classes | None = None,
    ):
        self.counts = counts
        self.lock_events = lock_events
        self.other_events = other_events or {}
        self.blockers = blockers
        self.producer = producer


class SampleSession:
    """One connection held for the housekeeper (a connection per sample would cost the server more
    than the sample). Behind a transaction pooler each statement is a transaction of its own, sent
    as text (nothing PREPAREd)."""

    def __init__(self, dsn: str, prepared: bool) -> None:
        self._dsn = dsn
        self._prepared = prepared
        self._wire: Wire | None = None
        self._next_blockers = 0.0
        self._rows_queries: dict[str, str] = {}  # a queue table's rows census, composed once

    async def _open(self) -> Wire:
        if self._wire is not None and not self._wire.closed:
            return self._wire
        self._wire = None

        async def set_up(conn: psycopg.AsyncConnection[Any]) -> Wire:
            if self._prepared:  # a session of its own (no transaction pooler): the tool's bounds for
                # the session, not the role's timeouts, so its samples are not canceled by them
                await conn.execute(own_limits(conn, local=False) + f"; set lock_timeout = {LOCK_WAIT_MS}")
                await conn.execute(f"prepare {WAIT_COUNTS} as {statement('wait_counts')}")
            return Wire(conn)

        self._wire = await opened_async(self._dsn, "housekeeper", set_up)
        return self._wire

    async def _ask(self, timeout: float, query: str, params: list[bytes | None] | None = None) -> Answer:
        """A bounded statement; a failure (or a timeout) closes the connection unless it drained."""
        wire = await self._open()
        try:
            return await wire.within(timeout, query.encode(), params)
        except psycopg.errors.LockNotAvailable:
            raise  # answered: the session serves the next sample
        except psycopg.OperationalError:
            self.close()
            raise

    async def pulse(self, tables: tuple[str, ...]) -> TablePulse:
        """The second's sample of the queue's tables and the server's sessions."""
        r = (await self._ask(PULSE_TIMEOUT_S, statement("table_pulse"), [text_array(tables)])).results[0]
        value = r.get_value
        pid, xmin, age = value(0, 1), value(0, 3), value(0, 4)
        return TablePulse(
            int(value(0, 0) or 0),
            None if pid is None else int(pid),
            text_of(r, 0, 2),
            None if xmin is None else xmin.decode(),
            None if age is None else int(age),
            int(value(0, 5) or 0),
            int(value(0, 6) or 0),
            int(value(0, 7) or 0),
        )

    async def census(self, tables: tuple[str, ...], count_rows: bool) -> LockSample:
        """Who holds locks a claim may skip or wait on (sql/lock_census.sql); with count_rows, the
        rows of each queue table each transaction holds (a scan of each: only while they are small)."""
        rows: dict[int, int] = {}
        if count_rows:
            try:
                await self._count_rows(tables, rows)
            except psycopg.errors.LockNotAvailable:  # a table lock: its holder is named below
                rows.clear()
                count_rows = False
        params: list[bytes | None] = [text_array(tables), int_array(sorted(rows))]
        r = (await self._ask(SAMPLE_TIMEOUT_S, statement("lock_census"), params)).results[0]
        held = []
        for i in range(r.ntuples):
            if r.get_value(i, 1) is None:  # nobody holds anything: the clock's row alone
                continue
            pid, application = int(r.get_value(i, 1) or 0), text_of(r, i, 2)
            who = whose(application, text_of(r, i, 3), transaction_pooled=not self._prepared)
            held.append(
                HeldLocks(
                    pid,
                    said(application, who),
                    who == Whose.OURS and application.startswith(WORKER),
                    text_of(r, i, 4),
                    float(r.get_value(i, 5) or 0),
                    int(r.get_value(i, 6) or 0),
                    text_of(r, i, 7),
                    rows.get(pid, 0) if count_rows else None,
                    who,
                )
            )
        return LockSample(float(r.get_value(0, 0) or 0), tuple(held), count_rows)

    async def _count_rows(self, tables: tuple[str, ...], rows: dict[int, int]) -> None:
        """The rows of each queue table each transaction holds, into `rows` by pid."""
        for table in tables:
            query = self._rows_queries.get(table)
            if query is None:
                composed = sql.SQL(statement("lock_census_rows")).format(
                    table=sql.Identifier(*table.split(".", 1))
                )
                query = self._rows_queries[table] = composed.as_string((await self._open()).connection)
            r = (await self._ask(SAMPLE_TIMEOUT_S, query)).results[0]
            for i in range(r.ntuples):
                pid, n = int(r.get_value(i, 0) or 0), int(r.get_value(i, 1) or 0)
                rows[pid] = max(rows.get(pid, 0), n)

    async def recover(self, shape: QueueShape, owner_timeout_s: float) -> list[tuple[int, str, bool]]:
        """Return to pending the messages whose owner stopped its heartbeat or whose lease expired
        (a folder design: what its recover.sql returns, each a lease that passed)."""
        if not shape.seed_table:
            if shape.recover_sql is None:
                return []
            r = (await self._ask(RECOVER_TIMEOUT_S, shape.recover_sql)).results[-1]
            return [(int(r.get_value(i, 0) or 0), "", True) for i in range(r.ntuples)]
        answer = await self._ask(
            RECOVER_TIMEOUT_S, statement("recover_split"), [repr(owner_timeout_s).encode()]
        )
        r = answer.results[0]
        return [
            (int(r.get_value(i, 0) or 0), text_of(r, i, 1), r.get_value(i, 2) == b"t")
            for i in range(r.ntuples)
        ]

    async def waits(self) -> WaitSample:
        """What each of the run's sessions waits on now, counted by class on the server; while some
        wait on a lock, a few times a second, who blocks them (pg_blocking_pids takes the lock
        manager's partition locks: not at every sample)."""
        wire = await self._open()
        try:
            if self._prepared:
                answer = await wire.within(SAMPLE_TIMEOUT_S, f"execute {WAIT_COUNTS}".encode())
            else:
                answer = await wire.within(SAMPLE_TIMEOUT_S, statement("wait_counts").encode())
        except psycopg.OperationalError:
            self.close()
            raise
        r = answer.results[0]
        rows = [_classes(r, i) for i in range(r.ntuples)]  # the producer's sessions, and the rest
        counts = tuple(sum(row[0][c] for row in rows) for c in range(CLASS_COLUMNS))
        events: dict[str, int] = {}
        others: dict[str, int] = {}
        waiting: list[int] = []
        producer: Classes | None = None
        for row_counts, row_events, row_waiting, row_others, is_producer in rows:
            for event, n in row_events.items():
                events[event] = events.get(event, 0) + n
            for event, n in row_others.items():
                others[event] = others.get(event, 0) + n
            waiting += row_waiting
            if is_producer:
                producer = (row_counts, row_events, row_others)
        blockers: list[LockBlocker] = []
        now = time.monotonic()
        if waiting and now >= self._next_blockers:
            self._next_blockers = now + BLOCKERS_EVERY_S
            found = (
                await self._ask(SAMPLE_TIMEOUT_S, statement("lock_blockers"), [int_array(waiting)])
            ).results[0]
            blockers = [
                lock_blocker(
                    (
                        int(found.get_value(i, 0) or 0),
                        text_of(found, i, 1),
                        int(found.get_value(i, 2) or 0),
                        *(text_of(found, i, c) for c in range(3, 8)),
                        float(found.get_value(i, 8) or 0),
                        *(text_of(found, i, c) for c in range(9, 12)),
                    ),
                    not self._prepared,  # nothing prepared: the path pools per transaction
                )
                for i in range(found.ntuples)
            ]
        return WaitSample(counts, events, blockers, others, producer)

    def close(self) -> None:
        wire, self._wire = self._wire, None
        if wire is not None:
            wire.close()
