"""Bad input: one line naming the problem and the fix, a non-zero exit, no traceback, nothing lost.
What is refused before a server is opened (bad flag values, SQL files too large or not UTF-8) is unit."""

from __future__ import annotations

from pathlib import Path

import psycopg
import pytest
from checks import free_port
from conftest import Cli, Refuse, assert_one_line_error

from pgmq_sim.errors import UsageError
from pgmq_sim.sqlfiles import MAX_SQL_BYTES, read_sql


@pytest.mark.unit
@pytest.mark.parametrize(
    "args,needles",
    [
        (["-fill-db", "0"], ["-fill-db 0", "between 1 and"]),
        (["-fill-db", "3000000000"], ["-fill-db 3000000000", "integer column"]),
        (["-orders", "3000000000"], ["-orders 3000000000", "integer"]),
        (["-fill-db", "-5"], ["-fill-db -5"]),
        (["-fill-db", "abc"], ["abc", "integer"]),
        (["-workers", "2"], ["-workers 2", "at least 3"]),
        (["-rate", "-1"], ["-rate -1", "negative"]),
        (["-rate", "fast"], ["fast"]),
        (["-work-ms", "ten"], ["-work-ms 'ten'", "MIN-MAX"]),
        (["-work-ms", "9-3"], ["MAX below MIN"]),
        (["-orders", "0"], ["-orders 0"]),
        (
            ["-claim", "bogus"],
            ["unknown queue design 'bogus'", "advisory", "fifo", "indexed", "seed", "visibility"],
        ),
        (["-wakeup", "smoke"], ["unknown -wakeup 'smoke'", "notify"]),
        (["-compare", "seed,nope"], ["unknown queue design 'nope'"]),
        (["-no-such-flag"], ["unknown flag -no-such-flag"]),
        (["-fail-rate", "0.1", "-max-attempts", "5000"], ["-max-attempts 5000", "between 1 and"]),
        (["-tx", "twice"], ["unknown -tx 'twice'"]),
        (["-frobnicate"], ["unknown flag -frobnicate"]),
        (["-fill-db", "50", "-fill-db", "300"], ["-fill-db is given twice"]),
        (["-fill-db=50", "--fill-db", "300"], ["given twice"]),
        (["-rate", "nan"], ["-rate nan", "finite"]),
        (["-poll-interval", "inf"], ["-poll-interval inf", "finite"]),
        (["-stall-timeout", "0"], ["-stall-timeout 0", "polls or works"]),
        (["-stall-timeout", "2", "-work-ms", "1000-3000"], ["-stall-timeout 2", "(3 s)"]),
        (["-plot", "run.xyz"], ["-plot run.xyz", ".png"]),
        (["-wakeup", "notify", "-listen-dsn", "postgres://u:pw@[::1"], ["-listen-dsn", "not shown"]),
        (["-pooler-admin", "postgres://u:pw@[::1"], ["-pooler-admin", "not shown"]),
        (["-chaos", "kill-pooler@1s+1s"], ["kill-pooler takes no +DURATION"]),
    ],
)
def test_bad_flag_values_are_usage_errors(
    refuse: Refuse, tmp_path: Path, args: list[str], needles: list[str]
) -> None:
    """Refused before anything starts (in this process: see the refuse fixture)."""
    assert_one_line_error(refuse(*args), 2, *needles)
    assert not (tmp_path / "msg_queue.log").exists()


@pytest.mark.integration
@pytest.mark.parametrize(
    "args,needles",
    [
        (["-chaos", "pause-pooler@1s+1s"], ["-chaos pause-pooler", "-pooler-admin URL"]),
        (
            ["-pooler-admin", "postgres://u:secretpw@127.0.0.1:1/pgbouncer"],
            ["not pooled", "leave -pooler-admin"],
        ),
    ],
)
def test_flags_the_path_to_the_server_rules_out_are_usage_errors(
    cli: Cli, args: list[str], needles: list[str]
) -> None:
    """Refused once the path to the server is known, before anything changes."""
    assert_one_line_error(cli.run(*args), 2, *needles)
    assert not (cli.workdir / "msg_queue.log").exists()


@pytest.mark.unit
def test_missing_and_unreadable_sql_files(refuse: Refuse, tmp_path: Path) -> None:
    assert_one_line_error(refuse("-schema", "nope.sql"), 2, "nope.sql does not exist", "-schema")
    (tmp_path / "adir.sql").mkdir()
    assert_one_line_error(refuse("-schema", "adir.sql"), 2, "cannot read schema file", "adir.sql")
    assert_one_line_error(refuse("-next-msg", "gone.sql"), 2, "gone.sql does not exist", "-next-msg")
    (tmp_path / "empty.sql").write_text("  \n")
    assert_one_line_error(refuse("-next-msg", "empty.sql"), 2, "is empty")


