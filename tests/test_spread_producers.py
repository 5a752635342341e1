"""A paced distributed run spreads its producer sessions over the worker processes (issue 49): each
process enqueues its own groups' arrivals of the one seeded arrival stream, and the master's report
and audit hold as in one process. Real server, real Locust processes."""

from __future__ import annotations

import json
import os
import signal
import time
from pathlib import Path

import psycopg
import pytest
from checks import assert_exactly_once_in_order, free_port, handled_lines
from conftest import Cli

pytestmark = pytest.mark.integration

WORKLOAD = "-workers 6 -claim indexed -orders 40 -work-ms 0-1 -poll-interval 0.05"


def test_processes_two_spread_four_producer_sessions_and_the_audit_holds(
    cli: Cli, db: psycopg.Connection
) -> None:
    """-producers 4 over --processes 2: two sessions in each process, each process's enqueues > 0
    and together every message once; exactly once and in order; produced is what the rate offered."""
    result = cli.run(
        f"-fill-db 3000 -rate 500 -producers 4 {WORKLOAD} --processes 2 -audit-window 0.5 -json out.json"
    )  # 6 s: a loaded CI host's window may take 0.4 s to judge, and the next waits ten times that
    assert result.returncode == 0, result.stdout + result.stderr
    report = json.loads((cli.workdir / "out.json").read_text())
    assert_exactly_once_in_order(db, 3000, delmsg=False)
    assert report["audit"]["verdict"] == "pass", report["audit"]
    live = report["live_audit"]  # judged as it ran, from the processes' reports
    assert live is not None and live["windows_closed"] >= 2 and not live["failed_windows"], live
    assert report["produced"] == report["processed"] == 3000, report["notes"]
    runners = report["producer"]["enqueue"]["runners"]
    assert sorted(r["runner"].split("@")[0] for r in runners) == ["p1", "p2"], runners
    assert all(r["sessions"] == 2 and r["written"] > 0 for r in runners), runners
    assert sum(r["written"] for r in runners) == 3000
    offered = sum(s["offered"] or 0 for s in report["timeline"])
    arrived = sum(s["arrived"] for s in report["timeline"])
    assert offered == arrived == 3000, report["timeline"]
    # one process writes a group: a group's msg_ids and enqueue times rise together
    back = db.execute(
        """select count(*) from (select time_added < lag(time_added) over
             (partition by queue_type, order_id order by msg_id) as back from msg_queue) t where back"""
    ).fetchone()
    assert back is not None and back[0] == 0


def test_spread_enqueue_figures_count_every_message(cli: Cli) -> None:
    """The JSON's producer.enqueue, merged from the processes' reports: every enqueue timed, its
    parts, each second's enqueue p99; the summary's enqueue row."""
    result = cli.run(f"-fill-db 1200 -rate 600 -producers 3 {WORKLOAD} --processes 2 -json out.json")
    assert result.returncode == 0, result.stdout + result.stderr
    report = json.loads((cli.workdir / "out.json").read_text())
    enqueue = report["producer"]["enqueue"]
    assert enqueue["sessions"] == 3 and enqueue["count"] == 1200, enqueue
    assert [r["sessions"] for r in enqueue["runners"]] == [2, 1], enqueue["runners"]
    figures = enqueue["latency_ms"]
    assert 0 < figures["p50"] <= figures["p95"] <= figures["p99"] <= figures["max"], figures
    assert abs(sum(enqueue["parts"].values()) - 1) < 0.01, enqueue["parts"]
    seconds = [s["enqueue_p99_ms"] for s in report["timeline"] if s["arrived"]]
    assert seconds and all(p is not None and p > 0 for p in seconds), report["timeline"]
    assert report["server_cost"]["roles"]["producer"]["transactions_per_msg"] == 1.0
    text = " ".join(result.stdout.split())
    assert "enqueue ms" in text and "3 sessions: p50" in text, text


