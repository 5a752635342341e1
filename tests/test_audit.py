"""The audit's verdict, judged from the journal: it passes correct runs and catches broken ones; on
counts and evidence built by hand (unit), each kind of problem fails it and each cause is named. And
the stall diagnosis: on real runs, and on facts built by hand."""

from __future__ import annotations

import dataclasses
import json
import subprocess
import time
from datetime import UTC, datetime, timedelta

import psycopg
import pytest
from checks import handled_lines, wait_for_handled
from conftest import REPO, Cli, assert_one_line_error

from pgmq_sim.db.audit import count_audit
from pgmq_sim.db.queue import QueueDatabase
from pgmq_sim.db.sessions import Sessions
from pgmq_sim.db.values import QueueShape
from pgmq_sim.model.facts import (
    AuditCounts,
    DuplicateClaims,
    LockBlocker,
    OrderViolation,
    StallFacts,
)
from pgmq_sim.result.audit import AuditVerdict
from pgmq_sim.sqlfiles import statement
from pgmq_sim.verdicts.audit import SHOW, judge_audit
from pgmq_sim.verdicts.diagnose import explain_stall

T0 = datetime(2026, 1, 1, tzinfo=UTC)


def at(ms: float) -> datetime:
    return T0 + timedelta(milliseconds=ms)


@pytest.fixture
def crafted(db: psycopg.Connection) -> psycopg.Connection:
    """An empty queue and journal to write runs into by hand."""
    db.execute((REPO / "schema.sql").read_text())
    db.execute(statement("journal"))
    return db


def judge(db: psycopg.Connection, expected: int, ordered: bool, complete: bool) -> AuditVerdict:
    """The audit, through the tool's own queue layer, of the database `db` is connected to."""
    counts = QueueDatabase(Sessions(db.info.dsn)).audit_counts(expected, SHOW)
    return judge_audit(counts, expected=expected, ordered=ordered, complete=complete)


def queue(db: psycopg.Connection, msg_id: int, status: str, order_id: int = 1) -> None:
    db.execute(
        "insert into msg_queue values (%s, 'type1', %s, %s, %s, null)", (msg_id, status, order_id, at(msg_id))
    )


def journal(db: psycopg.Connection, msg_id: int, claimed: float, done: float, order_id: int = 1) -> None:
    db.execute(
        "insert into msg_journal values (%s, 'type1', %s, 'w1', %s, %s)",
        (msg_id, order_id, at(claimed), at(done)),
    )


@pytest.mark.integration
def test_clean_run_passes(crafted: psycopg.Connection) -> None:
    for i in (1, 2, 3):
        queue(crafted, i, "P")
        journal(crafted, i, claimed=10 * i, done=10 * i + 5)
    verdict = judge(crafted, 3, ordered=True, complete=True)
    assert verdict.passed and verdict.verdict == "pass"
    assert (
        verdict.processed,
        verdict.duplicates,
        verdict.missing,
        verdict.left_behind,
        verdict.order_violations,
    ) == (3, 0, 0, 0, 0)


@pytest.mark.integration
def test_each_field_fails_the_verdict(crafted: psycopg.Connection) -> None:
    queue(crafted, 1, "P")
    journal(crafted, 1, 0, 5)
    journal(crafted, 1, 6, 9)  # processed twice
    queue(crafted, 2, "N")  # never processed: left behind
    queue(crafted, 3, "P", order_id=2)
    journal(crafted, 3, 20, 30, order_id=2)
    queue(crafted, 4, "P", order_id=2)
    journal(crafted, 4, 25, 35, order_id=2)  # claimed before 3 completed
    queue(crafted, 6, "P", order_id=3)  # marked processed, never journaled: lost
    verdict = judge(crafted, 6, ordered=True, complete=True)  # msg 5 was produced but vanished
    assert verdict.verdict == "fail"
    assert verdict.processed == 3
    assert verdict.duplicates == 1 and verdict.duplicate_ids == (1,)
    assert verdict.missing == 2 and verdict.missing_ids == (5, 6)
    assert verdict.left_behind == 1
    assert verdict.order_violations == 1 and verdict.order_violation_ids == (4,)
    text = "; ".join(verdict.problems)
    assert "1 duplicate" in text and "2 missing" in text and "left behind" in text and "order" in text


