"""How the tool connects: the connection policy (bounded connects, keepalives, names that faults and
diagnoses find on the server), what counts as a lost connection, and the one reconnecting loop.

Nothing is set at connection start-up beyond what every pooler forwards (application_name): a
session setting goes in with SET LOCAL inside the transaction that needs it, so it holds whether
or not the pooler keeps a server session for this client. (DateStyle, which a worker sets when the
server's is not ISO, is one a pooler tracks per client, as it does application_name.)
"""

from __future__ import annotations

import contextlib
import threading
from collections.abc import Awaitable, Callable, Iterator
from typing import Any, TypeVar

import psycopg
from psycopg.generators import execute
from psycopg.pq import ExecStatus, TransactionStatus

from pgmq_sim.dsn import check_dsn, first_line, redact, scrub
from pgmq_sim.errors import SimError
from pgmq_sim.model.backoff import Backoff
from pgmq_sim.model.reasons import ServerReason, classify

T = TypeVar("T")
APPLICATION_NAME = "pgmq-sim"
PRODUCER_APPLICATION = f"{APPLICATION_NAME} producer"  # every producer session's (sql/wait_counts.sql)
CONNECT_TIMEOUT_S = 5
CANCEL_TIMEOUT_S = 2.0
ADMIN_LOCK_TIMEOUT_MS = 3_000
# the tool's own statements (its install, prefill, run record, journal lookups, audit, account,
# samples) run under this bound, not the role's statement_timeout: the longest the tool waits for
# any of them (the audit's, engine/collecting)
OWN_STATEMENT_TIMEOUT_MS = 600_000

# Lost connections, restarts, fail-overs: worth a new connection. Anything else is a real error.
LOST = (psycopg.OperationalError, psycopg.InterfaceError)
# 08P01: PgBouncer's own refusals (server_login_retry, query_wait_timeout), after which it closes
# the client; PostgreSQL too ends a session that breaks the protocol
LOST_SQLSTATES = (None, "08000", "08003", "08006", "08P01")


def is_connection_lost(exc: BaseException, closed: bool = False) -> bool:
    """A lost session, not a bad statement: the connection is gone or the server is going away."""
    if isinstance(
        exc, psycopg.errors.AdminShutdown | psycopg.errors.CrashShutdown | psycopg.errors.CannotConnectNow
    ):
        return True
    if isinstance(exc, psycopg.errors.QueryCanceled | psycopg.errors.LockNotAvailable):
        return False
    if isinstance(exc, psycopg.errors.IdleSessionTimeout | psycopg.errors.IdleInTransactionSessionTimeout):
        return True
    if closed:  # the connection the statement ran on is gone: whatever the error says
        return isinstance(exc, psycopg.Error)
    return isinstance(exc, LOST) and getattr(exc, "sqlstate", None) in LOST_SQLSTATES


def server_reason(exc: BaseException, dsn: str, *others: str | None) -> ServerReason:
    """What the server said of an error (its SQLSTATE and primary message), classified; a
    connection that closed without a word is that, in the driver's words. Scrubbed of every DSN
    given: a driver's message may quote one."""
    diag = getattr(exc, "diag", None)
    said = getattr(diag, "message_primary", None) or first_line(exc)
    return classify(getattr(exc, "sqlstate", None), scrub(said, dsn, *others))


def policy(name: str | None) -> dict[str, Any]:
    """Every connection of the tool: bounded connect, keepalives so a dead peer is noticed, no
    protocol-level prepared statements (a transaction pooler before PgBouncer 1.21 cannot keep
    them); the application_name carries a worker's name, so faults and diagnoses find it on any
    host."""
    return {
        "application_name": APPLICATION_NAME + (f" {name}" if name else ""),
        "connect_timeout": CONNECT_TIMEOUT_S,
        "prepare_threshold": None,
        "keepalives": 1,
        "keepalives_idle": 5,
        "keepalives_interval": 2,
        "keepalives_count": 3,
    }


def connect(dsn: str, name: str | None = None, autocommit: bool = False) -> psycopg.Connection:
    """A connection of the tool's own phases (blocking, $1 placeholders)."""
    return psycopg.connect(dsn, cursor_factory=psycopg.RawCursor, autocommit=autocommit, **policy(name))


