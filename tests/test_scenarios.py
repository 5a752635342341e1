"""Faults as scenarios: split transactions with leases and recovery, failing work with retries
and dead letters, and a fault schedule injected into the run. The database, not the report,
proves what was kept. A fault schedule's text is parsed, or refused, without a server (unit)."""

from __future__ import annotations

import json
from datetime import datetime

import psycopg
import pytest
from conftest import REPO, Cli, Refuse, assert_one_line_error

from pgmq_sim.actors.chaos import parse_chaos
from pgmq_sim.errors import UsageError

FAST = "-work-ms 1-3 -poll-interval 0.05"


def doc_of(cli: Cli) -> dict:
    return json.loads((cli.workdir / "out.json").read_text())


def stamp(line: str) -> datetime:
    return datetime.fromisoformat(line.split(" ", 1)[0])


def journal_facts(db: psycopg.Connection) -> tuple[int, int, int]:
    """(journal rows, distinct messages, order overlaps) straight from the journal."""
    rows, distinct = db.execute("select count(*), count(distinct msg_id) from msg_journal").fetchone()
    overlaps = db.execute(
        """select count(*) from (
             select claimed_at, lag(completed_at) over
                    (partition by queue_type, order_id order by msg_id) as prev_done
             from msg_journal) t where claimed_at < prev_done"""
    ).fetchone()[0]
    return rows, distinct, overlaps


@pytest.mark.integration
def test_split_mode_recovers_what_killed_workers_held(cli: Cli, db: psycopg.Connection) -> None:
    result = cli.run(
        "-fill-db 900 -rate 450 -workers 6 -orders 3 -tx split -lease 5 -json out.json",
        FAST,
        "-chaos kill-worker*2@0.5s,kill-worker@1.2s",
    )
    assert result.returncode == 0, result.stdout + result.stderr
    doc = doc_of(cli)
    assert doc["audit"]["verdict"] == "pass" and doc["audit"]["missing"] == 0
    assert doc["audit"]["duplicates"] == 0 and doc["audit"]["order_violations"] == 0
    assert doc["retries"]["crashes"] == 3
    # the messages the crashed workers held came back (their backends were gone), and were redone
    assert doc["retries"]["recovered"] >= 1 and doc["audit"]["redelivered"] >= 1
    assert db.execute("select count(*) from msg_journal where attempt > 1").fetchone()[0] >= 1
    rows, distinct, overlaps = journal_facts(db)
    assert rows == distinct == 900 and overlaps == 0
    assert [f["kind"] for f in doc["faults"]] == ["kill-worker", "kill-worker"]
    # each crashed worker's message came back by its stopped heartbeat, well before the 5 s lease
    log = (cli.workdir / "msg_queue.log").read_text().splitlines()
    crashes = [stamp(line) for line in log if "crashed mid-work" in line]
    recoveries = [stamp(line) for line in log if "its owner stopped beating" in line]
    assert len(crashes) == 3 and recoveries
    assert all(any(0 < (r - c).total_seconds() < 2.5 for r in recoveries) for c in crashes), (
        crashes,
        recoveries,
    )


@pytest.mark.integration
def test_single_mode_rides_through_killed_connections(cli: Cli, db: psycopg.Connection) -> None:
    result = cli.run(
        "-fill-db 900 -rate 450 -workers 6 -orders 3 -json out.json", FAST, "-chaos kill-connection*2/0.5s"
    )
    assert result.returncode == 0, result.stdout + result.stderr
    doc = doc_of(cli)
    assert doc["audit"]["verdict"] == "pass" and doc["connections_lost"] >= 2
    kills = [f for f in doc["faults"] if f["kind"] == "kill-connection"]
    assert len(kills) >= 2 and all("terminated" in f["detail"] for f in kills)
    rows, distinct, overlaps = journal_facts(db)
    assert rows == distinct == 900 and overlaps == 0


