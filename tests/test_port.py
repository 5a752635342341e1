"""The faithful port: runs on a real server, processes every message once, in group order."""

from __future__ import annotations

import itertools
import json
import re
import signal
import sys
from datetime import datetime

import psycopg
import pytest
from checks import assert_exactly_once_in_order, handled_lines, wait_for_handled
from conftest import REPO, Cli

pytestmark = pytest.mark.integration


@pytest.mark.parametrize("delmsg", [False, True], ids=["mark", "delmsg"])
@pytest.mark.parametrize("rate", [0, 800], ids=["prefill", "rate"])
def test_run_processes_every_message_once_in_group_order(
    cli: Cli, db: psycopg.Connection, delmsg: bool, rate: int
) -> None:
    n = 400
    args = [
        "-fill-db",
        str(n),
        "-workers",
        "6",
        "-orders",
        "3",
        "-work-ms",
        "0-2",
        "-poll-interval",
        "0.05",
        "-json",
        "out.json",
    ]
    args += ["-delmsg"] if delmsg else []
    args += ["-rate", str(rate)] if rate else []
    result = cli.run(*args)
    assert result.returncode == 0, result.stderr
    assert_exactly_once_in_order(db, n, delmsg)
    report = json.loads((cli.workdir / "out.json").read_text())
    assert report["processed"] == n and report["outcome"] == "completed"
    assert sum(report["processed_per_type"].values()) == n
    handled = handled_lines(cli.workdir / "msg_queue.log")
    assert sorted(h[2] for h in handled) == list(range(1, n + 1))
    # msg_id increases with insertion and time_added is distinct and increasing.
    added = [datetime.fromisoformat(h[4]) for h in sorted(handled, key=lambda h: h[2])]
    assert all(a < b for a, b in itertools.pairwise(added))
    if rate:
        # paced: n messages at `rate`/s cannot all be in before (n - 1) / rate seconds
        assert report["elapsed_s"] >= (n - 1) / rate * 0.95


def test_summary_reports_processed_and_rates(cli: Cli) -> None:
    """The answer in a screen (at most 40 lines), without the detail -v prints
    (test_capacity.py::test_server_cost_and_bystander_are_reported runs with -v)."""
    result = cli.run("-fill-db", "300", "-workers", "3", "-work-ms", "0")
    assert result.returncode == 0, result.stderr
    assert "300 of 300" in result.stdout
    assert "messages/s" in result.stdout and "type1" in result.stdout
    assert "audit" in result.stdout and "pass" in result.stdout
    lines = result.stdout.splitlines()
    assert len(lines) <= 40, result.stdout
    assert "the detail: -v, or -report FILE.html" in " ".join(result.stdout.split())
    detail = ("workers' time", "complete+commit ms", "claim ms", "empty claims")
    assert not any(row in result.stdout for row in detail), result.stdout


def test_seed_example_two_claim_third_finds_none(db: psycopg.Connection, dsn: str) -> None:
    """Seed 000: orders 1,2,2,1,1 of one type, three workers: two claim, the third gets nothing."""
    db.execute((REPO / "schema.sql").read_text())
    for msg_id, order_id in enumerate([1, 2, 2, 1, 1], start=1):
        db.execute(
            "insert into msg_queue values (%s, 'type1', 'N', %s, clock_timestamp(), null)",
            (msg_id, order_id),
        )
    claim = (REPO / "next_msg.sql").read_text()
    workers = [psycopg.connect(dsn) for _ in range(3)]
    try:
        got = []
        for conn in workers:  # each keeps its transaction open, as a worker mid-message does
            got.append(psycopg.RawCursor(conn).execute(claim, ("type1",)).fetchone())
        assert sorted(g[0] for g in got[:2]) == [1, 2]
        assert got[2] is None
    finally:
        for conn in workers:
            conn.close()


def test_go_style_and_gnu_style_flags(cli: Cli, db: psycopg.Connection) -> None:
    for args in (["--fill-db", "30", "--workers", "3"], ["-fill-db=30", "-workers=3"]):
        result = cli.run(*args, "--work-ms", "0", "-no-audit")
        assert result.returncode == 0, result.stderr
        assert db.execute("select count(*) from msg_queue where status = 'P'").fetchone()[0] == 30


def test_logfile_dash_writes_to_stdout_and_file_starts_afresh(cli: Cli) -> None:
    log = cli.workdir / "msg_queue.log"
    log.write_text("stale line from an earlier run\n")
    result = cli.run("-fill-db", "20", "-workers", "3", "-work-ms", "0")
    assert result.returncode == 0
    assert "stale line" not in log.read_text()
    assert len(handled_lines(log)) == 20
    result = cli.run("-fill-db", "20", "-workers", "3", "-work-ms", "0", "-logfile", "-")
    assert result.returncode == 0
    assert result.stdout.count(" handled worker=") == 20