def test_a_lost_producing_process_stops_its_groups_enqueues_and_the_audit_stays_exact(
    cli: Cli, db: psycopg.Connection
) -> None:
    """SIGKILL the second of two producing processes mid-run: its groups get no more enqueues (a
    note says so), the other finishes, and the audit counts 1..produced exactly: nothing missing or
    repeated, the lost groups' owed arrivals written after the run, left pending."""
    master = cli.start(
        f"-fill-db 3000 -rate 600 -producers 2 {WORKLOAD} --processes 2 -audit-window 0.5 -json out.json"
    )
    try:
        log = cli.workdir / "msg_queue.p2.log"
        deadline = time.monotonic() + 45
        while time.monotonic() < deadline and (not log.exists() or len(handled_lines(log)) < 200):
            time.sleep(0.2)
        pid = int(log.read_text().split("(pid ", 1)[1].split(")", 1)[0])
        os.kill(pid, signal.SIGKILL)
        out, err = master.communicate(timeout=90)
    finally:
        if master.poll() is None:
            master.kill()
            master.communicate(timeout=10)
    assert master.returncode == 0, out + err
    report = json.loads((cli.workdir / "out.json").read_text())
    notes = report["notes"]
    assert any("p2@" in note and "enqueues stopped" in note for note in notes), notes
    audit = report["audit"]
    assert audit["verdict"] == "pass" and audit["missing"] == audit["duplicates"] == 0, audit
    produced = report["produced"]
    assert audit["left_behind"] > 0 and produced <= 3000, audit
    journal = [r[0] for r in db.execute("select msg_id from msg_journal")]
    pending = [r[0] for r in db.execute("select msg_id from msg_queue where status = 'N'")]
    assert len(journal) == len(set(journal)) and not set(journal) & set(pending)
    assert sorted(journal + pending) == list(range(1, produced + 1))
    # judged live: the lost process held the watermark below what it owed, so no window found
    # its unwritten ids lost
    live = report["live_audit"]
    assert live["windows_closed"] >= 2 and not live["failed_windows"], live
    assert 0 < live["through_msg_id"] <= produced, live


def test_master_and_two_workers_over_tcp_spread_the_producers(
    cli: Cli, db: psycopg.Connection, tmp_path: Path
) -> None:
    """--master with two --worker processes (one with its own PGMQ_SIM_DSN): each enqueues its
    groups' arrivals on its own DSN; together every message once, in order."""
    port = free_port()
    master = cli.start(
        f"-fill-db 1600 -rate 800 -producers 2 {WORKLOAD} --master --expect-workers 2"
        f" --master-bind-port {port} -json run.json"
    )
    workers = cli.tcp_workers(port, tmp_path)
    try:
        out, err = master.communicate(timeout=90)
        ends = [w.communicate(timeout=30) for w in workers]
    finally:
        for proc in (master, *workers):
            if proc.poll() is None:
                proc.kill()
                proc.communicate(timeout=10)
    assert master.returncode == 0, out + err
    assert all(w.returncode == 0 for w in workers), ends
    report = json.loads((cli.workdir / "run.json").read_text())
    assert_exactly_once_in_order(db, 1600, delmsg=False)
    assert report["audit"]["verdict"] == "pass" and report["produced"] == 1600, report["notes"]
    runners = report["producer"]["enqueue"]["runners"]
    assert [r["sessions"] for r in runners] == [1, 1] and all(r["written"] > 0 for r in runners), runners
    assert sum(r["written"] for r in runners) == report["producer"]["enqueue"]["count"] == 1600


