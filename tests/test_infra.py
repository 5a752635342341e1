"""The test helpers themselves: a real PgBouncer (tests/pooler.py), a TLS server (tests/tls.py) and
plain roles, each proven on a real server in a few seconds."""

from __future__ import annotations

import uuid
from collections.abc import Iterator
from pathlib import Path

import psycopg
import pytest
import tls
from pooler import PgBouncer, find_pgbouncer, run_as, skip_reason, temp_role

from pgmq_sim.embedded.postgres import LocalPostgres

pytestmark = pytest.mark.faults  # servers (and poolers) these tests start themselves


def need_pgbouncer() -> None:
    reason = skip_reason()
    if reason:
        print(reason)
        pytest.skip(reason)


def connect(dsn: str, **kwargs: object) -> psycopg.Connection:
    """Autocommit, bounded, and no protocol-level prepared statements (a transaction pooler before
    1.21 cannot keep them: psycopg's default prepares a query on its 6th run)."""
    return psycopg.connect(dsn, autocommit=True, connect_timeout=5, prepare_threshold=None, **kwargs)


def backend_pid(conn: psycopg.Connection) -> int:
    row = conn.execute("select pg_backend_pid()").fetchone()
    assert row is not None
    return int(row[0])


@pytest.fixture(scope="module")
def tcp_pg() -> Iterator[LocalPostgres]:
    with LocalPostgres(tcp=True, host="127.0.0.1") as server:
        yield server


@pytest.fixture
def bouncer(tcp_pg: LocalPostgres) -> Iterator[PgBouncer]:
    """A fresh transaction-pooling pgbouncer (no server connection yet) in front of tcp_pg."""
    need_pgbouncer()
    assert tcp_pg.password is not None
    with PgBouncer("127.0.0.1", tcp_pg.port, "postgres", tcp_pg.password, "postgres") as pooler:
        yield pooler


def test_transaction_pooling_moves_a_client_between_backends(bouncer: PgBouncer) -> None:
    owner = Path(f"/proc/{bouncer.process.pid if bouncer.process else 0}").stat().st_uid
    assert owner == run_as().pw_uid, "pgbouncer runs unprivileged (nobody when root)"
    with connect(bouncer.dsn) as a, connect(bouncer.dsn) as b:
        first = backend_pid(a)
        assert backend_pid(b) == first, "two idle clients share the one server connection"
        with b.transaction():
            held = backend_pid(b)  # b now holds the only server connection until it commits
            moved = backend_pid(a)
        assert held == first
        assert moved != first, "a's next transaction ran on another backend"
    assert "login attempt: db=postgres user=postgres" in bouncer.log_text()


def test_pgbouncer_refuses_the_options_startup_parameter(bouncer: PgBouncer) -> None:
    with pytest.raises(psycopg.OperationalError) as refused:
        connect(bouncer.dsn, options="-c lock_timeout=3000").close()
    message = str(refused.value)
    assert "FATAL:  unsupported startup parameter: options" in message, message
    log = bouncer.log_text()
    assert "unsupported startup parameter: options=-c lock_timeout=3000" in log, log
    with connect(bouncer.dsn) as conn:  # the same DSN without options works
        assert backend_pid(conn) > 0


def test_tls_verify_full() -> None:
    reason = tls.skip_reason()
    if reason:
        print(reason)
        pytest.skip(reason)
    with tls.TlsPostgres() as server:
        for dsn in (server.dsn, server.dsn_localhost):
            with connect(dsn) as conn:
                row = conn.execute("select ssl from pg_stat_ssl where pid = pg_backend_pid()").fetchone()
                assert row == (True,)
        with connect(server.plain_dsn) as conn:
            row = conn.execute("select ssl from pg_stat_ssl where pid = pg_backend_pid()").fetchone()
            assert row == (False,)
        with pytest.raises(psycopg.OperationalError, match="certificate verify failed"):
            connect(server.dsn_with("verify-full", server.wrong_ca_path)).close()
        # right CA, wrong name: hostaddr dials 127.0.0.1 while the certificate is checked for host
        with pytest.raises(psycopg.OperationalError, match="does not match host name"):
            connect(server.dsn, host="elsewhere.invalid", hostaddr="127.0.0.1").close()


def test_plain_role_cannot_read_other_sessions_queries(tcp_pg: LocalPostgres) -> None:
    marker = f"marker_{uuid.uuid4().hex[:8]}"
    name = f"plain_{uuid.uuid4().hex[:8]}"
    password = "pw with ' and \" and %"
    with connect(tcp_pg.dsn) as admin, temp_role(tcp_pg.dsn, name, password) as role:
        admin_pid = backend_pid(admin)
        admin.execute(f"select '{marker}'")
        with connect(role.dsn) as conn:
            conn.execute("create table mine (x int)")  # its own database: CREATE works on PG15+
            row = conn.execute("select query from pg_stat_activity where pid = %s", (admin_pid,)).fetchone()
            assert row == ("<insufficient privilege>",)
            flags = conn.execute("select rolsuper, rolcreaterole from pg_roles where rolname = current_user")
            assert flags.fetchone() == (False, False)
            if find_pgbouncer() is not None and tcp_pg.password is not None:
                with (
                    PgBouncer(
                        "127.0.0.1",
                        tcp_pg.port,
                        "postgres",
                        tcp_pg.password,
                        name,
                        more_users={name: password},
                    ) as pooler,
                    connect(pooler.dsn_for(user=name)) as pooled,
                ):
                    assert pooled.execute("select current_user").fetchone() == (name,)
    with temp_role(tcp_pg.dsn, f"mon_{name}", "pw", monitoring=True) as watcher, connect(tcp_pg.dsn) as admin:
        admin_pid = backend_pid(admin)
        admin.execute(f"select '{marker}'")
        with connect(watcher.dsn) as conn:
            row = conn.execute("select query from pg_stat_activity where pid = %s", (admin_pid,)).fetchone()
            assert row == (f"select '{marker}'",)


def test_bouncer_directory_is_removed(tcp_pg: LocalPostgres) -> None:
    need_pgbouncer()
    assert tcp_pg.password is not None
    with PgBouncer("127.0.0.1", tcp_pg.port, "postgres", tcp_pg.password, "postgres", mode="session") as p:
        top, process = p.top, p.process
        assert top is not None and process is not None
        assert oct(top.stat().st_mode & 0o777) == "0o700"
    assert not top.exists()
    assert process.poll() is not None, "pgbouncer was stopped and reaped"
