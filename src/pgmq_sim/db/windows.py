"""The live audit's windows on the server: msg_ids judged a window at a time, behind a watermark
below which every message is finished, by the run's own audit statements over views of the
window's rows (sql/window_views*.sql); each closed window kept (pgmq_sim_windows) with each group's
last completed message (pgmq_sim_marks), so a killed run keeps what was judged and the next window
checks order across the boundary."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import psycopg
from psycopg.types.json import Jsonb

from pgmq_sim.db.audit import count_audit, load_pending
from pgmq_sim.db.values import QueueShape
from pgmq_sim.model.facts import AuditCounts
from pgmq_sim.sqlfiles import statement


@dataclass(frozen=True)
class WindowRead:
    """A window's counts: msg_ids lo+1..hi, its journal rows, read in one snapshot."""

    lo: int
    hi: int
    journal_rows: int
    counts: AuditCounts


@dataclass(frozen=True)
class ClosedWindow:
    """A window as the server keeps it."""

    number: int
    lo: int
    hi: int
    journal_rows: int
    passed: bool
    audit: dict[str, Any]


def watermark(conn: psycopg.Connection, shape: QueueShape, after: int, safe: int) -> int:
    """The highest msg_id, from `after` to `safe` (every enqueue up to it landed or never will),
    below which every message is finished: the window's views are set for after+1..safe."""
    _views(conn, shape, after, safe)
    if shape.seed_table:
        row = conn.execute(statement("window_unfinished_seed")).fetchone()
    else:
        load_pending(conn, shape)  # over the window's rows, where the design has no pending.sql
        row = conn.execute(statement("window_unfinished_log")).fetchone()
        conn.execute("drop table pending_messages")  # the audit loads it again for the window
    lowest = row[0] if row else None
    return safe if lowest is None else min(safe, int(lowest) - 1)


def read_window(
    conn: psycopg.Connection, shape: QueueShape, after: int, hi: int, show: int, retrying: bool
) -> WindowRead:
    """The audit's counts of msg_ids after+1..hi, in this transaction (the caller's snapshot)."""
    _bounds(conn, after, hi, marks=False)
    rows = conn.execute(statement("window_rows")).fetchone()
    counts = count_audit(conn, shape, hi, show, retrying, after=after)
    return WindowRead(after, hi, int(rows[0]) if rows else 0, counts)


def keep_window(conn: psycopg.Connection, run_id: str, number: int, read: WindowRead, passed: bool,
                audit: dict[str, Any]) -> None:  # fmt: skip
    """The window closed: its groups' marks and its record, in the transaction that read it."""
    _bounds(conn, read.lo, read.hi, marks=False)
    conn.execute(statement("window_marks"))
    conn.execute(statement("window_views_drop"))
    conn.execute(
        statement("window_keep"), (run_id, number, read.lo, read.hi, read.journal_rows, passed, Jsonb(audit))
    )


def drop_views(conn: psycopg.Connection) -> None:
    conn.execute(statement("window_views_drop"))


def read_rest(
    conn: psycopg.Connection, shape: QueueShape, after: int, expected: int, show: int, retrying: bool
) -> WindowRead:
    """What the closed windows left: msg_ids after+1..expected, pending ones included (the run's
    end, or `pgmq-sim audit`), judged as a window is (the views go with the connection)."""
    conn.execute("set transaction isolation level repeatable read")
    _views(conn, shape, after, expected)
    return read_window(conn, shape, after, expected, show, retrying)


def summarize_journal(conn: psycopg.Connection) -> None:
    """The journal's new block ranges summarized (a transaction of its own: it waits for a vacuum)."""
    conn.execute(statement("journal_summarize"))


def closed_windows(conn: psycopg.Connection, run_id: str) -> list[ClosedWindow]:
    return [
        ClosedWindow(int(n), int(lo), int(hi), int(rows), bool(passed), dict(audit))
        for n, lo, hi, rows, passed, audit in conn.execute(statement("windows_closed"), (run_id,))
    ]


def journal_rows_through(conn: psycopg.Connection, hi: int) -> int:
    row = conn.execute(statement("journal_rows_through"), (hi,)).fetchone()
    return int(row[0]) if row else 0


def _views(conn: psycopg.Connection, shape: QueueShape, lo: int, hi: int) -> None:
    _bounds(conn, lo, hi, marks=False)
    conn.execute(statement("window_views"))
    conn.execute(statement("window_views_seed" if shape.seed_table else "window_views_log"))


def _bounds(conn: psycopg.Connection, lo: int, hi: int, marks: bool) -> None:
    conn.execute(
        "select set_config('pgmq_sim.window_lo', $1, true), set_config('pgmq_sim.window_hi', $2, true),"
        " set_config('pgmq_sim.window_marks', $3, true)",
        (str(lo), str(hi), "on" if marks else "off"),
    )
