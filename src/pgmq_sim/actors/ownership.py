"""Who owns a message in progress (split mode): a worker's token, not its backend pid. A pooler's
server connection outlives the client and serves others, so only the worker can say it is alive:
each process beats for its live workers' tokens, and a token whose beat stopped loses its messages
to recovery within about a second."""

from __future__ import annotations

import uuid
from collections.abc import Awaitable, Callable
from typing import Any

import psycopg

from pgmq_sim.actors.bells import Halt
from pgmq_sim.db.wire import Wire
from pgmq_sim.sqlfiles import statement

BEAT_S = 0.25
OWNER_TIMEOUT_S = 1.0  # recovery takes back a message whose owner has not beaten for this long
BEAT_TIMEOUT_S = 2.0  # a beat not answered by then is given up (cancelled); the next one connects again


class Owners:
    """The owner tokens of this process's live workers (changed on the run's loop)."""

    def __init__(self) -> None:
        self._alive: set[str] = set()

    def new_token(self, worker: str) -> str:
        token = f"{worker}:{uuid.uuid4().hex[:8]}"
        self._alive.add(token)
        return token

    def drop(self, token: str) -> None:
        self._alive.discard(token)

    def alive(self) -> list[str]:
        return sorted(self._alive)


def text_array(values: list[str]) -> bytes:
    """A text[] parameter in its text form ('{"w1:ab12cd34","w2:..."}')."""
    quoted = ",".join('"' + v.replace("\\", "\\\\").replace('"', '\\"') + '"' for v in values)
    return ("{" + quoted + "}").encode()


class Heartbeat:
    """Beats for this process's live owners every BEAT_S, on a connection of its own; a beat missed
    (a restart, a lost connection, a server slow to answer) is retried at the next one."""

    def __init__(
        self, connect: Callable[[], Awaitable[psycopg.AsyncConnection[Any]]], owners: Owners, halt: Halt
    ) -> None:
        self._connect = connect
        self._owners = owners
        self._halt = halt
        self._wire: Wire | None = None

    async def run(self) -> None:
        bell = self._halt.bell()
        try:
            while not await self._halt.sleep(BEAT_S, bell):
                await self.beat()
        finally:
            self._halt.forget(bell)
            if self._wire is not None:
                self._wire.close()

    async def beat(self) -> None:
        tokens = self._owners.alive()
        if not tokens:
            return
        try:
            if self._wire is None or self._wire.closed:
                self._wire = None
                self._wire = Wire(await self._connect())
            await self._wire.within(BEAT_TIMEOUT_S, statement("owner_beat").encode(), [text_array(tokens)])
        except (psycopg.Error, TimeoutError):
            if self._wire is not None:
                self._wire.close()
            self._wire = None
