"""The live audit (issue 50): windows of msg_ids behind the watermark judged while the run goes, on
a real server: order across a window's boundary, windows kept through a kill -9 and `pgmq-sim
audit` going on from them, the audit so far in the metrics, and -check-abort acting on it."""

from __future__ import annotations

import json
import threading
import time
import urllib.request

import psycopg
import pytest
from checks import free_port
from conftest import Cli, Refuse, assert_one_line_error

from pgmq_sim.db.queue import QueueDatabase
from pgmq_sim.db.sessions import Sessions
from pgmq_sim.db.values import QueueShape
from pgmq_sim.engine.judging import LiveJudge
from pgmq_sim.verdicts.audit import SHOW, judge_audit


def windows_kept(db: psycopg.Connection) -> list[tuple[int, int, int, bool]]:
    return db.execute("select window_no, lo, hi, passed from pgmq_sim_windows order by window_no").fetchall()


def wait_for_windows(db: psycopg.Connection, count: int, timeout: float = 40) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        exists = db.execute("select to_regclass('pgmq_sim_windows') is not null").fetchone()
        if exists and exists[0] and len(windows_kept(db)) >= count:
            return
        time.sleep(0.2)
    raise AssertionError(f"fewer than {count} live audit windows closed in {timeout} s")


def judge_of(dsn: str, safe: list[int], said: list[BaseException] | None = None) -> LiveJudge:
    """A live judge over the seed's table, its watermark's upper bound `safe[0]`; what it would say
    to the run, in `said`."""
    return LiveJudge(
        dsn,
        QueueShape(),
        "planted",
        1.0,
        lambda: safe[0],
        lambda counts, messages: judge_audit(counts, expected=messages, ordered=True, complete=False),
        False,
        True,
        time.monotonic,
        threading.Event(),
        lambda exc: None,
        (said if said is not None else []).append,
    )


@pytest.mark.integration
def test_order_is_judged_across_a_windows_boundary(cli: Cli, db: psycopg.Connection) -> None:
    """One group's ten messages, in two windows; the sixth claimed before the fifth completed: the
    pair straddles the boundary, and the second window finds it through the first one's mark."""
    assert cli.run("-fill-db 10 -workers 1 -work-ms 0 -orders 1 -types 1").returncode == 0
    db.execute("truncate msg_journal, pgmq_sim_windows, pgmq_sim_marks")
    # message n claimed at second 2n and completed at 2n + 1; the sixth claimed at 10.5, before the
    # fifth's completion at 11
    db.execute(
        "insert into msg_journal (msg_id, queue_type, order_id, worker, claimed_at, completed_at)"
        " select n, 'type1', 1, 'w' || (n % 2),"
        "        t + make_interval(secs => case when n = 6 then 10.5 else 2 * n end),"
        "        t + make_interval(secs => 2 * n + 1)"
        " from generate_series(1, 10) n, (select now() t) t0"
    )
    db.execute("update msg_queue set queue_type = 'type1', order_id = 1, status = 'P'")
    safe = [5]
    judge = judge_of(cli.dsn, safe)
    first = judge.close_window()
    assert first is not None and (first.lo, first.hi) == (0, 5)
    assert first.verdict.passed and first.verdict.order_violations == 0
    safe[0] = 10
    second = judge.close_window()
    assert second is not None and (second.lo, second.hi) == (5, 10)
    assert second.verdict.processed == 5 and second.verdict.missing == 0
    assert second.verdict.order_violations == 1 and second.verdict.order_violation_ids == (6,)
    pair = second.verdict.violations[0]
    assert (pair.prev_msg_id, pair.msg_id) == (5, 6), pair
    assert not second.verdict.passed
    assert windows_kept(db) == [(1, 0, 5, True), (2, 5, 10, False)]
    # nothing new behind the watermark, nothing carried: a third tick closes no window
    assert judge.close_window() is None


