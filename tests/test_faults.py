"""Faults on a server the test starts and controls: the run rides through, or ends with a report.

Each run here is a real process against a LocalPostgres of the test's own, which the
test kills backends of, restarts, freezes and times out; the audit (read here from the
database, not from the tool) proves nothing was lost or repeated.
"""

from __future__ import annotations

import json
import signal
import subprocess
import time
from collections.abc import Callable
from pathlib import Path

import psycopg
import pytest
from checks import assert_exactly_once_in_order, wait_for_handled, wait_until_quiet
from conftest import Cli

from pgmq_sim.embedded.postgres import LocalPostgres
from pgmq_sim.model.quantities import seconds_text

pytestmark = pytest.mark.faults


def finish(proc: subprocess.Popen[str], timeout: float = 120) -> subprocess.CompletedProcess[str]:
    try:
        stdout, stderr = proc.communicate(timeout=timeout)
    finally:
        if proc.poll() is None:
            proc.kill()
    return subprocess.CompletedProcess(proc.args, proc.returncode, stdout, stderr)


def terminate_tool_backends(dsn: str) -> int:
    with psycopg.connect(dsn, autocommit=True) as conn:
        row = conn.execute(
            "select count(pg_terminate_backend(pid)) from pg_stat_activity"
            " where application_name like 'pgmq-sim%' and pid <> pg_backend_pid()"
        ).fetchone()
    return int(row[0]) if row else 0


@pytest.fixture
def own_cli(own_pg: LocalPostgres, tmp_path: Path) -> Cli:
    return Cli(own_pg.dsn, tmp_path)


def run_through(
    cli: Cli, fault: Callable[[], None], *args: str
) -> tuple[subprocess.CompletedProcess[str], dict]:
    proc = cli.start(*args, "-json out.json")
    wait_for_handled(cli.workdir / "msg_queue.log", 50)
    fault()
    result = finish(proc)
    return result, json.loads((cli.workdir / "out.json").read_text())


RATE_RUN = "-fill-db 1500 -rate 300 -workers 6 -orders 3 -work-ms 1-3"


def test_worker_connections_killed_mid_run(own_cli: Cli, own_pg: LocalPostgres) -> None:
    def kill_three_times() -> None:
        for _ in range(3):
            assert terminate_tool_backends(own_pg.dsn) > 0
            time.sleep(0.7)

    result, doc = run_through(own_cli, kill_three_times, RATE_RUN, "-poll-interval 0.05")
    assert result.returncode == 0, result.stdout + result.stderr
    assert doc["outcome"] == "completed" and doc["audit"]["verdict"] == "pass"
    assert doc["connections_lost"] >= 6 and doc["reconnects"] >= 6
    # a commit whose answer was lost is counted once the journal shows it landed
    assert doc["processed"] == 1500 == sum(w["processed"] for w in doc["workers"])
    assert "lost" in " ".join(result.stdout.split())
    # named by what the server said, and by the reconnect it took at once: a command, no shutdown
    met = {m["cause"]: m for m in doc["server_reasons"]}
    assert met["terminated"]["sqlstate"] == "57P01" and "shutdown" not in met, met
    assert met["terminated"]["sessions_ended"] >= 6
    with psycopg.connect(own_pg.dsn, autocommit=True) as db:
        assert_exactly_once_in_order(db, 1500, delmsg=False)


def test_server_restart_mid_run(own_cli: Cli, own_pg: LocalPostgres) -> None:
    result, doc = run_through(own_cli, own_pg.restart, RATE_RUN, "-delmsg -poll-interval 0.05")
    assert result.returncode == 0, result.stdout + result.stderr
    assert doc["outcome"] == "completed" and doc["audit"]["verdict"] == "pass"
    assert doc["connections_lost"] >= 6 and doc["produced"] == 1500
    # the same message as a termination, but the server then refused the reconnects: its shutdown
    met = {m["cause"]: m for m in doc["server_reasons"]}
    assert met["shutdown"]["sqlstate"] == "57P01" and met["shutdown"]["sessions_ended"] >= 6, met
    with psycopg.connect(own_pg.dsn, autocommit=True) as db:
        assert_exactly_once_in_order(db, 1500, delmsg=True)
        # the producer's retried batches wrote no message twice
        assert db.execute("select count(*) from msg_queue").fetchone()[0] == 0


def test_server_restart_during_notify_wakeup(own_cli: Cli, own_pg: LocalPostgres) -> None:
    result, doc = run_through(own_cli, own_pg.restart, RATE_RUN, "-wakeup notify -poll-interval 1")
    assert result.returncode == 0, result.stdout + result.stderr
    assert doc["audit"]["verdict"] == "pass"


