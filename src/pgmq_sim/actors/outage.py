"""A worker's lost connection, from the loss until a statement answers again: one outage, counted
once and said once, its reconnects waited out on one backoff. A pooler accepts the login and then
refuses the first statement while its own login to the server is failing: such a refusal, soon
after a reconnect and before any answer, is the same outage, not a new one.

Each loss is named by what the server said (model/reasons): a session its own policy ended (an
idle-in-transaction or idle-session timeout) is counted, but is no outage. A termination is the
server's shutdown when it then refuses the reconnects, an administrator's command when it does
not: named once the reconnect tells which."""

from __future__ import annotations

import random
import time
from collections.abc import Awaitable, Callable

from pgmq_sim.db.claims import ClaimPort
from pgmq_sim.db.connection import is_connection_lost, reconnecting_async, server_reason
from pgmq_sim.dsn import reason
from pgmq_sim.errors import ServerLostError
from pgmq_sim.model.backoff import Backoff, Stopped
from pgmq_sim.model.reasons import Cause, ServerReason
from pgmq_sim.result.stats import WorkerStats
from pgmq_sim.result.timeline import Timeline
from pgmq_sim.runlog import RunLog

RECONNECT_FIRST_S = 0.05
RECONNECT_MAX_S = 2.0
SAME_OUTAGE_S = 5.0  # a failure this soon after reconnecting, before any answer, is the same outage