@pytest.mark.integration
def test_broken_schema_shows_server_message_and_keeps_old_table(cli: Cli, db: psycopg.Connection) -> None:
    assert cli.run("-fill-db", "25", "-workers", "3", "-work-ms", "0").returncode == 0
    (cli.workdir / "bad.sql").write_text("drop table if exists msg_queue;\ncreate tabel msg_queue(x int);\n")
    line = assert_one_line_error(cli.run("-schema", "bad.sql"), 2, "schema file bad.sql", "syntax error")
    assert "tabel" in line
    # One transaction: the drop was rolled back with the failed create.
    assert db.execute("select count(*) from msg_queue").fetchone()[0] == 25


@pytest.mark.integration
def test_broken_claim_query_shows_server_message(cli: Cli) -> None:
    (cli.workdir / "claim.sql").write_text("select msg_id from msg_queue where no_such_column = $1")
    assert_one_line_error(cli.run("-next-msg", "claim.sql"), 2, "claim query claim.sql", "no_such_column")


@pytest.mark.integration
def test_unreachable_server(cli: Cli) -> None:
    port = free_port()
    result = cli.run("-dsn", f"postgres://test:s3cret-pw@127.0.0.1:{port}/test", dsn=False)
    line = assert_one_line_error(result, 1, "cannot connect", "server is running")
    assert "s3cret-pw" not in result.stdout + result.stderr
    assert "***" in line


@pytest.mark.integration
def test_failed_login_never_shows_password(cli: Cli, db: psycopg.Connection, pg: object) -> None:
    db.execute("drop role if exists pgmq_login")
    db.execute("create role pgmq_login login password 'right-password'")
    hba = Path(pg.pgdata) / "pg_hba.conf"  # type: ignore[attr-defined]
    original = hba.read_text()
    hba.write_text("local all pgmq_login scram-sha-256\n" + original)
    db.execute("select pg_reload_conf()")
    try:
        host = psycopg.conninfo.conninfo_to_dict(cli.dsn)["host"]
        dsn = f"postgresql://pgmq_login:wrong-secret@/postgres?host={host}"
        result = cli.run("-dsn", dsn, dsn=False)
        assert_one_line_error(result, 1, "password authentication failed", "check the user and password")
        assert "wrong-secret" not in result.stdout + result.stderr
    finally:
        hba.write_text(original)
        db.execute("select pg_reload_conf()")


@pytest.mark.integration
def test_dsn_from_environment_is_used(cli: Cli, dsn: str) -> None:
    result = cli.run("-fill-db 10 -workers 3 -work-ms 0", dsn=False, env={"PGMQ_SIM_DSN": dsn})
    assert result.returncode == 0, result.stderr
    assert "embedded" not in result.stdout


@pytest.mark.unit
def test_unwritable_log_file(refuse: Refuse) -> None:
    assert_one_line_error(refuse("-logfile", "no/such/dir/run.log"), 2, "cannot write log file", "-logfile")


@pytest.mark.integration
def test_too_many_workers_for_the_server(cli: Cli) -> None:
    assert_one_line_error(cli.run("-workers", "500"), 2, "-workers 500", "max_connections")


@pytest.mark.unit
@pytest.mark.parametrize("flag", ["-json", "-plot"])
def test_unwritable_result_file_is_refused_before_the_run(refuse: Refuse, tmp_path: Path, flag: str) -> None:
    assert_one_line_error(refuse(flag, "no/such/dir/out"), 2, f"cannot write {flag} file", "writable")
    assert not (tmp_path / "msg_queue.log").exists()


@pytest.mark.unit
def test_sql_file_limits(tmp_path: Path) -> None:
    big = tmp_path / "big.sql"
    big.write_bytes(b"-- x\n" * (MAX_SQL_BYTES // 5 + 10))
    with pytest.raises(UsageError, match="larger than"):
        read_sql(big, "schema", "fix")
    binary = tmp_path / "bin.sql"
    binary.write_bytes(b"\xff\xfe\x00")
    with pytest.raises(UsageError, match="not UTF-8"):
        read_sql(binary, "schema", "fix")
    with pytest.raises(UsageError, match="larger than"):
        read_sql(Path("/dev/zero"), "schema", "fix")
