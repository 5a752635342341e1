"""How an idle worker learns that a message may be waiting: polling or LISTEN/NOTIFY.

Each worker holds a `WakeupSlot` of its type. Around every claim it tells the slot what it is
doing (claiming, what the claim found, done with its message), and the slot says when to claim:
after a completion, whether to claim again at once, and after an empty claim, how long to wait.

With notifications, a type's slots share a count of *credits*: one per message that arrived,
taken by the claim it wakes (a worker waiting, or a completion that claims the next message in
its round trip). A woken worker that finds nothing goes back to waiting and wakes no one, so a
steady arrival rate costs about one claim per message, not a herd of empty ones. Credits are
counted whether or not anyone waits: a message that arrives between a worker's empty claim and
its wait leaves a credit that the wait takes at once, so no wake-up is lost in that window.

Everything here runs on the run's event loop: a waiting worker is its bell (actors/waits), rung by
a credit, by its type's fallback or by the halt; the listener is a connection whose reader hands
each notification over as it arrives.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Awaitable, Callable
from typing import Any, Protocol

import psycopg
from psycopg import pq

from pgmq_sim.actors.waits import Bell, Halt, Why
from pgmq_sim.db.connection import reconnecting_async
from pgmq_sim.db.wire import Wire
from pgmq_sim.model.backoff import Backoff

CHANNEL = "pgmq_sim"
UNKNOWN = 1 << 60  # messages pending that no notification told of (a prefill, a listener lost)


class WakeupSlot(Protocol):
    """One worker's view of its type's wake-ups."""

    def claiming(self) -> None:
        """A claim is about to be sent (alone, not chained behind a completion)."""

    def claimed(self, found: int) -> None:
        """The claim's answer: how many messages the worker now holds (0: nothing was free)."""

    def claim_due(self) -> bool:
        """After a completion: claim again at once? False releases the worker (it will wait)."""

    def released(self) -> None:
        """The worker dropped its message without completing it (lost connection, crash, stop)."""

    async def wait(self, after_completion: bool) -> bool:
        """Until a claim is worth trying (or the fallback, or the run's stop); True when the type's
        fallback woke it (no notification did)."""


class Wakeup(Protocol):
    def slot(self, queue_type: str, bell: Bell) -> WakeupSlot: ...


class PollSlot:
    """The Go tool's behaviour: claim again after every message, sleep a fixed interval after an
    empty claim. Right after a completion an empty claim is often a race over the group this
    worker just freed, so the first one claims again before sleeping."""

    def __init__(self, interval: float, halt: Halt, bell: Bell) -> None:
        self._interval = interval
        self._halt = halt
        self._bell = bell

    def claiming(self) -> None:
        pass

    def claimed(self, found: int) -> None:
        pass

    def claim_due(self) -> bool:
        return True

    def released(self) -> None:
        pass

    async def wait(self, after_completion: bool) -> bool:
        if not after_completion:
            await self._halt.sleep(self._interval, self._bell)
        return False  # polling is the mechanism itself, not a fallback


class PollWakeup:
    def __init__(self, interval: float, halt: Halt) -> None:
        self._interval = interval
        self._halt = halt

    def slot(self, queue_type: str, bell: Bell) -> WakeupSlot:
        return PollSlot(self._interval, self._halt, bell)


