"""The server's own reasons for ending a statement or a session, read from its SQLSTATE and its
message: its policies (the timeouts a role, a database or the server sets), an administrator's
command, a shutdown, a crash and restart, its resources, the conflicts between transactions; or a
connection that closed without a word. Plain values: the database layer reads the SQLSTATE and
the message from the driver's error, this names them, the result counts them, the verdicts read
them. Messages as PostgreSQL 15 to 18 write them (src/backend/tcop/postgres.c, ProcessInterrupts
and quickdie): none of these versions says who sent a termination."""

from __future__ import annotations

from dataclasses import dataclass
from enum import StrEnum
from typing import Any

from pgmq_sim.model.quantities import count_text


class Cause(StrEnum):
    IDLE_IN_TRANSACTION = "idle-in-transaction-timeout"
    TRANSACTION_TIMEOUT = "transaction-timeout"
    IDLE_SESSION = "idle-session-timeout"
    STATEMENT_TIMEOUT = "statement-timeout"
    LOCK_TIMEOUT = "lock-timeout"
    TERMINATED = "terminated"  # 57P01 administrator command: pg_terminate_backend (or a shutdown)
    SHUTDOWN = "shutdown"  # the server going away: a 57P01 and then refused connections, 57P03
    NOT_ACCEPTING = "not-accepting"  # 57P03 starting up, in recovery: a refusal that passes
    CRASH = "crash"  # 57P02: another server process crashed, the postmaster resets every session
    CANCELED = "canceled"  # 57014 by request: pg_cancel_backend, or a client's cancel
    TOO_MANY_CONNECTIONS = "too-many-connections"
    DISK_FULL = "disk-full"
    RESOURCES = "resources"  # class 53 besides those: memory, files, ...
    SERIALIZATION = "serialization-failure"
    DEADLOCK = "deadlock"
    LOCK_NOT_AVAILABLE = "lock-not-available"  # 55P03 without a timeout: NOWAIT
    CLOSED = "closed"  # the connection ended without a message from the server
    OTHER = "other"


# the server's policies: the setting that made the server end the statement or the session
SETTINGS = {
    Cause.IDLE_IN_TRANSACTION: "idle_in_transaction_session_timeout",
    Cause.TRANSACTION_TIMEOUT: "transaction_timeout",
    Cause.IDLE_SESSION: "idle_session_timeout",
    Cause.STATEMENT_TIMEOUT: "statement_timeout",
    Cause.LOCK_TIMEOUT: "lock_timeout",
}
LABELS = {
    Cause.IDLE_IN_TRANSACTION: "the server's idle-in-transaction timeout",
    Cause.TRANSACTION_TIMEOUT: "the server's transaction timeout",
    Cause.IDLE_SESSION: "the server's idle-session timeout",
    Cause.STATEMENT_TIMEOUT: "the server's statement timeout",
    Cause.LOCK_TIMEOUT: "the server's lock timeout",
    Cause.TERMINATED: "an administrator's command (pg_terminate_backend: the server took the reconnect)",
    Cause.SHUTDOWN: "the server shutting down (it ended the sessions, then refused connections)",
    Cause.NOT_ACCEPTING: "the server not accepting connections (starting up or in recovery)",
    Cause.CRASH: "a crash of another server process (the server reset every session)",
    Cause.CANCELED: "a cancel request (pg_cancel_backend, or a client's cancel)",
    Cause.TOO_MANY_CONNECTIONS: "too many connections",
    Cause.DISK_FULL: "a full disk",
    Cause.RESOURCES: "the server's resources",
    Cause.SERIALIZATION: "a serialization failure",
    Cause.DEADLOCK: "a deadlock",
    Cause.LOCK_NOT_AVAILABLE: "a lock not available (NOWAIT)",
    Cause.CLOSED: "the connection closing without a message from the server",
    Cause.OTHER: "an error",
}
# ended by the server, the session still usable: the transaction rolled back, the work is tried again
RETRIED = frozenset(
    {
        Cause.STATEMENT_TIMEOUT,
        Cause.LOCK_TIMEOUT,
        Cause.LOCK_NOT_AVAILABLE,
        Cause.CANCELED,
        Cause.SERIALIZATION,
        Cause.DEADLOCK,
        Cause.DISK_FULL,
        Cause.RESOURCES,
    }
)
SESSION_ENDING = frozenset({"25P03", "25P04", "57P05"})  # with class 57's: the server ends the session


