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
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable
from typing import Protocol

import psycopg

from pgmq_sim.db.connection import reconnecting
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

    def wait(self, after_completion: bool) -> None:
        """Until a claim is worth trying (or the fallback, or the run's stop)."""


class Wakeup(Protocol):
    def slot(self, queue_type: str) -> WakeupSlot: ...

    def close(self) -> None: ...


class PollSlot:
    """The Go tool's behaviour: claim again after every message, sleep a fixed interval after an
    empty claim. Right after a completion an empty claim is often a race over the group this
    worker just freed, so the first one claims again before sleeping."""

    def __init__(self, interval: float, stop: threading.Event) -> None:
        self._interval = interval
        self._stop = stop

    def claiming(self) -> None:
        pass

    def claimed(self, found: int) -> None:
        pass

    def claim_due(self) -> bool:
        return True

    def released(self) -> None:
        pass

    def wait(self, after_completion: bool) -> None:
        if not after_completion:
            self._stop.wait(self._interval)


class PollWakeup:
    def __init__(self, interval: float, stop: threading.Event) -> None:
        self._interval = interval
        self._stop = stop

    def slot(self, queue_type: str) -> WakeupSlot:
        return PollSlot(self._interval, self._stop)

    def close(self) -> None:
        pass


class TypeCredits:
    """A type's wake-ups in this process, under one condition.

    `known`: messages notified (or, at the start and after a lost listener, possibly present)
    that no claim of this process has taken yet; a completion claims again at once while it is
    above zero, since the group it freed may hold the next one. `credits`: notified messages
    whose claim has not been tried, at most `known`; each wakes one claim. An empty claim, while
    no other worker of the type here claims or holds a message, proves that nothing notified
    before it started is claimable: `known` drops to what was notified since.
    """

    def __init__(self, stop: threading.Event, fallback: float) -> None:
        self._changed = threading.Condition()
        self._stop = stop
        self._fallback = fallback
        self.known = UNKNOWN
        self.credits = 0
        self.notified = 0  # ever, for what an empty claim can vouch for
        self.active = 0  # workers claiming or holding a message
        self.waiting = 0
        self._fallback_at = time.monotonic()  # the type's last claim at the fallback

    def arrived(self, count: int) -> None:
        with self._changed:
            self.notified += count
            self.known = min(UNKNOWN, self.known + count)
            self.credits += count
            self._changed.notify(count)

    def unknown(self) -> None:
        """Notifications may have been lost: claim once more everywhere, chain until proven empty."""
        with self._changed:
            self.known = UNKNOWN
            self.credits = max(self.credits, self.waiting)
            self._changed.notify_all()

    def release_all(self) -> None:
        with self._changed:
            self._changed.notify_all()

    def start(self) -> int:
        with self._changed:
            self.active += 1
            return self.notified

    def found(self, hit: int, notified_at_start: int) -> None:
        """A claim took `hit` messages (a batch spends the credits of the messages it took)."""
        with self._changed:
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
        with self._changed:
            if self.credits > 0:
                self.credits -= 1
                return self.notified
            if self.known > 0:
                return self.notified
            self.active -= 1
            return None

    def release(self) -> None:
        with self._changed:
            self.active -= 1

    def wait(self) -> None:
        """Until a credit, the stop, or the type's fallback: one claim per fallback interval for
        the whole type, which bounds the cost of a wake-up missed for good. Not one per idle
        worker: 500 of them would poll 500 times a second."""
        with self._changed:
            self.waiting += 1
            try:
                while not self._changed.wait_for(
                    lambda: self.credits > 0 or self._stop.is_set(), self._fallback
                ):
                    now = time.monotonic()
                    if now - self._fallback_at >= self._fallback:
                        self._fallback_at = now
                        return
            finally:
                self.waiting -= 1
            if self.credits > 0:
                self.credits -= 1