class TypeCredits:
    """A type's wake-ups in this process.

    `known`: messages notified (or, at the start and after a lost listener, possibly present)
    that no claim of this process has taken yet; a completion claims again at once while it is
    above zero, since the group it freed may hold the next one. `credits`: notified messages
    whose claim has not been tried, at most `known`; each wakes one claim. An empty claim, while
    no other worker of the type here claims or holds a message, proves that nothing notified
    before it started is claimable: `known` drops to what was notified since.

    The fallback is one claim per interval for the whole type, by the worker that has waited
    longest (at least an interval): it bounds the cost of a wake-up missed for good, and 500 idle
    workers do not poll 500 times a second. One timer for the type, not one per waiting worker.
    """

    def __init__(self, halt: Halt, fallback: float) -> None:
        self._halt = halt
        self._fallback = fallback
        self.known = UNKNOWN
        self.credits = 0
        self.notified = 0  # ever, for what an empty claim can vouch for
        self.active = 0  # workers claiming or holding a message
        self._waiting: dict[Bell, float] = {}  # waiting workers, longest first, and since when
        self._fallback_at = time.monotonic()  # the type's last claim at the fallback
        self._timer: asyncio.TimerHandle | None = None

    @property
    def waiting(self) -> int:
        return len(self._waiting)

    def _wake(self, count: int, why: Why) -> None:
        """Ring the `count` longest waiting (one already rung counts for nothing)."""
        waiting = self._waiting
        while count > 0 and waiting:
            bell = next(iter(waiting))
            del waiting[bell]
            if bell.ring(why):
                count -= 1

    def arrived(self, count: int) -> None:
        self.notified += count
        self.known = min(UNKNOWN, self.known + count)
        self.credits += count
        self._wake(count, Why.CREDIT)

    def unknown(self) -> None:
        """Notifications may have been lost: claim once more everywhere, chain until proven empty."""
        self.known = UNKNOWN
        self.credits = max(self.credits, len(self._waiting))
        self._wake(len(self._waiting), Why.CREDIT)

    def start(self) -> int:
        self.active += 1
        return self.notified

    def found(self, hit: int, notified_at_start: int) -> None:
        """A claim took `hit` messages (a batch spends the credits of the messages it took)."""
        if hit:
            self.known = max(0, self.known - hit)
            self.credits = max(0, min(self.credits - (hit - 1), self.known))
            return
        if self.active == 1:
            self.known = self.notified - notified_at_start
            self.credits = min(self.credits, self.known)
        self.active -= 1

    def due(self) -> int | None:
        """After a completion: the notified count a claim now starts from, or None (released)."""
        if self.credits > 0:
            self.credits -= 1
            return self.notified
        if self.known > 0:
            return self.notified
        self.active -= 1
        return None

    def release(self) -> None:
        self.active -= 1

    async def wait(self, bell: Bell) -> bool:
        """Until a credit, the stop, or the type's fallback falls to this worker (True)."""
        if self.credits > 0:
            self.credits -= 1
            return False
        since = time.monotonic()
        try:
            while not self._halt.is_set():
                self._waiting[bell] = since
                self._arm()
                why = await bell.wait(None)
                if why is Why.FALLBACK or self._halt.is_set():
                    return why is Why.FALLBACK
                if self.credits > 0:
                    self.credits -= 1
                    return False
                # a credit another claim took first (or a ring for something else): wait on
        finally:
            self._waiting.pop(bell, None)
        return False

    def _arm(self) -> None:
        """The fallback's timer, for when the longest-waiting worker will have waited an interval."""
        if self._timer is not None or not self._waiting:
            return
        since = next(iter(self._waiting.values()))
        due_in = max(self._fallback_at, since) + self._fallback - time.monotonic()
        self._timer = asyncio.get_running_loop().call_later(max(0.0, due_in), self._fallback_due)

    def _fallback_due(self) -> None:
        self._timer = None
        now = time.monotonic()
        if self._waiting:
            bell, since = next(iter(self._waiting.items()))
            if now - max(self._fallback_at, since) >= self._fallback * 0.999:
                del self._waiting[bell]
                if bell.ring(Why.FALLBACK):
                    self._fallback_at = now
        self._arm()


class NotifySlot:
    """A worker's side of its type's credits: whether it is counted as active (claiming or
    holding a message), and from which notification its current claim vouches."""

    def __init__(self, credits: TypeCredits, bell: Bell) -> None:
        self._credits = credits
        self._bell = bell
        self._active = False
        self._notified_at_start = 0

    def claiming(self) -> None:
        if not self._active:  # else claim_due kept it active and opened the window
            self._active = True
            self._notified_at_start = self._credits.start()

    def claimed(self, found: int) -> None:
        if self._active:
            self._credits.found(found, self._notified_at_start)
            self._active = found > 0

    def claim_due(self) -> bool:
        notified = self._credits.due() if self._active else None
        self._active = notified is not None
        if notified is not None:
            self._notified_at_start = notified
        return self._active

    def released(self) -> None:
        if self._active:
            self._active = False
            self._credits.release()

    async def wait(self, after_completion: bool) -> bool:
        return await self._credits.wait(self._bell)


# The server reads notifications for an idle LISTEN session in transactions it dates from that
# session's last statement: with none since the LISTEN, pg_stat_activity shows the listener, idle,
# in a transaction as old as the run (and for a moment holding a snapshot). A statement this often
# keeps that date within a second of now, for anyone watching for long transactions.
RESTATE_S = 1.0
ANSWER_TIMEOUT_S = 10.0  # the listener's own statements: past this, the connection is given up


