"""The producer's writes: a batch of messages and the run's produced count, all or none."""

from __future__ import annotations

from collections.abc import Sequence

import psycopg

from pgmq_sim.db.values import Row
from pgmq_sim.sqlfiles import statement


def write_batch(conn: psycopg.Connection, rows: Sequence[Row], produced_after: int) -> None:
    """COPY one batch and raise the run's produced count in the same transaction: all or none."""
    copying = "copy_messages_payload" if len(rows[0]) > 5 else "copy_messages"
    with conn.transaction(), conn.cursor() as cur:
        with cur.copy(statement(copying)) as copy:
            for row in rows:
                copy.write_row(row)
        cur.execute(statement("run_produced"), (produced_after,))


def produced_count(conn: psycopg.Connection) -> int:
    """Messages whose batch committed (the run record's count)."""
    with conn.transaction():
        row = conn.execute(statement("run_produced_count")).fetchone()
    return int(row[0]) if row else 0