@pytest.mark.integration
def test_order_violation_alone_fails_only_ordered_strategies(crafted: psycopg.Connection) -> None:
    for i, (claimed, done) in enumerate([(0, 10), (5, 12)], start=1):
        queue(crafted, i, "P")
        journal(crafted, i, claimed, done)
    assert not judge(crafted, 2, ordered=True, complete=True).passed
    unordered = judge(crafted, 2, ordered=False, complete=True)
    assert unordered.passed and unordered.order_violations == 1


@pytest.mark.integration
def test_partial_run_may_leave_pending_but_not_lose(crafted: psycopg.Connection) -> None:
    queue(crafted, 1, "P")
    journal(crafted, 1, 0, 5)
    queue(crafted, 2, "N")
    assert judge(crafted, 2, ordered=True, complete=False).passed
    assert not judge(crafted, 2, ordered=True, complete=True).passed
    assert not judge(crafted, 3, ordered=True, complete=False).passed  # msg 3 is nowhere
    # msg 2 marked processed by a claim whose work never completed: lost, even in a partial run
    crafted.execute("update msg_queue set status = 'P' where msg_id = 2")
    lost = judge(crafted, 2, ordered=True, complete=False)
    assert not lost.passed and lost.missing_ids == (2,) and lost.left_behind == 0


@pytest.mark.integration
def test_a_redelivery_counts_the_lease_from_the_first_claims_arrival_not_its_clock_after(
    crafted: psycopg.Connection,
) -> None:
    """An at-least-once design sets the lease inside its claim statement, between the round trip's
    arrival (claimed_at less claim_s) and the clock read after it (claimed_at). A first claim whose
    clock came 60 ms after its arrival (a loaded client) and a second claim 180 ms after that clock,
    with a lease of 200 ms, is a redelivery (240 ms after the lease began at the latest); a second
    claim 100 ms after the first's arrival is a duplicate."""
    crafted.execute(statement("enqueue_log"))
    crafted.execute(statement("failures_table"))
    for msg_id in (1, 2):
        enqueued = "insert into pgmq_sim_enqueued values (%s, 'type1', %s, 0, %s, %s)"
        crafted.execute(enqueued, (msg_id, msg_id, at(0), at(0)))
    row = "insert into msg_journal (msg_id, queue_type, order_id, worker, claimed_at, completed_at, claim_s)"
    values = " values (%s, 'type1', %s, %s, %s, %s, %s)"
    for msg_id, worker, claimed, done, claim_s in [
        (1, "w1", 60, 400, 0.06),
        (1, "w2", 240, 260, 0.0),  # 240 ms after the first claim's arrival: the lease had passed
        (2, "w1", 60, 400, 0.06),
        (2, "w2", 100, 120, 0.0),  # 100 ms after it: two workers held the message at once
    ]:
        crafted.execute(row + values, (msg_id, msg_id, worker, at(claimed), at(done), claim_s))
    shape = QueueShape(seed_table=False, tables=("msg_journal",), redelivery_lease_s=0.2)
    with psycopg.connect(crafted.info.dsn, cursor_factory=psycopg.RawCursor) as conn:  # the tool's $n text
        counts = count_audit(conn, shape, 2, SHOW, retrying=False)
    assert (counts.redelivered, counts.redelivered_ids) == (1, (1,))
    assert (counts.duplicates, counts.duplicate_ids) == (1, (2,))
    # the duplicate's evidence, not the redelivery's
    assert [c.msg_id for c in counts.duplicate_claims] == [2]


@pytest.mark.integration
def test_claim_of_several_rows_fails_the_run_and_loses_nothing(cli: Cli, db: psycopg.Connection) -> None:
    (cli.workdir / "two.sql").write_text(
        (REPO / "src/pgmq_sim/designs/fifo/claim.sql").read_text().replace("limit $2", "limit $2 + 1")
    )
    result = cli.run("-next-msg two.sql -fill-db 30 -workers 3 -work-ms 0")
    assert_one_line_error(result, 1, "returned 2 rows for a batch of 1", "at most $2")
    assert db.execute("select count(*) from msg_queue where status = 'P'").fetchone()[0] == 0