class NotifySlot:
    """A worker's side of its type's credits: whether it is counted as active (claiming or
    holding a message), and from which notification its current claim vouches."""

    def __init__(self, credits: TypeCredits) -> None:
        self._credits = credits
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

    def wait(self, after_completion: bool) -> None:
        self._credits.wait()


# The server reads notifications for an idle LISTEN session in transactions it dates from that
# session's last statement: with none since the LISTEN, pg_stat_activity shows the listener, idle,
# in a transaction as old as the run (and for a moment holding a snapshot). A statement this often
# keeps that date within a second of now, for anyone watching for long transactions.
RESTATE_S = 1.0


class NotifyWakeup:
    """One listening connection; each notification says how many messages of a type arrived
    ('type1:3') and adds that many credits (seed 000 proposes signalling one idle handler).

    A lost listener reconnects (until the reconnect deadline); notifications sent meanwhile are
    gone, so every type goes back to not knowing what is pending. The fallback bounds the cost
    of any wake-up that is missed anyway.
    """

    def __init__(
        self,
        connect: Callable[[], psycopg.Connection],
        fallback: float,
        reconnect_timeout: float,
        stop: threading.Event,
        on_error: Callable[[BaseException], None],
        types: tuple[str, ...],
    ) -> None:
        self._connect = connect
        self._reconnect_timeout = reconnect_timeout
        self._stop = stop
        self._on_error = on_error
        self._types = {t: TypeCredits(stop, fallback) for t in types}
        self.delivered = 0  # the listener's transactions: one to read each batch of notifications
        self._stated = time.monotonic()  # the listener's last statement
        self._conn = self._listening()
        self._thread = threading.Thread(target=self._listen, name="listener", daemon=True)
        self._thread.start()

    def slot(self, queue_type: str) -> WakeupSlot:
        return NotifySlot(self._types[queue_type])

    def _listening(self) -> psycopg.Connection:
        conn = self._connect()
        conn.autocommit = True
        conn.execute(f"listen {CHANNEL}")
        return conn

    def _listen(self) -> None:
        try:
            while not self._stop.is_set():
                try:
                    self._deliver()
                except psycopg.OperationalError:
                    if self._stop.is_set():
                        return
                    self._conn.close()
                    for credits in self._types.values():
                        credits.unknown()
                    self._reconnect()
        except BaseException as exc:
            if not self._stop.is_set():
                self._on_error(exc)
        finally:
            self._conn.close()

    def _deliver(self) -> None:
        for note in self._conn.notifies(timeout=0.2):
            self.delivered += 1
            queue_type, _, count = note.payload.partition(":")
            credits = self._types.get(queue_type)
            if credits is not None:  # else a type no worker serves
                credits.arrived(int(count) if count.isdigit() else 1)
        if time.monotonic() - self._stated >= RESTATE_S:  # see RESTATE_S
            self._conn.execute("select")
            self._stated = time.monotonic()
            self.delivered += 1

    def _reconnect(self) -> None:
        self._conn = reconnecting(
            self._listening,
            Backoff(self._reconnect_timeout, self._stop),
            lost=lambda exc: isinstance(exc, psycopg.OperationalError),
        )
        for credits in self._types.values():  # what arrived while the listener was away
            credits.unknown()

    def close(self) -> None:
        """Called once the run's stop event is set: release every waiting worker."""
        for credits in self._types.values():
            credits.release_all()
        self._thread.join(timeout=2)


def wakeup_for(
    notify: bool,
    connect: Callable[[], psycopg.Connection],
    poll_interval: float,
    reconnect_timeout: float,
    stop: threading.Event,
    on_error: Callable[[BaseException], None],
    types: tuple[str, ...],
) -> Wakeup:
    """The wake-up -wakeup asks for, however the workers are carried (threads or processes)."""
    if notify:
        return NotifyWakeup(connect, poll_interval or 1.0, reconnect_timeout, stop, on_error, types)
    return PollWakeup(poll_interval, stop)
