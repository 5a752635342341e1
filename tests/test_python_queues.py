"""Python's own Postgres queues as they are (issue 46): procrastinate and pgqueuer run from their
installed packages' SQL as a plain role under the audit, with the version of that SQL said;
procrastinate's lock order (by priority, then id) is the contract its audit judges."""

from __future__ import annotations

import json
import re
import uuid
from importlib import metadata
from pathlib import Path

import psycopg
import pytest
from conftest import Cli, assert_one_line_error
from pooler import temp_role
from psycopg import conninfo
from test_real_queues import pgq_bindir, pgq_skip_reason

from pgmq_sim.embedded.postgres import LocalPostgres


def report(cli: Cli, name: str) -> dict:
    return json.loads((cli.workdir / name).read_text())


@pytest.mark.integration
@pytest.mark.parametrize(
    ("product", "delivery", "ordered"),
    [("procrastinate", "exactly-once", True), ("pgqueuer", "at-least-once", False)],
)
def test_a_python_queue_runs_from_its_package_as_a_plain_role(
    server_dsn: str, tmp_path: Path, product: str, delivery: str, ordered: bool
) -> None:
    name = f"plain_{uuid.uuid4().hex[:8]}"
    with temp_role(server_dsn, name, "plain-pw") as role:
        cli = Cli(role.dsn, tmp_path)
        flags = "-fill-db 150 -rate 300 -workers 6 -orders 10 -work-ms 0-2 -poll-interval 0.05"
        result = cli.run(f"-queue {product} {flags} -json a.json")
        assert result.returncode == 0, result.stdout + result.stderr
        doc = report(cli, "a.json")
        audit = doc["audit"]
        assert (audit["verdict"], audit["processed"], audit["delivery"]) == ("pass", 150, delivery), audit
        assert audit["duplicates"] == audit["missing"] == 0 and audit["order_checked"] == ordered
        version = metadata.version(product)  # the package's SQL, said with its version
        assert doc["queue"]["product"]["name"] == product and doc["queue"]["product"]["version"] == version
        assert f"{product} ({product} {version})" in " ".join(result.stdout.split())
        with psycopg.connect(role.dsn, autocommit=True) as conn:  # the package's own tables, the jobs in them
            table = "procrastinate_jobs" if product == "procrastinate" else "pgqueuer_log"
            assert conn.execute(f"select count(*) from {table}").fetchone()[0] >= 150
        # a rerun replaces what the last run made
        again = cli.run(f"-queue {product} -fill-db 30 -workers 3 -orders 5 -work-ms 0 -json b.json")
        assert again.returncode == 0, again.stdout + again.stderr
        assert report(cli, "b.json")["audit"]["processed"] == 30


@pytest.mark.integration
def test_procrastinate_priorities_are_judged_by_its_lock_order(cli: Cli, db: psycopg.Connection) -> None:
    """Within a lock procrastinate runs jobs by priority, then id: a later job of a higher priority
    overtakes, as promised; the audit judges that order, counts the overtakings, never fails them."""
    result = cli.run(
        "-queue procrastinate -fill-db 300 -workers 6 -orders 4 -work-ms 0-1 -priority 1-5",
        "-json p.json -report p.html",
    )
    assert result.returncode == 0, result.stdout + result.stderr
    audit = report(cli, "p.json")["audit"]
    assert audit["verdict"] == "pass" and audit["order_violations"] == 0, audit
    assert audit["priority_overtakings"] > 0, audit
    said = " ".join(result.stdout.split())
    assert "order judged by priority, then enqueue order" in said and "as promised, not a violation" in said
    page = (cli.workdir / "p.html").read_text()  # the report says it too
    assert "by priority, then enqueue order, the design's own" in page and "as promised" in page
    # the rows say the same: some job ran before an earlier job of its lock, by its higher priority
    overtook = db.execute(
        "select count(*) from msg_journal m join pgmq_sim_enqueued em on em.msg_id = m.msg_id"
        " join msg_journal p on p.queue_type = m.queue_type and p.order_id = m.order_id"
        " and p.msg_id < m.msg_id"
        " join pgmq_sim_enqueued ep on ep.msg_id = p.msg_id"
        " where m.claimed_at < p.claimed_at and em.priority > ep.priority"
    ).fetchone()[0]
    assert overtook > 0


