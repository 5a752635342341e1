"""What the tool promises the person who runs it: it destroys nothing it did not create, and
whatever ends a run, the summary, the JSON and the log's last line say what happened."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import time
import uuid
from pathlib import Path

import psycopg
import pytest
from checks import free_port, wait_for_handled
from conftest import REPO, Cli, assert_one_line_error
from psycopg.conninfo import conninfo_to_dict

pytestmark = pytest.mark.integration


# -- destroy nothing --------------------------------------------------------------------------


def test_a_foreign_table_is_refused_and_kept(cli: Cli, db: psycopg.Connection) -> None:
    db.execute("create table msg_queue (msg_id int, precious text)")
    db.execute("insert into msg_queue values (1, 'keep me')")
    (cli.workdir / "msg_queue.log").write_text("the last run's log\n")
    result = cli.run("-fill-db 20 -workers 3 -work-ms 0")
    assert_one_line_error(result, 2, "msg_queue", "not created by pgmq-sim", "-replace-tables")
    assert db.execute("select precious from msg_queue").fetchall() == [("keep me",)]
    assert (cli.workdir / "msg_queue.log").read_text() == "the last run's log\n"
    # -no-audit does not make a foreign journal fair game either
    db.execute("drop table msg_queue")
    db.execute("create table msg_journal (note text)")
    assert_one_line_error(cli.run("-fill-db 20 -workers 3 -no-audit"), 2, "msg_journal")
    assert db.execute("select to_regclass('msg_journal')").fetchone()[0] is not None
    # every audited run makes its failures table now (the latency account reads it): a foreign one stays
    db.execute("drop table msg_journal")
    db.execute("create table msg_failures (note text)")
    assert_one_line_error(cli.run("-fill-db 20 -workers 3"), 2, "msg_failures")
    assert db.execute("select to_regclass('msg_failures')").fetchone()[0] is not None
    # said explicitly, the tables are replaced
    assert cli.run("-fill-db 20 -workers 3 -work-ms 0 -replace-tables").returncode == 0


def test_a_tool_table_owned_by_another_role_is_refused_naming_its_owner(
    cli: Cli, db: psycopg.Connection, dsn: str
) -> None:
    """A run as the superuser makes the tool's tables; a run as a plain role then could not replace
    them ('permission denied for table pgmq_sim_run' halfway): it is refused before anything
    changes, in one line naming the table, its owner and the fix, and the first run's data stay."""
    assert cli.run("-fill-db 20 -workers 3 -work-ms 0").returncode == 0
    owner = db.execute("select current_user").fetchone()[0]
    role = f"plain_{uuid.uuid4().hex[:8]}"
    db.execute(f"create role {role} login")
    db.execute(f"grant all on schema public to {role}")
    try:
        params = conninfo_to_dict(dsn)
        plain = f"postgresql://{role}@/{params['dbname']}?host={params['host']}&port={params['port']}"
        result = cli.run("-dsn", plain, "-fill-db 20 -workers 3", dsn=False)
        assert_one_line_error(
            result, 2, "msg_failures", "pgmq_sim_run", f"belongs to role {owner}", f"OWNER TO {role}"
        )
        assert db.execute("select count(*) from msg_queue").fetchone() == (20,)
    finally:
        db.execute(f"drop owned by {role}")
        db.execute(f"drop role {role}")


def test_a_foreign_notify_function_is_refused_and_kept(cli: Cli, db: psycopg.Connection) -> None:
    body = "begin return null; end"
    db.execute(f"create function msg_queue_notify() returns trigger language plpgsql as $$ {body} $$")
    db.commit()
    assert cli.run("-fill-db 20 -workers 3 -work-ms 0").returncode == 0  # poll: the function is not touched
    result = cli.run("-fill-db 20 -workers 3 -work-ms 0 -wakeup notify")
    assert_one_line_error(result, 2, "msg_queue_notify", "not created by pgmq-sim", "-replace-tables")
    kept = db.execute("select prosrc from pg_proc where proname = 'msg_queue_notify'").fetchone()
    assert kept is not None and kept[0].strip() == body
    # the tool's own function is replaced by its next run without a word
    db.execute("drop function msg_queue_notify()")
    db.commit()
    for _ in range(2):
        assert cli.run("-fill-db 20 -workers 3 -work-ms 0 -wakeup notify").returncode == 0