@pytest.mark.integration
def test_a_message_pending_when_its_window_closes_is_judged_by_a_later_one(
    cli: Cli, db: psycopg.Connection
) -> None:
    """Messages 3 and 4 (a group of their own) still pending when the first window closes: carried,
    not lost. The next window judges 3 once it completed, and finds 4 lost: gone from the queue,
    never completed."""
    assert cli.run("-fill-db 10 -workers 1 -work-ms 0 -orders 1 -types 1").returncode == 0
    db.execute(
        "update msg_queue set order_id = 2, status = 'N', time_processed = null where msg_id in (3, 4)"
    )
    db.execute("delete from msg_journal where msg_id in (3, 4)")
    safe = [5]
    judge = judge_of(cli.dsn, safe)
    first = judge.close_window()
    assert first is not None and first.carried == 2
    assert (first.verdict.processed, first.verdict.left_behind, first.verdict.missing) == (3, 2, 0)
    assert first.verdict.passed
    carried = db.execute("select array_agg(msg_id order by msg_id) from pgmq_sim_carried").fetchone()
    assert carried == ([3, 4],)
    # 3 completes (its journal row, as the completing transaction writes it); 4 is deleted unfinished
    db.execute(
        "insert into msg_journal (msg_id, queue_type, order_id, worker, claimed_at, completed_at)"
        " values (3, 'type1', 2, 'w9', now(), now())"
    )
    db.execute("update msg_queue set status = 'P', time_processed = now() where msg_id = 3")
    db.execute("delete from msg_queue where msg_id = 4")
    safe[0] = 10
    second = judge.close_window()
    assert second is not None and (second.lo, second.hi, second.carried) == (5, 10, 0)
    assert (second.verdict.processed, second.verdict.missing, second.verdict.missing_ids) == (6, 1, (4,))
    assert not second.verdict.passed
    assert db.execute("select count(*) from pgmq_sim_carried").fetchone() == (0,)


@pytest.mark.integration
def test_a_killed_runs_windows_stay_and_the_audit_goes_on_from_them(cli: Cli, db: psycopg.Connection) -> None:
    proc = cli.start("-rate 200 -duration 60 -workers 6 -orders 20 -claim indexed -audit-window 1")
    try:
        wait_for_windows(db, 3)
    finally:
        proc.kill()  # SIGKILL: nothing of the tool's runs after it
        proc.communicate(timeout=30)
    kept = windows_kept(db)
    assert len(kept) >= 3 and all(passed for *_, passed in kept), kept
    assert [lo for _, lo, _, _ in kept] == [0] + [hi for _, _, hi, _ in kept[:-1]], kept  # contiguous
    result = cli.audit("-dsn", cli.dsn, "-json", "audit.json")
    assert result.returncode == 0, result.stdout + result.stderr
    through = kept[-1][2]
    assert f"window(s) 1 to {len(kept)} (msg_id 1 to {through:,}) judged while the run went" in result.stdout
    report = json.loads((cli.workdir / "audit.json").read_text())
    assert report["live_windows"] == len(kept) and report["judged_after"] == through
    # the same counts as the whole journal judged again from its first id
    database = QueueDatabase(Sessions(cli.dsn))
    produced = database.produced(journal=True)
    whole = database.audit_counts(produced, SHOW)
    audit = report["audit"]
    assert (audit["processed"], audit["duplicates"], audit["missing"], audit["order_violations"]) == (
        whole.processed,
        whole.duplicates,
        whole.missing,
        whole.order_violations,
    )
    # the windows' own and what came after them (none, if the kill followed a window at once)
    judged_live = db.execute("select sum((audit->>'processed')::int) from pgmq_sim_windows").fetchone()
    assert judged_live is not None and audit["processed"] >= judged_live[0] > 0