NO_LOCK_CLAIM = """
select msg_id, queue_type, order_id from msg_queue
where queue_type = $1 and status = 'N'
order by msg_id limit 1
"""

UNORDERED_CLAIM = """
with next_msg as (
    select msg_id from msg_queue where queue_type = $1 and status = 'N'
    order by msg_id limit 1 for update skip locked)
update msg_queue mq set status = 'P' from next_msg where mq.msg_id = next_msg.msg_id
returning mq.msg_id, mq.queue_type, mq.order_id
"""


@pytest.mark.integration
def test_claim_without_row_lock_is_caught_as_duplicates(cli: Cli, db: psycopg.Connection) -> None:
    """Seed 001's exercise: without locking, two workers take the same message."""
    (cli.workdir / "nolock.sql").write_text(NO_LOCK_CLAIM)
    result = cli.run(
        "-next-msg nolock.sql -fill-db 300 -workers 6 -work-ms 1-3 -orders 50 -json out.json -stall-timeout 5"
    )
    assert result.returncode == 1, result.stderr
    report = json.loads((cli.workdir / "out.json").read_text())
    assert report["audit"]["verdict"] == "fail"
    assert report["audit"]["duplicates"] > 0
    assert report["audit"]["duplicate_ids"]
    # The journal really holds the repeats the verdict counts.
    rows, distinct = db.execute("select count(*), count(distinct msg_id) from msg_journal").fetchone()
    assert rows - distinct == report["audit"]["duplicates"]
    assert "FAIL" in result.stdout and "duplicate" in result.stdout


@pytest.mark.integration
def test_unordered_claim_is_caught_as_order_violations(cli: Cli) -> None:
    (cli.workdir / "unordered.sql").write_text(UNORDERED_CLAIM)
    result = cli.run("-next-msg unordered.sql -fill-db 300 -workers 12 -work-ms 2-6 -json out.json")
    assert result.returncode == 1, result.stderr
    audit_json = json.loads((cli.workdir / "out.json").read_text())["audit"]
    assert audit_json["verdict"] == "fail"
    assert audit_json["order_violations"] > 0 and audit_json["order_violation_ids"]
    assert audit_json["duplicates"] == 0 and audit_json["missing"] == 0


JSON_KEYS = [
    "processed",
    "elapsed_s",
    "throughput_per_s",
    "empty_claims",
    "ordering_bound_per_s",
    "settings",
    "throughput_per_type_per_s",
    "workers",
    "timeline",
    "advice",
]


@pytest.mark.integration
def test_json_document_keys(cli: Cli) -> None:
    result = cli.run("-fill-db", "200", "-workers", "6", "-work-ms", "0-2", "-json", "out.json")
    assert result.returncode == 0, result.stderr
    doc = json.loads((cli.workdir / "out.json").read_text())
    for key in JSON_KEYS:
        assert key in doc, key
    for kind in ("e2e", "claim"):
        assert set(doc["latency_ms"][kind]) == {"p50", "p95", "p99", "max"}
        values = [doc["latency_ms"][kind][k] for k in ("p50", "p95", "p99", "max")]
        assert all(v is not None and v > 0 for v in values) and values == sorted(values)
    assert doc["audit"]["verdict"] == "pass"
    for key in ("duplicates", "missing", "order_violations", "left_behind"):
        assert doc["audit"][key] == 0
    assert doc["table"]["size_bytes"] > 0 and doc["table"]["dead_tuples"] >= 0
    assert doc["settings"]["fill_db"] == 200 and doc["settings"]["workers"] == 6
    assert doc["processed"] == 200
    assert sum(w["processed"] for w in doc["workers"]) == 200
    assert sum(s["processed"] for s in doc["timeline"]) == 200
    # 3 types x 2 orders, each at most one message per cycle: its work, claim and completion
    assert doc["groups"] == 6
    cycle_ms = doc["work_mean_ms"] + doc["latency_ms"]["claim"]["p50"] + doc["latency_ms"]["complete"]["p50"]
    assert doc["ordering_bound_per_s"] == pytest.approx(6 / (cycle_ms / 1000), rel=0.01)
    assert doc["work_bound_per_s"] == pytest.approx(6 / (doc["work_mean_ms"] / 1000), rel=0.01)
    assert doc["groups_per_type"] == {"type1": 2, "type2": 2, "type3": 2}
    assert doc["worker_bound_per_s"] == pytest.approx(doc["ordering_bound_per_s"], rel=0.01)


