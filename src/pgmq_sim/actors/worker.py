"""A worker: claim one message of its type, do the work, complete it, commit.

Claim, work and completion share one transaction, so a message another worker
has in flight stays locked (and, for the ordered claims, blocks the rest of its
group) until it commits. `WorkerLoop` is the one code path every runner uses: a
thread here, a Locust user in another process or on another host.

A worker whose connection dies gets a new one, with backoff, until the reconnect
deadline; the server rolled back its message, which whoever claims it next
processes. A commit whose answer never came is in doubt: the journal says whether
it landed before the message is counted.
"""

from __future__ import annotations

import contextlib
import random
import threading
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field

import psycopg

from pgmq_sim.actors.ownership import Owners
from pgmq_sim.actors.threads import RunThread
from pgmq_sim.actors.wakeup import Wakeup
from pgmq_sim.db.claims import ClaimPort, SessionOpener
from pgmq_sim.db.connection import is_connection_lost, reconnecting
from pgmq_sim.db.values import Claimed, SessionPlan
from pgmq_sim.designs.design import QueueDesign
from pgmq_sim.dsn import reason
from pgmq_sim.errors import ServerLostError
from pgmq_sim.model.backoff import Backoff
from pgmq_sim.model.kinds import SessionMode
from pgmq_sim.result.stats import Timeline, WorkerStats
from pgmq_sim.runlog import RunLog
from pgmq_sim.settings import MAX_WORKERS, Settings, WorkTime

RECONNECT_FIRST_S = 0.05
STATS_FLUSH_S = 1.0
RECONNECT_MAX_S = 2.0
SAME_OUTAGE_S = 5.0  # a failure this soon after reconnecting, before any answer, is the same outage


class ProcessedCounter:
    """Messages committed as processed, across workers; sets `done` at the target.

    A completion whose commit outcome is unknown and could not be checked (no journal)
    is counted apart, so the run can ask the database before it calls itself done."""

    def __init__(self, target: int | None, done: threading.Event) -> None:
        self._lock = threading.Lock()
        self._count = 0
        self._in_doubt = 0
        self._target = target
        self._done = done

    def add(self) -> None:
        with self._lock:
            self._count += 1
            if self._target is not None and self._count >= self._target:
                self._done.set()

    def add_in_doubt(self) -> None:
        with self._lock:
            self._in_doubt += 1

    def set_totals(self, count: int, in_doubt: int) -> None:
        """The count as reported by workers elsewhere (a total, not a stream)."""
        with self._lock:
            self._count, self._in_doubt = count, in_doubt
            if self._target is not None and self._count >= self._target:
                self._done.set()

    @property
    def count(self) -> int:
        return self._count

    @property
    def in_doubt(self) -> int:
        return self._in_doubt


class ClaimGate:
    """Which of a process's workers may claim now: all of them, the first few (a worker sweep), or
    none (a timed run draining its work in flight). Counts the workers holding a message."""

    PARK_S = 0.2

    def __init__(self, allowed: int) -> None:
        self._changed = threading.Condition()
        self._allowed = allowed
        self._holding: dict[int, bool] = {}  # by worker index; each worker writes only its own

    def allow(self, count: int) -> None:
        with self._changed:
            self._allowed = count
            self._changed.notify_all()

    def allows(self, index: int) -> bool:
        return index < self._allowed

    def park(self, index: int) -> None:
        """Wait (a short while) to be allowed again; the caller checks its stop between waits."""
        with self._changed:
            self._changed.wait_for(lambda: index < self._allowed, timeout=self.PARK_S)

    def hold(self, index: int) -> None:
        self._holding[index] = True

    def release(self, index: int) -> None:
        self._holding[index] = False

    @property
    def busy(self) -> int:
        return sum(self._holding.copy().values())


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
    settings: Settings, design: QueueDesign, transaction_pooled: bool = False, pooled: bool = False
) -> SessionPlan:
    """What each worker's session runs, from the settings and the design: the same in every process."""
    return SessionPlan(
        design.wrapped_claim_sql,
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
    )


@dataclass(frozen=True)
class WorkerPlan:
    """What every worker shares: its sessions, the statements, the work and the run's clock."""

    dsn: str  # to scrub from error lines
    session: SessionPlan
    open_session: SessionOpener  # (worker, queue type) -> a connected session
    work: WorkTime
    reconnect_timeout: float
    clock: Callable[[], float]
    fail_rate: float = 0.0
    gate: ClaimGate = field(default_factory=lambda: ClaimGate(MAX_WORKERS))
    owners: Owners = field(default_factory=Owners)
    opened: threading.Semaphore | None = None  # released once by each worker's first connect, done or not