class Outage:
    """One worker's outages: what it counts (connections lost, reconnects, the timeline's losses)
    and logs, and the backoff its reconnects wait on."""

    def __init__(
        self,
        stats: WorkerStats,
        timeline: Timeline,
        log: RunLog,
        clock: Callable[[], float],
        dsn: str,
        reconnect_timeout: float,
        stop: Stopped,
        sleep: Callable[[float], Awaitable[bool]],  # a backoff step on the loop; True: the run stopped
        rng: random.Random,
        pooled: bool,
    ) -> None:
        self._stats = stats
        self._timeline = timeline
        self._log = log
        self._clock = clock
        self._dsn = dsn  # to scrub from the lines
        self._reconnect_timeout = reconnect_timeout
        self._stop = stop
        self._sleep = sleep
        self._rng = rng
        self._pooled = pooled
        self._backoff: Backoff | None = None  # set from a loss until a statement answers
        self._since = 0.0
        self._refusals = 0  # failures after a reconnect, within the outage
        self._reconnected = False
        self._reconnected_at = 0.0
        self._pending: tuple[float, ServerReason, int | None] | None = None  # a termination not yet named
        self._refused = False  # the server refused a reconnect within the outage
        self._policy_losses = 0  # sessions the server's own timeouts ended since a statement answered

    @property
    def going_on(self) -> bool:
        """An outage, or sessions the server's timeouts ended, since a statement last answered."""
        return self._backoff is not None or self._policy_losses > 0

    def backoff(self) -> Backoff:
        """The outage's backoff, or a fresh one for a first connect."""
        return self._backoff or self._new_backoff()

    def _new_backoff(self) -> Backoff:
        return Backoff(self._reconnect_timeout, self._stop, RECONNECT_FIRST_S, RECONNECT_MAX_S, self._rng)

    def gave_up(self, exc: BaseException) -> ServerLostError:
        self._refused = True
        self.settle()
        return ServerLostError(
            f"worker {self._stats.name} could not reconnect within {self._reconnect_timeout:g} s"
            f" (-reconnect-timeout): {reason(exc, self._dsn)}"
        )

    async def open(self, attempt: Callable[[], Awaitable[ClaimPort]], first: bool) -> ClaimPort:
        """A session, retried on the outage's backoff while the server is away (a first failure is
        a real one: a bad DSN, a bad claim)."""
        session = await reconnecting_async(
            attempt,
            self.backoff(),
            self._sleep,
            lost=lambda exc: not first and (is_connection_lost(exc) or self._passing(exc)),
            on_lost=self._refusal,
            give_up=self.gave_up,
        )
        self._connected(first, session.backend_pid)
        return session

    def _passing(self, exc: BaseException) -> bool:
        """A reconnect refused for want of a free connection: waited out like the server's absence."""
        return server_reason(exc, self._dsn).cause == Cause.TOO_MANY_CONNECTIONS

    def _refusal(self, exc: BaseException) -> None:
        """A reconnect the server refused: a termination before it was its shutdown; too many
        connections is a reason of its own."""
        self._refused = True
        self._refusals += 1
        if self._refusals == 1:  # the session's set-up runs statements: a pooler may refuse those
            self._log.event(
                f"worker {self._stats.name} reconnecting, but the path still fails: {reason(exc, self._dsn)};"
                f" retrying with backoff for up to {self._reconnect_timeout:g} s from the loss"
                " (-reconnect-timeout)"
            )
        said = server_reason(exc, self._dsn)
        if said.cause == Cause.TOO_MANY_CONNECTIONS:
            self._timeline.reasons.met(self._clock(), said, self._stats.name, None, lost=False)
        self.settle()

    def settle(self) -> None:
        """Name a termination still waiting for its reconnect to tell a command from a shutdown."""
        pending, self._pending = self._pending, None
        if pending is not None:
            at_s, said, pid = pending
            self._timeline.reasons.met(at_s, said.resolved(self._refused), self._stats.name, pid, lost=True)

    def _connected(self, first: bool, backend_pid: int) -> None:
        """A session is open: after a loss, that is the outage's reconnect (counted once)."""
        self._reconnected_at = time.monotonic()
        self.settle()
        if first or self._reconnected:
            return
        self._reconnected = True
        self._stats.reconnects += 1
        # behind a pooler (session or transaction) the pid is its cancel key, no backend's
        where = (
            "through the pooler, which hides the backend's pid"
            if self._pooled
            else f"backend pid {backend_pid}"
        )
        self._log.event(f"worker {self._stats.name} reconnected ({where})")

    def answered(self) -> None:
        """A statement answered: the outage, if one was going on, is over."""
        self._policy_losses = 0
        if self._backoff is None:
            return
        if self._refusals:
            self._log.event(
                f"worker {self._stats.name} back after {time.monotonic() - self._since:.1f} s"
                f" ({self._refusals} refused after reconnecting)"
            )
        self._backoff, self._refusals, self._reconnected = None, 0, False

    def lost(self, exc: BaseException, pid: int | None = None) -> float | None:
        """The connection (of backend `pid`) is gone. A new outage is counted and said (None:
        reconnect at once); a refusal within the one going on is said once, and returns the
        backoff's next wait (raises past -reconnect-timeout). The caller closes the session either
        way."""
        now = time.monotonic()
        said = server_reason(exc, self._dsn)
        if said.policy:  # the server's own timeout ended the session: counted, no outage, reconnect now
            at_s = self._clock()
            self._stats.connections_lost += 1
            self._timeline.lost(at_s, outage=False)
            self._timeline.reasons.met(at_s, said, self._stats.name, pid, lost=True)
            self._log.event(f"worker {self._stats.name} lost its connection: {said.text()}; reconnecting")
            self._reconnected = False  # the reconnect is counted
            self._policy_losses += 1  # again before any answer: a short backoff, doubling to 1 s
            return 0.0 if self._policy_losses < 2 else min(1.0, 0.01 * 2 ** (self._policy_losses - 2))
        backoff = self._backoff
        if backoff is not None and now - self._reconnected_at < SAME_OUTAGE_S:
            self._refusals += 1
            self._refused = True
            if self._refusals == 1:
                self._log.event(
                    f"worker {self._stats.name} reconnected, but the path still fails:"
                    f" {reason(exc, self._dsn)}; retrying with backoff for up to"
                    f" {self._reconnect_timeout:g} s from the loss (-reconnect-timeout)"
                )
            delay = backoff.next_delay()
            if delay is None and not self._stop.is_set():
                raise self.gave_up(exc)
            return delay or 0.0
        # a first loss, or one long after a reconnect that no statement has used since (an idle
        # worker): a new outage
        self.settle()
        self._backoff, self._since, self._refusals, self._reconnected = self._new_backoff(), now, 0, False
        self._refused = False
        at_s = self._clock()
        self._stats.connections_lost += 1
        self._timeline.lost(at_s, outage=True)
        if said.cause == Cause.TERMINATED:  # a command or a shutdown: the reconnect tells
            self._pending = (at_s, said, pid)
        else:
            self._timeline.reasons.met(at_s, said, self._stats.name, pid, lost=True)
        self._log.event(f"worker {self._stats.name} lost its connection: {said.text()}; reconnecting")
        return None
