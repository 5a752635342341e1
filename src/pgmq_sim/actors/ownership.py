"""Who owns a message in progress (split mode): a worker's token, not its backend pid. A pooler's
server connection outlives the client and serves others, so only the worker can say it is alive:
each process beats for its live workers' tokens, and a token whose beat stopped loses its messages
to recovery within about a second."""

from __future__ import annotations

import threading
import uuid
from collections.abc import Callable

import psycopg

from pgmq_sim.actors.threads import RunThread
from pgmq_sim.db.connection import connect
from pgmq_sim.sqlfiles import statement

BEAT_S = 0.25
OWNER_TIMEOUT_S = 1.0  # recovery takes back a message whose owner has not beaten for this long


class Owners:
    """The owner tokens of this process's live workers."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._alive: set[str] = set()

    def new_token(self, worker: str) -> str:
        token = f"{worker}:{uuid.uuid4().hex[:8]}"
        with self._lock:
            self._alive.add(token)
        return token

    def drop(self, token: str) -> None:
        with self._lock:
            self._alive.discard(token)

    def alive(self) -> list[str]:
        with self._lock:
            return sorted(self._alive)


class Heartbeat(RunThread):
    """Beats for this process's live owners every BEAT_S, on a connection of its own; a beat missed
    (a restart, a lost connection) is retried at the next one."""

    def __init__(
        self, dsn: str, owners: Owners, stop: threading.Event, on_error: Callable[[BaseException], None]
    ) -> None:
        super().__init__("heartbeat", stop, on_error)
        self._dsn = dsn
        self._owners = owners
        self._conn: psycopg.Connection | None = None

    def connection(self) -> psycopg.Connection | None:
        return self._conn

    def body(self) -> None:
        try:
            while not self._halt.wait(BEAT_S):
                self.beat()
        finally:
            if self._conn is not None:
                self._conn.close()

    def beat(self) -> None:
        tokens = self._owners.alive()
        if not tokens:
            return
        try:
            if self._conn is None or self._conn.closed:
                self._conn = connect(self._dsn, "heartbeat", autocommit=True)
            self._conn.execute(statement("owner_beat"), (tokens,))
        except psycopg.Error:
            if self._conn is not None:
                self._conn.close()
            self._conn = None
