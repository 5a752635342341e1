"""One round trip at libpq's level: send a simple-query message, wait on the socket, read every
result raw. A worker's hot path: it holds the GIL for the least work (no cursor, no row adaptation,
one poll per answer), and it sees each statement's own result, so an error is placed exactly (the
completion, its commit or the next claim), even when the connection is lost halfway through.

Values are the server's text (the session keeps DateStyle ISO); callers convert what they need.
"""

from __future__ import annotations

import select
from typing import NamedTuple

import psycopg
from psycopg import pq
from psycopg.errors import error_from_result

FATAL_ERROR = pq.ExecStatus.FATAL_ERROR
WAIT_MS = 100  # the socket is polled in slices: a connection closed under it is noticed


class Answer(NamedTuple):
    """What came back for one message: each statement's result up to the first error (the server
    runs nothing after it), that error, and the error that cut the connection, if one did."""

    results: list[pq.abc.PGresult]
    error: psycopg.Error | None = None
    lost: psycopg.OperationalError | None = None

    def failure(self) -> psycopg.Error | None:
        return self.lost or self.error


class Wire:
    """A connection's raw round trips (the connection stays psycopg's, in autocommit mode, and
    stays usable through psycopg between them)."""

    def __init__(self, conn: psycopg.Connection) -> None:
        self.connection = conn
        self._pg = conn.pgconn
        self._encoding = conn.info.encoding
        self._poller = select.poll()
        self._poller.register(self._pg.socket, select.POLLIN)

    @property
    def encoding(self) -> str:
        return self._encoding

    def roundtrip(self, query: bytes) -> Answer:
        pg, poll = self._pg, self._poller.poll
        results: list[pq.abc.PGresult] = []
        error: psycopg.Error | None = None
        try:
            pg.send_query(query)
            while pg.flush():
                select.select([], [pg.socket], [], WAIT_MS / 1000)
            while True:
                while pg.is_busy():
                    if poll(WAIT_MS):
                        pg.consume_input()
                result = pg.get_result()
                if result is None:
                    return Answer(results, error)
                if result.status == FATAL_ERROR:
                    error = error_from_result(result, encoding=self._encoding)
                elif error is None:
                    results.append(result)
        except psycopg.OperationalError as exc:
            return Answer(results, error, exc)
        except OSError as exc:  # the socket itself failed
            return Answer(results, error, psycopg.OperationalError(f"connection lost: {exc}"))
