"""The password is never printed: not on stdout or stderr, in the log, the JSON or the plot,
whatever form the DSN takes (URL, key=value, $PGMQ_SIM_DSN, $PGPASSWORD) and however it fails."""

from __future__ import annotations

import subprocess
from collections.abc import Iterator
from pathlib import Path
from urllib.parse import quote

import psycopg
import pytest
from checks import free_port
from conftest import Cli, assert_one_line_error
from psycopg import sql
from psycopg.conninfo import conninfo_to_dict
from secret_forms import PASSWORD, WRONG, assert_no_secret

pytestmark = pytest.mark.integration

ROLE = "pgmq_secret"
DATABASE = "pgmq_secrets"


def url(params: dict[str, str], password: str | None, safe: str = "", **query: str) -> str:
    """postgresql://ROLE:password@/DATABASE?host=... with the password percent-encoded but `safe`."""
    userinfo = ROLE + (f":{quote(password, safe=safe)}" if password is not None else "")
    query = {k: v for k, v in params.items() if k in ("host", "port")} | query
    return f"postgresql://{userinfo}@/{DATABASE}?" + "&".join(
        f"{k}={quote(v, safe='/')}" for k, v in query.items()
    )


def keyword_value(params: dict[str, str], password: str | None) -> str:
    """host=... port=... user=... dbname=... password='...' with libpq's quoting."""
    words = {k: v for k, v in params.items() if k in ("host", "port")} | {"user": ROLE, "dbname": DATABASE}
    if password is not None:
        words["password"] = password
    return " ".join(
        f"{k}='{v.replace(chr(92), chr(92) * 2).replace(chr(39), chr(92) + chr(39))}'"
        for k, v in words.items()
    )


@pytest.fixture
def socket_params(dsn: str) -> Iterator[dict[str, str]]:
    """A login role with PASSWORD owning its own database, which scram-sha-256 guards on the socket."""
    with psycopg.connect(dsn, autocommit=True) as admin:
        hba = Path(admin.execute("show hba_file").fetchone()[0])
        admin.execute(sql.SQL("drop database if exists {}").format(sql.Identifier(DATABASE)))
        admin.execute(sql.SQL("drop role if exists {}").format(sql.Identifier(ROLE)))
        admin.execute(
            sql.SQL("create role {} login password {}").format(sql.Identifier(ROLE), sql.Literal(PASSWORD))
        )
        admin.execute(
            sql.SQL("create database {} owner {}").format(sql.Identifier(DATABASE), sql.Identifier(ROLE))
        )
        original = hba.read_text()
        hba.write_text(f"local all {ROLE} scram-sha-256\nhost all {ROLE} all scram-sha-256\n" + original)
        admin.execute("select pg_reload_conf()")
        try:
            params = {k: str(v) for k, v in conninfo_to_dict(dsn).items() if k in ("host", "port")}
            # The role really needs its password now: the wrong one is refused.
            with pytest.raises(psycopg.OperationalError):
                psycopg.connect(url(params, WRONG), connect_timeout=10).close()
            psycopg.connect(url(params, PASSWORD), connect_timeout=10).close()
            yield params
        finally:
            hba.write_text(original)
            admin.execute("select pg_reload_conf()")
            admin.execute(sql.SQL("drop database if exists {} with (force)").format(sql.Identifier(DATABASE)))
            admin.execute(sql.SQL("drop role if exists {}").format(sql.Identifier(ROLE)))


def run(
    cli: Cli, *args: str, dsn: str | None = None, env: dict[str, str] | None = None
) -> subprocess.CompletedProcess[str]:
    """The tool with our own -dsn (kept whole, spaces and all) or environment, not the fixture's."""
    return cli.run_argv(cli.command(*args, dsn=False) + (["-dsn", dsn] if dsn is not None else []), env=env)


RUN = "-fill-db 50 -workers 3 -json out.json -logfile run.log"


FORMS = ["url", "url-raw-hash", "keyword-value", "env-url", "env-keyword-value", "pgpassword"]


@pytest.mark.parametrize("form", FORMS)
def test_runs_with_a_hard_password_never_print_it(cli: Cli, socket_params: dict[str, str], form: str) -> None:
    plot = form == "url"
    dsn, env = None, {}
    if form == "url":
        dsn = url(socket_params, PASSWORD)
    elif form == "url-raw-hash":  # libpq takes a # in the password as it is
        dsn = url(socket_params, PASSWORD, safe="#")
    elif form == "keyword-value":
        dsn = keyword_value(socket_params, PASSWORD)
    elif form == "env-url":
        env["PGMQ_SIM_DSN"] = url(socket_params, PASSWORD)
    elif form == "env-keyword-value":
        env["PGMQ_SIM_DSN"] = keyword_value(socket_params, PASSWORD)
    else:
        dsn = url(socket_params, None)
        env["PGPASSWORD"] = PASSWORD
    result = run(cli, RUN, "-plot run.png" if plot else "", dsn=dsn, env=env)
    assert result.returncode == 0, (result.stdout, result.stderr)
    out = cli.workdir / "out.json"
    assert f"using postgres://{ROLE}" in result.stdout, result.stdout
    assert f'"server": "postgres://{ROLE}' in out.read_text()
    for text in (result.stdout, result.stderr, (cli.workdir / "run.log").read_text(), out.read_text()):
        assert_no_secret(text, PASSWORD)
    if plot:
        # Binary: a 4-byte piece could occur by chance; 6 bytes cannot, and the text is not drawn there.
        assert_no_secret((cli.workdir / "run.png").read_bytes(), PASSWORD, size=6)