async def connect_async(dsn: str, name: str | None = None) -> psycopg.AsyncConnection[Any]:
    """A connection of the run's loop (a worker's, the producer's, the listener's, the
    housekeeper's): the same policy, in autocommit mode; its bound is the connect timeout."""
    return await psycopg.AsyncConnection.connect(
        dsn, cursor_factory=psycopg.AsyncRawCursor, autocommit=True, **policy(name)
    )


def cancel_query(conn: psycopg.Connection) -> None:
    """Cancel what a connection waits on, from another thread (psycopg allows it). The server may
    be gone or frozen: the cancel has its own bound, and the caller's join keeps its own."""
    if not conn.closed:
        with contextlib.suppress(psycopg.Error):
            conn.cancel_safe(timeout=CANCEL_TIMEOUT_S)


def limit_lock_waits(conn: psycopg.Connection) -> None:
    """Open the tool's transaction with a bound on lock waits: a lock held elsewhere must not hang
    the schema, the diagnosis or the audit. The role's own timeouts are the queue's policy, not the
    tool's: its install, audit and diagnosis are not ended by them (their waits are bounded by the
    tool's own). SET LOCAL ends with the transaction. The BEGIN goes with them, in one round trip
    (psycopg's own BEGIN would leave the session idle in a transaction for one, under the role's
    idle-in-transaction timeout); psycopg then sees the transaction open and carries on in it."""
    if conn.pgconn.transaction_status != TransactionStatus.IDLE:
        conn.execute(own_limits(conn))
        return
    conn.pgconn.send_query(own_begin(conn).encode())
    for result in conn.wait(execute(conn.pgconn)):
        if result.status == ExecStatus.FATAL_ERROR:
            raise psycopg.errors.error_from_result(result, encoding=conn.info.encoding)


def own_limits(conn: psycopg.Connection | psycopg.AsyncConnection[Any], local: bool = True) -> str:
    """The SET LOCALs of a transaction of the tool's own: its own bounds on statements and lock
    waits, and none of the role's idle or transaction timeouts (transaction_timeout from
    PostgreSQL 17). Sent with the BEGIN in one round trip, the transaction is never idle under the
    role's settings; SET LOCAL holds behind any pooler (a startup `options` does not). Not local:
    for a session the tool holds alone (no transaction pooler)."""
    set_ = "set local" if local else "set"
    return (
        f"{set_} lock_timeout = {ADMIN_LOCK_TIMEOUT_MS};"
        f" {set_} statement_timeout = {OWN_STATEMENT_TIMEOUT_MS};"
        f" {set_} idle_in_transaction_session_timeout = 0"
        + (f"; {set_} transaction_timeout = 0" if conn.info.server_version >= 170000 else "")
    )


def own_begin(conn: psycopg.Connection | psycopg.AsyncConnection[Any]) -> str:
    """BEGIN a transaction of the tool's own, its bounds set in the same round trip."""
    return f"begin; {own_limits(conn)}"


OPEN_ATTEMPTS = 3


@contextlib.contextmanager
def admin_connection(dsn: str) -> Iterator[psycopg.Connection]:
    """The tool's own connection for one operation, its first transaction open with a lock bound.
    A role's idle-in-transaction timeout of a few milliseconds may end the session between the
    driver's BEGIN and the bound that lifts it (or its statement timeout cancel the bound itself):
    nothing was done yet, so it is opened again."""
    for attempt in range(1, OPEN_ATTEMPTS + 1):
        conn = connect(dsn)
        try:
            limit_lock_waits(conn)
            break
        except psycopg.Error as exc:
            # or its statement_timeout of a few ms canceled the SET LOCALs themselves
            again = is_connection_lost(exc, conn.closed) or isinstance(exc, psycopg.errors.QueryCanceled)
            conn.close()
            if attempt == OPEN_ATTEMPTS or not again:
                raise
    try:
        yield conn
    finally:
        conn.close()


