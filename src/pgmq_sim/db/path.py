"""The path to the server, as the tool finds it before changing anything: which pooler is in the way
(told apart by which backends serve which client connections), TLS, and what the role may see and do."""

from __future__ import annotations

import contextlib
import socket

import psycopg

from pgmq_sim.db.connection import connect_checked, own_begin
from pgmq_sim.errors import UsageError
from pgmq_sim.model.facts import PathFacts
from pgmq_sim.model.kinds import PoolerMode
from pgmq_sim.sqlfiles import statement

STATEMENT_POOLING = "transaction blocks not allowed"


def _pid(conn: psycopg.Connection) -> int:
    """The serving backend, asked in a transaction of the tool's own (a role's statement_timeout of
    a millisecond cancels a new backend's first statements)."""
    conn.execute(own_begin(conn))
    row = conn.execute("select pg_backend_pid()").fetchone()
    conn.execute("commit")
    assert row is not None
    return int(row[0])


def _local_port(conn: psycopg.Connection) -> int | None:
    with contextlib.suppress(OSError, ValueError):
        sock = socket.socket(fileno=conn.pgconn.socket)
        try:
            name = sock.getsockname()
        finally:
            sock.detach()  # the socket stays libpq's
        if isinstance(name, tuple):
            return int(name[1])
    return None


def probe(dsn: str) -> PathFacts:
    """Two client connections open at once, then a third after they closed: backends shared while
    both are open mean transaction pooling; a backend handed from a closed client to a new one
    means a pooler keeping sessions. Raises UsageError for statement pooling (no transactions)."""
    with connect_checked(dsn, autocommit=True) as a, connect_checked(dsn, autocommit=True) as b:
        try:  # transactions (begun with their limits in one round trip: never idle before they hold)
            first, second = _pid(a), _pid(b)
            again = _pid(a)
            a.execute(own_begin(a))
            row = a.execute(statement("connection_facts")).fetchone()  # the tool's own: its bounds
            a.execute("commit")
        except psycopg.Error as exc:
            if STATEMENT_POOLING in str(exc):
                raise UsageError(
                    "the pooler runs in statement pooling mode, which allows no transaction; a queue needs"
                    " them: connect through a transaction or session pool"
                ) from None
            raise
        assert row is not None
        seen_port, superuser, sees_all, version, server_tls = row
        tls = (server_tls or "TLS") if a.pgconn.ssl_in_use else None
        local_port = _local_port(a)
        database = a.info.dbname
    if first == second:
        mode, evidence = (
            PoolerMode.TRANSACTION,
            f"two client connections open at once were served by one backend (pid {first})",
        )
    elif again != first:
        mode, evidence = (
            PoolerMode.TRANSACTION,
            f"one client connection was served by backends {first} and {again}",
        )
    else:
        with connect_checked(dsn, autocommit=True) as c:
            third = _pid(c)
        if third in (first, second):
            mode, evidence = (
                PoolerMode.SESSION,
                f"a new client connection was given the backend (pid {third}) of a closed one",
            )
        else:
            mode, evidence = PoolerMode.NONE, "each client connection had a backend of its own"
            if local_port is not None and seen_port is not None and int(seen_port) != local_port:
                evidence += (
                    f" (through a proxy: the server sees client port {seen_port}, ours is {local_port})"
                )
    return PathFacts(mode, evidence, tls, bool(superuser), bool(sees_all), int(version), database)
