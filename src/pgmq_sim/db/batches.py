"""The producer's writes, shaped as an application's: each message (or, catching up, each batch)
is one statement in a transaction of its own, in one round trip, on the run's event loop.

On the seed's table, what committed is known without a second statement in those transactions: the
messages vouch for themselves (their rows, or their journal rows once processed and deleted). Only
where no row can vouch (-delmsg without a journal) does the batch raise the run's produced count in
its own transaction, as before. A design of its own folder has a table the tool does not know: its
enqueue goes with the tool's log row, in one transaction and one round trip.
"""

from __future__ import annotations

import contextlib
from collections.abc import Sequence
from enum import StrEnum
from typing import Any

import psycopg
from psycopg import sql

from pgmq_sim.db.connection import opened_async, own_begin
from pgmq_sim.db.statements import (
    ENQUEUE,
    ENQUEUE_ARGUMENTS,
    LOGGED,
    call,
    design_statement,
    prepare,
    producer_statements,
)
from pgmq_sim.db.values import Message
from pgmq_sim.db.wire import Answer, Wire
from pgmq_sim.errors import SimError
from pgmq_sim.sqlfiles import statement

LOGGED_CHUNK = 500  # messages per transaction when a folder design's producer catches up
# ENQUEUE_ARGUMENTS' types (bigint, text, bigint, integer, timestamptz, bytea), for the unnamed form
ENQUEUE_TYPES = (20, 25, 20, 23, 1184, 17)


class Evidence(StrEnum):
    """What says that a message whose commit answer was lost landed."""

    ROWS = "rows"  # its row in msg_queue (kept: no -delmsg)
    JOURNAL = "journal"  # its row in msg_queue, or in msg_journal once processed
    RECORD = "record"  # the run record's count, raised in the batch's own transaction
    LOG = "log"  # the tool's log row, written with a folder design's enqueue


def evidence_for(delmsg: bool, audited: bool, seed_table: bool = True) -> Evidence:
    if not seed_table:
        return Evidence.LOG
    if audited:
        return Evidence.JOURNAL
    return Evidence.RECORD if delmsg else Evidence.ROWS


async def open_writer(
    dsn: str, evidence: Evidence, prepared: bool, enqueue: str, id_type: str | None = None
) -> Wire:
    """The producer's connection, its statements PREPAREd where a session keeps them."""

    async def set_up(conn: psycopg.AsyncConnection[Any]) -> Wire:
        if prepared:  # the tool's set-up: under its own bounds (a PREPARE plans the statement)
            statements = (
                producer_statements(enqueue, id_type)
                if evidence == Evidence.LOG
                else [design_statement(ENQUEUE, enqueue, ENQUEUE_ARGUMENTS)]
            )
            await conn.execute(own_begin(conn))
            for s in statements:
                await conn.execute(prepare(s))
            await conn.execute("commit")
        return Wire(conn)

    return await opened_async(dsn, "producer", set_up)


def enqueue_params(m: Message) -> list[bytes | None]:
    """One message as the enqueue's text parameters."""
    payload = None if m.payload is None else b"\\x" + m.payload.hex().encode()
    return [
        str(m.msg_id).encode(),
        m.queue_type.encode(),
        str(m.order_id).encode(),
        str(m.priority).encode(),
        m.not_before.isoformat().encode(),
        payload,
    ]


async def write_batch(
    wire: Wire,
    messages: Sequence[Message],
    evidence: Evidence,
    prepared: bool,
    enqueue: str,
    own: bool = False,
) -> None:
    """Write the seed table's messages, all or none: one INSERT (the design's enqueue.sql) for one
    message, else one COPY. The connection is in autocommit, so the statement is its transaction,
    unless the record must count it too. `own`: the tool's own write (the prefill), a COPY in a
    transaction under the tool's bounds, whatever the role's timeouts."""
    if own or evidence == Evidence.RECORD:
        with wire.aside() as conn:
            await conn.execute(own_begin(conn) if own else "begin")
            try:
                await copy_rows(conn, messages)
                if evidence == Evidence.RECORD:
                    await conn.execute(statement("run_produced"), (messages[-1].msg_id,))
                await conn.execute("commit")
            except BaseException:
                if not conn.closed:
                    with contextlib.suppress(psycopg.Error):
                        await conn.execute("rollback")
                raise
    elif len(messages) == 1:
        params = enqueue_params(messages[0])
        if prepared:
            answer = await wire.prepared(ENQUEUE.encode(), params)
        else:
            answer = await wire.params(enqueue.encode(), params, ENQUEUE_TYPES)
        failure = answer.failure()
        if failure is not None:
            raise failure
    else:
        with wire.aside() as conn:
            await copy_rows(conn, messages)


