"""A worker's side of the queue: claim, complete, fail, abandon, on one connection driven by the
run's event loop.

`ClaimPort` is what the worker loop needs from it, so the loop can be tested with a fake.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Sequence
from dataclasses import replace
from datetime import datetime
from typing import Any, NamedTuple, Protocol

import psycopg
from psycopg import sql
from psycopg.pq import ExecStatus, TransactionStatus
from psycopg.pq.abc import PGresult

from pgmq_sim.db.claim_rows import claim_columns, claimed_rows
from pgmq_sim.db.connection import opened_async, own_begin
from pgmq_sim.db.session_text import SessionText
from pgmq_sim.db.statements import (
    CLAIM,
    CLAIM_CLOCK,
    CLAIM_COLUMNS,
    COMPLETE,
    WorkerStatement,
    Wrapper,
    call,
    claim_statement,
    create_function,
    prepare,
    producer_statements,
    worker_statements,
)
from pgmq_sim.db.values import Claimed, SessionPlan
from pgmq_sim.db.wire import Answer, LoopTime, Wire
from pgmq_sim.errors import SimError
from pgmq_sim.model.kinds import SessionMode
from pgmq_sim.sqlfiles import statement

# after a commit: when it was done, and how long since the message carrying it arrived
TUPLES_OK = ExecStatus.TUPLES_OK
CLOCKS = "select clock_timestamp(), extract(epoch from clock_timestamp() - statement_timestamp())"


class Completion(NamedTuple):
    """A completion's answer for the messages of one claim, on the server's clock (DateStyle ISO
    text, for the log): per message, whether its row was finished (split mode: not when the worker
    no longer owned it) and the time its end-to-end latency counts from (its arrival, or its due
    time); when the commit was done; how long the server took from the round trip's arrival to the
    commit; and the next messages claimed in the same round trip, or the error that claim met
    (raised by the loop once the completion, durable, is counted)."""

    finished: tuple[bool, ...]
    time_added: tuple[str | None, ...]
    committed_at: str | None
    server_s: float | None = None
    next: tuple[Claimed, ...] = ()
    chained: bool = False  # a next claim was sent (its answer may be empty: nothing free)
    claim_error: psycopg.Error | None = None

    def e2e_ms(self, index: int) -> float | None:
        """From a message's arrival in the table (or its due time) to its commit, on the server's clock."""
        added = self.time_added[index]
        if not self.finished[index] or added is None or self.committed_at is None:
            return None
        return (server_time(self.committed_at) - server_time(added)).total_seconds() * 1000


def server_time(text: str) -> datetime:
    """A timestamptz as the server wrote it in DateStyle ISO ('2026-11-23 10:00:00.1+00')."""
    return datetime.fromisoformat(text)


class ClaimPort(Protocol):
    """A worker's connected session, as the worker loop uses it (on the run's loop)."""

    @property
    def backend_pid(self) -> int: ...

    @property
    def closed(self) -> bool: ...

    async def claim(self) -> tuple[Claimed, ...]:
        """Claim up to the batch's messages; none if nothing is free."""

    async def complete(self, claimed: Sequence[Claimed], claim_next: bool) -> Completion:
        """Complete the claim's messages and commit, and claim the next in the same round trip when
        asked and the session's mode allows it."""

    async def fail(self, claimed: Claimed, error: str) -> bool | None:
        """Record a failed attempt and commit: True if it made a dead letter, None if not owned."""

    async def was_completed(self, claimed: Claimed, worker: str | None) -> bool | None:
        """After a lost commit answer: did it land? None: cannot tell."""

    async def abandon(self) -> None:
        """Roll back whatever is open."""

    async def cancel(self) -> None:
        """Cancel the statement on the server and drain its answer (a round trip given up on)."""

    def close(self) -> None:
        """Close the connection as it is (the server rolls back what is open)."""

    # the worker's own time on the loop around this session's round trips, for its claims' account
    time: LoopTime


# (worker, queue type, owner token) -> a connected session
SessionOpener = Callable[[str, str, str], Awaitable[ClaimPort]]


