"""A worker: claim one message of its type, do the work, complete it, commit.

Claim, work and completion share one transaction, so a message another worker
has in flight stays locked (and, for the ordered claims, blocks the rest of its
group) until it commits. `WorkerLoop` is the one code path every runner uses: a
task on the run's event loop, in this process or in a Locust worker's.

A worker whose connection dies gets a new one, with backoff, until the reconnect
deadline (actors/outage); the server rolled back its message, which whoever claims
it next processes. A commit whose answer never came is in doubt: the journal says
whether it landed before the message is counted.

A statement the server ends without ending the session (its statement or lock timeout, a
cancel, a deadlock, a serialization failure, a full disk: model/reasons) ends the
message's transaction: the worker rolls it back, counts the reason, and claims again (after a
short backoff when it repeats). The message goes back to the queue as it was, so exactly
once and order hold as for a lost connection; in split mode the worker takes a new owner
token, as after a loss, and recovery returns what the old one held.
"""

from __future__ import annotations

import contextlib
import random
import time
from collections.abc import Callable
from dataclasses import dataclass, field

import psycopg

from pgmq_sim.actors.bells import Halt, Why
from pgmq_sim.actors.books import ProcessedCounter, WorkerBooks
from pgmq_sim.actors.gate import ClaimGate
from pgmq_sim.actors.outage import Outage
from pgmq_sim.actors.ownership import Owners
from pgmq_sim.actors.wakeup import Wakeup
from pgmq_sim.db.claims import ClaimPort, SessionOpener
from pgmq_sim.db.connection import is_connection_lost, server_reason
from pgmq_sim.db.values import Claimed, SessionPlan
from pgmq_sim.designs.design import QueueDesign
from pgmq_sim.model.kinds import SessionMode
from pgmq_sim.model.reasons import ServerReason
from pgmq_sim.result.stats import WorkerStats
from pgmq_sim.result.timeline import Timeline
from pgmq_sim.runlog import RunLog
from pgmq_sim.settings import MAX_WORKERS, Settings, WorkTime

STATS_FLUSH_S = 1.0
ERROR_BACKOFF_S = (0.01, 1.0)  # after a statement the server ended, again and again: first, cap


def worker_index(name: str) -> int:
    """w1 -> 0: a worker's place in the run, the same in every process."""
    return int(name.removeprefix("w")) - 1


@dataclass(frozen=True)
class Assignment:
    """One queue worker, as a process is told to run it."""

    name: str
    queue_type: str
    seed: float


def session_plan(
    settings: Settings,
    design: QueueDesign,
    transaction_pooled: bool = False,
    pooled: bool = False,
    id_type: str | None = None,
    team_timeouts: tuple[tuple[str, int], ...] = (),
) -> SessionPlan:
    """What each worker's session runs, from the settings and the design: the same in every process.
    `id_type`: the type of the id a design's enqueue returns as msg_id (its own ids), if it does;
    `team_timeouts`: the role's statement and lock timeouts that are on (name, ms)."""
    return SessionPlan(
        design.claim.text,
        design.deletes,
        settings.audit,
        mode=settings.session_mode,
        lease_s=settings.lease,
        max_attempts=settings.max_attempts,
        backoff_ms=settings.backoff_ms,
        functions=transaction_pooled,  # no session state: nothing PREPAREd
        chain=not transaction_pooled,  # a transaction between messages would pin a server connection
        pooled=pooled or transaction_pooled,
        complete_sql=design.complete.text,
        fail_sql=design.fail.text if design.fail is not None else None,
        batch=settings.batch,
        seed_table=design.seed_table,
        at_least_once=design.at_least_once,
        id_type=id_type or "bigint",
        builtin_claim=design.claim.origin in ("built-in", "packaged"),
        keyed=id_type is not None,
        team_timeouts=team_timeouts,
        channel=design.channel,
    )


@dataclass(frozen=True)
class WorkerPlan:
    """What every worker shares: its sessions, the statements, the work and the run's clock."""

    dsn: str  # to scrub from error lines
    session: SessionPlan
    open_session: SessionOpener  # (worker, queue type, owner) -> a connected session
    work: WorkTime
    reconnect_timeout: float
    clock: Callable[[], float]
    fail_rate: float = 0.0
    gate: ClaimGate = field(default_factory=lambda: ClaimGate(MAX_WORKERS))
    owners: Owners = field(default_factory=Owners)
    opened: Callable[[], None] | None = None  # called once by each worker's first connect, done or not


