"""Faults the run injects into itself on the server: ended backends, a crash restart, a held
snapshot or table lock, and the pressures a phase puts on the queue (an open writing transaction,
repeatable-read readers, idle sessions taking the server's slots). Each holds until its time is up
or the run stops, and says which sessions were its own."""

from __future__ import annotations

import contextlib
import threading
import time
from collections.abc import Callable, Iterator

import psycopg
from psycopg import sql

from pgmq_sim.db.connection import connect, limit_lock_waits
from pgmq_sim.db.sessions import Sessions
from pgmq_sim.dsn import reason
from pgmq_sim.errors import SimError
from pgmq_sim.model.quantities import count_text
from pgmq_sim.sqlfiles import statement

PRESSURE_NAME = "pressure"  # its sessions are "pgmq-sim pressure" in pg_stat_activity


class ServerFaults:
    def __init__(self, sessions: Sessions) -> None:
        self.sessions = sessions

    @contextlib.contextmanager
    def _pressure(self) -> Iterator[psycopg.Connection]:
        """A session of a fault's own, named so that it is told from the run's."""
        conn = connect(self.sessions.dsn, PRESSURE_NAME)
        try:
            yield conn
        finally:
            conn.close()

    def terminate(self, pids: list[int]) -> int:
        """End these backends; how many were ended."""
        row = self.sessions.one("terminate_backends", (pids,))
        return int(row[0]) if row else 0

    def crash_restart(self) -> None:
        """Kill one backend with SIGKILL through COPY TO PROGRAM: the postmaster then resets every
        session, as after a crash. The caller checked the role may run programs."""
        with contextlib.suppress(psycopg.Error), self.sessions.connection() as conn:
            conn.execute(statement("crash_backend").format(pid=int(conn.info.backend_pid)))

    def hold(
        self,
        what: str,
        seconds: float,
        stop: threading.Event,
        tables: tuple[str, ...] = ("msg_queue",),
        holding: Callable[[str], None] = lambda _: None,
    ) -> str:
        """Hold a snapshot (what='hold_snapshot'), an exclusive lock on the queue's tables
        ('lock_queue') or an XID ('idle_in_tx') in an open transaction for `seconds`, or until the
        run stops; `holding` is told the session once it holds."""
        with self._pressure() as conn:
            conn.rollback()  # a transaction of its own, with its own isolation and lock bound
            if what != "lock_queue":
                conn.execute("set transaction isolation level repeatable read")
            limit_lock_waits(conn)  # the tool's bounds: the role's idle timeout must not end the hold
            conn.execute(f"set local lock_timeout = {int(max(seconds, 1) * 1000)}")
            pid = conn.info.backend_pid
            if what == "lock_queue":
                names = sql.SQL(", ").join(sql.Identifier(*name.split(".", 1)) for name in tables)
                conn.execute(sql.SQL("lock table {} in access exclusive mode").format(names))
                holding(f"pid {pid} holds AccessExclusiveLock on {', '.join(tables)}")
            elif what == "idle_in_tx":
                row = conn.execute(statement(what)).fetchone()
                holding(f"pid {pid} idle in transaction holding xid {row[0] if row else '?'}")
            else:
                conn.execute(statement(what))
                holding(f"pid {pid} holds a repeatable-read snapshot")
            stop.wait(seconds)
            conn.rollback()
            return f"pid {pid} released"

    def readers(
        self,
        count: int,
        seconds: float,
        stop: threading.Event,
        tables: tuple[str, ...],
        holding: Callable[[str], None],
    ) -> str:
        """`count` sessions scan the queue's tables, each scan a REPEATABLE READ transaction, one
        after another until `seconds` are up or the run stops; how many scans they made."""
        deadline = time.monotonic() + seconds
        scans = [0] * count
        pids: list[int] = []
        errors: list[str] = []
        ready = threading.Barrier(count + 1, timeout=30)
        names = sql.SQL(" union all ").join(
            sql.SQL("select count(*) from {}").format(sql.Identifier(*name.split(".", 1))) for name in tables
        )

        def scan(index: int) -> None:
            try:
                with self._pressure() as conn:
                    pids.append(conn.info.backend_pid)
                    conn.rollback()
                    ready.wait()
                    while not stop.is_set() and (left := deadline - time.monotonic()) > 0:
                        conn.execute("set transaction isolation level repeatable read")
                        conn.execute(f"set local statement_timeout = {max(1, int(left * 1000))}")
                        conn.execute(names).fetchall()
                        conn.commit()
                        scans[index] += 1
            except (psycopg.Error, threading.BrokenBarrierError) as exc:
                errors.append(f"{type(exc).__name__}: {reason(exc, self.sessions.dsn)}")
                with contextlib.suppress(threading.BrokenBarrierError):
                    ready.abort()

        threads = [threading.Thread(target=scan, args=(i,), daemon=True) for i in range(count)]
        for thread in threads:
            thread.start()
        with contextlib.suppress(threading.BrokenBarrierError):
            ready.wait()
        if not pids:
            raise SimError(f"no reader got a session: {errors[0] if errors else 'none answered'}")
        holding(f"{len(pids)} reader(s), pid {', '.join(map(str, sorted(pids)))}")
        for thread in threads:
            thread.join(max(0.0, deadline - time.monotonic()) + 10)
        said = (
            f"{count_text(sum(scans))} repeatable-read scan(s) of {', '.join(tables)}"
            f" by {count_text(len(pids))} session(s)"
        )
        return said + (f"; {len(errors)} ended early: {errors[0]}" if errors else "")

    def take_slots(
        self, count: int, seconds: float, stop: threading.Event, holding: Callable[[str], None]
    ) -> str:
        """Open up to `count` idle sessions (until the server or the pooler refuses one), hold them
        for `seconds` or until the run stops, then close them all."""
        held: list[psycopg.Connection] = []
        refused = ""
        try:
            while len(held) < count and not stop.is_set():
                try:
                    held.append(connect(self.sessions.dsn, PRESSURE_NAME, autocommit=True))
                except psycopg.Error as exc:
                    refused = f"; the next was refused: {reason(exc, self.sessions.dsn)}"
                    break
            if not held:
                raise SimError(f"no session could be opened{refused}")
            pids = sorted(conn.info.backend_pid for conn in held)
            shown = ", ".join(map(str, pids[:10])) + (", ..." if len(pids) > 10 else "")
            holding(
                f"{count_text(len(held))} of {count_text(count)} idle session(s) held, pid {shown}{refused}"
            )
            stop.wait(seconds)
        finally:
            for conn in held:
                conn.close()
        return f"{count_text(len(held))} session(s) closed"