@dataclass(frozen=True)
class ServerReason:
    """Why the server ended a statement or a session: the cause named, and what it said."""

    cause: Cause
    sqlstate: str | None
    message: str  # the server's primary message, or the driver's for a connection that closed

    @property
    def setting(self) -> str | None:
        """The setting whose policy this is, or None."""
        return SETTINGS.get(self.cause)

    @property
    def policy(self) -> bool:
        return self.cause in SETTINGS

    @property
    def retried(self) -> bool:
        """The server ended the statement and its transaction, not the session: roll back, try again."""
        return self.cause in RETRIED

    @property
    def label(self) -> str:
        return LABELS[self.cause] if self.cause != Cause.OTHER else f"an error ({self.sqlstate or '-'})"

    def text(self) -> str:
        """What the server said, with its SQLSTATE."""
        return f"{self.message} ({self.sqlstate})" if self.sqlstate else self.message

    def resolved(self, refused: bool) -> ServerReason:
        """A termination whose reconnects the server refused was its shutdown (the message is the
        same for pg_terminate_backend and for a smart or fast shutdown)."""
        if self.cause == Cause.TERMINATED and refused:
            return ServerReason(Cause.SHUTDOWN, self.sqlstate, self.message)
        return self


@dataclass(frozen=True)
class RunEnding:
    """The server's error that ended a run (or cut it short), and whose statement met it: the
    producer, a worker, the run's own phase (the install, the prefill...)."""

    who: str
    reason: ServerReason

    def as_json(self) -> dict[str, Any]:
        r = self.reason
        return {"who": self.who, "cause": str(r.cause), "sqlstate": r.sqlstate, "message": r.message,
                "setting": r.setting}  # fmt: skip


def classify(sqlstate: str | None, message: str | None) -> ServerReason:
    """The cause of an error, from its SQLSTATE and the server's primary message."""
    said = " ".join((message or "").split()) or "no message"
    text = said.lower()
    if sqlstate is None:
        return ServerReason(Cause.CLOSED, None, said)
    cause = {
        "25P03": Cause.IDLE_IN_TRANSACTION,
        "25P04": Cause.TRANSACTION_TIMEOUT,
        "57P05": Cause.IDLE_SESSION,
        "57P02": Cause.CRASH,
        "53300": Cause.TOO_MANY_CONNECTIONS,
        "53100": Cause.DISK_FULL,
        "40001": Cause.SERIALIZATION,
        "40P01": Cause.DEADLOCK,
    }.get(sqlstate)
    if cause is None:
        if sqlstate == "57014":
            cause = Cause.STATEMENT_TIMEOUT if "statement timeout" in text else Cause.CANCELED
        elif sqlstate == "55P03":
            cause = Cause.LOCK_TIMEOUT if "lock timeout" in text else Cause.LOCK_NOT_AVAILABLE
        elif sqlstate == "57P01":
            if "immediate shutdown" in text:
                cause = Cause.SHUTDOWN
            elif "postmaster exit" in text:
                cause = Cause.CRASH
            else:
                cause = Cause.TERMINATED
        elif sqlstate == "57P03":
            cause = Cause.SHUTDOWN if "shutting down" in text else Cause.NOT_ACCEPTING
        elif sqlstate.startswith("53"):
            cause = Cause.RESOURCES
        else:
            cause = Cause.OTHER
    return ServerReason(cause, sqlstate, said)


def ends_session(sqlstate: str | None, severity: str | None) -> bool:
    """A notice or an error after which the server closes the session (FATAL, or a WARNING of
    class 57 sent before the process exits: a crash, an immediate shutdown)."""
    return severity in ("FATAL", "PANIC") or (sqlstate or "").startswith("57P") or sqlstate in SESSION_ENDING


@dataclass(frozen=True)
class ReasonCount:
    """One cause met during the run: how often, from when to when, on how many sessions."""

    cause: Cause
    sqlstate: str | None
    message: str  # the first time's
    count: int
    first_s: float
    last_s: float
    sessions: int  # distinct server sessions (backend pids) it ended or interrupted
    workers: tuple[str, ...]  # the run's sessions it met, by name (w1, producer, ...)
    lost: int  # of the count, sessions ended (the others: statements ended, the session kept)

    @property
    def reason(self) -> ServerReason:
        return ServerReason(self.cause, self.sqlstate, self.message)

    def who(self) -> str:
        """'4 workers (w1, w2, w3, w4)', 'producer', or both."""
        queue = [w for w in self.workers if w.startswith("w") and w[1:].isdigit()]
        others = [w for w in self.workers if w not in queue]
        names = ", ".join(queue[:4]) + (", ..." if len(queue) > 4 else "")
        said = [f"{count_text(len(queue))} worker{'s' if len(queue) != 1 else ''} ({names})"] if queue else []
        return ", ".join(said + others)

    def when(self) -> str:
        """'at 0.2 s', or 'from 0.2 s to 199.8 s'."""
        return (
            f"at {self.first_s:.1f} s"
            if self.count == 1
            else f"from {self.first_s:.1f} s to {self.last_s:.1f} s"
        )

    def as_json(self) -> dict[str, Any]:
        reason = self.reason
        return {
            "cause": str(self.cause),
            "sqlstate": self.sqlstate,
            "message": self.message,
            "label": reason.label,
            "setting": reason.setting,
            "count": self.count,
            "sessions_ended": self.lost,
            "first_s": round(self.first_s, 3),
            "last_s": round(self.last_s, 3),
            "sessions": self.sessions,
            "workers": list(self.workers),
        }