def claim_sessions(dsn: str, plan: SessionPlan) -> SessionOpener:
    """How workers open their sessions on this server."""

    async def open_session(worker: str, queue_type: str, owner: str) -> ClaimPort:
        return await opened_async(
            dsn, worker, lambda conn: ClaimSession.open(conn, plan, queue_type, worker, owner)
        )

    return open_session


def install_functions(
    plan: SessionPlan, enqueue_sql: str | None = None
) -> Callable[[psycopg.Connection], list[str]]:
    """The statements that create the run's functions: every worker statement when the workers call
    functions (and a folder design's enqueue with the tool's log row), else those only a function
    can be (a completion that must finish exactly one row). Made in the install, once the schema
    ran: a claim called as a function returns its own columns, read from its description."""

    def ddl(conn: psycopg.Connection) -> list[str]:
        session = plan
        if plan.functions:
            session = replace(
                plan, claim_returns=", ".join(f"{n} {t}" for n, t in describe_claim(conn, plan))
            )
        statements = statements_of(session)
        if plan.functions and enqueue_sql is not None:
            statements += producer_statements(enqueue_sql, plan.id_type if plan.keyed else None)
        return [text for s in statements if plan.functions or s.function_only for text in create_function(s)]

    return ddl


def describe_claim(conn: psycopg.Connection, plan: SessionPlan) -> list[tuple[str, str]]:
    """The claim's result columns (name, type) as the server describes the statement as written."""
    s = claim_statement(plan)
    name = "pgmq_sim_described_claim"
    conn.execute(f"prepare {name}{s.argument_types} as {s.text}".encode())
    try:
        return result_columns(conn, name)
    finally:
        conn.execute(f"deallocate {name}")


def result_columns(conn: psycopg.Connection, prepared: str) -> list[tuple[str, str]]:
    """A prepared statement's result columns, (name, SQL type), as the server describes them."""
    result = conn.pgconn.describe_prepared(prepared.encode())
    if result.status != ExecStatus.COMMAND_OK:
        raise psycopg.errors.error_from_result(result, encoding=conn.info.encoding)
    columns = [(result.fname(i) or b"").decode() for i in range(result.nfields)]
    types = [(result.ftype(i), result.fmod(i)) for i in range(result.nfields)]
    if not types:
        return []
    rows = conn.execute(statement("format_types"), ([t for t, _ in types], [m for _, m in types]))
    return list(zip(columns, (str(row[0]) for row in rows), strict=True))


def missing_columns(columns: Sequence[str]) -> list[str]:
    """The columns a claim must return (by name, in any place) that it does not."""
    return [c for c in CLAIM_COLUMNS if c not in columns]


def statements_of(plan: SessionPlan) -> list[WorkerStatement]:
    return worker_statements(plan)


def try_claim(plan: SessionPlan, queue_type: str) -> Callable[[psycopg.Connection], None]:
    """The install's trial: the claim run once in the form the workers will run it, left behind by
    nothing (the install rolls it back to a savepoint; a prepared trial is deallocated)."""

    def trial(conn: psycopg.Connection) -> None:
        literal = sql.Literal(queue_type).as_string(conn) + f", {int(plan.batch)}, null, null, null"
        if plan.functions:
            cursor = conn.execute(call(CLAIM, literal, True))
        else:
            # the workers' own name: pg_stat_statements keeps the first text it saw for a statement
            conn.execute(prepare(statements_of(plan)[0]))
            try:
                cursor = conn.execute(call(CLAIM, literal, False))
            finally:
                conn.execute(f"deallocate {CLAIM}")
        cursor.fetchall()
        missing = missing_columns([d.name for d in cursor.description or ()])
        if missing:
            raise ClaimColumnsError(missing)

    return trial


class ClaimColumnsError(Exception):
    """The claim ran and returned no column of these names."""

    def __init__(self, missing: list[str]) -> None:
        super().__init__(f"it returns no {', '.join(missing)} column")
        self.missing = missing


