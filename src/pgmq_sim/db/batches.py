"""The producer's writes, shaped as an application's: each message (or, catching up, each batch)
is one statement in a transaction of its own, in one round trip.

What committed is known without a second statement in those transactions: the messages vouch for
themselves (their rows, or their journal rows once processed and deleted). Only where no row can
vouch (-delmsg without a journal) does the batch raise the run's produced count in its own
transaction, as before.
"""

from __future__ import annotations

from collections.abc import Sequence
from enum import StrEnum

import psycopg

from pgmq_sim.db.values import Row
from pgmq_sim.sqlfiles import statement


class Evidence(StrEnum):
    """What says that a message whose commit answer was lost landed."""

    ROWS = "rows"  # its row in msg_queue (kept: no -delmsg)
    JOURNAL = "journal"  # its row in msg_queue, or in msg_journal once processed
    RECORD = "record"  # the run record's count, raised in the batch's own transaction


def evidence_for(delmsg: bool, audited: bool) -> Evidence:
    if audited:
        return Evidence.JOURNAL
    return Evidence.RECORD if delmsg else Evidence.ROWS


def write_batch(cur: psycopg.Cursor, rows: Sequence[Row], evidence: Evidence, prepared: bool) -> None:
    """Write the rows, all or none: one INSERT for one message, else one COPY. The cursor's
    connection is in autocommit, so the statement is its transaction, unless the record must count
    it too."""
    payload = len(rows[0]) > 5
    if evidence == Evidence.RECORD:
        with cur.connection.transaction():
            copy_rows(cur, rows, payload)
            cur.execute(statement("run_produced"), (rows[-1][0],))
    elif len(rows) == 1:
        name = "insert_message_payload" if payload else "insert_message"
        cur.execute(statement(name), rows[0], prepare=prepared)
    else:
        copy_rows(cur, rows, payload)


def copy_rows(cur: psycopg.Cursor, rows: Sequence[Row], payload: bool) -> None:
    try:
        with cur.copy(statement("copy_messages_payload" if payload else "copy_messages")) as copy:
            for row in rows:
                copy.write_row(row)
    except ValueError as exc:
        # a server connection killed behind a pooler mid-COPY can answer its end twice, and psycopg
        # unpacks one result: the session is out of step, which is a lost connection
        cur.connection.close()
        raise psycopg.OperationalError(f"the connection broke during COPY ({exc})") from exc


def landed(conn: psycopg.Connection, msg_id: int, evidence: Evidence) -> bool:
    """After a lost commit answer: did the write that ended with msg_id land?"""
    if evidence == Evidence.RECORD:
        return produced_count(conn, journal=False) >= msg_id
    name = "message_landed_journal" if evidence == Evidence.JOURNAL else "message_landed"
    row = conn.execute(statement(name), (msg_id,)).fetchone()
    return bool(row and row[0])


def record_produced(conn: psycopg.Connection, produced: int) -> None:
    """Raise the run record's count (autocommit: a transaction of the tool's own)."""
    conn.execute(statement("run_produced"), (produced,))


def produced_count(conn: psycopg.Connection, journal: bool) -> int:
    """Messages produced: the run record's count, or the highest msg_id that landed."""
    name = "run_produced_count_journal" if journal else "run_produced_count"
    with conn.transaction():
        row = conn.execute(statement(name)).fetchone()
    return int(row[0]) if row and row[0] is not None else 0