BAD_FORMS = [
    f"http://{ROLE}:{quote(PASSWORD, safe='')}@localhost/{DATABASE}",
    f"postgres://{ROLE}:{quote(PASSWORD, safe='')}@[::1",
    f"postgres://{ROLE}:{quote(PASSWORD, safe='')}@[::1/{DATABASE}",
    f"garbage password={PASSWORD}",
    f"postgres://{ROLE}:{PASSWORD}@localhost/{DATABASE}",  # not percent-encoded: the space
    f"postgres://{ROLE}:{PASSWORD.replace(' ', '')}@localhost/{DATABASE}",  # libpq reads a host and port
    f"postgres://{ROLE}:{PASSWORD.replace('/', '').replace(' ', '')}@localhost/{DATABASE}",  # ... a host
    f"host=localhost password={PASSWORD}",  # unquoted: the space
    f"host=localhost password='{PASSWORD}'",  # the quote inside is not escaped
    f"postgres://{ROLE}:{quote(PASSWORD, safe='')}@localhost/{DATABASE}?nosuchoption={quote(PASSWORD)}",
]


@pytest.mark.parametrize("where", ["-dsn", "PGMQ_SIM_DSN"])
@pytest.mark.parametrize("bad", BAD_FORMS, ids=range(len(BAD_FORMS)))
def test_malformed_dsn_is_a_usage_error_without_the_dsn(cli: Cli, where: str, bad: str) -> None:
    given = {"dsn": bad} if where == "-dsn" else {"env": {"PGMQ_SIM_DSN": bad}}
    result = run(cli, RUN, **given)  # type: ignore[arg-type]
    line = assert_one_line_error(result, 2, where, "not", "postgres://user:password@host")
    assert_no_secret(result.stdout + result.stderr, PASSWORD)
    assert "postgres://pgmq" not in line and "host=localhost" not in line
    log = cli.workdir / "run.log"
    assert_no_secret(log.read_text() if log.exists() else "", PASSWORD)


def test_wrong_password_is_named_but_never_printed(cli: Cli, socket_params: dict[str, str]) -> None:
    for dsn in (url(socket_params, WRONG), keyword_value(socket_params, WRONG)):
        result = run(cli, RUN, dsn=dsn)
        line = assert_one_line_error(
            result, 1, "password authentication failed", "check the user and password"
        )
        assert f"postgres://{ROLE}:***@" in line, line
        assert_no_secret(result.stdout + result.stderr, WRONG, PASSWORD)
    result = run(cli, RUN, dsn=url(socket_params, None), env={"PGPASSWORD": WRONG})
    assert_one_line_error(result, 1, "password authentication failed", "PGPASSWORD")
    assert_no_secret(result.stdout + result.stderr, WRONG)


def test_unreachable_server_never_prints_the_password(cli: Cli) -> None:
    port = free_port()
    encoded = quote(PASSWORD, safe="")
    for dsn in (
        f"postgres://{ROLE}:{encoded}@127.0.0.1:{port}/{DATABASE}",
        f"postgres://{ROLE}@127.0.0.1:{port}/{DATABASE}?password={encoded}",
        f"postgres://{ROLE}:{encoded}@127.0.0.1:{port}/{DATABASE}?password=other-{quote(WRONG, safe='')}",
        f"postgres://{ROLE}@127.0.0.1:{port}/{DATABASE}?sslpassword={encoded}",
        keyword_value({"host": "127.0.0.1", "port": str(port)}, PASSWORD),
    ):
        result = run(cli, RUN, dsn=dsn)
        line = assert_one_line_error(result, 1, "cannot connect", f"127.0.0.1:{port}", "server is running")
        assert_no_secret(result.stdout + result.stderr, PASSWORD, WRONG)
        assert ROLE in line
    result = run(
        cli, RUN, env={"PGMQ_SIM_DSN": f"postgres://{ROLE}@127.0.0.1:{port}/x", "PGPASSWORD": PASSWORD}
    )
    assert_one_line_error(result, 1, "cannot connect")
    assert_no_secret(result.stdout + result.stderr, PASSWORD)
