"""Why the limit is where it is, on a real server: runs whose limit is built in (too few workers for
the groups, a hot key, a claim that scans a backlog, a rate far below capacity) get that verdict,
with its evidence and the one fix that follows; no two advice lines of a run contradict."""

from __future__ import annotations

import contextlib
import json
import re
import time

import psycopg
import pytest
from conftest import Cli

pytestmark = pytest.mark.integration
FAST = "-claim indexed -poll-interval 0.02"
OPPOSITES = (
    ("add workers", "fewer workers"),
    ("add workers", "more workers cannot help"),
    ("add workers", "more workers will not help"),
    ("raise the pooler's pool size", "run fewer workers"),
)


def verdict(cli: Cli, *args: str) -> dict:
    result = cli.run(*args, "-json out.json")
    assert result.returncode == 0, result.stdout + result.stderr
    report = json.loads((cli.workdir / "out.json").read_text())
    lines = report["advice"]
    assert sum(line.startswith("limit ") for line in lines) <= 1, lines
    for one, other in OPPOSITES:
        assert not (one in " | ".join(lines) and other in " | ".join(lines)), lines
    assert "limit" in result.stdout and report["limit"]["resource"] in result.stdout
    return report


def test_too_few_workers_for_the_groups_is_a_workers_limit(cli: Cli) -> None:
    """6 workers x 30 ms under 300 groups: the workers are busy all the time, far from the bound."""
    report = verdict(cli, "-fill-db 900 -workers 6 -work-ms 30 -orders 100", FAST)
    limit = report["limit"]
    assert limit["resource"] == "workers", limit
    # by the busy share (past WORKERS_BUSY), or, where a loaded host's claims and commits took part
    # of the workers' time (busy 82% in CI), by the slowest 1%'s wait for a free worker
    evidence = limit["evidence"]
    said = ("the workers were busy", "while every worker that could take them was busy")
    assert any(words in evidence for words in said), evidence
    assert any(line.startswith("limit workers: add workers") for line in report["advice"]), report["advice"]
    # the wait profile: the workers' 30 ms of work are the server's idle-in-transaction time
    assert limit["wait_profile"]["client"] > 0.5, limit["wait_profile"]
    assert report["waits"]["ticks"] > 20  # about 20 samples a second
    split = report["time_split"]
    # most of it, on a busy host too (where a claim and a completion take milliseconds each)
    assert split["work"] > 0.6 and abs(sum(split.values()) - 1) < 0.01, split


def test_a_hot_key_is_an_ordering_limit(cli: Cli) -> None:
    """Zipf keys with exponent 2: a fifth of the messages in one group of each type; 12 workers
    could do four times what that group allows, one message at a time."""
    report = verdict(cli, "-fill-db 3000 -workers 12 -work-ms 5 -orders 1000 -key-skew zipf:2", FAST)
    limit = report["limit"]
    assert limit["resource"] == "ordering", limit
    assert "order_id 1) has" in limit["evidence"] and "of the ordering bound" in limit["evidence"]
    assert any("more workers cannot help" in line for line in report["advice"]), report["advice"]


def test_the_seeds_claim_over_a_backlog_is_a_claim_plan_limit(cli: Cli) -> None:
    """The seed's claim reads the table in order to find a free head: over 50,000 messages each
    claim reads thousands of buffers, and the claim, not the work, takes the time."""
    report = verdict(cli, "-fill-db 50000 -duration 4 -workers 6 -work-ms 1 -orders 2 -claim seed")
    limit = report["limit"]
    assert limit["resource"] == "claim-plan", limit
    assert "buffers per message" in limit["evidence"]
    assert report["advice"][0].startswith("limit claim-plan: try -claim indexed"), report["advice"]


