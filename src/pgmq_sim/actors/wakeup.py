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

Everything here runs on the run's event loop: a waiting worker is its bell (actors/bells), rung by
a credit, by its type's fallback or by the halt; the listener is a connection whose reader hands
each notification over as it arrives.
"""

from __future__ import annotations

import contextlib
import time
from collections.abc import Awaitable, Callable
from typing import Any, Protocol

import psycopg
from psycopg import pq

from pgmq_sim.actors.bells import Bell, Halt, Why
from pgmq_sim.actors.claim_reasons import COMPLETION, POLL, RETRY, START, ClaimTally
from pgmq_sim.actors.notified import NotifySlot, TypeCredits
from pgmq_sim.db.connection import reconnecting_async
from pgmq_sim.db.wire import LoopTime, Wire
from pgmq_sim.model.backoff import Backoff
from pgmq_sim.model.identity import Whose, whose
from pgmq_sim.result.claims import ClaimBook
from pgmq_sim.sqlfiles import statement

CHANNEL = "pgmq_sim"


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

    def retrying(self) -> None:
        """The next claim retries after a statement the server ended or a lost connection."""

    def completed(self) -> bool:
        """A completion (or a failure) it sent was answered: True to claim again now."""

    async def wait(self, after_completion: bool) -> bool:
        """Until a claim is worth trying (or the fallback, or the run's stop); True when the type's
        fallback woke it (no notification did)."""

    def timed(self, meter: LoopTime) -> None:
        """The worker's session counts its own time on the loop around its round trips on `meter`."""


class Wakeup(Protocol):
    book: ClaimBook

    def slot(self, queue_type: str, bell: Bell) -> WakeupSlot: ...


class PollSlot:
    """The Go tool's behaviour: claim again after every message, sleep a fixed interval after an
    empty claim. Right after a completion an empty claim is often a race over the group this
    worker just freed, so the first one claims again before sleeping."""

    def __init__(self, interval: float, halt: Halt, bell: Bell, book: ClaimBook | None = None) -> None:
        self._interval = interval
        self._halt = halt
        self._bell = bell
        self._claims = ClaimTally(book or ClaimBook())

    def claiming(self) -> None:
        pass

    def claimed(self, found: int) -> None:
        self._claims.answered(found)

    def claim_due(self) -> bool:
        self._claims.woke(COMPLETION)
        return True

    def released(self) -> None:
        self._claims.woke(START)

    def retrying(self) -> None:
        self._claims.woke(RETRY)

    def completed(self) -> bool:
        return False

    def timed(self, meter: LoopTime) -> None:
        self._claims.time = meter

    async def wait(self, after_completion: bool) -> bool:
        claims = self._claims
        claims.waiting()
        if not after_completion:
            await self._halt.sleep(self._interval, self._bell)
        claims.woke(COMPLETION if after_completion else POLL, running=True)
        return False  # polling is the mechanism itself, not a fallback


class PollWakeup:
    def __init__(self, interval: float, halt: Halt) -> None:
        self._interval = interval
        self._halt = halt
        self.book = ClaimBook()

    def slot(self, queue_type: str, bell: Bell) -> WakeupSlot:
        return PollSlot(self._interval, self._halt, bell, self.book)


# The server reads notifications for an idle LISTEN session in transactions it dates from that
# session's last statement: with none since the LISTEN, pg_stat_activity shows the listener, idle,
# in a transaction as old as the run (and for a moment holding a snapshot). A statement this often
# keeps that date within a second of now, for anyone watching for long transactions.
RESTATE_S = 1.0
ANSWER_TIMEOUT_S = 10.0  # the listener's own statements: past this, the connection is given up
LAST_NAMES_S = 1.0  # at the run's end, naming the last senders waits at most this
SENDERS_SQL = statement("notify_senders").encode()


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
        self.book = ClaimBook()
        self._types = {t: TypeCredits(halt, fallback, self.book) for t in types}
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
        began = time.perf_counter()
        self.delivered += 1
        sender = self.book.sender(note.be_pid)  # the backend that sent it: the run's, or not
        sender.notifications += 1
        if not sender.first_at:
            sender.first_at = began
        sender.last_at = began
        channel = note.relname.decode()
        if channel != CHANNEL:  # the design's own: one message of the channel's type
            queue_type, count = self._channels.get(channel, ""), "1"
        else:
            queue_type, _, count = note.extra.decode().partition(":")
        told = int(count) if count.isdigit() else 1
        sender.told += told
        credits = self._types.get(queue_type)
        if credits is not None:  # else a type no worker serves
            credits.arrived(told, note.be_pid)
        sender.read_s += time.perf_counter() - began

    async def _name_senders(self, wire: Wire, timeout: float) -> None:
        """The application of each sender not yet named, from pg_stat_activity (every role sees
        application_name): whose it is, model/identity decides (the run's own sessions are named
        'pgmq-sim ...'). A sender already gone stays unnamed."""
        pids = self.book.unnamed()
        if not pids:
            return
        answer = await wire.within(timeout, SENDERS_SQL, [("{" + ",".join(map(str, pids)) + "}").encode()])
        result = answer.results[0]
        found: dict[int, str] = {}
        for row in range(result.ntuples):
            backend, application = result.get_value(row, 0), result.get_value(row, 1)
            found[int(backend or b"0")] = (application or b"").decode(wire.encoding, "replace")
        for pid in pids:
            sender = self.book.senders[pid]
            sender.application = found.get(pid)
            sender.own = sender.application is not None and whose(sender.application) != Whose.OUTSIDE

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
                        if self.book.unnamed():
                            await self._name_senders(wire, ANSWER_TIMEOUT_S)
                        else:
                            await wire.within(ANSWER_TIMEOUT_S, b"select")
                        self.delivered += 1
                        continue
                    except (psycopg.Error, TimeoutError):  # lost, or ended by the server: listen again
                        pass
                await self._reconnect()
        finally:
            try:
                await self._name_last()
            finally:
                if self._wire is not None:
                    self._wire.close()
                self._halt.forget(self._bell)

    async def _name_last(self) -> None:
        """The senders of the run's last second, named before the listener closes (bounded)."""
        wire = self._wire
        if wire is not None and not wire.closed and not wire.busy and self.book.unnamed():
            with contextlib.suppress(psycopg.Error, TimeoutError):
                await self._name_senders(wire, LAST_NAMES_S)

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
