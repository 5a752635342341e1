"""The loop's wire on a real server: a bounded round trip cancels its statement on the server and
drains its answer before the connection serves again, and a backend that ends while the wire idles
is seen by its reader, with no statement sent, and one that ends with a message unread (a reset
socket, which uvloop stops reading) still answers the round trip in flight with the loss."""

from __future__ import annotations

import asyncio
import os
import time

import psycopg
import pytest

from pgmq_sim.actors.bells import new_loop
from pgmq_sim.db.connection import connect_async
from pgmq_sim.db.wire import Wire

pytestmark = pytest.mark.integration


def on_loop(body: object) -> None:
    loop = new_loop()
    try:
        loop.run_until_complete(asyncio.wait_for(body, 30))  # type: ignore[arg-type]
    finally:
        loop.close()


def test_a_statement_past_its_bound_is_cancelled_and_drained(dsn: str, db: psycopg.Connection) -> None:
    async def body() -> None:
        wire = Wire(await connect_async(dsn, "wire test"))
        pid = wire.backend_pid
        began = time.monotonic()
        with pytest.raises(TimeoutError):
            await wire.within(0.5, b"select pg_sleep(30)")
        assert time.monotonic() - began < 3
        assert not wire.busy and not wire.closed  # drained: the wire serves again
        answer = await wire.checked(b"select 41 + 1")
        assert answer.results[0].get_value(0, 0) == b"42"
        state = db.execute("select state from pg_stat_activity where pid = %s", (pid,)).fetchone()
        assert state == ("idle",)  # cancelled on the server, not left sleeping
        wire.close()

    on_loop(body())


def test_a_backend_ended_while_the_wire_idles_is_seen_without_a_statement(
    dsn: str, db: psycopg.Connection
) -> None:
    async def body() -> None:
        lost: list[psycopg.OperationalError] = []
        wire = Wire(await connect_async(dsn, "wire test"), on_lost=lost.append)
        db.execute("select pg_terminate_backend(%s)", (wire.backend_pid,))
        deadline = time.monotonic() + 5
        while not lost and time.monotonic() < deadline:
            await asyncio.sleep(0.01)
        assert lost and wire.closed and wire.lost is lost[0]
        answer = await wire.roundtrip(b"select 1")  # refused at once, not sent
        assert answer.lost is lost[0] and not answer.results
        wire.close()

    on_loop(body())


def test_a_backend_ended_before_reading_a_message_still_answers_the_round_trip_with_the_loss(
    dsn: str, db: psycopg.Connection
) -> None:
    """A backend that exits with a message of ours unread resets the socket (POLLERR): libuv then
    stops the wire's reader without calling it. The round trip in flight must end all the same."""

    async def body() -> None:
        wire = Wire(await connect_async(dsn, "wire test"))
        answer = wire.roundtrip(b"select pg_sleep(30)")
        query = b"select 1\x00"
        os.write(wire.connection.pgconn.socket, b"Q" + (4 + len(query)).to_bytes(4, "big") + query)
        await asyncio.sleep(0.2)  # the backend sleeps; the second message waits in its socket
        db.execute("select pg_terminate_backend(%s)", (wire.backend_pid,))
        lost = (await asyncio.wait_for(answer, 3)).lost
        assert lost is not None and wire.closed
        wire.close()

    on_loop(body())
