"""The pooler's own console (PgBouncer's admin database, -pooler-admin): its view of the run's pool,
and its faults on demand (PAUSE, KILL, RECONNECT).

The console speaks only the simple query protocol and knows no statement_timeout, so a command goes
through libpq's non-blocking calls and its answer is waited for with a bound: a pooler that stops
answering costs the caller COMMAND_TIMEOUT_S, never a hang."""

from __future__ import annotations

import select
import threading
import time

import psycopg
from psycopg import pq

from pgmq_sim.model.facts import PoolerPulse

CONNECT_TIMEOUT_S = 3
COMMAND_TIMEOUT_S = 3.0
PAUSE_TIMEOUT_S = 15.0  # PAUSE answers once the queries in flight end
RESUME_TRIES_S = 5.0


class ConsoleError(psycopg.OperationalError):
    """The console refused a command, did not answer in time, or could not be reached."""


class PoolerConsole:
    """One connection to the console, opened when first needed and again after a failure; a lock
    lets the housekeeper's reads and the fault schedule's commands share it."""

    def __init__(self, dsn: str, database: str) -> None:
        self.dsn = dsn
        self.database = database  # the pool's database, as the run's DSN names it to the pooler
        self._conn: psycopg.Connection | None = None
        self._lock = threading.Lock()

    def rows(self, command: str, timeout_s: float = COMMAND_TIMEOUT_S) -> list[dict[str, str | None]]:
        with self._lock:
            try:
                if self._conn is None or self._conn.closed:
                    self._conn = psycopg.connect(self.dsn, autocommit=True, connect_timeout=CONNECT_TIMEOUT_S)
                return _bounded(self._conn.pgconn, command, timeout_s)
            except ConsoleError:
                self._drop()
                raise
            except (psycopg.Error, OSError) as exc:
                self._drop()
                raise ConsoleError(str(exc)) from exc

    def command(self, verb: str, timeout_s: float = COMMAND_TIMEOUT_S) -> None:
        """PAUSE, RESUME, KILL or RECONNECT of the run's database."""
        self.rows(f'{verb} "{self.database}"', timeout_s)

    def resume(self) -> None:
        """RESUME, retried for a few seconds: after a KILL the pooler may close the console's next
        connection while it drops the others, and a database it never paused needs nothing."""
        deadline = time.monotonic() + RESUME_TRIES_S
        while True:
            try:
                self.command("RESUME")
                return
            except ConsoleError as exc:
                if "not paused" in str(exc):
                    return
                if time.monotonic() > deadline:
                    raise
                time.sleep(0.2)

    def pulse(self) -> PoolerPulse | None:
        """The run's pool (every user of its database), and its clients' waiting so far; None when
        the pooler has no pool for the database (yet)."""
        pools = [r for r in self.rows("SHOW POOLS") if r.get("database") == self.database]
        stats = [r for r in self.rows("SHOW STATS") if r.get("database") == self.database]
        if not pools:
            return None
        longest = max(_num(r, "maxwait") + _num(r, "maxwait_us") / 1e6 for r in pools)
        return PoolerPulse(
            waiting=sum(int(_num(r, "cl_waiting")) for r in pools),
            active=sum(int(_num(r, "cl_active")) for r in pools),
            servers_active=sum(int(_num(r, "sv_active")) for r in pools),
            servers_idle=sum(int(_num(r, "sv_idle") + _num(r, "sv_used")) for r in pools),
            longest_wait_ms=round(longest * 1000, 1),
            waited_s=sum(_num(r, "total_wait_time") for r in stats) / 1e6,
        )

    def close(self) -> None:
        """Bounded too: a fault's command may still hold the connection (it ends on its own bound)."""
        if self._lock.acquire(timeout=COMMAND_TIMEOUT_S):
            try:
                self._drop()
            finally:
                self._lock.release()

    def _drop(self) -> None:
        conn, self._conn = self._conn, None
        if conn is not None:
            conn.close()


def _num(row: dict[str, str | None], column: str) -> float:
    value = row.get(column)
    return float(value) if value else 0.0


def _bounded(pgconn: pq.abc.PGconn, command: str, timeout_s: float) -> list[dict[str, str | None]]:
    """Send one simple query and read every result, waiting at most timeout_s in all."""
    deadline = time.monotonic() + timeout_s
    pgconn.send_query(command.encode())
    while pgconn.flush():
        _wait(pgconn, deadline, write=True)
    rows: list[dict[str, str | None]] = []
    failure: str | None = None
    while True:
        while pgconn.is_busy():
            _wait(pgconn, deadline)
            pgconn.consume_input()
        result = pgconn.get_result()
        if result is None:
            break
        if result.status == pq.ExecStatus.FATAL_ERROR:
            failure = (result.error_message or b"").decode(errors="replace").strip()
        elif result.status == pq.ExecStatus.TUPLES_OK:
            names = [(result.fname(i) or b"").decode() for i in range(result.nfields)]
            for row in range(result.ntuples):
                values = (result.get_value(row, i) for i in range(result.nfields))
                rows.append(
                    {n: None if v is None else v.decode() for n, v in zip(names, values, strict=True)}
                )
    if failure is not None:
        raise ConsoleError(f"the pooler's console refused {command.split()[0]}: {failure}")
    return rows


def _wait(pgconn: pq.abc.PGconn, deadline: float, write: bool = False) -> None:
    left = deadline - time.monotonic()
    if left <= 0:
        raise ConsoleError("the pooler's console did not answer in time")
    sock = pgconn.socket
    ready = select.select([], [sock], [], left) if write else select.select([sock], [], [], left)
    if not any(ready):
        raise ConsoleError("the pooler's console did not answer in time")