@pytest.mark.integration
def test_the_audit_so_far_is_live_in_the_metrics_and_fails_the_run_early(
    cli: Cli, db: psycopg.Connection
) -> None:
    """A completed message's journal row deleted mid-run is a lost message: the next window finds
    it, the metrics say so, and -check missing==0 -check-abort stops the run then, not at its end.
    The metrics also give the last closed window's limit."""
    port = free_port()
    proc = cli.start(
        "-rate 100 -duration 60 -workers 4 -orders 10 -claim indexed -audit-window 1 -json r.json",
        f"-check missing==0 -check-abort -metrics-port {port}",
    )
    began = time.monotonic()

    def value(text: str, name: str) -> float:
        return float(next(line.split()[-1] for line in text.splitlines() if line.startswith(name + " ")))

    try:
        wait_for_windows(db, 1)
        deadline = time.monotonic() + 20
        while True:  # a loaded host's first window may close with nothing completed in it yet
            with urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=5) as answer:
                before = answer.read().decode()
            if value(before, "pgmq_sim_audit_checked_total") > 0 or time.monotonic() > deadline:
                break
            time.sleep(0.2)
        row = None  # the newest completion past every closed window's msg_ids, in one statement
        while row is None and time.monotonic() < deadline + 10:  # behind, the workers may have none yet
            row = db.execute(
                "delete from msg_journal where msg_id = (select max(msg_id) from msg_journal)"
                " and msg_id > (select max(hi) from pgmq_sim_windows) returning msg_id"
            ).fetchone()
            if row is None:
                time.sleep(0.05)
        assert row is not None, windows_kept(db)
        out, err = proc.communicate(timeout=40)
    finally:
        proc.kill()
    assert time.monotonic() - began < 45, "the run went on to its end"

    assert value(before, "pgmq_sim_audit_windows_closed_total") >= 1
    # the last closed window's limit, a second at a time: one resource, 1, and when its window ended
    limits = [line for line in before.splitlines() if line.startswith("pgmq_sim_window_limit{")]
    assert len(limits) == 1 and limits[0].endswith(" 1.0"), before
    assert value(before, "pgmq_sim_window_limit_end_seconds") >= 1, before
    assert value(before, "pgmq_sim_audit_checked_total") > 0
    assert value(before, "pgmq_sim_audit_lost_total") == 0
    report = json.loads((cli.workdir / "r.json").read_text())
    assert any("-check-abort: missing==0 breached" in note for note in report["notes"]), report["notes"]
    assert report["audit"]["missing"] == 1 and report["audit"]["missing_ids"] == [row[0]], report["audit"]
    live = report["live_audit"]
    assert live["failed_windows"] == 1 and any(w["missing"] == 1 for w in live["windows"]), live
    assert proc.returncode != 0, out + err


@pytest.mark.unit
def test_check_abort_reads_the_live_audit_only_where_it_runs(refuse: Refuse) -> None:
    for argv in ("-fill-db 10 -check missing==0 -check-abort -audit-window 0",
                 "-fill-db 10 -check duplicates==0 -check-abort -audit-window 0"):  # fmt: skip
        assert_one_line_error(refuse(argv), 2, "-check-abort acts on -check lost (known")
    result = refuse("-fill-db 10 -check-abort")
    assert_one_line_error(result, 2, "acts on -check lost, duplicates, missing (known while the run goes on)")


@pytest.mark.integration
def test_a_lost_live_audit_session_is_said_once_and_the_next_window_opens_another(
    cli: Cli, db: psycopg.Connection
) -> None:
    """The live audit's session ended by the server between two windows: that tick closes no window,
    says so once, and does not end the run; the next tick opens a new session and closes it."""
    assert cli.run("-fill-db 10 -workers 1 -work-ms 0 -orders 1 -types 1").returncode == 0
    said: list[BaseException] = []
    safe = [5]
    judge = judge_of(cli.dsn, safe, said)
    assert judge.close_window() is not None
    ended = db.execute(
        "select count(pg_terminate_backend(pid)) from pg_stat_activity"
        " where application_name = 'pgmq-sim live audit' and datname = current_database()"
    ).fetchone()
    assert ended == (1,)
    safe[0] = 10
    assert judge.close_window() is None and judge.failures == 1 and len(said) == 1
    second = judge.close_window()
    assert second is not None and (second.lo, second.hi) == (5, 10) and second.verdict.passed
    assert [w.number for w in judge.windows()] == [1, 2]