class NotifyWakeup:
    """One listening connection; each notification says how many messages of a type arrived
    ('type1:3') and adds that many credits (seed 000 proposes signalling one idle handler).

    A lost listener reconnects (until the reconnect deadline); notifications sent meanwhile are
    gone, so every type goes back to not knowing what is pending. The fallback bounds the cost
    of any wake-up that is missed anyway.
    """

    def __init__(
        self,
        connect: Callable[[], Awaitable[psycopg.AsyncConnection[Any]]],
        fallback: float,
        reconnect_timeout: float,
        halt: Halt,
        types: tuple[str, ...],
        channel: str | None = None,
    ) -> None:
        self._connect = connect
        # the design's own channel of each type (pgmq's insert notification, procrastinate's trigger's)
        self._channels = {channel.format(type=t): t for t in types} if channel else {}
        self._reconnect_timeout = reconnect_timeout
        self._halt = halt
        self._bell = halt.bell()  # rung by the halt and by the listener's loss
        self._types = {t: TypeCredits(halt, fallback) for t in types}
        self.delivered = 0  # the listener's transactions: one to read each notification
        self._wire: Wire | None = None

    def slot(self, queue_type: str, bell: Bell) -> WakeupSlot:
        return NotifySlot(self._types[queue_type], bell)

    async def start(self) -> None:
        """The first connection: a failure here is the run's (a bad -listen-dsn)."""
        self._wire = await self._listening()

    async def _listening(self) -> Wire:
        conn = await self._connect()
        try:
            # and the design's own channel of each type, in one round trip
            own = "".join(f'; listen "{name}"' for name in self._channels)
            await conn.execute(f"listen {CHANNEL}{own}".encode())
        except BaseException:
            await conn.close()
            raise
        return Wire(conn, self._notified, self._lost)

    def _lost(self, exc: psycopg.Error) -> None:
        self._bell.ring(Why.CREDIT)  # the task reconnects

    def _notified(self, note: pq.PGnotify) -> None:
        self.delivered += 1
        channel = note.relname.decode()
        if channel != CHANNEL:  # the design's own: one message of the channel's type
            queue_type, count = self._channels.get(channel, ""), "1"
        else:
            queue_type, _, count = note.extra.decode().partition(":")
        credits = self._types.get(queue_type)
        if credits is not None:  # else a type no worker serves
            credits.arrived(int(count) if count.isdigit() else 1)

    async def run(self) -> None:
        """Until the run stops: a statement each second (see RESTATE_S); a lost listener is
        reconnected, and every type claims again (what arrived meanwhile was not told)."""
        try:
            while not self._halt.is_set():
                await self._bell.wait(RESTATE_S)
                if self._halt.is_set():
                    return
                wire = self._wire
                if wire is not None and not wire.closed:
                    try:
                        await wire.within(ANSWER_TIMEOUT_S, b"select")
                        self.delivered += 1
                        continue
                    except (psycopg.Error, TimeoutError):  # lost, or ended by the server: listen again
                        pass
                await self._reconnect()
        finally:
            if self._wire is not None:
                self._wire.close()
            self._halt.forget(self._bell)

    async def _reconnect(self) -> None:
        if self._wire is not None:
            self._wire.close()
            self._wire = None
        for credits in self._types.values():
            credits.unknown()
        self._wire = await reconnecting_async(
            self._listening,
            Backoff(self._reconnect_timeout, self._halt),
            lambda seconds: self._halt.sleep(seconds, self._bell),
            lost=lambda exc: isinstance(exc, psycopg.OperationalError),
        )
        for credits in self._types.values():  # what arrived while the listener was away
            credits.unknown()


def wakeup_for(
    notify: bool,
    connect: Callable[[], Awaitable[psycopg.AsyncConnection[Any]]],
    poll_interval: float,
    reconnect_timeout: float,
    halt: Halt,
    types: tuple[str, ...],
    channel: str | None = None,
) -> PollWakeup | NotifyWakeup:
    """The wake-up -wakeup asks for, in every process that runs workers; `channel`: the design's own
    notification channel (queue.toml), `{type}` standing for each type, one message a notification."""
    if notify:
        return NotifyWakeup(connect, poll_interval or 1.0, reconnect_timeout, halt, types, channel)
    return PollWakeup(poll_interval, halt)
