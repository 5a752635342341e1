"""The server's own reasons on a real server: the timeouts set on the run's role or database are read
before the run (a run no message could pass is refused in one line, one some would pass is said and
run), a policy that ends the workers' sessions is the limit and one fault row, never an outage, and
statement and lock timeouts met during a run are ridden through, counted and named, with exactly
once and order proven."""

from __future__ import annotations

import json
import time
import uuid
from collections.abc import Iterator

import psycopg
import pytest
from checks import wait_for_handled
from conftest import Cli, assert_one_line_error
from psycopg.conninfo import conninfo_to_dict
from test_designs import OUTBOX, folder

from pgmq_sim.model.quantities import count_text

pytestmark = pytest.mark.integration


@pytest.fixture
def role(db: psycopg.Connection, dsn: str) -> Iterator[tuple[str, str]]:
    """A plain role of this test's own, which may create tables in the test's database: its name and
    a DSN that logs in as it."""
    name = f"queue_{uuid.uuid4().hex[:8]}"
    db.execute(f"create role {name} login")
    db.execute(f"grant all on schema public to {name}")
    params = conninfo_to_dict(dsn)  # a URL: the command line splits its arguments on spaces
    yield name, f"postgresql://{name}@/{params['dbname']}?host={params['host']}&port={params['port']}"
    db.execute(f"drop owned by {name}")
    db.execute(f"drop role {name}")


def said(result: object) -> str:
    return " ".join(str(result).split())


def test_an_idle_in_transaction_timeout_on_the_runs_role_is_read_before_and_is_the_limit_after(
    cli: Cli, db: psycopg.Connection, role: tuple[str, str]
) -> None:
    """`ALTER ROLE ... SET idle_in_transaction_session_timeout = '5ms'` with the work inside the
    claim's transaction: work of 10-20 ms is refused before anything changes; work of 1-10 ms is
    said in one line and run, and the server ending about half the sessions is the limit
    `server-policy` naming the setting and where it is set, and one fault row, not 250 outages."""
    name, role_dsn = role
    db.execute(f"alter role {name} set idle_in_transaction_session_timeout = '5ms'")
    refused = cli.run("-dsn", role_dsn, "-fill-db 100 -workers 4 -work-ms 10-20 -claim indexed", dsn=False)
    assert_one_line_error(
        refused,
        2,
        f"idle_in_transaction_session_timeout = 5ms (ALTER ROLE {name} SET) would end every",
        "-tx split",
    )
    assert db.execute("select to_regclass('msg_queue')").fetchone() == (None,)  # nothing changed
    result = cli.run(
        "-dsn", role_dsn, "-fill-db 80 -workers 4 -work-ms 1-10 -claim indexed -json out.json", dsn=False
    )
    assert result.returncode == 0, result.stdout + result.stderr
    doc = json.loads((cli.workdir / "out.json").read_text())
    out = said(result.stdout)
    assert (
        f"note: idle_in_transaction_session_timeout = 5ms (ALTER ROLE {name} SET) is shorter than the work of"
        " about 56% of the claims" in out
    ), out
    read = doc["server_timeouts"]
    assert (
        read["role"] == name and read["settings"]["idle_in_transaction_session_timeout"]["source"] == "user"
    )
    assert read["settings"]["idle_in_transaction_session_timeout"]["ms"] == 5
    assert doc["audit"]["verdict"] == "pass" and doc["processed"] == 80
    (met,) = doc["server_reasons"]
    assert (met["cause"], met["sqlstate"]) == ("idle-in-transaction-timeout", "25P03")
    assert met["sessions_ended"] == met["count"] == doc["connections_lost"] > 10
    limit = doc["limit"]
    assert limit["resource"] == "server-policy", limit
    assert (
        f"the server's idle_in_transaction_session_timeout = 5ms (ALTER ROLE {name} SET) ended"
        f" {count_text(met['count'])} session(s) of 4 workers" in limit["evidence"]
    ), limit
    (row,) = doc["faults"]  # one row for the cause, no outage
    assert (row["kind"], row["count"], row["sessions"]) == ("server-policy", met["count"], met["count"])
    assert "terminating connection due to idle-in-transaction timeout (25P03)" in row["detail"]
    fix = next(line for line in doc["advice"] if line.startswith("limit server-policy:"))
    assert "-tx split" in fix and f"ALTER ROLE {name} SET idle_in_transaction_session_timeout = '1s'" in fix
    assert out.count("│ fault ") == 1 and "outage" not in out


