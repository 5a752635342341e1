"""The live audit's windows on the server: msg_ids judged a window at a time, up to the watermark
(every enqueue below it landed), by the run's own audit statements over views of the window's rows
(sql/window_views*.sql); each closed window kept (pgmq_sim_windows) with its messages still pending
(pgmq_sim_carried, judged by a later window once they finish) and each group's last completed
message (pgmq_sim_marks), so a killed run keeps what was judged and the next window checks order
across the boundary."""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass
from typing import Any

import psycopg
from psycopg.types.json import Jsonb

from pgmq_sim.db.audit import count_audit
from pgmq_sim.db.values import QueueShape
from pgmq_sim.model.facts import AuditCounts
from pgmq_sim.sqlfiles import statement


@dataclass(frozen=True)
class WindowRead:
    """A window's counts: msg_ids lo+1..hi and those the closed windows carried, its journal rows,
    and its messages still pending (carried on), read in one snapshot."""

    lo: int
    hi: int
    journal_rows: int
    counts: AuditCounts
    pending: tuple[int, ...]


@dataclass(frozen=True)
class ClosedWindow:
    """A window as the server keeps it."""

    number: int
    lo: int
    hi: int
    journal_rows: int
    carried: int
    passed: bool
    audit: dict[str, Any]
    compacted_rows: int = 0  # the closed windows' journal rows deleted once judged (compact_journal)


def read_window(
    conn: psycopg.Connection, shape: QueueShape, after: int, hi: int, show: int, retrying: bool
) -> WindowRead:
    """The audit's counts of msg_ids after+1..hi and of those the closed windows carried, in this
    transaction (the caller's snapshot), over the window's views (open_views)."""
    conn.execute(statement("window_plans"))
    row = conn.execute(statement("window_from"), (after,)).fetchone()
    first = int(row[0]) if row and row[0] is not None else after
    _bounds(conn, first, after, hi)
    rows = conn.execute(statement("window_rows")).fetchone()
    counts = count_audit(conn, shape, hi, show, retrying, after=after)
    if shape.seed_table and after:  # carried ones lost since: the seed's ids are a range, not a log
        lost = conn.execute(statement("window_carried_count")).fetchone()
        if lost and lost[0]:
            ids = [int(r[0]) for r in conn.execute(statement("window_carried_missing"), (show,))]
            counts = dataclasses.replace(
                counts,
                missing=counts.missing + int(lost[0]),
                missing_ids=tuple(sorted((*ids, *counts.missing_ids)))[:show],
            )
    _bounds(conn, first, after, hi)  # the evidence read the groups' marks: the window alone again
    pending = statement("window_pending_seed" if shape.seed_table else "window_pending_log")
    return WindowRead(
        after, hi, int(rows[0]) if rows else 0, counts, tuple(int(r[0]) for r in conn.execute(pending))
    )


def keep_window(conn: psycopg.Connection, run_id: str, number: int, read: WindowRead, passed: bool,
                audit: dict[str, Any]) -> None:  # fmt: skip
    """The window closed: its groups' marks, its pending messages carried in place of the last
    ones, and its record, in the transaction that read it."""
    conn.execute(statement("window_marks"))
    conn.execute(statement("window_carried_clear"))
    conn.execute(statement("window_carry"), (list(read.pending),))
    conn.execute(
        statement("window_keep"),
        (run_id, number, read.lo, read.hi, read.journal_rows, len(read.pending), passed, Jsonb(audit)),
    )


def open_views(conn: psycopg.Connection, shape: QueueShape) -> None:
    """The window's views of the tool's tables, for the rest of this session, or of this transaction
    (drop_views): made once a session where the session is the tool's alone, so the windows write
    nothing to the server's catalogs; each window behind a transaction pooler."""
    conn.execute(statement("window_views"))
    conn.execute(statement("window_views_seed" if shape.seed_table else "window_views_log"))


def drop_views(conn: psycopg.Connection) -> None:
    conn.execute(statement("window_views_drop"))


def summarize_journal(conn: psycopg.Connection) -> None:
    """The journal's new block ranges summarized (a transaction of its own: it waits for a vacuum)."""
    conn.execute(statement("journal_summarize"))


def read_rest(
    conn: psycopg.Connection, shape: QueueShape, after: int, expected: int, show: int, retrying: bool
) -> WindowRead:
    """What the closed windows left: msg_ids after+1..expected and those they carried (the run's
    end, or `pgmq-sim audit`), judged as a window is (the views go with the connection)."""
    conn.execute("set transaction isolation level repeatable read")
    open_views(conn, shape)
    return read_window(conn, shape, after, expected, show, retrying)


def closed_windows(conn: psycopg.Connection, run_id: str) -> list[ClosedWindow]:
    return [
        ClosedWindow(int(n), int(lo), int(hi), int(rows), int(carried), bool(passed), dict(audit), int(gone))
        for n, lo, hi, rows, carried, passed, audit, gone in conn.execute(
            statement("windows_closed"), (run_id,)
        )
    ]


def compact_journal(
    conn: psycopg.Connection, run_id: str, window: int, after: int, hi: int, cut: float, keep_s: float
) -> tuple[int, int, int]:
    """The closed windows' journal rows of msg_ids after+1..hi claimed before `cut` (the latency
    account's: the server's epoch) and completed more than `keep_s` ago deleted, in the caller's
    repeatable read transaction: (rows completed after their window closed, which stop it: nothing
    deleted; rows deleted; where the next compaction starts)."""
    conn.execute(statement("tables_before_views"))
    row = conn.execute(statement("windows_rows_left"), (run_id,)).fetchone()
    counted, now = int(row[0]) if row else 0, journal_rows_through(conn, hi)
    if now != counted:
        return now - counted, 0, after
    row = conn.execute(statement("journal_compact"), (run_id, window, after, hi, cut, keep_s)).fetchone()
    return (0, int(row[0]), int(row[1])) if row else (0, 0, after)


def journal_rows_through(conn: psycopg.Connection, hi: int) -> int:
    row = conn.execute(statement("journal_rows_through"), (hi,)).fetchone()
    return int(row[0]) if row else 0


def _bounds(conn: psycopg.Connection, first: int, lo: int, hi: int) -> None:
    """The window: msg_ids lo+1..hi, and those carried from first+1 on; the groups' marks off."""
    conn.execute(
        "select set_config('pgmq_sim.window_from', $1, true), set_config('pgmq_sim.window_lo', $2, true),"
        " set_config('pgmq_sim.window_hi', $3, true), set_config('pgmq_sim.window_marks', 'off', true)",
        (str(first), str(lo), str(hi)),
    )
