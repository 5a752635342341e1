"""A worker's lost connection, from the loss until a statement answers again: one outage, counted
once and said once, its reconnects waited out on one backoff. A pooler accepts the login and then
refuses the first statement while its own login to the server is failing: such a refusal, soon
after a reconnect and before any answer, is the same outage, not a new one."""

from __future__ import annotations

import random
import time
from collections.abc import Awaitable, Callable

from pgmq_sim.db.claims import ClaimPort
from pgmq_sim.db.connection import is_connection_lost, reconnecting_async
from pgmq_sim.dsn import reason
from pgmq_sim.errors import ServerLostError
from pgmq_sim.model.backoff import Backoff, Stopped
from pgmq_sim.result.stats import Timeline, WorkerStats
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

    @property
    def going_on(self) -> bool:
        return self._backoff is not None

    def backoff(self) -> Backoff:
        """The outage's backoff, or a fresh one for a first connect."""
        return self._backoff or self._new_backoff()

    def _new_backoff(self) -> Backoff:
        return Backoff(self._reconnect_timeout, self._stop, RECONNECT_FIRST_S, RECONNECT_MAX_S, self._rng)

    def gave_up(self, exc: BaseException) -> ServerLostError:
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
            lost=lambda exc: not first and is_connection_lost(exc),
            give_up=self.gave_up,
        )
        self._connected(first, session.backend_pid)
        return session

    def _connected(self, first: bool, backend_pid: int) -> None:
        """A session is open: after a loss, that is the outage's reconnect (counted once)."""
        self._reconnected_at = time.monotonic()
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
        if self._backoff is None:
            return
        if self._refusals:
            self._log.event(
                f"worker {self._stats.name} back after {time.monotonic() - self._since:.1f} s"
                f" ({self._refusals} refused after reconnecting)"
            )
        self._backoff, self._refusals, self._reconnected = None, 0, False

    def lost(self, exc: BaseException) -> float | None:
        """The connection is gone. A new outage is counted and said (None: reconnect at once); a
        refusal within the one going on is said once, and returns the backoff's next wait (raises
        past -reconnect-timeout). The caller closes the session either way."""
        now = time.monotonic()
        backoff = self._backoff
        if backoff is not None and now - self._reconnected_at < SAME_OUTAGE_S:
            self._refusals += 1
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
        self._backoff, self._since, self._refusals, self._reconnected = self._new_backoff(), now, 0, False
        self._stats.connections_lost += 1
        self._timeline.lost(self._clock())
        self._log.event(
            f"worker {self._stats.name} lost its connection: {reason(exc, self._dsn)}; reconnecting"
        )
        return None