def test_the_seeds_claim_at_a_backlog_is_the_claims_time_not_hidden(cli: Cli) -> None:
    """Issue 43, case 5: over 10,000 messages and more (20,000 here, so that the claims outweigh a
    loaded host's slow commits) each of the seed's claims scans the backlog; between one
    message's commit and its group's next lock that claim runs, once for every message ahead. The
    account gives that time to the claim (not to hidden, as if a free worker could have taken the
    message), and the limit names it with the index-driven claim."""
    report = verdict(cli, "-fill-db 20000 -duration 5 -workers 12 -work-ms 0-1 -claim seed")
    for cohort in ("median", "p99"):  # (capacity: mostly the start, before the workers were up)
        split = report["latency_split"]["overall"][cohort]
        assert split["claim_ms"] > 2 * split["hidden_ms"], (cohort, split)
        assert split["claim_ms"] > 0.1 * split["e2e_ms"], (cohort, split)
    limit = report["limit"]
    assert limit["resource"] == "claim-plan", limit
    assert "claim scans the backlog" in limit["evidence"], limit
    assert re.search(r"took [\d,.]+ m?s: (.+, )?claim \d+%", limit["evidence"]), limit  # the account's part
    assert report["advice"][0].startswith("limit claim-plan: try -claim indexed"), report["advice"]


def test_a_rate_far_below_capacity_is_below_every_limit(cli: Cli) -> None:
    """Woken by NOTIFY, the slowest 1% are mostly their 40 ms of work: none. (Polling every 20 ms
    instead, most of their time is hidden from idle workers asleep: that is the limit, test_advice.)
    Its window, judged as the run went (the run's end closes the last), is none too."""
    report = verdict(cli, "-rate 50 -duration 4 -workers 6 -work-ms 40 -orders 100 -wakeup notify", FAST)
    stretches = report["limit_by_window"]
    assert [s["resource"] for s in stretches] == ["none"] and stretches[0]["to_s"] >= 4, stretches
    assert re.search(
        r"the offered (49\.\d|50(\.\d)?)/s was served below every limit", stretches[0]["evidence"]
    ), stretches
    limit = report["limit"]
    assert limit["resource"] == "none", limit
    assert "the slowest 1% took" in limit["evidence"], limit
    assert "the offered 50/s was served below every limit" in limit["evidence"]
    assert not any(line.startswith("limit ") for line in report["advice"]), report["advice"]
    slowest = report["latency_split"]["overall"]["p99"]
    assert slowest["service_ms"] + slowest["capacity_ms"] > slowest["e2e_ms"] / 2, slowest


def test_without_sampling_there_is_no_wait_profile(cli: Cli) -> None:
    report = verdict(cli, "-rate 100 -duration 2 -workers 3 -work-ms 1 -wait-sample-hz 0", FAST)
    assert report["waits"] is None and report["limit"]["wait_profile"] is None


def test_a_foreign_table_lock_is_a_locks_limit_naming_its_holder_and_no_claim_fix(cli: Cli, dsn: str) -> None:
    """Another session takes LOCK TABLE msg_queue IN EXCLUSIVE MODE for 300 ms of every 400 ms during
    an indexed run: the verdict is `locks`, its evidence names the holder (its application_name) and
    its ExclusiveLock on msg_queue, as the lock census saw them while the slowest messages waited,
    and no advice offers the claim the run already uses."""
    proc = cli.start("-rate 300 -duration 4 -workers 6 -work-ms 1-2 -orders 100 -wakeup notify", FAST,
                     "-json out.json")  # fmt: skip
    bursts = 0
    try:
        with psycopg.connect(dsn, application_name="report job") as other:
            deadline = time.monotonic() + 30
            while other.execute("select to_regclass('msg_queue')").fetchone() == (None,):
                other.rollback()
                assert time.monotonic() < deadline and proc.poll() is None, "the run made no queue"
                time.sleep(0.05)
            other.rollback()
            while proc.poll() is None and time.monotonic() < deadline:
                other.execute("set local lock_timeout = '2s'")
                with contextlib.suppress(psycopg.errors.LockNotAvailable):
                    other.execute("lock table msg_queue in exclusive mode")
                    bursts += 1
                    time.sleep(0.3)
                other.rollback()
                time.sleep(0.1)
        stdout, stderr = proc.communicate(timeout=60)
    finally:
        if proc.poll() is None:
            proc.kill()
    assert proc.returncode == 0 and bursts >= 5, (bursts, stdout + stderr)
    report = json.loads((cli.workdir / "out.json").read_text())
    limit = report["limit"]
    assert limit["resource"] == "locks", limit
    assert "(report job;" in limit["evidence"] and "ExclusiveLock on msg_queue" in limit["evidence"], limit
    assert report["waits"]["lock_events"]["relation"] > 0.5, report["waits"]
    fix = next(line for line in report["advice"] if line.startswith("limit locks:"))
    assert "a session outside the run holds ExclusiveLock on msg_queue" in fix and "report job" in fix, fix
    assert not any("-claim indexed" in line for line in report["advice"]), report["advice"]