class ClaimSession:
    """A worker's connection, speaking in as few round trips per claim as it can.

    The connection is in autocommit mode, so explicit BEGIN and COMMIT in the text are the only
    transaction control, and several statements go in one simple-query message. In the basic mode a
    claim costs one round trip: its messages' completions, the commit, the clocks and the next claim
    go together ("... complete; commit; select clocks; begin; ... claim"); the server runs them in
    order, so ordering and the audit are as with separate trips. With attempts (single mode) and
    leases (split mode) the bookkeeping takes its own trips. Round trips go through `Wire`: raw
    results, each statement's error in its place. The set-up (DateStyle, the PREPAREs, a split
    design's first beat) goes through psycopg before the wire takes the connection.
    """

    @classmethod
    async def open(
        cls, conn: psycopg.AsyncConnection[Any], plan: SessionPlan, queue_type: str, worker: str, owner: str
    ) -> ClaimSession:
        # the set-up is the tool's own (a PREPARE's planning may outlast a short statement_timeout
        # of the role's): one transaction under the tool's bounds; what it sets outlives it
        await conn.execute(own_begin(conn))
        if not (conn.info.parameter_status("DateStyle") or "").startswith("ISO"):
            await conn.execute("set datestyle = 'ISO'")  # the server's text is read as ISO 8601
        called = called_statements(plan)
        if not plan.functions:
            await conn.execute("deallocate all")
            for s in statements_of(plan):
                if s.name not in called:
                    await conn.execute(prepare(s))
        if plan.mode == SessionMode.SPLIT and plan.seed_table:  # alive before its first claim
            await conn.execute(statement("owner_beat"), ([owner],))
        await conn.execute("commit")
        return cls(Wire(conn), plan, queue_type, worker, owner)

    def __init__(self, wire: Wire, plan: SessionPlan, queue_type: str, worker: str, owner: str) -> None:
        self._wire = wire
        wire.meter = self.time = LoopTime()
        self._conn = wire.connection
        self._plan = plan
        called = called_statements(plan)
        # a wrapped statement called as a function answers with the rows it changed
        self._counts = {s.name for s in statements_of(plan) if s.name in called and s.wrapper != Wrapper.SQL}
        self._text = SessionText(self._conn, plan, called, queue_type, worker, owner)
        self._split = self._text.split
        self._places: tuple[int, int, int] | None = None

    @property
    def backend_pid(self) -> int:
        return self._wire.backend_pid

    @property
    def closed(self) -> bool:
        return self._wire.closed

    async def cancel(self) -> None:
        await self._wire.settle()

    def close(self) -> None:
        self._wire.close()

    async def was_completed(self, claimed: Claimed, worker: str | None) -> bool | None:
        """Did this worker's completion of the message commit? Asked after a commit's answer was lost.

        With the journal the answer is exact (its row names the worker). Without it, a message
        still pending did not complete; a completed one may have been completed by another
        worker after ours rolled back, so the answer is None: unknown."""
        ident = self._text.literal(claimed.shown_id)
        if worker is not None:
            asked = "journaled_by_keyed" if claimed.key is not None else "journaled_by"
            text = statement(asked).replace("$1", ident).replace("$2", self._text.literal(worker))
            return await self._own(text) == b"t"
        if not self._plan.seed_table:  # a folder design's table is its own: without the journal, no telling
            return None
        return None if await self._own(statement("completed_message").replace("$1", ident)) == b"t" else False

    async def _own(self, text: str) -> bytes | None:
        """A question of the tool's own (was a commit in doubt done?), in a transaction under its
        own bounds: the role's statement timeout must not leave it in doubt again. Its one value."""
        answer = await self._run(f"{own_begin(self._conn)}; {text}; commit")
        return answer.results[-2].get_value(0, 0)

    async def _run(self, text: str) -> Answer:
        """One round trip that must succeed as a whole."""
        return await self._wire.checked(text.encode(self._wire.encoding))

    def _changed(self, name: str, result: PGresult) -> int:
        """Rows a statement finished: its rows, its command's count, or a wrapper's answer."""
        if name in self._counts:
            return int(result.get_value(0, 0) or 0) if result.ntuples else 0
        if result.status == TUPLES_OK:
            return result.ntuples
        return int(result.command_tuples or 0)

    async def claim(self) -> tuple[Claimed, ...]:
        """Claim up to a batch; none (transaction ended) if nothing is free. Basic and single modes
        leave the transaction open; split mode has committed the claim."""
        plan = self._plan
        claim = f"begin; {self._text.claim()}; {CLAIM_CLOCK}"
        if plan.seed_table or not self._split:
            after = "; savepoint work" if plan.mode == SessionMode.SINGLE and not plan.seed_table else ""
            answer = await self._run(claim + after)
        else:  # a folder design's split claim commits at once: its messages are leased, not locked
            answer = await self._run(f"{claim}; commit")
        return await self._claimed(answer.results[1], answer.results[2])

    def _columns(self, result: PGresult) -> tuple[int, int, int]:
        """Where the claim's columns are (read once: a prepared statement's columns do not change)."""
        if self._places is None:
            self._places = claim_columns(result)
        return self._places

    async def _claimed(self, result: PGresult, clock: PGresult, before_s: float = 0.0) -> tuple[Claimed, ...]:
        """`before_s`: the server's time in the round trip before the claim (a completion's)."""
        plan = self._plan
        if result.ntuples > plan.batch:  # the rest would be marked taken and never processed
            raise SimError(
                f"the claim query returned {result.ntuples} rows for a batch of {plan.batch}; it must claim"
                " at most $2 messages (limit $2)"
            )
        if result.ntuples == 0:
            if plan.seed_table or not self._split:
                await self._run("commit")
            return ()
        claim_s = max(0.0, float(clock.get_value(0, 1) or 0) - before_s)
        claimed = claimed_rows(result, clock, self._columns(result), plan.keyed, self._wire.encoding, claim_s)
        if plan.mode == SessionMode.BASIC or not plan.seed_table:
            return tuple(claimed)
        # the seed's table counts each attempt on its row, in the claim's transaction (split: and
        # commits it, with the owner and the lease)
        takes = "; ".join(self._text.take(c) for c in claimed)
        after = "savepoint work" if plan.mode == SessionMode.SINGLE else "commit"
        taken = await self._run(f"{takes}; {after}")
        return tuple(
            c._replace(attempt=int(r.get_value(0, 0) or 0))
            for c, r in zip(claimed, taken.results, strict=False)
        )

    async def complete(self, claimed: Sequence[Claimed], claim_next: bool) -> Completion:
        """Complete the claim's messages and commit; with claim_next (basic mode), claim the next in
        the same round trip. A folder design's split completions go one by one: each must finish its
        own row, or roll back alone."""
        if self._split and not self._plan.seed_table:
            return await self._complete_each(claimed)
        plan, text = self._plan, self._text
        journal_first = plan.audited  # its row's answer precedes the completion's
        bounds = text.journal_bounds if plan.audited else None  # the tool's bounds around its row
        parts = ["begin"] if self._split else []
        for c in claimed:
            if bounds is not None:
                parts += [bounds[0], text.journal(c), bounds[1]]
            elif plan.audited:
                parts.append(text.journal(c))
            parts.append(text.complete(c, owned=self._split))
        parts += ["commit", CLOCKS]
        chained = claim_next and plan.chains
        if chained:  # the group just completed is named: a design with affinity tries it first
            parts += ["begin", text.claim(group=claimed[-1].order_id), CLAIM_CLOCK]
        answer = await self._wire.roundtrip("; ".join(parts).encode(self._wire.encoding))
        self.time.start(running=chained)  # a chained claim's own time is from this answer on
        results = answer.results
        first = 1 if self._split else 0
        per = (4 if bounds is not None else 2) if journal_first else 1
        at_journal = 1 if bounds is not None else 0  # within a message's results
        done_at = first + per * len(claimed)
        if len(results) < done_at + 2:  # a completion, the commit or the clocks did not answer
            raise answer.failure() or SimError("the completion's round trip ended without its commit")
        commit, clocks = results[done_at], results[done_at + 1]
        if commit.command_status != b"COMMIT":
            raise SimError(f"the completion's commit answered {commit.command_status!r}")
        finished, added = [], []
        for i in range(len(claimed)):
            done = results[first + per * i + per - 1]
            rows = self._changed(COMPLETE, done)
            finished.append(rows > 0)
            if plan.seed_table:
                added.append((done.get_value(0, 0) or b"").decode() if done.ntuples else None)
            else:  # the journal's row says when the message arrived (or was due)
                journal = results[first + per * i + at_journal] if journal_first else None
                added.append(
                    (journal.get_value(0, 1) or b"").decode() if journal and journal.ntuples else None
                )
        committed_at = (clocks.get_value(0, 0) or b"").decode() if any(finished) else None
        server_s = float(clocks.get_value(0, 1) or 0)
        following: tuple[Claimed, ...] = ()
        failure = answer.failure()
        if chained and failure is None:
            following = await self._claimed(results[done_at + 3], results[done_at + 4], server_s)
        return Completion(tuple(finished), tuple(added), committed_at, server_s, following, chained, failure)

    async def _complete_each(self, claimed: Sequence[Claimed]) -> Completion:
        """Split, a folder design: each message in its own transaction; exactly once, a completion
        that finds its lease gone finishes nothing and rolls back (the wrapper raises P0002)."""
        finished: list[bool] = []
        added: list[str | None] = []
        committed_at = None
        server_s = 0.0
        for c in claimed:
            parts = ["begin", self._text.complete(c, owned=True)]
            bounds = self._text.journal_bounds
            if self._plan.audited:  # last before the commit: the team's bounds need not come back
                parts += [bounds[0], self._text.journal(c)] if bounds is not None else [self._text.journal(c)]
            parts += ["commit", CLOCKS]
            answer = await self._wire.roundtrip("; ".join(parts).encode(self._wire.encoding))
            if answer.lost is not None:
                raise answer.lost
            if answer.error is not None:
                await self._run("rollback")
                if answer.error.sqlstate != "P0002":
                    raise answer.error
                # the lease passed: another worker has it
                finished.append(False)
                added.append(None)
                continue
            results = answer.results
            journal = results[3 if bounds is not None else 2] if self._plan.audited else None
            # at least once: a second delivery's completion finds the message gone (journaled all the same)
            finished.append(self._changed(COMPLETE, results[1]) > 0)
            added.append((journal.get_value(0, 1) or b"").decode() if journal and journal.ntuples else None)
            committed_at = (results[-1].get_value(0, 0) or b"").decode()
            server_s = float(results[-1].get_value(0, 1) or 0)
        return Completion(tuple(finished), tuple(added), committed_at, server_s)

    async def fail(self, claimed: Claimed, error: str) -> bool | None:
        """Record a failed attempt and commit: True if it made the message a dead letter,
        None if this worker no longer owned it (split). In single mode the work's changes
        roll back to the savepoint taken after the claim; the bookkeeping commits."""
        plan = self._plan
        if not plan.seed_table:
            return await self._fail_design(claimed, error)
        before = "rollback to savepoint work; " if plan.mode == SessionMode.SINGLE else "begin; "
        failed = (await self._run(f"{before}{self._text.fail_seed(claimed, error)}; commit")).results[1]
        return failed.get_value(0, 0) == b"t" if failed.ntuples else None

    async def _fail_design(self, claimed: Claimed, error: str) -> bool:
        """A folder design: the tool records the attempt (and decides a dead letter and the next
        try's time), then the design's fail.sql records it in its table, in one transaction."""
        text = self._text
        before = "rollback to savepoint work" if self._plan.mode == SessionMode.SINGLE else "begin"
        recorded = (await self._run(f"{before}; {text.failure(claimed, error)}")).results[1]
        attempt, dead = int(recorded.get_value(0, 0) or 1), recorded.get_value(0, 1) == b"t"
        await self._run(f"{text.fail_design(claimed, attempt, error, recorded.get_value(0, 2))}; commit")
        return dead

    async def abandon(self) -> None:
        """Roll back whatever is open: the message goes back to the queue. A statement still running
        (a round trip given up on: the run's halt) is cancelled on the server first, its answer
        drained, so it does not keep its locks."""
        await self._wire.settle()
        if not self.closed and self._conn.pgconn.transaction_status != TransactionStatus.IDLE:
            await self._run("rollback")


def called_statements(plan: SessionPlan) -> set[str]:
    """The statements called as functions (all of them behind a transaction pooler)."""
    return {s.name for s in statements_of(plan) if plan.functions or s.function_only}