def test_the_tool_replaces_its_own_tables_without_asking(cli: Cli, db: psycopg.Connection) -> None:
    assert cli.run("-fill-db 20 -workers 3 -work-ms 0").returncode == 0
    comment = db.execute("select obj_description('msg_queue'::regclass, 'pg_class')").fetchone()[0]
    assert comment.startswith("pgmq-sim:")
    result = cli.run("-fill-db 30 -workers 3 -work-ms 0")
    assert result.returncode == 0, result.stderr
    assert "unfinished run" not in result.stdout


def test_a_replace_refused_by_a_lock_audits_nothing_of_the_last_run(cli: Cli, db: psycopg.Connection) -> None:
    """The last run's tables stand when another session's lock times the replacing out (the
    install's one transaction rolled back): its messages are not this run's, so nothing is audited
    or accounted, as for a refusal; the error and the log's last line say what held the run up."""
    assert cli.run("-fill-db 20 -workers 3 -work-ms 0").returncode == 0
    db.execute("begin")
    db.execute("lock table msg_journal in access share mode")
    try:
        result = cli.run("-fill-db 30 -workers 3 -work-ms 0 -json out.json")
    finally:
        db.rollback()
    assert_one_line_error(result, 1, "for a lock another session holds")  # a refusal, as if not run
    assert not (cli.workdir / "out.json").exists() and "audit" not in result.stdout, result.stdout
    last = (cli.workdir / "msg_queue.log").read_text().splitlines()[-1]
    assert "run end: refused: journal table waited" in last and last.endswith("exit 1"), last
    kept = db.execute("select count(*) from msg_journal").fetchone()
    assert kept is not None and kept[0] == 20  # the last run's journal, untouched


def test_failed_start_keeps_the_last_log(cli: Cli) -> None:
    log = cli.workdir / "msg_queue.log"
    log.write_text("evidence of the last run\n")
    result = cli.run("-dsn", "postgres://nobody@127.0.0.1:1/none", dsn=False)
    assert result.returncode != 0
    assert log.read_text() == "evidence of the last run\n"


def test_killed_run_is_audited_in_place_and_named_by_the_next_run(cli: Cli, dsn: str) -> None:
    proc = cli.start("-fill-db 3000 -workers 3 -work-ms 5-10")
    wait_for_handled(cli.workdir / "msg_queue.log", 30)
    proc.send_signal(signal.SIGKILL)
    proc.wait(timeout=10)
    audit = cli.audit("-dsn", dsn, "-json", "audit.json")
    assert audit.returncode == 0, audit.stdout + audit.stderr
    assert "unfinished" in audit.stdout and "audit pass" in audit.stdout
    doc = json.loads((cli.workdir / "audit.json").read_text())
    assert doc["outcome"] is None and doc["audit"]["missing"] == 0 and doc["audit"]["duplicates"] == 0
    assert doc["audit"]["processed"] >= 30 and doc["audit"]["left_behind"] > 0
    rerun = cli.run("-fill-db 20 -workers 3 -work-ms 0")
    assert rerun.returncode == 0
    assert "replacing the data of an unfinished run" in " ".join(rerun.stdout.split())


def test_audit_command_needs_a_server(cli: Cli) -> None:
    assert_one_line_error(cli.audit(), 2, "-dsn")
    port = free_port()
    assert_one_line_error(cli.audit("-dsn", f"postgres://u:pw@127.0.0.1:{port}/x"), 1, "cannot connect")


def test_audit_command_without_a_run_record_is_one_line(cli: Cli, dsn: str, db: psycopg.Connection) -> None:
    assert cli.run("-fill-db 10 -workers 3 -work-ms 0").returncode == 0
    db.execute("delete from pgmq_sim_run")
    db.commit()
    assert_one_line_error(cli.audit("-dsn", dsn), 1, "no run recorded")