def test_a_rate_profile_spreads_its_producers_as_a_constant_rate_does(
    cli: Cli, db: psycopg.Connection
) -> None:
    """-rate-profile step:300,900/1s over --processes 2: each process draws the arrivals by the same
    profile (its numbers sent in the plan) and enqueues its groups'; the first second offers what
    the profile has due in it, and together every message once, in order."""
    result = cli.run(
        f"-fill-db 1500 -rate-profile step:300,900/1s -producers 2 {WORKLOAD} --processes 2 -json out.json"
    )
    assert result.returncode == 0, result.stdout + result.stderr
    report = json.loads((cli.workdir / "out.json").read_text())
    assert_exactly_once_in_order(db, 1500, delmsg=False)
    assert report["audit"]["verdict"] == "pass", report["audit"]
    assert report["produced"] == report["processed"] == 1500, report["notes"]
    runners = report["producer"]["enqueue"].get("runners")
    assert runners, report["producer"]  # before: the producer stayed on the master (no runners)
    assert [r["sessions"] for r in runners] == [1, 1] and all(r["written"] > 0 for r in runners), runners
    assert sum(r["written"] for r in runners) == 1500
    offered = [s["offered"] or 0 for s in report["timeline"]]
    assert offered[0] == 300 and sum(offered) == 1500, offered  # 300/s in second 0, then 900/s


def test_a_replayed_profile_spreads_from_the_rows_the_master_read(cli: Cli, db: psycopg.Connection) -> None:
    """A CSV replay over --processes 2 (no -fill-db: the replay's end ends the run): the processes
    follow the rows the master read, and the run offers and writes the replay's messages, each
    once."""
    (cli.workdir / "day.csv").write_text("second,rate\n0,300\n1,600\n")
    result = cli.run(f"-rate-profile day.csv -producers 2 {WORKLOAD} --processes 2 -json out.json")
    assert result.returncode == 0, result.stdout + result.stderr
    report = json.loads((cli.workdir / "out.json").read_text())
    runners = report["producer"]["enqueue"].get("runners")
    assert runners and all(r["written"] > 0 for r in runners), report["producer"]
    offered = sum(s["offered"] or 0 for s in report["timeline"])
    assert offered == 900, report["timeline"]  # 300 + 600: the rows as the master read them
    # the replay's end ends the run: an enqueue in flight then may be cut off (above the last landed)
    produced, written = report["produced"], sum(r["written"] for r in runners)
    assert 890 <= produced <= 900 and produced - 10 <= written <= produced, (produced, runners)
    assert report["audit"]["verdict"] == "pass", report["audit"]
    journal = [r[0] for r in db.execute("select msg_id from msg_journal")]
    pending = [r[0] for r in db.execute("select msg_id from msg_queue where status = 'N'")]
    assert sorted(journal + pending) == list(range(1, produced + 1))  # each once; some left pending


@pytest.mark.parametrize(
    ("kind", "flags", "said"),
    [
        ("phases", ["-phase", "name=a duration=1.5 rate=200; name=b duration=1.5 rate=400"], "phases"),
        ("sweep", ["-sweep", "rate=200,400", "-step", "1.5", "-settle", "0.5"], "a sweep"),
        ("delmsg", ["-rate", "300", "-duration", "2", "-delmsg", "-no-audit"], "-delmsg with -no-audit"),
    ],
)
def test_what_sets_the_rate_on_the_master_keeps_the_producer_there_and_says_so_in_one_line(
    cli: Cli, kind: str, flags: list[str], said: str
) -> None:
    """Phases and a sweep set their rates on the master as they go, and -delmsg -no-audit leaves no
    row to say what landed: under --processes their producer sessions stay on the master, one note
    says why, and the run (and its audit, where there is one) is as before."""
    producers = 1 if kind == "delmsg" else 2  # several sessions with no audit are refused
    argv = [*cli.command(f"-producers {producers} {WORKLOAD} --processes 2 -json out.json"), *flags]
    result = cli.run_argv(argv)
    assert result.returncode == 0, result.stdout + result.stderr
    report = json.loads((cli.workdir / "out.json").read_text())
    kept = [note for note in report["notes"] if "stay on the master" in note]
    assert len(kept) == 1 and said in kept[0], report["notes"]
    assert not report["producer"]["enqueue"].get("runners"), report["producer"]
    assert report["producer"]["written"] > 0, report["producer"]
    if kind != "delmsg":
        assert report["audit"]["verdict"] == "pass", report["audit"]