@pytest.mark.integration
def test_procrastinate_a_lock_held_by_a_job_not_yet_due_is_named(cli: Cli) -> None:
    """procrastinate's fetch passes over a lock while an earlier job of it waits for its
    scheduled_at: the jobs behind it wait for their group, and the account says which lock and job."""
    result = cli.run(
        "-queue procrastinate -fill-db 80 -workers 6 -orders 2 -work-ms 0-1 -delay 0.1:1-1.5"
        " -poll-interval 0.05 -json d.json"
    )
    assert result.returncode == 0, result.stdout + result.stderr
    doc = report(cli, "d.json")
    assert doc["audit"]["verdict"] == "pass" and doc["audit"]["early"] == 0
    split = doc["latency_split"]
    cohorts = [*split["overall"].values(), *(c for t in split["per_type"].values() for c in t.values())]
    named = [c for c in cohorts if c.get("not_due_head")]
    assert named, cohorts  # the jobs behind a job not yet due: their lock and that job named
    assert all(0 < c["not_due_head_ms"] <= c["ordering_ms"] + 0.001 for c in named), named
    head = named[0]["not_due_head"]  # the head's group, its msg_id and due time, and one it held
    assert head["queue_type"].startswith("type") and head["msg_id"] < head["held_msg_id"], head
    assert 0 < head["due_s"] < doc["elapsed_s"], head
    slowest = split["overall"]["p99"]
    if doc["limit"]["resource"] in ("ordering", "due") and slowest.get("not_due_head"):  # the limit says it
        assert "behind a head not yet due: group type" in doc["limit"]["evidence"], doc["limit"]


@pytest.mark.integration
def test_procrastinate_a_higher_priority_job_not_yet_due_holds_its_lock_and_is_named_not_hidden(
    cli: Cli, db: psycopg.Connection
) -> None:
    """Issue 51: `-queue procrastinate -rate 150 -workers 8 -orders 20 -delay 0.03:4-8 -priority 0-3`
    gave limit `unexplained`, 88% of it. Within a lock procrastinate's fetch takes the job of the
    highest priority, then the earliest id, due or not (#1599): a job scheduled later holds its lock's
    other jobs, often earlier ids of a lower priority, and higher-priority jobs overtake. The account
    read the journeys by msg_id, so that head's hold was not in the group yet when the messages it
    held were split, and an overtaker's hold, out of time order, was dropped: their wait was hidden.
    Read by claim, it is ordering, and the limit names the head and its due time.
    One worker per type (procrastinate's queue): two fetches of one lock at once can both take a job
    of it with priorities (procrastinate's own race, a unique violation), which is not this test's."""
    result = cli.run(
        "-queue procrastinate -rate 60 -workers 3 -orders 4 -delay 0.1:2-3 -priority 0-3 -work-ms 1-5"
        " -wakeup notify -duration 12 -json d.json"
    )
    doc = report(cli, "d.json")
    # 12 s, not 8: at 8 s the case below was built 4 to 28 times a run, and once in CI not at all;
    # at 12 s 24 to 66 times in 8 runs
    # exit 1 only for the audit: now and then a fetch misses a higher-priority job committed as it
    # began, and takes a lower one (procrastinate's, not this test's subject)
    assert result.returncode == 0 or doc["audit"]["verdict"] == "fail", result.stdout + result.stderr
    # the case is built: a slow message waited behind a job of its lock enqueued after it, of a
    # higher priority, not yet due
    held_by_later = db.execute(
        "select count(*) from msg_journal m join pgmq_sim_enqueued p using (msg_id)"
        " where m.completed_at - m.time_added > interval '1 s' and exists ("
        " select 1 from pgmq_sim_enqueued h where h.queue_type = m.queue_type and h.order_id = m.order_id"
        " and h.msg_id > m.msg_id and h.priority > p.priority and h.due_at > h.time_added"
        " and h.time_added < m.claimed_at and h.due_at > m.time_added)"
    ).fetchone()[0]
    assert held_by_later > 0
    limit, slowest = doc["limit"], doc["latency_split"]["overall"]["p99"]
    assert limit["resource"] == "ordering", limit  # was unexplained
    assert slowest["ordering_ms"] > slowest["hidden_ms"], slowest
    assert slowest["not_due_head_ms"] >= slowest["ordering_ms"] / 2, slowest
    head = slowest["not_due_head"]  # the limit names the head the account measured
    named = re.search(
        f"behind a head not yet due: group {head['queue_type']}:{head['order_id']} held by msg_id"
        rf" {head['msg_id']}, not due until ([\d.]+) s into the run",
        limit["evidence"],
    )
    assert named is not None and abs(float(named.group(1)) - head["due_s"]) <= 0.006, (head, limit)
    assert any("schedule later only what must wait" in line for line in doc["advice"]), doc["advice"]


