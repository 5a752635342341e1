"""The tool's own sessions: a connection per operation instead of one held idle through the run, so
an `idle_session_timeout`, a pooler or a restart cannot take the report with it; an operation whose
connection was lost is retried until the reconnect deadline."""

from __future__ import annotations

import contextlib
import threading
from collections.abc import Callable, Iterator, Sequence
from typing import Any, TypeVar

import psycopg

from pgmq_sim.db.connection import admin_connection, reconnecting
from pgmq_sim.model.backoff import Backoff
from pgmq_sim.sqlfiles import statement

T = TypeVar("T")


class Sessions:
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
    def connection(self) -> Iterator[psycopg.Connection]:
        """One connection, not retried (for operations that must not run twice)."""
        with admin_connection(self._dsn) as conn:
            yield conn

    def retrying(self, operation: Callable[[psycopg.Connection], T]) -> T:
        """Run an idempotent operation on a fresh connection, again while the connection is lost."""

        def attempt() -> T:
            with admin_connection(self._dsn) as conn:
                return operation(conn)

        return reconnecting(attempt, Backoff(self._reconnect_timeout, self._stop, first=0.1))

    def one(self, name: str, params: Sequence[Any] = ()) -> tuple[Any, ...] | None:
        """The first row of a packaged statement (retried while lost)."""
        return self.retrying(lambda conn: conn.execute(statement(name), params).fetchone())

    def all(self, name: str, params: Sequence[Any] = ()) -> list[tuple[Any, ...]]:
        return self.retrying(lambda conn: conn.execute(statement(name), params).fetchall())

    def write(self, name: str, params: Sequence[Any] = ()) -> list[tuple[Any, ...]]:
        """Run a packaged statement that changes something, commit, return what it returned."""

        def run(conn: psycopg.Connection) -> list[tuple[Any, ...]]:
            cur = conn.execute(statement(name), params)
            rows = cur.fetchall() if cur.description else []
            conn.commit()
            return rows

        return self.retrying(run)
