"""A worker's side of the queue: claim, complete, fail, abandon, on one connection.

`ClaimPort` is what the worker loop needs from it, so the loop can be tested with a fake.
"""

from __future__ import annotations

from collections.abc import Callable
from datetime import datetime
from typing import NamedTuple, Protocol

import psycopg
from psycopg import sql
from psycopg.pq import TransactionStatus
from psycopg.pq.abc import PGresult

from pgmq_sim.db.connection import cancel_query, connect_worker
from pgmq_sim.db.statements import (
    CLAIM,
    COMPLETE,
    FAIL,
    JOURNAL,
    TAKE,
    WorkerStatement,
    call,
    create_function,
    prepare,
    worker_statements,
)
from pgmq_sim.db.values import Claimed, SessionPlan
from pgmq_sim.db.wire import Answer, Wire
from pgmq_sim.errors import SimError
from pgmq_sim.model.kinds import SessionMode
from pgmq_sim.sqlfiles import statement

# after a commit: when it was done, and how long since the message carrying it arrived
CLOCKS = "select clock_timestamp(), extract(epoch from clock_timestamp() - statement_timestamp())"


class Completion(NamedTuple):
    """A completion's answer, on the server's clock (DateStyle ISO text, for the log): the message's
    time_added and when its commit was done (None, None when no row was completed: split mode, the
    worker no longer owned it); how long the server took from the message's arrival to the commit;
    and the next message claimed in the same round trip, or the error that claim met (raised by the
    loop once the completion, durable, is counted)."""

    time_added: str | None
    committed_at: str | None
    server_s: float | None = None
    next: Claimed | None = None
    chained: bool = False  # a next claim was sent (its answer may be None: nothing free)
    claim_error: psycopg.Error | None = None

    @property
    def e2e_ms(self) -> float | None:
        """From the message's arrival in the table to its commit, on the server's clock."""
        if self.time_added is None or self.committed_at is None:
            return None
        return (server_time(self.committed_at) - server_time(self.time_added)).total_seconds() * 1000


def server_time(text: str) -> datetime:
    """A timestamptz as the server wrote it in DateStyle ISO ('2026-11-23 10:00:00.1+00')."""
    return datetime.fromisoformat(text)


class ClaimPort(Protocol):
    """A worker's connected session, as the worker loop uses it."""

    @property
    def backend_pid(self) -> int: ...

    @property
    def closed(self) -> bool: ...

    def claim(self) -> Claimed | None:
        """Claim one message; None if nothing is free."""

    def complete(self, claimed: Claimed, claim_next: bool) -> Completion:
        """Complete it and commit, and claim the next in the same round trip when asked and the
        session's mode allows it."""

    def fail(self, claimed: Claimed, error: str) -> bool | None:
        """Record a failed attempt and commit: True if it made a dead letter, None if not owned."""

    def was_completed(self, msg_id: int, worker: str | None) -> bool | None:
        """After a lost commit answer: did it land? None: cannot tell."""

    def abandon(self) -> None:
        """Roll back whatever is open."""

    def cancel(self) -> None:
        """Cancel the running statement (from another thread)."""

    def close(self) -> None:
        """Close the connection as it is (the server rolls back what is open)."""


SessionOpener = Callable[[str, str, str], ClaimPort]  # (worker, queue type, owner token) -> a session


def claim_sessions(dsn: str, plan: SessionPlan) -> SessionOpener:
    """How workers open their sessions on this server."""

    def open_session(worker: str, queue_type: str, owner: str) -> ClaimPort:
        conn = connect_worker(dsn, worker)
        try:
            return ClaimSession(conn, plan, queue_type, worker, owner)
        except BaseException:
            conn.close()
            raise

    return open_session


def install_functions(plan: SessionPlan) -> list[str]:
    """The statements that create the run's functions (when the workers call functions)."""
    return [ddl for s in statements_of(plan) for ddl in create_function(s)] if plan.functions else []


def statements_of(plan: SessionPlan) -> list[WorkerStatement]:
    return worker_statements(plan.claim_sql, plan.mode, plan.delmsg, plan.audited)