@pytest.mark.faults  # a server of its own
@pytest.mark.skipif(pgq_skip_reason() is not None, reason=pgq_skip_reason() or "")
def test_pgq_as_a_plain_role_after_the_administrator_steps_it_prints(tmp_path: Path) -> None:
    """The refusal names every step an administrator takes once; after exactly those, the plain role
    runs, reruns (dropping its queues) and passes; another role's run over its queues is refused,
    naming it."""
    with LocalPostgres(bindir=pgq_bindir()) as pg, temp_role(pg.dsn, "app_pgq", "app-pw") as role:
        cli = Cli(role.dsn, tmp_path)
        flags = "-queue pgq -fill-db 60 -workers 3 -orders 5 -work-ms 0 -poll-interval 0.1 -json q.json"
        refused = cli.run(flags)
        assert refused.returncode == 2, refused.stdout + refused.stderr
        line = refused.stderr.strip().splitlines()[-1]
        steps = re.search(r"`([^`]+)` in database (\S+)", line)
        assert steps is not None, line
        assert steps.group(2) == role.dbname and "grant pgq_admin to app_pgq" in steps.group(1), line
        with psycopg.connect(conninfo.make_conninfo(pg.dsn, dbname=role.dbname), autocommit=True) as admin:
            for step in steps.group(1).split(";"):
                admin.execute(step.strip().encode())
        for run in (1, 2):  # the second drops and remakes the first's queues
            result = cli.run(flags)
            assert result.returncode == 0, (run, result.stdout + result.stderr)
            audit = report(cli, "q.json")["audit"]
            assert (audit["verdict"], audit["processed"]) == ("pass", 60), audit
            assert report(cli, "q.json")["queue"]["product"]["version"].startswith("extension ")
        # a superuser's run over the plain role's queues: refused, the owner named, its queues kept
        other = Cli(conninfo.make_conninfo(pg.dsn, dbname=role.dbname), tmp_path).run(flags)
        assert_one_line_error(other, 2, "left by a run of role app_pgq")
        with psycopg.connect(role.dsn, autocommit=True) as conn:
            assert conn.execute("select count(*) from pgq.get_queue_info()").fetchone()[0] == 3


@pytest.mark.integration
def test_pgqueuer_heartbeats_keep_a_live_workers_job(cli: Cli) -> None:
    """Work longer than pgqueuer's heartbeat timeout (-lease): the heartbeat of a live worker's jobs
    (pgqueuer's own update_heartbeat, run by the tool's housekeeper) keeps them from being picked
    again; without it every job would go stale and be redelivered."""
    result = cli.run(
        "-queue pgqueuer -fill-db 12 -workers 6 -orders 12 -work-ms 1200-1500 -lease 1 -json h.json"
    )
    assert result.returncode == 0, result.stdout + result.stderr
    audit = report(cli, "h.json")["audit"]
    assert (audit["verdict"], audit["processed"], audit["redelivered"]) == ("pass", 12, 0), audit