def test_statement_and_lock_timeouts_met_during_a_run_are_ridden_through_and_named(
    cli: Cli, db: psycopg.Connection, dsn: str, role: tuple[str, str]
) -> None:
    """statement_timeout on the role, lock_timeout on the database: a completion that sleeps now and
    then (1 in 20, 0.6 s) is canceled by the first, and claims waiting on another session's table
    lock are canceled by the second. Each is rolled back and tried again: the run completes, the
    audit passes, no connection is lost, and each cause is one row naming its setting and source."""
    name, role_dsn = role
    database = conninfo_to_dict(dsn)["dbname"]
    db.execute(f"alter role {name} set statement_timeout = '300ms'")
    db.execute(f"alter database {database} set lock_timeout = '100ms'")
    slow = (
        OUTBOX["complete.sql"]
        + " and (select true from pg_sleep(case when random() < 0.05 then 0.6 else 0 end))"
    )
    folder(cli.workdir, **{"complete.sql": slow})
    cli = Cli(role_dsn, cli.workdir)  # the run logs in as the role
    proc = cli.start(
        "-queue ./outbox -fill-db 400 -workers 4 -orders 20 -work-ms 0-2",
        "-poll-interval 0.05 -json out.json",
    )  # fmt: skip
    bursts = 0
    try:
        wait_for_handled(cli.workdir / "msg_queue.log", 20)
        with psycopg.connect(dsn, application_name="report job") as other:
            while proc.poll() is None and bursts < 3:
                other.execute("set local lock_timeout = '5s'")
                other.execute("lock table outbox in exclusive mode")
                bursts += 1
                time.sleep(0.4)
                other.rollback()
                time.sleep(0.2)
        stdout, stderr = proc.communicate(timeout=120)
    finally:
        if proc.poll() is None:
            proc.kill()
    assert proc.returncode == 0 and bursts >= 1, stdout + stderr
    doc = json.loads((cli.workdir / "out.json").read_text())
    assert doc["audit"]["verdict"] == "pass" and doc["processed"] == 400 and doc["connections_lost"] == 0
    met = {m["cause"]: m for m in doc["server_reasons"]}
    assert set(met) == {"statement-timeout", "lock-timeout"}, met
    assert met["statement-timeout"]["sqlstate"] == "57014" and met["lock-timeout"]["sqlstate"] == "55P03"
    assert met["statement-timeout"]["sessions_ended"] == met["lock-timeout"]["sessions_ended"] == 0
    rows = {row["detail"].split(" = ")[0]: row for row in doc["faults"]}
    assert set(rows) == {"statement_timeout", "lock_timeout"} and {r["kind"] for r in rows.values()} == {
        "server-policy"
    }
    assert rows["statement_timeout"]["detail"].startswith(
        f"statement_timeout = 300ms (ALTER ROLE {name} SET)"
    )
    assert rows["lock_timeout"]["detail"].startswith(f"lock_timeout = 100ms (ALTER DATABASE {database} SET)")
    assert rows["lock_timeout"]["count"] == met["lock-timeout"]["count"]
    log = (cli.workdir / "msg_queue.log").read_text()
    assert "the server ended a statement: canceling statement due to statement timeout (57014)" in log


def test_a_3ms_statement_timeout_on_the_database_spares_the_prefill_and_is_the_teams_own(
    cli: Cli, db: psycopg.Connection, dsn: str
) -> None:
    """`ALTER DATABASE ... SET statement_timeout = '3ms'`: the prefill (COPY, the tool's own work)
    survives it, whole; the workers' set-up (their PREPAREs) too; their claims and completions are
    the team's and ride through it. The run completes, or is judged by the setting, never by
    what it measured before it died."""
    database = conninfo_to_dict(dsn)["dbname"]
    db.execute(f"alter database {database} set statement_timeout = '3ms'")
    result = cli.run("-fill-db 4000 -workers 6 -orders 50 -work-ms 0 -claim indexed -json out.json")
    doc = json.loads((cli.workdir / "out.json").read_text())
    assert doc["produced"] == 4000, said(result.stdout + result.stderr)  # the COPY of 4000 rows: whole
    assert (
        f"note: statement_timeout = 3ms (ALTER DATABASE {database} SET) is shorter than some of the team's"
        " statements will take" in said(result.stdout)
    ), result.stdout
    setting = doc["server_timeouts"]["settings"]["statement_timeout"]
    assert (setting["ms"], setting["set_by"]) == (3, f"ALTER DATABASE {database} SET")
    if result.returncode != 0:  # died: judged by what ended it, naming the setting and where it is set
        assert doc["limit"]["resource"] == "server-policy", doc["limit"]
        assert f"ALTER DATABASE {database} SET" in doc["error"], doc["error"]
        return
    assert doc["audit"]["verdict"] == "pass" and doc["processed"] == 4000
    assert doc["limit"]["resource"] not in ("workers", "polling", "none") or doc["error"] is None


def test_a_3ms_statement_timeout_on_the_database_is_ridden_through_by_a_rate_run(
    cli: Cli, db: psycopg.Connection, dsn: str
) -> None:
    """The same setting during a run at a rate: the producer's enqueues, the claims and the
    completions it cancels are rolled back, counted and tried again; the tool's set-up and its
    record are not canceled; the run lasts its duration and the audit passes."""
    database = conninfo_to_dict(dsn)["dbname"]
    db.execute(f"alter database {database} set statement_timeout = '3ms'")
    result = cli.run("-duration 4 -rate 200 -workers 6 -orders 50 -work-ms 0-1 -claim indexed -json out.json")
    doc = json.loads((cli.workdir / "out.json").read_text())
    assert result.returncode == 0, said(result.stdout + result.stderr)
    assert doc["outcome"] == "completed" and doc["error"] is None and doc["ended_by"] is None
    assert doc["audit"]["verdict"] == "pass" and doc["produced"] >= doc["processed"] > 0
    assert doc["elapsed_s"] >= 4
