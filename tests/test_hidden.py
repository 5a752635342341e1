"""What hid messages from free workers, built for real: another session holding one type's advisory
locks, and a claim that locks every group's head while it returns one. Each run's latency account
says where the slowest messages' time went, and the limit names what hid them, from the lock census."""

from __future__ import annotations

import json
import subprocess
import time

import psycopg
import pytest
from conftest import Cli

pytestmark = pytest.mark.integration


def wait_for_queue(conn: psycopg.Connection, proc: subprocess.Popen[str], rows: int) -> None:
    """Until the run's queue holds `rows` messages (its journal made: the run is under way)."""
    deadline = time.monotonic() + 30
    while True:
        made = conn.execute("select to_regclass('msg_journal') is not null").fetchone()
        if made and made[0]:
            count = conn.execute("select count(*) from msg_queue").fetchone()
            if count and count[0] >= rows:
                return
        assert time.monotonic() < deadline and proc.poll() is None, "the run made no queue"
        time.sleep(0.05)


def test_another_sessions_advisory_locks_on_one_types_groups_are_the_limit(cli: Cli, dsn: str) -> None:
    """Issue 38's first case: -claim advisory at a steady rate; after a second, a session named
    'blocker' takes the advisory lock of every group of type1 and holds them 3 s. type1's claims come
    back empty while its messages wait: the slowest 1% are type1's, hidden, and the limit is `locks`
    naming the blocker and its advisory locks (it was `none` before the account)."""
    proc = cli.start(
        "-claim advisory -rate 150 -duration 6 -workers 6 -orders 20 -work-ms 1-3 -wakeup notify",
        "-json out.json",
    )
    try:
        with psycopg.connect(dsn, application_name="blocker", autocommit=True) as other:
            wait_for_queue(other, proc, rows=100)
            other.execute(
                "select pg_advisory_lock(hashtext('type1'), g) from generate_series(1, 20) g"
            ).fetchall()
            time.sleep(3)
            other.execute("select pg_advisory_unlock_all()")
        stdout, stderr = proc.communicate(timeout=60)
    finally:
        if proc.poll() is None:
            proc.kill()
    assert proc.returncode == 0, stdout + stderr
    report = json.loads((cli.workdir / "out.json").read_text())
    split = report["latency_split"]
    slowest = split["per_type"]["type1"]["p99"]
    assert slowest["hidden_ms"] > 1500 and slowest["hidden_ms"] > 0.8 * slowest["e2e_ms"], split
    assert split["per_type"]["type2"]["p99"]["hidden_ms"] < 500, split  # the other types ran on
    limit = report["limit"]
    assert limit["resource"] == "locks", limit
    assert "pid" in limit["evidence"] and "(blocker;" in limit["evidence"], limit
    assert "held 20 advisory locks from" in limit["evidence"], limit
    assert "type1's slowest 1% " in limit["evidence"], limit
    assert report["advice"][0].startswith("limit locks: a session outside the run holds 20 advisory locks")
    holder = report["locks"]["holders"][0]
    assert holder["application"] == "blocker" and 1.5 <= holder["last_s"] - holder["first_s"] <= 4.5, holder
    assert "where the time went" in stdout


LOCK_EVERY_HEAD = """
with heads as (
    select distinct on (order_id) msg_id from msg_queue
    where queue_type = $1 and status = 'N'
    order by order_id, msg_id
),
locked as (
    select m.msg_id from msg_queue m join heads h using (msg_id)
    for update of m skip locked
)
update msg_queue q set status = 'P'
where q.msg_id = (select min(msg_id) from locked) and q.status = 'N'  -- not one done since the scan
returning q.msg_id, q.queue_type, q.order_id
"""


def test_a_claim_that_locks_every_head_it_does_not_return_is_a_claim_locks_limit(cli: Cli) -> None:
    """Issue 38's third case: each claim locks the head of every group of its type and returns one.
    The other workers' claims skip the locked heads, come back empty and sleep a poll: the slowest
    messages waited hidden, and the limit says the claim locks more than it returns (it was
    `claim-plan` from the buffers read before), with the rows the census counted."""
    (cli.workdir / "lock_every_head.sql").write_text(LOCK_EVERY_HEAD)
    result = cli.run(
        "-fill-db 900 -duration 4 -workers 12 -orders 30 -work-ms 1-5 -next-msg lock_every_head.sql",
        "-json out.json",
    )
    assert result.returncode == 0, result.stdout + result.stderr
    report = json.loads((cli.workdir / "out.json").read_text())
    slowest = report["latency_split"]["overall"]["p99"]
    assert slowest["hidden_ms"] > 0.5 * slowest["e2e_ms"], report["latency_split"]
    limit = report["limit"]
    assert limit["resource"] == "claim-locks", limit
    assert "each claim locks more than it returns" in limit["evidence"], limit
    assert report["locks"]["rows_per_worker"] >= 5, report["locks"]
    assert report["advice"][0].startswith("limit claim-locks: lock only the rows the claim returns")
    # the account and the histograms measure the same messages
    e2e = report["latency_ms"]["e2e"]
    assert slowest["e2e_ms"] >= 0.9 * e2e["p99"], (slowest, e2e)
    for cohort in (slowest, report["latency_split"]["overall"]["median"]):
        parts = sum(cohort[f"{p}_ms"] for p in report["latency_split"]["parts"])
        assert abs(parts - cohort["e2e_ms"]) < 0.01, cohort
