"""Checks of a finished run read straight from the database and the log, not from the tool's report."""

from __future__ import annotations

import re
from pathlib import Path

import psycopg

HANDLED = re.compile(r"handled worker=(\S+) type=(\S+) msg_id=(\d+) order_id=(\d+) added=(\S+)")


def handled_lines(log: Path) -> list[tuple[str, str, int, int, str]]:
    found = []
    for line in log.read_text().splitlines():
        match = HANDLED.search(line)
        if match:
            worker, queue_type, msg_id, order_id, added = match.groups()
            found.append((worker, queue_type, int(msg_id), int(order_id), added))
    return found


def assert_exactly_once_in_order(db: psycopg.Connection, n: int, delmsg: bool) -> None:
    journal = db.execute("select msg_id from msg_journal").fetchall()
    assert sorted(r[0] for r in journal) == list(range(1, n + 1))
    remaining = db.execute("select status, time_processed is not null, count(*) from msg_queue group by 1, 2")
    rows = remaining.fetchall()
    if delmsg:
        assert rows == []
    else:
        assert rows == [("P", True, n)]
        # Independent of the journal: inside a group, processing times follow msg_id.
        inversions = db.execute(
            """select count(*) from (
                 select time_processed < lag(time_processed) over
                        (partition by queue_type, order_id order by msg_id) as back
                 from msg_queue) t where back"""
        ).fetchone()[0]
        assert inversions == 0
    overlaps = db.execute(
        """select count(*) from (
             select claimed_at, lag(completed_at) over
                    (partition by queue_type, order_id order by msg_id) as prev_done
             from msg_journal) t where claimed_at < prev_done"""
    ).fetchone()[0]
    assert overlaps == 0