@pytest.mark.integration
def test_fewer_workers_than_groups_lowers_the_bound_and_says_so(cli: Cli) -> None:
    result = cli.run("-fill-db 300 -workers 3 -orders 4 -work-ms 0-2 -json out.json")
    assert result.returncode == 0, result.stderr
    doc = json.loads((cli.workdir / "out.json").read_text())
    assert doc["groups"] == 12
    assert doc["worker_bound_per_s"] == pytest.approx(doc["ordering_bound_per_s"] / 4, rel=0.01)
    assert doc["limit"]["resource"] == "workers", doc["limit"]  # the workers, not the groups, bound it


@pytest.mark.integration
def test_no_audit_skips_the_journal(cli: Cli, db: psycopg.Connection) -> None:
    result = cli.run("-fill-db", "50", "-workers", "3", "-work-ms", "0", "-no-audit", "-json", "out.json")
    assert result.returncode == 0
    assert json.loads((cli.workdir / "out.json").read_text())["audit"] is None
    assert db.execute("select to_regclass('msg_journal')").fetchone()[0] is None


@pytest.mark.integration
def test_plot_is_a_png(cli: Cli) -> None:
    result = cli.run("-fill-db 300 -workers 6 -rate 300 -work-ms 1-3 -poll-interval 0.1 -plot run.png")
    assert result.returncode == 0, result.stderr
    data = (cli.workdir / "run.png").read_bytes()
    assert data[:8] == b"\x89PNG\r\n\x1a\n" and len(data) > 10_000


TYPE3_TO_TYPE9 = """
create function reroute() returns trigger language plpgsql as $$
begin
    if new.queue_type = 'type3' then new.queue_type := 'type9'; end if;
    return new;
end $$;
create trigger reroute before insert on msg_queue for each row execute function reroute();
"""

TIE_GROUP = """
create function tie() returns trigger language plpgsql as $$
begin
    if new.queue_type = 'type1' and new.order_id = 1 then new.time_added := '2001-01-01'; end if;
    return new;
end $$;
create trigger tie before insert on msg_queue for each row execute function tie();
"""


def custom_schema(cli: Cli, extra: str) -> str:
    (cli.workdir / "custom.sql").write_text((REPO / "schema.sql").read_text() + extra)
    return "custom.sql"


@pytest.mark.integration
def test_stall_names_a_type_without_worker(cli: Cli) -> None:
    result = cli.run(
        "-schema",
        custom_schema(cli, TYPE3_TO_TYPE9),
        "-fill-db 90 -workers 3 -work-ms 0 -stall-timeout 1.5 -poll-interval 0.1 -json out.json",
    )
    assert result.returncode == 3, result.stderr
    assert "type 'type9' but no worker serves that type" in result.stdout
    doc = json.loads((cli.workdir / "out.json").read_text())
    assert doc["outcome"] == "stalled" and any("type9" in c for c in doc["stall_causes"])


@pytest.mark.integration
def test_stall_names_a_group_whose_head_cannot_be_claimed(cli: Cli) -> None:
    result = cli.run(
        "-schema",
        custom_schema(cli, TIE_GROUP),
        "-fill-db 120 -workers 3 -work-ms 0 -stall-timeout 1.5 -poll-interval 0.1",
    )
    assert result.returncode == 3, result.stderr
    out = " ".join(result.stdout.split())
    assert "group (type1, order_id 1)" in out and "shares its time_added" in out


PACED = "-fill-db 4000 -rate 400 -workers 3 -orders 1 -work-ms 2-4 -stall-timeout 1.5 -poll-interval 0.05"