def test_json_through_a_symlink_keeps_the_link(cli: Cli) -> None:
    (cli.workdir / "real.json").write_text("{}")
    os.symlink("real.json", cli.workdir / "out.json")
    assert cli.run("-fill-db 20 -workers 3 -work-ms 0 -json out.json").returncode == 0
    assert (cli.workdir / "out.json").is_symlink()
    assert json.loads((cli.workdir / "real.json").read_text())["processed"] == 20


def test_json_dash_is_stdout_and_the_summary_moves_to_stderr(cli: Cli) -> None:
    result = cli.run("-fill-db 20 -workers 3 -work-ms 0 -json -")
    assert result.returncode == 0, result.stderr
    assert json.loads(result.stdout)["processed"] == 20
    assert "audit" in result.stderr


def test_json_to_a_device_is_written_not_replaced(cli: Cli) -> None:
    result = cli.run("-fill-db 20 -workers 3 -work-ms 0 -json /dev/null")
    assert result.returncode == 0, result.stderr
    assert Path("/dev/null").is_char_device()


def test_checks_run_before_anything_changes(cli: Cli, db: psycopg.Connection) -> None:
    assert cli.run("-fill-db 25 -workers 3 -work-ms 0").returncode == 0
    for args in ("-orders 3000000000", "-schema /dev/zero", "-fill-db 3000000000"):
        assert cli.run(args).returncode == 2, args
    bad_name = os.fsencode(str(cli.workdir)) + b"/\xff.sql"
    result = subprocess.run(
        [*cli.command(), b"-schema", bad_name], cwd=cli.workdir, env=cli.env(), capture_output=True
    )
    assert result.returncode == 2 and b"Traceback" not in result.stderr
    assert db.execute("select count(*) from msg_queue").fetchone()[0] == 25


def test_connections_are_counted_as_the_run_opens_them(cli: Cli, db: psycopg.Connection, dsn: str) -> None:
    db.execute("drop role if exists pgmq_limited")
    db.execute("create role pgmq_limited login connection limit 5")
    db.execute("grant all on schema public to pgmq_limited")
    params = psycopg.conninfo.conninfo_to_dict(dsn)
    limited = f"postgresql://pgmq_limited@/{params['dbname']}?host={params['host']}&port={params['port']}"
    # 3 workers + producer + listener + the tool's own three (its phases', the housekeeper's and
    # the live audit's) = 8 > 5
    result = cli.run("-dsn", limited, "-workers 3 -rate 100 -wakeup notify", dsn=False)
    assert_one_line_error(result, 2, "needs 8 connections", "CONNECTION LIMIT", "the tool's own 3")
    # by priority a group's order is not enqueue order: no live audit, so no session of its own
    result = cli.run("-dsn", limited, "-workers 3 -rate 100 -queue procrastinate -priority 1-3", dsn=False)
    assert_one_line_error(result, 2, "needs 7 connections", "the tool's own 2")
    # who holds the slots is named: here a session of the role's own, by its application
    with psycopg.connect(limited, application_name="nightly-export"):
        result = cli.run("-dsn", limited, "-workers 3 -rate 100", dsn=False)  # 7 needed, 4 left
    assert_one_line_error(
        result, 2, "needs 7 connections", "allows 4 more now (1 client session(s): 1 by application"
        " 'nightly-export' as role pgmq_limited)"
    )  # fmt: skip


# -- every exit writes what it knows ----------------------------------------------------------


def test_full_disk_log_is_one_line_and_a_report(cli: Cli) -> None:
    result = cli.run("-fill-db 50 -workers 3 -work-ms 0 -logfile /dev/full -json out.json")
    assert result.returncode == 1
    assert "Traceback" not in result.stderr
    errors = [line for line in result.stderr.splitlines() if line.startswith("pgmq-sim: error:")]
    assert len(errors) == 1 and "No space left on device" in errors[0]
    doc = json.loads((cli.workdir / "out.json").read_text())
    assert doc["outcome"] == "failed" and "No space left" in doc["error"]
    assert doc["audit"] is not None and doc["audit"]["duplicates"] == 0 and doc["audit"]["missing"] == 0


