"""Faults the run injects into itself on the server: ended backends, a crash restart, a held
snapshot or table lock."""

from __future__ import annotations

import contextlib
import threading

import psycopg
from psycopg import sql

from pgmq_sim.db.connection import limit_lock_waits
from pgmq_sim.db.sessions import Sessions
from pgmq_sim.sqlfiles import statement


class ServerFaults:
    def __init__(self, sessions: Sessions) -> None:
        self.sessions = sessions

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
        self, what: str, seconds: float, stop: threading.Event, tables: tuple[str, ...] = ("msg_queue",)
    ) -> None:
        """Hold a snapshot (what='hold_snapshot') or an exclusive lock on the queue's tables
        ('lock_queue') in an open transaction for `seconds`, or until the run stops."""
        with self.sessions.connection() as conn:
            conn.rollback()  # a transaction of its own, with its own isolation and lock bound
            if what == "hold_snapshot":
                conn.execute("set transaction isolation level repeatable read")
            limit_lock_waits(conn)  # the tool's bounds: the role's idle timeout must not end the hold
            conn.execute(f"set local lock_timeout = {int(max(seconds, 1) * 1000)}")
            if what == "lock_queue":
                names = sql.SQL(", ").join(sql.Identifier(*name.split(".", 1)) for name in tables)
                conn.execute(sql.SQL("lock table {} in access exclusive mode").format(names))
            else:
                conn.execute(statement(what))
            stop.wait(seconds)
            conn.rollback()