def run_while_another_session_locks(
    cli: Cli, dsn: str, app: str, lock_sql: str, args: str = PACED
) -> tuple[int, subprocess.CompletedProcess[str]]:
    """Start a rate-fed run, take a lock from another session once this run's workers are
    handling messages, and wait for the run to end; returns the locker's pid and the run."""
    # paced over 10 s: the lock is taken long before the producer is done, however slow the machine
    proc = cli.start(args)
    holder = psycopg.connect(dsn, application_name=app)
    try:
        wait_for_handled(cli.workdir / "msg_queue.log", 20)
        deadline = time.monotonic() + 20
        while holder.execute(lock_sql).rowcount == 0:
            holder.rollback()  # nothing pending to lock yet: the producer is still catching up
            assert time.monotonic() < deadline, "nothing pending to lock"
            time.sleep(0.01)
        stdout, stderr = proc.communicate(timeout=60)
        return holder.info.backend_pid, subprocess.CompletedProcess(
            proc.args, proc.returncode, stdout, stderr
        )
    finally:
        holder.close()
        if proc.poll() is None:
            proc.kill()


@pytest.mark.integration
def test_stall_names_the_session_holding_a_row_lock(cli: Cli, dsn: str) -> None:
    pid, result = run_while_another_session_locks(
        cli,
        dsn,
        "lock-holder-test",
        "select msg_id from msg_queue where queue_type = 'type2' and status = 'N' for update skip locked",
    )
    assert result.returncode == 3, result.stderr
    out = " ".join(result.stdout.split())
    assert f"locked by another session, pid {pid}" in out and "lock-holder-test" in out


@pytest.mark.integration
def test_stall_names_the_session_holding_a_table_lock_and_stops(cli: Cli, dsn: str) -> None:
    """A table lock held elsewhere blocks every worker; the run must still end, and say who."""
    pid, result = run_while_another_session_locks(
        cli, dsn, "table-lock-test", "lock table msg_queue in access exclusive mode"
    )
    assert result.returncode == 3, result.stderr
    out = " ".join(result.stdout.split())
    assert f"wait on a lock held by pid {pid} (table-lock-test" in out
    assert "Traceback" not in result.stderr


@pytest.mark.integration
def test_a_producer_held_by_a_lock_is_a_stall_naming_the_holder(cli: Cli, dsn: str) -> None:
    """The workers keep up and wait; the producer, blocked on a lock of the tool's log table, writes
    nothing more. Nothing is pending, yet the run must end (it would wait for its count forever)
    and say whose lock holds the producer."""
    pid, result = run_while_another_session_locks(
        cli,
        dsn,
        "log-lock-test",
        "lock table pgmq_sim_enqueued in exclusive mode",
        "-queue next-attempt " + PACED.replace("-orders 1 -work-ms 2-4", "-orders 100 -work-ms 0"),
    )
    assert result.returncode == 3, result.stdout + result.stderr
    out = " ".join(result.stdout.split())
    assert "the producer wrote nothing for 1.5 s while" in out, out
    assert (
        "the producer's session pid" in out and f"waits on a lock held by pid {pid} (log-lock-test" in out
    ), out


@pytest.mark.integration
def test_slow_producer_is_not_a_stall(cli: Cli) -> None:
    """A run whose producer is still behind schedule is not a stall: nothing is pending."""
    result = cli.run("-fill-db 4 -rate 2 -workers 3 -work-ms 0 -stall-timeout 1 -poll-interval 0.05")
    assert result.returncode == 0, result.stdout + result.stderr


@pytest.mark.integration
def test_threads_share_nothing_unsafe(cli: Cli, db: psycopg.Connection) -> None:
    """Many workers on few groups: each worker's count in the report matches what the database
    and the log saw of that worker (no lost updates across threads)."""
    result = cli.run(
        "-fill-db 1500 -workers 24 -orders 2 -work-ms 0 -poll-interval 0.01 -json out.json -claim indexed"
    )
    assert result.returncode == 0, result.stderr
    doc = json.loads((cli.workdir / "out.json").read_text())
    journaled = dict(db.execute("select worker, count(*) from msg_journal group by worker").fetchall())
    logged: dict[str, int] = {}
    for worker, *_ in handled_lines(cli.workdir / "msg_queue.log"):
        logged[worker] = logged.get(worker, 0) + 1
    reported = {w["name"]: w["processed"] for w in doc["workers"] if w["processed"]}
    assert reported == journaled == logged
    assert doc["processed"] == 1500 == sum(journaled.values())
    assert doc["audit"]["verdict"] == "pass"