@pytest.mark.integration
@pytest.mark.parametrize("tx", ["single", "split"])
def test_failing_work_retries_and_dead_letters_add_up(cli: Cli, db: psycopg.Connection, tx: str) -> None:
    result = cli.run(
        f"-fill-db 600 -workers 6 -orders 3 -claim indexed -tx {tx} -json out.json",
        "-fail-rate 0.3 -max-attempts 3 -backoff-ms 10 -work-ms 0-1 -poll-interval 0.02",
    )
    assert result.returncode == 0, result.stdout + result.stderr
    doc = doc_of(cli)
    audit = doc["audit"]
    dead = db.execute("select count(*) from msg_queue where status = 'D'").fetchone()[0]
    failures = db.execute("select count(*) from msg_failures").fetchone()[0]
    rows, distinct, overlaps = journal_facts(db)
    assert rows == distinct == audit["processed"] and overlaps == 0
    assert audit["processed"] + audit["dead_lettered"] == 600 and audit["dead_lettered"] == dead > 0
    assert audit["failed_attempts"] == failures == doc["retries"]["failed_attempts"] > 0
    # every attempt either completed or failed (nothing was recovered in these runs)
    assert audit["attempts"] == rows + failures
    # a dead letter failed all three attempts, each recorded with its error
    per_dead = db.execute(
        """select count(*) from msg_failures f join msg_queue q using (msg_id)
           where q.status = 'D' group by msg_id"""
    ).fetchall()
    assert per_dead and all(n == (3,) for n in per_dead)
    assert (
        db.execute("select count(*) from msg_queue where status = 'D' and last_error is null").fetchone()[0]
        == 0
    )
    # the group after a dead letter went on: a later message of its group was processed
    assert (
        db.execute(
            """select count(*) from msg_queue d join msg_journal j
             on j.queue_type = d.queue_type and j.order_id = d.order_id and j.msg_id > d.msg_id
           where d.status = 'D'"""
        ).fetchone()[0]
        > 0
    )
    assert doc["retries"]["blocked_s_total"] > 0
    assert any("failing heads kept their groups waiting" in line for line in doc["advice"])


@pytest.mark.integration
def test_audit_command_judges_a_retry_run_as_the_run_did(cli: Cli, dsn: str) -> None:
    result = cli.run(
        "-fill-db 200 -workers 3 -claim indexed -fail-rate 0.4 -max-attempts 1 -json out.json", FAST
    )
    assert result.returncode == 0, result.stdout + result.stderr
    assert doc_of(cli)["audit"]["dead_lettered"] > 0
    again = cli.audit("-dsn", dsn)
    assert again.returncode == 0, again.stdout + again.stderr
    assert "audit pass" in again.stdout


@pytest.mark.integration
def test_split_mode_rides_out_a_table_lock_longer_than_its_own_lock_timeout(cli: Cli) -> None:
    result = cli.run(
        "-fill-db 1200 -rate 300 -workers 6 -claim indexed -tx split -json out.json",
        FAST,
        "-chaos lock-table@0.5s+4s",
    )
    assert result.returncode == 0, result.stdout + result.stderr
    assert doc_of(cli)["audit"]["verdict"] == "pass"


@pytest.mark.integration
def test_kill_worker_with_zero_work_crashes_a_worker(cli: Cli) -> None:
    result = cli.run(
        "-fill-db 900 -rate 300 -workers 6 -claim indexed -tx split -work-ms 0 -poll-interval 0.05",
        "-chaos kill-worker@0.5s -json out.json",
    )
    assert result.returncode == 0, result.stdout + result.stderr
    assert doc_of(cli)["retries"]["crashes"] == 1


@pytest.mark.integration
def test_a_claim_without_its_split_form_is_caught(cli: Cli) -> None:
    (cli.workdir / "seed_as_is.sql").write_text((REPO / "next_msg.sql").read_text())
    result = cli.run(
        "-fill-db 600 -workers 6 -orders 3 -tx split -next-msg seed_as_is.sql -json out.json", FAST
    )
    assert result.returncode == 1, result.stdout + result.stderr
    doc = doc_of(cli)
    assert doc["audit"]["verdict"] == "fail" and doc["audit"]["order_violations"] > 0
    assert doc["audit"]["duplicates"] == 0 and doc["audit"]["missing"] == 0
    assert any("no form for leases and retries" in n for n in doc["notes"])