async def opened_async(
    dsn: str, name: str, set_up: Callable[[psycopg.AsyncConnection[Any]], Awaitable[T]]
) -> T:
    """A connection of the run's loop and its set-up, the tool's own, as admin_connection opens one:
    a role's statement timeout of a few milliseconds may end the set-up's first round trip before
    its bounds hold (between two of its statements PostgreSQL says 'user request'); nothing was done
    yet, so it is opened again."""
    for attempt in range(1, OPEN_ATTEMPTS + 1):
        conn = await connect_async(dsn, name)
        try:
            return await set_up(conn)
        except BaseException as exc:
            again = isinstance(exc, psycopg.errors.QueryCanceled) or (
                isinstance(exc, psycopg.Error) and is_connection_lost(exc, conn.closed)
            )
            await conn.close()
            if attempt == OPEN_ATTEMPTS or not again:
                raise
    raise AssertionError("unreachable")


def reconnecting(
    attempt: Callable[[], T],
    backoff: Backoff,
    *,
    lost: Callable[[BaseException], bool] = is_connection_lost,
    on_lost: Callable[[BaseException], None] | None = None,
    give_up: Callable[[BaseException], BaseException] | None = None,
) -> T:
    """The one reconnecting loop: attempt until it succeeds; a lost connection waits out the next
    backoff step, anything else raises. Past the deadline the loss raises as `give_up` makes it
    (or as it is); after a stop, as it is."""
    while True:
        try:
            return attempt()
        except psycopg.Error as exc:
            if not lost(exc):
                raise
            if on_lost is not None:
                on_lost(exc)
            if not backoff.wait():
                if give_up is None or backoff.stopped:
                    raise
                raise give_up(exc) from None


async def reconnecting_async(
    attempt: Callable[[], Awaitable[T]],
    backoff: Backoff,
    sleep: Callable[[float], Awaitable[bool]],
    *,
    lost: Callable[[BaseException], bool] = is_connection_lost,
    on_lost: Callable[[BaseException], None] | None = None,
    give_up: Callable[[BaseException], BaseException] | None = None,
) -> T:
    """`reconnecting` on the run's loop: `sleep` waits a backoff step (True: the run stopped)."""
    while True:
        try:
            return await attempt()
        except psycopg.Error as exc:
            if not lost(exc):
                raise
            if on_lost is not None:
                on_lost(exc)
            delay = backoff.next_delay()
            if delay is None or await sleep(delay):
                if give_up is None or backoff.stopped:
                    raise
                raise give_up(exc) from None


# refusals that end by themselves: a server starting up or shutting down, a pooler whose own login
# to the server is failing (server_login_retry) or whose queue timed out (query_wait_timeout)
PASSING = ("starting up", "shutting down", "server_login_retry", "query_wait_timeout", "server conn crashed")


def is_passing_refusal(exc: BaseException) -> bool:
    """A refusal worth waiting out, not a wrong address or password."""
    return isinstance(exc, psycopg.errors.CannotConnectNow) or any(p in str(exc) for p in PASSING)


def connect_checked(dsn: str, autocommit: bool = False, patience_s: float = 0.0) -> psycopg.Connection:
    """A connection, or one line saying why there is none (never the password); a passing refusal
    is waited out for up to patience_s."""
    check_dsn(dsn, "the DSN")
    try:
        return reconnecting(
            lambda: connect(dsn, autocommit=autocommit),
            Backoff(patience_s, threading.Event(), 0.2),
            lost=is_passing_refusal,
        )
    except psycopg.Error as exc:
        raise connect_error(dsn, exc) from None


def connect_error(dsn: str, exc: BaseException) -> SimError:
    """One line for a failed connection: where to (redacted), the driver's reason scrubbed of
    every form of the password, and the fix. For any code that calls psycopg.connect itself."""
    reason = scrub(" ".join(str(exc).split()), dsn)
    if "authentication failed" in reason or "no password" in reason:
        fix = (
            "the server or pooler refused the login: check the user and password in -dsn, PGMQ_SIM_DSN"
            " or PGPASSWORD"
        )
    elif "unsupported startup parameter" in reason:
        fix = "the pooler refused a startup parameter of the DSN (options=...): drop it from -dsn"
    elif "no pg_hba.conf entry" in reason or "does not exist" in reason:
        fix = "the server refused this user, database or host: check them in -dsn and its pg_hba.conf"
    else:
        fix = "check that the server is running and -dsn points to it, or omit -dsn"
    return SimError(f"cannot connect to {redact(dsn)}: {reason}; {fix}")