CLEAN = AuditCounts(100, 0, 0, 0, (), (), (), 0)


def verdict(counts: AuditCounts = CLEAN, *, ordered: bool = True, complete: bool = True) -> AuditVerdict:
    return judge_audit(counts, expected=100, ordered=ordered, complete=complete)


@pytest.mark.unit
def test_verdict_passes_a_clean_run_and_keeps_every_count() -> None:
    v = verdict()
    assert v.passed and v.problems == ()
    doc = v.as_json()
    assert doc["verdict"] == "pass" and doc["expected"] == 100 and doc["processed"] == 100
    assert doc["order_checked"] is True and doc["complete"] is True
    assert set(doc) >= {f.name for f in dataclasses.fields(AuditCounts)}


@pytest.mark.unit
@pytest.mark.parametrize(
    "change,words",
    [
        ({"duplicates": 1, "duplicate_ids": (7,)}, "1 duplicate(s), e.g. msg_id 7"),
        ({"missing": 2, "missing_ids": (3, 4)}, "2 missing, e.g. msg_id 3, 4"),
        ({"left_behind": 5}, "5 left behind"),
        ({"order_violations": 1, "order_violation_ids": (9,)}, "1 order violation(s), e.g. msg_id 9"),
    ],
)
def test_each_kind_of_problem_fails_the_verdict(change: dict[str, object], words: str) -> None:
    v = verdict(dataclasses.replace(CLEAN, **change))  # type: ignore[arg-type]
    assert not v.passed and v.verdict == "fail"
    assert words in "; ".join(v.problems)


@pytest.mark.unit
def test_a_partial_run_may_leave_messages_and_an_unordered_one_may_reorder() -> None:
    assert verdict(dataclasses.replace(CLEAN, left_behind=5), complete=False).passed
    reordered = dataclasses.replace(CLEAN, order_violations=3, order_violation_ids=(1, 2, 3))
    assert verdict(reordered, ordered=False).passed
    assert "out-of-order (unordered strategy)" in "; ".join(verdict(reordered, ordered=False).problems)


def facts(**changes: object) -> StallFacts:
    base = StallFacts(blocked=[], pending_by_type=[], heads=[], unlocked_heads=set(), lock_holders=[])
    return dataclasses.replace(base, **changes)  # type: ignore[arg-type]


@pytest.mark.unit
def test_stall_names_a_type_nobody_serves() -> None:
    causes = explain_stall(facts(pending_by_type=[("type9", 30)]), {"type1", "type2", "type3"})
    assert causes == ["30 pending message(s) of type 'type9' but no worker serves that type"]


@pytest.mark.unit
def test_stall_names_the_session_holding_a_head_and_hides_its_literals() -> None:
    holder = (
        4242,
        "report job",
        "idle in transaction",
        61.0,
        "777",
        "update t set pw = 'hunter2'",
        False,
        "10.0.0.9",
    )
    causes = explain_stall(
        facts(heads=[("type1", 3, 12, False, "777")], lock_holders=[holder]), {"type1", "type2", "type3"}
    )
    assert len(causes) == 1
    assert "group (type1, order_id 3): head msg_id 12 is locked by another session, pid 4242" in causes[0]
    assert "report job" in causes[0] and "hunter2" not in causes[0] and "'…'" in causes[0]


@pytest.mark.unit
def test_stall_names_a_pooler_connection_and_a_session_hidden_from_the_role() -> None:
    ours = (100, "pgmq-sim w1", "active", 1.0, "", "execute claim", True, "127.0.0.1")
    pooled_holder = (
        200,
        "report job",
        "idle in transaction",
        30.0,
        "900",
        "lock table x",
        False,
        "127.0.0.1",
    )
    facts_ = facts(
        heads=[("type1", 1, 5, False, "900")],
        blocked=[LockBlocker(100, "pgmq-sim w1", 300, "", "", False, "relation", "x", "")],
        lock_holders=[ours, pooled_holder],
    )
    causes = explain_stall(facts_, {"type1", "type2", "type3"}, pooled=True)
    assert "its state and query are hidden from this role" in causes[0] and "pid 300" in causes[0]
    assert "a server connection of the pooler at 127.0.0.1, last serving report job" in causes[1]
    assert "pooler" not in " ".join(explain_stall(facts_, {"type1", "type2", "type3"}, pooled=False))