def test_packaged_sql_used_outside_repo_and_local_file_wins(cli: Cli, db: psycopg.Connection) -> None:
    result = cli.run("-fill-db", "10", "-workers", "3", "-work-ms", "0")
    assert result.returncode == 0, result.stderr
    assert "note" not in [c.name for c in db.execute("select * from msg_queue limit 0").description]
    local = (
        (REPO / "schema.sql")
        .read_text()
        .replace(
            "time_processed timestamp with time zone", "time_processed timestamp with time zone, note text"
        )
    )
    (cli.workdir / "schema.sql").write_text(local)
    result = cli.run("-fill-db", "10", "-workers", "3", "-work-ms", "0")
    assert result.returncode == 0, result.stderr
    assert "note" in [c.name for c in db.execute("select * from msg_queue limit 0").description]


def test_go_tool_never_exits_but_we_stop_at_target_and_feeder_stops(cli: Cli, db: psycopg.Connection) -> None:
    result = cli.run("-fill-db", "50", "-workers", "3", "-rate", "500", "-work-ms", "0", "-delmsg")
    assert result.returncode == 0
    # the feeder stopped at the target: no message beyond msg_id 50 was ever written
    assert db.execute("select count(*), max(msg_id) from msg_journal").fetchone() == (50, 50)
    assert db.execute("select count(*) from msg_queue").fetchone()[0] == 0
    assert db.execute("select produced from pgmq_sim_run").fetchone()[0] == 50


def test_time_processed_is_when_work_finished(cli: Cli, db: psycopg.Connection) -> None:
    result = cli.run("-fill-db", "60", "-workers", "3", "-work-ms", "5")
    assert result.returncode == 0
    rows = db.execute(
        """select q.time_processed, j.claimed_at, j.completed_at
           from msg_queue q join msg_journal j using (msg_id)"""
    ).fetchall()
    assert len(rows) == 60
    for processed, claimed, completed in rows:
        assert processed is not None
        # set by the completion, after the 5 ms of work that followed the claim
        assert (processed - claimed).total_seconds() >= 0.005
        assert completed <= processed  # the journal's row is written just before, in its transaction


@pytest.mark.parametrize("signum,code", [(signal.SIGINT, 130), (signal.SIGTERM, 143)])
def test_signal_stops_cleanly_with_partial_summary(
    cli: Cli, db: psycopg.Connection, signum: int, code: int
) -> None:
    proc = cli.start(
        "-fill-db", "5000", "-workers", "6", "-work-ms", "20-30", "-orders", "4", "-json", "out.json"
    )
    wait_for_handled(cli.workdir / "msg_queue.log", 20)
    proc.send_signal(signum)
    stdout, stderr = proc.communicate(timeout=30)
    assert proc.returncode == code, stderr
    assert "Traceback" not in stderr
    assert "interrupted" in stdout
    report = json.loads((cli.workdir / "out.json").read_text())
    assert report["outcome"] == "interrupted"
    assert 0 < report["processed"] < 5000
    assert report["audit"]["verdict"] == "pass" and report["audit"]["duplicates"] == 0
    # Messages in flight at the signal were rolled back, not left marked.
    journaled = db.execute("select count(*) from msg_journal").fetchone()[0]
    marked = db.execute("select count(*) from msg_queue where status = 'P'").fetchone()[0]
    assert journaled == marked == report["processed"]
    last = (cli.workdir / "msg_queue.log").read_text().splitlines()[-1]
    assert last.endswith(f"run end: interrupted; exit {code}"), last


def test_version_and_help(cli: Cli) -> None:
    version = cli.run("--version", dsn=False)
    assert version.returncode == 0 and "pgmq-sim" in version.stdout and "0." in version.stdout
    helptext = cli.run("-help", dsn=False)
    assert helptext.returncode == 0
    for name in (
        "-delmsg",
        "-dsn",
        "-fill-db",
        "-logfile",
        "-rate",
        "-schema",
        "-workers",
        "-next-msg",
        "-work-ms",
        "-orders",
        "-poll-interval",
        "-claim",
        "-wakeup",
        "-compare",
        "-json",
    ):
        assert f"{name}, -{name}" in helptext.stdout, name


def test_progress_bars_show_true_figures(cli: Cli) -> None:
    """Per-worker bars are busy shares (never past 100%), with counts that add up to the total."""
    argv = [sys.executable, "-m", "pgmq_sim", "-dsn", cli.dsn, "-progress", "bars"]
    result = cli.run_argv([*argv, *["-fill-db", "3000", "-workers", "6", "-work-ms", "0-1"]])
    assert result.returncode == 0, result.stderr
    lines = result.stderr.splitlines()
    total = next(line for line in lines if line.strip().startswith("total"))
    assert "3,000/3,000 100.0%" in total and "done" in total
    busy = [int(m) for m in re.findall(r"busy (\d+)%", result.stderr)]
    counts = [int(m.replace(",", "")) for m in re.findall(r"(\d[\d,]*) msgs", result.stderr)]
    assert len(busy) == len(counts) == 6 and all(b <= 100 for b in busy)
    assert sum(counts) == 3000