def test_failed_copy_counts_only_committed_messages(cli: Cli, db: psycopg.Connection) -> None:
    """The second prefill chunk fails: only the first chunk's messages count as produced, and the
    audit finds none missing."""
    failing = (REPO / "schema.sql").read_text() + (
        "\ncreate function refuse() returns trigger language plpgsql as $$ begin"
        " if new.msg_id = 25000 then raise exception 'disk quota exceeded (test)'; end if;"
        " return new; end $$;\n"
        "create trigger refuse before insert on msg_queue for each row execute function refuse();\n"
    )
    (cli.workdir / "failing.sql").write_text(failing)
    result = cli.run("-schema failing.sql -fill-db 30000 -workers 3 -work-ms 0 -json out.json")
    assert result.returncode == 1
    doc = json.loads((cli.workdir / "out.json").read_text())
    assert doc["outcome"] == "failed" and "disk quota exceeded" in doc["error"]
    assert doc["produced"] == 20000 == db.execute("select count(*) from msg_queue").fetchone()[0]
    assert doc["audit"]["missing"] == 0


def prefilled_some(db: psycopg.Connection) -> bool:
    if db.execute("select to_regclass('pgmq_sim_run')").fetchone()[0] is None:
        return False
    row = db.execute("select produced from pgmq_sim_run").fetchone()
    return bool(row and row[0] > 0)


@pytest.mark.parametrize("signum,code", [(signal.SIGTERM, 143), (signal.SIGINT, 130)])
def test_second_signal_keeps_the_first_code_and_still_writes(cli: Cli, signum: int, code: int) -> None:
    proc = cli.start("-fill-db 5000 -workers 6 -work-ms 20-30 -orders 4 -json out.json")
    wait_for_handled(cli.workdir / "msg_queue.log", 20)
    proc.send_signal(signum)
    time.sleep(0.05)
    proc.send_signal(signal.SIGINT if signum == signal.SIGTERM else signal.SIGTERM)
    stdout, stderr = proc.communicate(timeout=30)
    assert proc.returncode == code, stderr
    assert "Traceback" not in stderr
    doc = json.loads((cli.workdir / "out.json").read_text())
    assert doc["outcome"] == "interrupted" and doc["processed"] > 0
    assert "interrupted" in stdout
    last = (cli.workdir / "msg_queue.log").read_text().splitlines()[-1]
    assert last.endswith(f"exit {code}")


def test_signal_during_a_long_prefill_is_honoured_at_once(cli: Cli, db: psycopg.Connection) -> None:
    proc = cli.start("-fill-db 3000000 -workers 3 -json out.json")
    log = cli.workdir / "msg_queue.log"
    deadline = time.monotonic() + 30
    while not prefilled_some(db):  # the first chunk has committed: the prefill is under way
        assert time.monotonic() < deadline and proc.poll() is None, "the prefill never started"
        time.sleep(0.05)
    began = time.monotonic()
    proc.send_signal(signal.SIGTERM)
    proc.communicate(timeout=30)
    assert proc.returncode == 143
    assert time.monotonic() - began < 5
    doc = json.loads((cli.workdir / "out.json").read_text())
    assert doc["outcome"] == "interrupted" and 0 < doc["produced"] < 3_000_000
    assert doc["processed"] == 0 and doc["audit"]["missing"] == 0
    assert "starting 3 workers" not in log.read_text()


def test_files_used_are_named(cli: Cli) -> None:
    (cli.workdir / "next_msg.sql").write_text((REPO / "next_msg.sql").read_text())
    result = cli.run("-fill-db 20 -workers 3 -work-ms 0 -json out.json")
    assert result.returncode == 0
    doc = json.loads((cli.workdir / "out.json").read_text())
    assert doc["files"]["claim"] == {"path": str(cli.workdir / "next_msg.sql"), "origin": "current directory"}
    assert doc["files"]["schema"]["origin"] == "packaged"
    assert "current directory" in " ".join(result.stdout.replace("│", " ").split())  # a cell may wrap