class WorkerLoop:
    """One queue worker's life: connect, then claim-work-complete, reconnecting when lost; its
    connection opened (retrying while the server is away), lost, ended by the server, crashed on
    purpose, closed, what it held going back and a commit in doubt settled."""

    def __init__(
        self,
        stats: WorkerStats,
        plan: WorkerPlan,
        wakeup: Wakeup,
        log: RunLog,
        counter: ProcessedCounter,
        timeline: Timeline,
        halt: Halt,
        rng: random.Random,
    ) -> None:
        self.stats = stats
        self._plan = plan
        self._halt = halt
        self._bell = halt.bell()  # rung by the halt, a crash, the gate, a notification's credit
        self._wakeup = wakeup.slot(stats.queue_type, self._bell)
        self._own_pids = wakeup.book.own_pids
        self._log = log
        self._books = WorkerBooks(stats, timeline, counter, log, plan.clock)
        self._timeline = timeline
        self._rng = rng
        self._session: ClaimPort | None = None
        self._claim_now = True  # at the start, nothing says whether messages wait: claim
        self._after_completion = False  # the last empty claim rode behind a completion
        self._in_doubt: tuple[str, Claimed] | None = None  # (complete | fail, message) sent, no answer
        self._crash_requested = False
        self._index = worker_index(stats.name)
        self.owner = plan.owners.new_token(stats.name)  # kept across reconnects, new after a crash
        self._claim_s = 0.0  # the current message's claim, as measured when it was claimed
        self._next: tuple[Claimed, ...] = ()  # claimed by the last completion's round trip
        self._idle_at = time.perf_counter()  # when the session last went idle outside a transaction
        self._ended_in_a_row = 0  # statements the server ended since one last answered
        # since when this worker has been free (holding no message, not in a claim that will return
        # one): the latency account's evidence of a free worker, sent with its next claim's journal row
        self._free_since: float | None = None
        self._parked = False
        self._at_fallback = False  # the next claim is the type's fallback (no notification woke it)
        self.backend_pid: int | None = None
        timeout = plan.reconnect_timeout
        self._outage = Outage(
            stats, timeline, log, plan.clock, plan.dsn, timeout, halt, self._sleep, rng, plan.session.pooled
        )  # fmt: skip

    async def close(self) -> None:
        """Roll back what is open (a statement still running is cancelled first) and close."""
        self._wakeup.released()  # whatever it held rolls back (or, split, waits for recovery)
        session, self._session = self._session, None
        if session is None:
            return
        try:
            with contextlib.suppress(psycopg.Error):
                await session.abandon()
        finally:
            session.close()

    async def _sleep(self, seconds: float) -> bool:
        return await self._halt.sleep(seconds, self._bell)

    async def _open(self) -> None:
        """Connect (retrying while the server is away), prepare, and settle a commit in doubt."""
        first = self.backend_pid is None
        stats = self.stats
        try:
            session = await self._outage.open(
                lambda: self._plan.open_session(stats.name, stats.queue_type, self.owner), first
            )
        finally:
            if first and self._plan.opened is not None:
                self._plan.opened()
        self._session, self.backend_pid = session, session.backend_pid
        self._wakeup.timed(session.time)  # an empty claim's own time, by why it was made
        self._own_pids.add(session.backend_pid)  # a notification it sends is the run's, named or not
        if first:
            self._free()
        if self._in_doubt is not None:  # a commit whose answer was lost: asked until answered
            await self._settle(session)

    async def _settle(self, session: ClaimPort) -> None:
        """A completion or failure sent without its answer: counted if it landed."""
        assert self._in_doubt is not None
        kind, claimed = self._in_doubt
        landed = None
        if kind == "complete":
            worker = self.stats.name if self._plan.session.audited else None
            landed = await session.was_completed(claimed, worker)
            self._outage.answered()
        self._in_doubt = None
        self._books.settled(kind, claimed, landed)

    async def _ended(self, session: ClaimPort, said: ServerReason) -> None:
        """The server ended a statement and its transaction, not the session: roll back (the
        message goes back to the queue), settle a completion it may have cut, count the reason and
        claim again, waiting a little longer each time it repeats."""
        self._timeline.reasons.met(self._plan.clock(), said, self.stats.name, self.backend_pid, lost=False)
        self._log.event(
            f"worker {self.stats.name}: the server ended a statement: {said.text()}; rolled back,"
            " claiming again"
        )
        self._wakeup.released()
        self._wakeup.retrying()
        self._free()  # what it held rolled back
        self._next = ()
        await session.abandon()
        if self._in_doubt is not None and self._in_doubt[0] == "complete":
            await self._settle(session)  # answered with an error: the journal says what committed
        self._in_doubt = None  # a failure's bookkeeping answered with an error: rolled back
        if self._plan.session.mode == SessionMode.SPLIT:
            self._renew_owner()  # what it held comes back through recovery, as after a loss
        self._claim_now = True
        self._ended_in_a_row += 1
        first, cap = ERROR_BACKOFF_S
        if self._ended_in_a_row > 1:
            await self._sleep(min(cap, first * 2 ** (self._ended_in_a_row - 2)) * self._rng.uniform(0.5, 1.0))

    async def _lost(self, exc: BaseException) -> None:
        self._free()  # what it held rolled back (or, split, waits for recovery)
        delay = self._outage.lost(exc, self.backend_pid)
        if delay is None and self._plan.session.mode == SessionMode.SPLIT:
            # what this worker took on the lost connection may have committed unseen: a new token,
            # and the old one's messages come back through recovery within about a second
            self._renew_owner()
        await self.close()
        self._wakeup.retrying()
        if delay:  # refused again within the outage: its next backoff step
            await self._sleep(delay)

    def _free(self, since: float | None = None) -> None:
        """The worker holds no message from `since` (now) on, unless it was free already."""
        if self._free_since is None:
            self._free_since = time.perf_counter() if since is None else since

    def _crash(self) -> None:
        self._crash_requested = False
        self.stats.crashes += 1
        self._log.event(f"worker {self.stats.name} crashed mid-work (injected); a new one takes its place")
        self._free()
        self._wakeup.released()
        session, self._session = self._session, None
        if session is not None:
            session.close()  # no rollback, no completion: the server ends the session's transaction
        self._renew_owner()

    def _renew_owner(self) -> None:
        """The old token's heartbeat stops (recovery takes its messages back); work on under a new one."""
        self._plan.owners.drop(self.owner)
        self.owner = self._plan.owners.new_token(self.stats.name)

    def crash(self) -> None:
        """Die mid-work without cleaning up (a fault the run injects): the connection closes with
        the message claimed; in split mode it stays in progress until recovery."""
        self._crash_requested = True
        self._bell.ring(Why.CRASH)

    async def run(self, after_step: Callable[[WorkerStats], None] | None = None) -> None:
        """Until the run stops: every message this worker can claim."""
        try:
            while not self._halt.is_set():
                await self.step()
                if after_step is not None:
                    after_step(self.stats)
        finally:
            self._outage.settle()  # a termination the run's end left unnamed
            self.stats.free_at_end = int(self._free_since is not None)
            await self.close()
            self._halt.forget(self._bell)

    async def step(self) -> None:
        """Handle at most one message, or ride out a lost connection."""
        try:
            if self._session is None:
                await self._open()
            assert self._session is not None
            await self._handle_one(self._session)
        except psycopg.Error as exc:
            closed = self._session is not None and self._session.closed
            if self._halt.is_set():
                raise
            if is_connection_lost(exc, closed):
                await self._lost(exc)
                return
            said = server_reason(exc, self._plan.dsn)
            if not said.retried or self._session is None:
                raise
            await self._ended(self._session, said)

    async def _handle_one(self, session: ClaimPort) -> None:
        """Handle the message the last completion's round trip claimed, or claim one."""
        plan = self._plan
        claimed, self._next = self._next, ()
        if not claimed:
            if not plan.gate.allows(self._index):
                self._wakeup.released()  # a parked worker does not vouch for its type's queue
                self._free_since, self._parked = None, True  # not free: not one that may take a message
                await plan.gate.park(self._index, self._bell)
                return
            if self._parked:
                self._parked = False
                self._free()
            if not self._claim_now:
                self._free()
                self._at_fallback = await self._wakeup.wait(self._after_completion)
                self._claim_now, self._after_completion = True, False
                return  # the run may have stopped meanwhile
            claimed = await self._claim(session)
            if not claimed:
                return
        plan.gate.hold(self._index)
        try:
            await self._process(session, claimed)
        finally:
            plan.gate.release(self._index)

    async def _claim(self, session: ClaimPort) -> tuple[Claimed, ...]:
        stats = self.stats
        self._wakeup.claiming()
        started = time.perf_counter()
        claimed = await session.claim()
        at_fallback, self._at_fallback = self._at_fallback, False
        self._ended_in_a_row = 0
        if self._outage.going_on:
            self._outage.answered()
        answered = time.perf_counter()
        self._claim_s = answered - started
        stats.claim.record_ms(self._claim_s * 1000)
        self._wakeup.claimed(len(claimed))
        if not claimed:
            self._empty(after_completion=False, since=started)
            return claimed
        if self._plan.session.mode == SessionMode.SPLIT:
            stats.claim_commits += 1
        if at_fallback:  # messages that no notification woke a worker for
            stats.fallback_finds += 1
        if self._free_since is not None:  # its journal row says how long this worker was free
            claimed = (claimed[0]._replace(free_s=answered - self._free_since), *claimed[1:])
            self._free_since = None
        return claimed

    def _empty(self, after_completion: bool, since: float) -> None:
        """Nothing claimable: the next step waits for a reason to claim, and the worker is free
        from the empty claim's start."""
        self.stats.empty_claims += 1
        self._claim_now, self._after_completion = False, after_completion
        self._free(since)

    async def _process(self, session: ClaimPort, claimed: tuple[Claimed, ...]) -> None:
        """Work the claim's messages in the order returned, then complete them in one round trip
        (a failed one is recorded on its own and left out)."""
        plan = self._plan
        done: list[Claimed] = []
        work_total = 0.0
        for message in claimed:
            work_s = self._rng.uniform(plan.work.min_ms, plan.work.max_ms) / 1000
            if work_s > 0 and not self._crash_requested and not self._halt.is_set():
                await self._halt.work(work_s, self._bell)  # rung only to cut it short: a crash, the halt
            if self._crash_requested:
                self._crash()
                return
            if self._halt.is_set():
                return  # stopping mid-message: close() rolls it back
            if plan.fail_rate and self._rng.random() < plan.fail_rate:
                await self._fail(session, message, work_s)
                continue
            done.append(message)
            work_total += work_s
        if done:
            await self._complete(session, tuple(done), work_total)

    async def _complete(self, session: ClaimPort, claimed: tuple[Claimed, ...], work_s: float) -> None:
        stats, plan = self.stats, self._plan
        sent = time.perf_counter()
        # Chaining keeps the session in a transaction between messages, and PostgreSQL flushes a
        # backend's statistics (dead tuples that drive autovacuum, the server's counters) only when
        # it is idle outside one: once a second each worker completes on its own first.
        idle_due = sent - self._idle_at >= STATS_FLUSH_S
        # claim again at once only where a message may wait (the wake-up knows of one, or of a
        # group this completion frees): at a steady rate most completions find nothing to chain
        self._claim_now = self._wakeup.claim_due()
        claim_next = (
            self._claim_now
            and plan.session.chains
            and plan.gate.allows(self._index)
            and not self._halt.is_set()
            and not idle_due
        )
        if not claim_next:
            self._idle_at = sent
        self._in_doubt = ("complete", claimed[-1])
        done = await session.complete(claimed, claim_next)
        if self._wakeup.completed():  # answered: what arrived meanwhile may wait for a claim
            self._claim_now = True
        self._ended_in_a_row = 0
        if self._outage.going_on:
            self._outage.answered()
        round_trip = time.perf_counter() - sent
        self._in_doubt = None  # answered: the commit landed (a claim after it may have failed)
        # on the server's clock: from the round trip's arrival to its commit; the rest of the round
        # trip (network, a pooler's queue, the next claim) belongs to the next claim
        complete_s = round_trip if done.server_s is None else done.server_s
        stats.complete.record_ms(complete_s * 1000)
        busy_s = self._claim_s + work_s + complete_s
        if not done.chained:
            stats.clock_reads += 1
        if done.chained and done.claim_error is None:
            self._claim_s = max(0.0, round_trip - complete_s)
            stats.claim.record_ms(self._claim_s * 1000)
            self._next = done.next
            self._wakeup.claimed(len(done.next))
            if not done.next:
                self._empty(after_completion=True, since=time.perf_counter() - self._claim_s)
        self._books.completed(claimed, done, busy_s, work_s)
        if done.claim_error is not None:
            raise done.claim_error  # after the count: the completion it rode behind is durable

    async def _fail(self, session: ClaimPort, claimed: Claimed, work_s: float) -> None:
        """The work failed: record the attempt (and maybe the dead letter) and move on."""
        error = f"simulated failure of attempt {claimed.attempt}"
        self._in_doubt = ("fail", claimed)
        sent = time.perf_counter()
        dead = await session.fail(claimed, error)
        self._in_doubt = None
        self._claim_now = self._wakeup.claim_due() or self._wakeup.completed()
        self._books.failed(claimed, dead, self._claim_s + work_s + time.perf_counter() - sent, work_s)