@pytest.mark.integration
def test_held_snapshot_grows_dead_tuples_and_is_named(cli: Cli) -> None:
    result = cli.run(
        "-fill-db 12000 -rate 1500 -workers 6 -orders 20 -claim indexed -delmsg -work-ms 0 -json out.json",
        "-poll-interval 0.05 -chaos hold-xmin@0.5s+7s",  # timed from the first sample that sees it
    )
    assert result.returncode == 0, result.stdout + result.stderr
    doc = doc_of(cli)
    kinds = [f["kind"] for f in doc["faults"]]
    assert kinds == ["hold-xmin", "hold-xmin end"]
    dead = [s["dead_tuples"] for s in doc["timeline"] if s["dead_tuples"] is not None]
    assert dead and max(dead) > 2000
    assert doc["oldest_snapshot"]["held_s"] >= 5
    assert any(
        "snapshot held for" in line and "vacuum settings cannot help" in line for line in doc["advice"]
    )
    assert not any("vacuum the queue table more often" in line for line in doc["advice"])


@pytest.mark.integration
def test_table_lock_is_injected_and_ridden_out(cli: Cli) -> None:
    result = cli.run("-fill-db 800 -rate 400 -workers 3 -json out.json", FAST, "-chaos lock-table@0.5s+1.5s")
    assert result.returncode == 0, result.stdout + result.stderr
    doc = doc_of(cli)
    assert [f["kind"] for f in doc["faults"]] == ["lock-table", "lock-table end"]
    assert doc["audit"]["verdict"] == "pass"


@pytest.mark.integration
def test_restart_of_a_dsn_server_needs_permission(cli: Cli) -> None:
    assert_one_line_error(cli.run("-chaos restart-server@1s"), 2, "-chaos-allow-restart")


@pytest.mark.integration
def test_compare_runs_single_and_split_on_one_workload(cli: Cli) -> None:
    result = cli.run("-compare indexed/single,indexed/split -fill-db 400 -workers 6 -json out.json", FAST)
    assert result.returncode == 0, result.stdout + result.stderr
    runs = doc_of(cli)["runs"]
    assert [r["settings"]["tx"] for r in runs] == ["single", "split"]
    assert runs[0]["processed_per_type"] == runs[1]["processed_per_type"]
    assert all(r["audit"]["verdict"] == "pass" for r in runs)
    assert "split" in result.stdout


@pytest.mark.unit
@pytest.mark.parametrize(
    "spec,needle",
    [
        ("kill-everything@1s", "unknown fault"),
        ("hold-xmin@1s", "needs +DURATION"),
        ("kill-worker@1s+2s", "takes no +DURATION"),
        ("kill-connection", "is not a fault"),
    ],
)
def test_bad_chaos_spec_is_a_usage_error(refuse: Refuse, spec: str, needle: str) -> None:
    assert_one_line_error(refuse("-chaos", spec), 2, needle)


@pytest.mark.unit
def test_chaos_spec() -> None:
    faults = parse_chaos("kill-connection*2/5s, kill-worker@3s,hold-xmin@500ms+20s")
    assert [(f.kind, f.count, f.at_s, f.every_s, f.duration_s) for f in faults] == [
        ("kill-connection", 2, 5.0, 5.0, None),
        ("kill-worker", 1, 3.0, None, None),
        ("hold-xmin", 1, 0.5, None, 20.0),
    ]
    assert faults[0].times(16) == [5.0, 10.0, 15.0]
    assert parse_chaos("kill-connection/5s@0s")[0].at_s == 0.0
    for bad in ("kill-connection", "explode@1s", "lock-table@1s", "kill-worker@1s+1s", "kill-connection/0s"):
        with pytest.raises(UsageError):
            parse_chaos(bad)