def test_idle_session_timeout_shorter_than_the_run(own_cli: Cli, own_pg: LocalPostgres) -> None:
    """Sessions idle longer than 1 s are ended by the server: the tool's own session must not sit
    idle through the run, and workers that poll longer than that reconnect."""
    with psycopg.connect(own_pg.dsn, autocommit=True) as db:
        db.execute("alter system set idle_session_timeout = '1s'")
        db.execute("select pg_reload_conf()")
    result = own_cli.run(
        "-fill-db 400 -rate 100 -workers 3 -work-ms 1-3 -poll-interval 1.5 -json out.json", timeout=120
    )
    assert result.returncode == 0, result.stdout + result.stderr
    doc = json.loads((own_cli.workdir / "out.json").read_text())
    assert doc["audit"]["verdict"] == "pass" and doc["processed"] == 400
    assert doc["connections_lost"] > 0  # the workers' idle polls did time out
    # said before the run, with where it is set; met, it is the server's policy: one row, no outage
    out = " ".join(result.stdout.split())
    assert "note: idle_session_timeout = 1s (the server's configuration file (" in out
    assert "postgresql.auto.conf" in out and "-poll-interval 1.5 s" in out
    (row,) = doc["faults"]
    assert row["kind"] == "server-policy" and row["detail"].startswith("idle_session_timeout = 1s"), row
    assert "terminating connection due to idle-session timeout (57P05)" in row["detail"]


def test_frozen_server_is_named_and_ends_with_exit_3(own_cli: Cli, own_pg: LocalPostgres) -> None:
    proc = own_cli.start(RATE_RUN, "-poll-interval 0.05 -stall-timeout 3 -json out.json")
    try:
        wait_for_handled(own_cli.workdir / "msg_queue.log", 50)
        own_pg.freeze()
        began = time.monotonic()
        result = finish(proc, timeout=60)
        took = time.monotonic() - began
    finally:
        own_pg.thaw()
    assert result.returncode == 3, result.stdout + result.stderr
    assert took < 3 + 20, took
    doc = json.loads((own_cli.workdir / "out.json").read_text())
    assert doc["outcome"] == "server-unresponsive"
    assert "did not answer" in doc["error"] and "did not answer" in result.stderr
    assert "claim" not in doc["error"]  # the claim SQL is not blamed
    assert (own_cli.workdir / "msg_queue.log").read_text().splitlines()[-1].endswith("exit 3")


def test_ctrl_c_against_a_frozen_server_ends_within_seconds(own_cli: Cli, own_pg: LocalPostgres) -> None:
    proc = own_cli.start(RATE_RUN, "-poll-interval 0.05 -stall-timeout 60 -json out.json")
    try:
        wait_for_handled(own_cli.workdir / "msg_queue.log", 50)
        own_pg.freeze()
        wait_until_quiet(own_cli.workdir / "msg_queue.log")  # the workers are stuck on the server
        began = time.monotonic()
        proc.send_signal(signal.SIGINT)
        result = finish(proc, timeout=30)
        took = time.monotonic() - began
    finally:
        own_pg.thaw()
    assert result.returncode == 130, result.stdout + result.stderr
    assert took < 12, took
    assert "Traceback" not in result.stderr
    doc = json.loads((own_cli.workdir / "out.json").read_text())
    assert doc["outcome"] == "interrupted"


def test_frozen_then_thawed_within_the_timeout_completes(own_cli: Cli, own_pg: LocalPostgres) -> None:
    def freeze_briefly() -> None:
        own_pg.freeze()
        time.sleep(2)
        own_pg.thaw()

    result, doc = run_through(own_cli, freeze_briefly, RATE_RUN, "-poll-interval 0.05 -stall-timeout 15")
    assert result.returncode == 0, result.stdout + result.stderr
    assert doc["audit"]["verdict"] == "pass"


def test_server_gone_past_reconnect_timeout_ends_with_a_report(own_cli: Cli, own_pg: LocalPostgres) -> None:
    result, doc = run_through(own_cli, own_pg.stop, RATE_RUN, "-poll-interval 0.05 -reconnect-timeout 2")
    assert result.returncode == 3, result.stdout + result.stderr
    assert doc["outcome"] == "server-lost" and "reconnect" in doc["error"]
    assert doc["audit"] is None and any("audit skipped" in n for n in doc["notes"])
    assert "server-lost" in result.stdout


def test_restart_server_fault_crash_restarts_a_dsn_server(own_cli: Cli) -> None:
    result = own_cli.run(
        "-fill-db 900 -rate 450 -workers 6 -orders 3 -json out.json",
        "-work-ms 1-3 -poll-interval 0.05",
        "-chaos restart-server@1s -chaos-allow-restart",
    )
    assert result.returncode == 0, result.stdout + result.stderr
    doc = json.loads((own_cli.workdir / "out.json").read_text())
    assert [f["kind"] for f in doc["faults"]] == ["restart-server"]
    assert doc["connections_lost"] >= 6 and doc["audit"]["verdict"] == "pass"
    # the postmaster's reset after a backend was killed: the others were told of the crash
    assert "crash" in {m["cause"] for m in doc["server_reasons"]}, doc["server_reasons"]