# (state, wait_event_type, wait_event) as pg_stat_activity shows them: every class and its edges
ACTIVITY = [
    ("active", None, None),
    ("active", "Lock", "relation"),
    ("active", "Lock", "tuple"),
    ("active", "Lock", "tuple"),
    ("active", "Lock", "transactionid"),
    ("active", "Lock", "advisory"),
    ("active", "LWLock", "WALWrite"),
    ("active", "IO", "WALSync"),
    ("active", "IO", "WALWrite"),
    ("active", "IO", "WALInitSync"),
    ("active", "IO", "DataFileRead"),
    ("active", "LWLock", "BufferContent"),
    ("active", "LWLock", "LockManager"),
    ("active", "Client", "ClientRead"),
    ("idle in transaction", "Client", "ClientRead"),
    ("idle in transaction (aborted)", "Client", "ClientRead"),
    ("active", "IPC", "SyncRep"),
    ("active", "Timeout", "PgSleep"),
    ("idle", "Client", "ClientRead"),
    ("fastpath function call", None, None),
    (None, None, None),  # another role's session, its state hidden
]


def test_the_samplers_query_classifies_as_classify_does(db: psycopg.Connection) -> None:
    """sql/wait_counts.sql counts on the server what result/waits.classify says of each row, and
    keeps the Lock waits' events and who waits: the same wait profile from one row per sample.
    Rows that are not the run's (another application, another database, a background worker, the
    sampler's own session) count nowhere."""
    from pgmq_sim.result.waits import WAIT_CLASSES, classify
    from pgmq_sim.sqlfiles import statement

    db.execute(
        "create temp table fixture_activity (state text, wait_event_type text, wait_event text, pid int,"
        " application_name text, backend_type text, datname name)"
    )
    ours = ("pgmq-sim w1", "client backend", None)
    rows = [(*row, 1000 + i, *ours) for i, row in enumerate(ACTIVITY)]
    rows += [
        ("active", "Lock", "relation", 1, "psql", "client backend", None),
        ("active", "Lock", "relation", 2, "pgmq-sim w2", "client backend", "postgres"),
        ("active", None, None, 3, "pgmq-sim w3", "autovacuum worker", None),
    ]
    with db.cursor() as cur:
        cur.executemany(
            "insert into fixture_activity values (%s, %s, %s, %s, %s, %s, coalesce(%s, current_database()))",
            rows,
        )
    db.execute(
        "insert into fixture_activity select 'active', 'Lock', 'relation', pg_backend_pid(),"
        " 'pgmq-sim sampler', 'client backend', current_database()"
    )
    text = statement("wait_counts").replace("from pg_stat_activity", "from fixture_activity")
    row = db.execute(text).fetchone()
    assert row is not None
    expected = {name: 0 for name in WAIT_CLASSES}
    events: dict[str, int] = {}
    for state, wait_type, wait_event in ACTIVITY:
        name = classify(state, wait_type or "", wait_event or "")
        if name is not None:
            expected[name] += 1
        if name == "locks":
            events[wait_event or ""] = events.get(wait_event or "", 0) + 1
    assert dict(zip(WAIT_CLASSES, row[:7], strict=True)) == expected
    assert all(expected.values())  # the fixtures reach every class
    counted = dict(item.rsplit(":", 1) for item in row[7].split(","))
    assert {event: int(n) for event, n in counted.items()} == events
    waiting = [1000 + i for i, r in enumerate(ACTIVITY) if r[1] == "Lock"]
    assert sorted(int(pid) for pid in row[8].split(",")) == waiting
    others = {f"{t}:{e}" for state, t, e in ACTIVITY if classify(state, t or "", e or "") == "other"}
    assert dict(item.rsplit(":", 1) for item in row[9].split(",")) == dict.fromkeys(others, "1"), row[9]