@pytest.mark.unit
def test_stall_names_a_time_tie_and_a_head_the_claim_never_selects() -> None:
    heads = [("type1", 1, 5, True, "0"), ("type2", 2, 6, False, "0")]
    causes = explain_stall(facts(heads=heads, unlocked_heads={5, 6}), {"type1", "type2", "type3"})
    assert "shares its time_added" in causes[0] and "never selects it" in causes[1]


def counts(**values: object) -> AuditCounts:
    base: dict[str, object] = {
        "processed": 100,
        "duplicates": 0,
        "missing": 0,
        "left_behind": 0,
        "duplicate_ids": (),
        "missing_ids": (),
        "order_violation_ids": (),
        "order_violations": 0,
    }
    return AuditCounts(**(base | values))  # type: ignore[arg-type]


@pytest.mark.unit
def test_duplicates_from_a_claim_without_a_lock_name_the_workers_and_the_missing_lock() -> None:
    evidence = (DuplicateClaims(17, ("w2", "w5"), False, 0.004),)
    verdict = judge_audit(
        counts(duplicates=3, duplicate_ids=(17,), left_behind=3, duplicate_claims=evidence),
        expected=100,
        ordered=True,
        complete=True,
        claim_sql="update q set s = 'taken' where id = (select id from q where s = 'new' limit 1)",
    )
    assert not verdict.passed
    assert "msg_id 17 was completed by w2 and again by w5" in verdict.causes[0]
    assert "4 ms after w2's" in verdict.causes[0] and "takes no row lock" in verdict.causes[0]
    assert "3 message(s) were never processed" in verdict.causes[1]  # the count was reached by duplicates
    assert verdict.fix is not None and "FOR UPDATE SKIP LOCKED" in verdict.fix


@pytest.mark.unit
def test_duplicates_despite_a_lock_say_the_lock_is_not_on_the_row_updated() -> None:
    evidence = (DuplicateClaims(8, ("w1", "w3"), True, 0.002),)
    verdict = judge_audit(
        counts(duplicates=1, duplicate_ids=(8,), duplicate_claims=evidence),
        expected=100,
        ordered=True,
        complete=False,
        claim_sql="select id from q for update skip locked",
    )
    assert "while w1 still held it" in verdict.causes[0]
    assert "FOR UPDATE, SKIP LOCKED, yet two transactions held one message at once" in verdict.causes[0]


@pytest.mark.unit
def test_an_order_violation_names_the_group_both_messages_and_how_early() -> None:
    evidence = (OrderViolation("type2", 4, 12, 9, "w3", "w1", 0.0021),)
    verdict = judge_audit(
        counts(order_violations=1, order_violation_ids=(12,), violations=evidence),
        expected=100,
        ordered=True,
        complete=True,
        claim_sql="select id from q for update skip locked",
    )
    assert (
        "group (type2, order_id 4): msg_id 12 (w3) was claimed 2.1 ms before msg_id 9 (w1)"
        in verdict.causes[0]
    )
    assert "skips locked rows" in verdict.causes[0]
    unordered = judge_audit(counts(order_violations=1), expected=100, ordered=False, complete=True)
    assert (
        unordered.passed and unordered.causes == ()
    )  # an unordered design's reordering is reported, not failed


@pytest.mark.unit
def test_a_passing_audit_has_no_cause_and_redeliveries_are_named_not_failed() -> None:
    verdict = judge_audit(
        counts(redelivered=2, redelivered_ids=(5, 6)),
        expected=100,
        ordered=True,
        complete=True,
        at_least_once=True,
    )
    assert verdict.passed and verdict.causes == () and verdict.fix is None
    assert "2 redelivered after their lease passed" in "; ".join(verdict.problems)