class WorkerLoop:
    """One queue worker's life: connect, then claim-work-complete, reconnecting when lost."""

    def __init__(
        self,
        stats: WorkerStats,
        plan: WorkerPlan,
        wakeup: Wakeup,
        log: RunLog,
        counter: ProcessedCounter,
        timeline: Timeline,
        stop: threading.Event,
        rng: random.Random,
    ) -> None:
        self.stats = stats
        self._plan = plan
        self._wakeup = wakeup.slot(stats.queue_type)
        self._log = log
        self._counter = counter
        self._timeline = timeline
        self._halt = stop
        self._rng = rng
        self._session: ClaimPort | None = None
        self._claim_now = True  # at the start, nothing says whether messages wait: claim
        self._after_completion = False  # the last empty claim rode behind a completion
        self._in_doubt: tuple[str, Claimed] | None = None  # (complete | fail, message) sent, no answer
        self._interrupt = threading.Event()  # ends the work early: a stop, or a crash to simulate
        self._crash_requested = False
        self._index = worker_index(stats.name)
        self.owner = plan.owners.new_token(stats.name)  # kept across reconnects, new after a crash
        self._claim_s = 0.0  # the current message's claim, as measured when it was claimed
        self._next: tuple[Claimed, ...] = ()  # claimed by the last completion's round trip
        self._idle_at = time.perf_counter()  # when the session last went idle outside a transaction
        self.backend_pid: int | None = None
        # from a lost connection until a statement answers again: one outage, counted once, its
        # reconnects waited out on one backoff (a pooler accepts the login and then refuses the
        # first statement while its own login to the server is failing)
        self._outage: Backoff | None = None
        self._outage_since = 0.0
        self._refusals = 0  # failures after a reconnect, within the outage
        self._reconnected = False
        self._reconnected_at = 0.0

    def interrupt(self) -> None:
        """Cut the work short (the run is stopping); the message rolls back or stays in progress."""
        self._interrupt.set()

    def crash(self) -> None:
        """Die mid-work without cleaning up (a fault the run injects): the connection closes with
        the message claimed; in split mode it stays in progress until recovery."""
        self._crash_requested = True
        self._interrupt.set()

    def cancel(self) -> None:
        """Cancel the statement this worker waits on, from another thread."""
        session = self._session
        if session is not None:
            session.cancel()

    def run(self) -> None:
        """Until the run stops: every message this worker can claim."""
        try:
            while not self._halt.is_set():
                self.step()
        finally:
            self.close()

    def step(self) -> None:
        """Handle at most one message, or ride out a lost connection."""
        try:
            if self._session is None:
                self._open()
            assert self._session is not None
            self._handle_one(self._session)
        except psycopg.Error as exc:
            closed = self._session is not None and self._session.closed
            if self._halt.is_set() or not is_connection_lost(exc, closed):
                raise
            self._lost(exc)

    def close(self) -> None:
        self._wakeup.released()  # whatever it held rolls back (or, split, waits for recovery)
        session, self._session = self._session, None
        if session is not None:
            with contextlib.suppress(psycopg.Error):
                session.abandon()
            session.close()

    def _open(self) -> None:
        """Connect (retrying while the server is away), prepare, and settle a commit in doubt."""
        first = self.backend_pid is None
        name = self.stats.name
        try:
            session = reconnecting(
                lambda: self._plan.open_session(name, self.stats.queue_type, self.owner),
                self._outage or self._backoff(),
                lost=lambda exc: not first and is_connection_lost(exc),  # a first failure is a real one
                give_up=self._gave_up,
            )
        finally:
            if first and self._plan.opened is not None:
                self._plan.opened.release()
        try:
            self._session = session
            self.backend_pid = session.backend_pid
            self._reconnected_at = time.monotonic()
            if not first and not self._reconnected:
                self._reconnected = True
                self.stats.reconnects += 1
                # behind a pooler (session or transaction) the pid is its cancel key, no backend's
                where = (
                    "through the pooler, which hides the backend's pid"
                    if self._plan.session.pooled
                    else f"backend pid {self.backend_pid}"
                )
                self._log.event(f"worker {name} reconnected ({where})")
            if self._in_doubt is not None:
                self._settle(session, self._in_doubt)
        except BaseException:
            self.close()
            raise

    def _settle(self, session: ClaimPort, doubt: tuple[str, Claimed]) -> None:
        """Count a completion whose commit answer was lost only if the journal has it. A failure's
        bookkeeping in doubt may have made a dead letter: the run asks the server at the end. The
        doubt stays until answered: a connection lost while asking asks again after reconnecting."""
        kind, claimed = doubt
        landed = None
        if kind == "complete":
            landed = session.was_completed(
                claimed.msg_id, self.stats.name if self._plan.session.audited else None
            )
            self._answered()
        self._in_doubt = None
        if landed is None:
            self._counter.add_in_doubt()
            self._log.event(f"worker {self.stats.name}: msg_id {claimed.msg_id} {kind} outcome unknown")
        elif landed:
            self.stats.record_processed(None, 0.0, 0.0)
            self._timeline.processed(self._plan.clock(), None)
            self._counter.add()
            self._log.event(f"worker {self.stats.name}: msg_id {claimed.msg_id} had committed")

    def _gave_up(self, exc: BaseException) -> ServerLostError:
        return ServerLostError(
            f"worker {self.stats.name} could not reconnect within {self._plan.reconnect_timeout:g} s"
            f" (-reconnect-timeout): {reason(exc, self._plan.dsn)}"
        )

    def _backoff(self) -> Backoff:
        return Backoff(
            self._plan.reconnect_timeout, self._halt, RECONNECT_FIRST_S, RECONNECT_MAX_S, self._rng
        )

    def _answered(self) -> None:
        """A statement answered: an outage, if one was going on, is over."""
        if self._refusals:
            self._log.event(
                f"worker {self.stats.name} back after {time.monotonic() - self._outage_since:.1f} s"
                f" ({self._refusals} refused after reconnecting)"
            )
        self._outage, self._refusals, self._reconnected = None, 0, False

    def _lost(self, exc: BaseException) -> None:
        now = time.monotonic()
        if self._outage is not None and now - self._reconnected_at < SAME_OUTAGE_S:
            self._refused(exc)
            return
        # a first loss, or one long after a reconnect that no statement has used since (an idle
        # worker): a new outage
        self._outage, self._outage_since, self._refusals, self._reconnected = self._backoff(), now, 0, False
        if self._plan.session.mode == SessionMode.SPLIT:
            # what this worker took on the lost connection may have committed unseen: a new token,
            # and the old one's messages come back through recovery within about a second
            self._renew_owner()
        self.stats.connections_lost += 1
        self._timeline.lost(self._plan.clock())
        self._log.event(
            f"worker {self.stats.name} lost its connection: {reason(exc, self._plan.dsn)}; reconnecting"
        )
        self.close()

    def _refused(self, exc: BaseException) -> None:
        """Reconnected, and the path failed again before any statement answered: the same outage.
        Said once; the next attempt waits its backoff step, within -reconnect-timeout."""
        outage = self._outage
        assert outage is not None
        self._refusals += 1
        if self._refusals == 1:
            self._log.event(
                f"worker {self.stats.name} reconnected, but the path still fails:"
                f" {reason(exc, self._plan.dsn)}; retrying with backoff for up to"
                f" {self._plan.reconnect_timeout:g} s from"
                " the loss (-reconnect-timeout)"
            )
        self.close()
        if not outage.wait() and not self._halt.is_set():
            raise self._gave_up(exc)

    def _handle_one(self, session: ClaimPort) -> None:
        """Handle the message the last completion's round trip claimed, or claim one."""
        plan = self._plan
        claimed, self._next = self._next, ()
        if not claimed:
            if not plan.gate.allows(self._index):
                self._wakeup.released()  # a parked worker does not vouch for its type's queue
                plan.gate.park(self._index)
                return
            if not self._claim_now:
                self._wakeup.wait(self._after_completion)
                self._claim_now, self._after_completion = True, False
                return  # the run may have stopped meanwhile
            claimed = self._claim(session)
            if not claimed:
                return
        plan.gate.hold(self._index)
        try:
            self._process(session, claimed)
        finally:
            plan.gate.release(self._index)

    def _claim(self, session: ClaimPort) -> tuple[Claimed, ...]:
        stats = self.stats
        self._wakeup.claiming()
        started = time.perf_counter()
        claimed = session.claim()
        if self._outage is not None:
            self._answered()
        self._claim_s = time.perf_counter() - started
        stats.claim.record_ms(self._claim_s * 1000)
        self._wakeup.claimed(len(claimed))
        if not claimed:
            self._empty(after_completion=False)
        elif self._plan.session.mode == SessionMode.SPLIT:
            stats.claim_commits += 1
        return claimed

    def _empty(self, after_completion: bool) -> None:
        """Nothing claimable: the next step waits for a reason to claim."""
        self.stats.empty_claims += 1
        self._claim_now, self._after_completion = False, after_completion

    def _process(self, session: ClaimPort, claimed: tuple[Claimed, ...]) -> None:
        """Work the claim's messages in the order returned, then complete them in one round trip
        (a failed one is recorded on its own and left out)."""
        plan = self._plan
        done: list[Claimed] = []
        work_total = 0.0
        for message in claimed:
            work_s = self._rng.uniform(plan.work.min_ms, plan.work.max_ms) / 1000
            interrupted = self._interrupt.wait(work_s) if work_s > 0 else self._interrupt.is_set()
            if interrupted or self._halt.is_set():
                if self._crash_requested:
                    self._crash()
                return  # stopping mid-message: close() rolls it back
            if plan.fail_rate and self._rng.random() < plan.fail_rate:
                self._fail(session, message, work_s)
                continue
            done.append(message)
            work_total += work_s
        if done:
            self._complete(session, tuple(done), work_total)

    def _complete(self, session: ClaimPort, claimed: tuple[Claimed, ...], work_s: float) -> None:
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
        done = session.complete(claimed, claim_next)
        if self._outage is not None:
            self._answered()
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
                self._empty(after_completion=True)
        share = 1 / len(claimed)  # the claim's and the round trip's time, spread over its messages
        for index, message in enumerate(claimed):
            if not done.finished[index]:
                stats.lost_ownership += 1  # recovered while we worked: another worker has it now
                self._log.event(
                    f"worker {stats.name}: msg_id {message.msg_id} was recovered from it; not completed"
                )
                continue
            e2e_ms = done.e2e_ms(index)
            stats.record_processed(e2e_ms, busy_s * share, work_s * share)
            self._timeline.processed(plan.clock(), e2e_ms)
            self._counter.add()
            self._log.message(
                stats.name,
                message.queue_type,
                message.msg_id,
                message.order_id,
                done.time_added[index],
                message.claimed_at,
                done.committed_at,
            )
        if done.claim_error is not None:
            raise done.claim_error  # after the count: the completion it rode behind is durable

    def _fail(self, session: ClaimPort, claimed: Claimed, work_s: float) -> None:
        """The work failed: record the attempt (and maybe the dead letter) and move on."""
        stats = self.stats
        error = f"simulated failure of attempt {claimed.attempt}"
        self._in_doubt = ("fail", claimed)
        sent = time.perf_counter()
        dead = session.fail(claimed, error)
        self._in_doubt = None
        self._claim_now = self._wakeup.claim_due()
        stats.busy_s += self._claim_s + work_s + time.perf_counter() - sent
        stats.work_s += work_s
        if dead is None:
            stats.lost_ownership += 1
            return
        stats.failed_attempts += 1
        self._log.event(
            f"failed worker={stats.name} type={claimed.queue_type} msg_id={claimed.msg_id}"
            f" order_id={claimed.order_id} attempt={claimed.attempt}" + (" dead-letter" if dead else "")
        )
        if dead:
            stats.dead_lettered += 1
            self._counter.add()  # finished: the run ends when every message is processed or dead

    def _crash(self) -> None:
        self._crash_requested = False
        self._interrupt.clear()
        self.stats.crashes += 1
        self._log.event(f"worker {self.stats.name} crashed mid-work (injected); a new one takes its place")
        self._wakeup.released()
        session, self._session = self._session, None
        if session is not None:
            session.close()  # no rollback, no completion: the server ends the session's transaction
        self._renew_owner()

    def _renew_owner(self) -> None:
        """The old token's heartbeat stops (recovery takes its messages back); work on under a new one."""
        self._plan.owners.drop(self.owner)
        self.owner = self._plan.owners.new_token(self.stats.name)


class Worker(RunThread):
    """A worker on a thread of this process."""

    def __init__(self, loop: WorkerLoop, stop: threading.Event, on_error: Callable[[BaseException], None]):
        super().__init__(loop.stats.name, stop, on_error)
        self.loop = loop

    def cancel(self) -> None:
        self.loop.cancel()

    def body(self) -> None:
        self.loop.run()


def crew(
    stats: Sequence[WorkerStats],
    seeds: Sequence[float],
    plan: WorkerPlan,
    wakeup: Wakeup,
    log: RunLog,
    counter: ProcessedCounter,
    timeline: Timeline,
    stop: threading.Event,
) -> list[WorkerLoop]:
    """The queue workers of one process, each with its own seeded randomness."""
    return [
        WorkerLoop(s, plan, wakeup, log, counter, timeline, stop, random.Random(seed))
        for s, seed in zip(stats, seeds, strict=True)
    ]