def try_claim(plan: SessionPlan, queue_type: str) -> Callable[[psycopg.Connection], None]:
    """The install's trial: the claim run once in the form the workers will run it, left behind by
    nothing (the install rolls it back to a savepoint; a prepared trial is deallocated)."""

    def trial(conn: psycopg.Connection) -> None:
        literal = sql.Literal(queue_type).as_string(conn) + ", null"
        if plan.functions:
            conn.execute(call(CLAIM, literal, True)).fetchall()
            return
        # the workers' own name: pg_stat_statements keeps the first text it saw for a statement
        conn.execute(prepare(statements_of(plan)[0]))
        try:
            conn.execute(call(CLAIM, literal, False)).fetchall()
        finally:
            conn.execute(f"deallocate {CLAIM}")

    return trial


class ClaimSession:
    """A worker's connection, speaking in as few round trips per message as it can.

    The connection is in autocommit mode, so explicit BEGIN and COMMIT in the text are the only
    transaction control, and several statements go in one simple-query message. In the basic mode
    a message costs one round trip: its completion, the commit, the clocks and the next claim go
    together ("... complete; commit; select clocks; begin; ... claim"); the server runs them in
    order, so ordering and the audit are as with separate trips. With attempts (single mode) and
    leases (split mode) the bookkeeping takes its own trips. Round trips go through `Wire`: raw
    results, each statement's error in its place.
    """

    def __init__(
        self, conn: psycopg.Connection, plan: SessionPlan, queue_type: str, worker: str, owner: str
    ) -> None:
        conn.autocommit = True
        self._conn = conn
        self._plan = plan
        if not (conn.info.parameter_status("DateStyle") or "").startswith("ISO"):
            conn.execute("set datestyle = 'ISO'")  # the server's text is read as ISO 8601
        if not plan.functions:
            conn.execute("deallocate all")
            for s in statements_of(plan):
                conn.execute(prepare(s))
        self._wire = Wire(conn)
        # Quoting is the costliest Python step per message: quote fixed values once.
        self._type = self._literal(queue_type)
        self._claim_call = call(CLAIM, f"{self._type}, null", plan.functions)
        self._worker = self._literal(worker)
        self._owner = self._literal(owner)
        self._quoted_types: dict[str, str] = {}
        if plan.mode == SessionMode.SPLIT:  # alive before its first claim, beaten from now on
            conn.execute(statement("owner_beat"), ([owner],))

    @property
    def backend_pid(self) -> int:
        return self._conn.info.backend_pid

    @property
    def closed(self) -> bool:
        return self._conn.closed

    def cancel(self) -> None:
        cancel_query(self._conn)

    def close(self) -> None:
        self._conn.close()

    def was_completed(self, msg_id: int, worker: str | None) -> bool | None:
        return was_completed(self._conn, msg_id, worker)

    def _literal(self, value: object) -> str:
        return sql.Literal(value).as_string(self._conn)

    def _quoted_type(self, queue_type: str) -> str:
        quoted = self._quoted_types.get(queue_type)
        if quoted is None:
            quoted = self._quoted_types[queue_type] = self._literal(queue_type)
        return quoted

    def _call(self, name: str, args: str) -> str:
        return call(name, args, self._plan.functions)

    def _run(self, text: str) -> Answer:
        """One round trip that must succeed as a whole."""
        answer = self._wire.roundtrip(text.encode(self._wire.encoding))
        failure = answer.failure()
        if failure is not None:
            raise failure
        return answer

    def claim(self) -> Claimed | None:
        """Claim one message; None (transaction ended) if nothing is free. Basic and single
        modes leave the transaction open; split mode has committed the claim."""
        return self._claimed(self._run(f"begin; {self._claim_call}").results[1])

    def _claimed(self, result: PGresult) -> Claimed | None:
        if result.ntuples > 1:  # the rest would be marked taken and never processed
            raise SimError(
                f"the claim query returned {result.ntuples} rows; it must claim one message (limit 1)"
            )
        if result.ntuples == 0:
            self._run("commit")
            return None
        value, encoding = result.get_value, self._wire.encoding
        msg_id, order_id = int(value(0, 0) or 0), int(value(0, 2) or 0)
        queue_type, claimed_at = (value(0, 1) or b"").decode(encoding), (value(0, 3) or b"").decode()
        plan = self._plan
        if plan.mode == SessionMode.BASIC:
            return Claimed(msg_id, queue_type, order_id, claimed_at)
        if plan.mode == SessionMode.SINGLE:
            taken = self._run(f"{self._call(TAKE, str(msg_id))}; savepoint work")
        else:
            args = f"{msg_id}, {self._owner}, {plan.lease_s!r}"
            taken = self._run(f"{self._call(TAKE, args)}; commit")
        return Claimed(msg_id, queue_type, order_id, claimed_at, int(taken.results[0].get_value(0, 0) or 0))

    def complete(self, claimed: Claimed, claim_next: bool) -> Completion:
        """Complete the claimed message and commit; with claim_next (basic mode), claim the next
        message in the same round trip."""
        plan = self._plan
        split = plan.mode == SessionMode.SPLIT
        owner = f", {self._owner}" if split else ""
        journal = ""
        if plan.audited:  # claimed_at is the server's own text for its timestamptz, offset included
            args = (
                f"{claimed.msg_id}, {self._quoted_type(claimed.queue_type)}, {claimed.order_id},"
                f" {self._worker}, '{claimed.claimed_at}'::timestamptz, {claimed.attempt}{owner}"
            )
            journal = f"{self._call(JOURNAL, args)}; "
        # the completion's result comes after the split mode's BEGIN and the journal's row
        first = (1 if split else 0) + (1 if journal else 0)
        completion = self._call(COMPLETE, f"{claimed.msg_id}{owner}")
        text = f"{'begin; ' if split else ''}{journal}{completion}; commit; {CLOCKS}"
        chained = claim_next and plan.chains
        if chained:  # the group just completed is named: a strategy with affinity tries it first
            text += f"; begin; {self._call(CLAIM, f'{self._type}, {claimed.order_id}')}"
        answer = self._wire.roundtrip(text.encode(self._wire.encoding))
        results = answer.results
        if len(results) < first + 3:  # the completion, its commit or the clocks did not answer
            raise answer.failure() or SimError("the completion's round trip ended without its commit")
        done, commit, clocks = results[first : first + 3]
        if commit.command_status != b"COMMIT":
            raise SimError(f"the completion's commit answered {commit.command_status!r}")
        time_added = committed_at = None
        if done.ntuples:
            time_added = (done.get_value(0, 0) or b"").decode()
            committed_at = (clocks.get_value(0, 0) or b"").decode()
        server_s = float(clocks.get_value(0, 1) or 0)
        following = None
        failure = answer.failure()
        if chained and failure is None:
            following = self._claimed(results[first + 4])
        return Completion(time_added, committed_at, server_s, following, chained, failure)

    def fail(self, claimed: Claimed, error: str) -> bool | None:
        """Record a failed attempt and commit: True if it made the message a dead letter,
        None if this worker no longer owned it (split). In single mode the work's changes
        roll back to the savepoint taken after the claim; the bookkeeping commits."""
        plan = self._plan
        owner = self._owner if plan.mode == SessionMode.SPLIT else "null"
        args = (
            f"{claimed.msg_id}, {self._worker}, '{claimed.claimed_at}'::timestamptz,"
            f" {self._literal(error)}, {int(plan.max_attempts)}, {plan.backoff_ms!r}, {owner}"
        )
        before = "rollback to savepoint work; " if plan.mode == SessionMode.SINGLE else "begin; "
        failed = self._run(f"{before}{self._call(FAIL, args)}; commit").results[1]
        return failed.get_value(0, 0) == b"t" if failed.ntuples else None

    def abandon(self) -> None:
        """Roll back whatever is open: the message goes back to the queue."""
        if not self._conn.closed and self._conn.info.transaction_status != TransactionStatus.IDLE:
            self._conn.execute("rollback")


def was_completed(conn: psycopg.Connection, msg_id: int, worker: str | None) -> bool | None:
    """Did this worker's completion of msg_id commit? Asked after a commit's answer was lost.

    With the journal the answer is exact (its row names the worker). Without it, a message
    still pending did not complete; a completed one may have been completed by another
    worker after ours rolled back, so the answer is None: unknown."""
    cur = psycopg.RawCursor(conn)
    if worker is not None:
        row = cur.execute(statement("journaled_by"), (msg_id, worker)).fetchone()
        return bool(row and row[0])
    row = cur.execute(statement("completed_message"), (msg_id,)).fetchone()
    return None if row and row[0] else False