def test_a_server_restart_behind_a_pooler_that_refuses_logins_meanwhile_is_one_outage_per_worker(
    tmp_path: Path,
) -> None:
    """PgBouncer (transaction pooling, pool 4) in front of a server restarted mid-run; for
    server_login_retry (3 s) after that it accepts the workers' logins and refuses their
    statements. Each worker loses its connection once, waits the refusals out on its backoff and
    comes back: nothing lost or repeated, no reconnect storm, no pooler cancel key taken for a pid."""
    from pooler import PgBouncer, skip_reason

    reason = skip_reason()
    if reason:
        print(reason)
        pytest.skip(reason)
    with LocalPostgres(tcp=True, host="127.0.0.1") as server:
        assert server.password is not None
        password = server.password
        with PgBouncer(
            "127.0.0.1", server.port, "postgres", server.password, "postgres", pool_size=4,
            extra={"server_login_retry": "3"},
        ) as bouncer:  # fmt: skip
            bouncer.start()
            cli = Cli(bouncer.dsn_for(), tmp_path)
            proc = cli.start(
                "-duration 14 -rate 150 -workers 6 -orders 6 -claim indexed -work-ms 1-3 -poll-interval 0.05",
                "-json out.json",
            )
            wait_for_handled(cli.workdir / "msg_queue.log", 200)
            server.restart()
            result = finish(proc)
    assert result.returncode == 0, result.stdout + result.stderr
    doc = json.loads((cli.workdir / "out.json").read_text())
    assert doc["outcome"] == "completed" and doc["audit"]["verdict"] == "pass", doc["audit"]
    assert 1 <= doc["connections_lost"] <= 6 and doc["reconnects"] <= 6, doc["connections_lost"]
    log = (cli.workdir / "msg_queue.log").read_text()
    assert "still fails" in log and "back after" in log  # the refusals were met and waited out
    assert (
        "backend pid -" not in log
        and "reconnected (through the pooler, which hides the backend's pid)" in log
    )
    assert password not in log + result.stdout + result.stderr  # the refusals are quoted, scrubbed


def test_an_outage_the_runs_end_cuts_off_is_reported_with_its_seconds_the_limit_and_the_shortfall(
    tmp_path: Path,
) -> None:
    """Through PgBouncer (transaction pooling, -pooler-admin), the server restarted about 3 s into
    a 6 s run: the pooler's server_login_retry (7 s) keeps the path down past the run's end. The
    outage is a fault row with its seconds, not recovered by the end of the run; the limit is
    `outage`, never none; the producer's shortfall is a figure; the audit still passes."""
    from pooler import PgBouncer, skip_reason

    reason = skip_reason()
    if reason:
        pytest.skip(reason)
    with LocalPostgres(tcp=True, host="127.0.0.1") as server:
        assert server.password is not None
        with PgBouncer(
            "127.0.0.1", server.port, "postgres", server.password, "postgres", pool_size=4,
            extra={"server_login_retry": "7"},
        ) as bouncer:  # fmt: skip
            cli = Cli(bouncer.dsn_for(), tmp_path)
            proc = cli.start(
                "-duration 6 -rate 150 -workers 4 -orders 6 -claim indexed -work-ms 1-3 -poll-interval 0.05",
                f"-pooler-admin {bouncer.admin_dsn} -json out.json -v",
            )
            wait_for_handled(cli.workdir / "msg_queue.log", 420)
            server.restart()
            result = finish(proc)
    assert result.returncode == 0, result.stdout + result.stderr
    doc = json.loads((cli.workdir / "out.json").read_text())
    assert doc["outcome"] == "completed" and doc["audit"]["verdict"] == "pass", doc["audit"]
    (outage,) = [f for f in doc["faults"] if f.get("outage_s")]
    assert outage["kind"] == "outage" and outage["recovered"] is False, outage
    assert outage["outage_s"] >= 1.5 and outage["at_s"] + outage["outage_s"] == pytest.approx(
        doc["elapsed_s"], abs=0.01
    ), (outage, doc["elapsed_s"])
    limit = doc["limit"]
    assert limit["resource"] == "outage", limit
    said = f"out {seconds_text(outage['outage_s'])}, not recovered by the end of the run"
    assert said in limit["evidence"], limit
    producer = doc["producer"]
    assert producer["offered"] >= 850 and producer["on_time"] <= producer["offered"] - 150, producer
    assert producer["stalled_s"] >= 1 and producer["written"] < producer["offered"], producer
    said = " ".join(result.stdout.split())
    assert "outage: not injected" in said and "not recovered by the end of the run" in said, said[-3000:]
    assert f"written on time ({producer['on_time_share']:.0%})" in said, said[-3000:]