async def write_logged(
    wire: Wire, messages: Sequence[Message], functions: bool, keyed: bool = False, own: bool = False
) -> None:
    """A folder design's enqueues, each with the tool's log row, all or none: one transaction and
    one round trip per chunk (the first chunk's commit is the only one a single message needs).
    A design of its own ids answers each enqueue with its id, which the log rows carry: a second
    round trip in the same transaction (the enqueue runs as written; nothing is read inside it)."""
    conn = wire.connection
    begin = own_begin(conn) if own else "begin"  # own: the prefill, under the tool's bounds
    for start in range(0, len(messages), LOGGED_CHUNK):
        enqueues, logs = [], []
        for m in messages[start : start + LOGGED_CHUNK]:
            values = (m.msg_id, m.queue_type, m.order_id, m.priority)
            common = ", ".join(sql.Literal(v).as_string(conn) for v in values)
            added, due = (sql.Literal(t).as_string(conn) for t in (m.time_added, m.not_before))
            payload = sql.Literal(m.payload).as_string(conn) + "::bytea"
            enqueues.append(call(ENQUEUE, f"{common}, {due}::timestamptz, {payload}", functions))
            logs.append(f"{common}, {added}::timestamptz, {due}::timestamptz")
        if not keyed:
            calls = []
            for enqueue, log in zip(enqueues, logs, strict=True):
                calls += [enqueue, call(LOGGED, log, functions)]
            await _all_or_none(wire, f"{begin}; {'; '.join(calls)}; commit")
            continue
        answer = await _all_or_none(wire, f"{begin}; {'; '.join(enqueues)}")
        keys = [_returned_id(result, wire.encoding) for result in answer.results[-len(enqueues) :]]
        logged = [
            call(LOGGED, f"{log}, {sql.Literal(key).as_string(conn)}", functions)
            for log, key in zip(logs, keys, strict=True)
        ]
        await _all_or_none(wire, f"{'; '.join(logged)}; commit")


async def _all_or_none(wire: Wire, text: str) -> Answer:
    """A round trip of the producer's transaction: a failure rolls the transaction back and raises."""
    answer = await wire.roundtrip(text.encode(wire.encoding))
    failure = answer.failure()
    if failure is not None:
        if not answer.lost and not wire.closed:
            await wire.roundtrip(b"rollback")
        raise failure
    return answer


def _returned_id(result: Any, encoding: str) -> str:
    """The msg_id an enqueue of the design's own ids returned (one row), as the server wrote it."""
    names = [result.fname(i) for i in range(result.nfields)]
    if result.ntuples != 1 or b"msg_id" not in names:
        raise SimError(
            f"the design's enqueue returned {result.ntuples} rows for one message; it must return one msg_id"
        )
    return (result.get_value(0, names.index(b"msg_id")) or b"").decode(encoding)


async def copy_rows(conn: psycopg.AsyncConnection[Any], messages: Sequence[Message]) -> None:
    payload = messages[0].payload is not None
    cur = conn.cursor()
    try:
        async with cur.copy(statement("copy_messages_payload" if payload else "copy_messages")) as copy:
            for m in messages:
                await copy.write_row(m.row())
    except ValueError as exc:
        # a server connection killed behind a pooler mid-COPY can answer its end twice, and psycopg
        # unpacks one result: the session is out of step, which is a lost connection
        await conn.close()
        raise psycopg.OperationalError(f"the connection broke during COPY ({exc})") from exc


async def landed(wire: Wire, msg_id: int, evidence: Evidence) -> bool:
    """After a lost commit answer: did the write that ended with msg_id land? Asked in a transaction
    of the tool's own (the role's statement timeout must not leave it in doubt again)."""
    name = {
        Evidence.RECORD: "run_produced_count",
        Evidence.JOURNAL: "message_landed_journal",
        Evidence.LOG: "message_landed_log",
    }.get(evidence, "message_landed")
    answer = await _own(wire, statement(name).replace("$1", str(int(msg_id))))
    value = answer.results[-2].get_value(0, 0)  # the last before the commit's
    if evidence == Evidence.RECORD:
        return value is not None and int(value) >= msg_id
    return value == b"t"


async def _own(wire: Wire, text: str) -> Answer:
    """One statement in a transaction of the tool's own, in one round trip."""
    return await _all_or_none(wire, f"{own_begin(wire.connection)}; {text}; commit")


async def record_produced(wire: Wire, produced: int) -> None:
    """Raise the run record's count: a transaction of the tool's own, under its own bounds, in one
    round trip (the count is a number: written into the text)."""
    await _own(wire, statement("run_produced").replace("$1", str(int(produced))))


def produced_count(conn: psycopg.Connection, journal: bool, logged: bool = False) -> int:
    """Messages produced: the run record's count, or the highest msg_id that landed."""
    name = (
        "run_produced_count_log"
        if logged
        else "run_produced_count_journal"
        if journal
        else "run_produced_count"
    )
    with conn.transaction():
        row = conn.execute(statement(name)).fetchone()
    return int(row[0]) if row and row[0] is not None else 0


def settle(conn: psycopg.Connection, cut_off: Sequence[Message], journal: bool) -> list[int]:
    """After the run, on the seed's table: the enqueues its end cut off in flight that did not land,
    below the highest msg_id that did, written now in the tool's own transaction (a COPY), so msg_ids
    stay consecutive (several producer sessions commit out of order); their ids."""
    top = produced_count(conn, journal)
    below = [message for message in sorted(cut_off) if message.msg_id < top]
    landed: set[int] = set()
    if below:  # one round trip, however many (a spread run's lost process may owe thousands)
        ids = [message.msg_id for message in below]
        rows = conn.execute(statement("landed_of_journal" if journal else "landed_of"), (ids,))
        landed = {int(row[0]) for row in rows}
    gaps = [message for message in below if message.msg_id not in landed]
    if gaps:
        payload = gaps[0].payload is not None
        with conn.cursor().copy(statement("copy_messages_payload" if payload else "copy_messages")) as copy:
            for message in gaps:
                copy.write_row(message.row())
    conn.commit()
    return [m.msg_id for m in gaps]
