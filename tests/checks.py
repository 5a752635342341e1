"""Checks of a finished run read straight from the database and the log, not from the tool's report."""

from __future__ import annotations

import re
import socket
import time
from pathlib import Path

import psycopg

PRODUCER = "pgmq-sim producer"  # the application_name of the run's producer sessions
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


def wait_for_handled(log: Path, count: int, timeout: float = 30) -> None:
    """Until the run's log has `count` handled messages; fails the test past `timeout`."""
    deadline = time.monotonic() + timeout
    while not (log.exists() and len(handled_lines(log)) >= count):
        if time.monotonic() > deadline:
            raise AssertionError(f"fewer than {count} messages handled within {timeout} s")
        time.sleep(0.05)


def wait_for_producer(conn: psycopg.Connection, timeout: float = 30) -> None:
    """Until a producer session of the run is in `conn`'s database (the run made its table and
    began), or `timeout` passed; a connection outside autocommit is left outside a transaction."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        seen = conn.execute(
            "select count(*) from pg_stat_activity where application_name = %s"
            " and datname = current_database()",
            (PRODUCER,),
        ).fetchone()
        if not conn.autocommit:
            conn.rollback()
        if seen and seen[0]:
            return
        time.sleep(0.05)


def wait_until_quiet(log: Path, quiet_s: float = 0.5, timeout: float = 15) -> None:
    """Until no message has been handled for `quiet_s` (the run is stuck); fails past `timeout`."""
    deadline = time.monotonic() + timeout
    seen, since = -1, time.monotonic()
    while time.monotonic() - since < quiet_s:
        if time.monotonic() > deadline:
            raise AssertionError(f"messages were still handled {timeout} s later")
        count = len(handled_lines(log)) if log.exists() else 0
        if count != seen:
            seen, since = count, time.monotonic()
        time.sleep(0.05)


def free_port() -> int:
    """A TCP port nobody listens on now."""
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])
