"""How the run's tasks wait on its event loop. A waiting task holds a `Bell`, which whatever it
waits for rings: a notification's credit, the claim gate opening, a crash to simulate, the run's
`Halt` (which rings every bell at once). A wait is one future and at most one timer, what
asyncio.sleep costs, with an end that others can bring forward; no task is created per wait.

The loop is uvloop's (libuv's poll loop: measured a quarter cheaper per message than asyncio's
own). Its timers count whole milliseconds: a delay is rounded to the nearest one and counted from
the clock's last whole millisecond, and the poll that waits for it rounds once more, so a wait ends
on average within 0.2 ms of its time but sometimes up to a millisecond early or late: good enough
for a fallback or a poll interval. The work a worker simulates must take its time, never less, and
not a millisecond more: `Halt.work` waits on actors/precise's timerfd. A loop that paces itself
sleeps at least `MIN_SLEEP_S`: a shorter sleep returns at once and spins.
"""

from __future__ import annotations

import asyncio
import time
from enum import Enum

import uvloop

from pgmq_sim.actors.precise import PreciseTimers

MIN_SLEEP_S = 0.001


class Why(Enum):
    """What rang a bell."""

    CREDIT = "credit"  # a notified message, or a listener lost: claim
    FALLBACK = "fallback"  # the type's fallback claim is this worker's
    GATE = "gate"  # the claim gate changed
    CRASH = "crash"  # a fault: die mid-work
    HALT = "halt"  # the run is stopping


def new_loop() -> asyncio.AbstractEventLoop:
    """The run's event loop."""
    return uvloop.new_event_loop()


def _expire(future: asyncio.Future[Why | None]) -> None:
    if not future.done():
        future.set_result(None)


class Bell:
    """One task's wait, which others may end early."""

    __slots__ = ("_future",)

    def __init__(self) -> None:
        self._future: asyncio.Future[Why | None] | None = None

    @property
    def waiting(self) -> bool:
        return self._future is not None and not self._future.done()

    def ring(self, why: Why) -> bool:
        """End the wait going on, if one is and nothing ended it yet."""
        future = self._future
        if future is None or future.done():
            return False
        future.set_result(why)
        return True

    async def wait(self, timeout: float | None, exact: PreciseTimers | None = None) -> Why | None:
        """Until rung (what rang it) or `timeout` seconds have passed (None): give or take the
        loop's millisecond, or, on `exact` timers, to the microsecond and never fewer."""
        loop = asyncio.get_running_loop()
        future: asyncio.Future[Why | None] = loop.create_future()
        self._future = future
        timer = None
        if timeout is not None and exact is not None:
            exact.at(time.monotonic() + timeout, future)
        elif timeout is not None:
            timer = loop.call_later(timeout, _expire, future)
        try:
            return await future
        finally:
            self._future = None
            if timer is not None:
                timer.cancel()


class Halt:
    """The run's stop as its tasks see it: a flag read at every step, and the bells of the tasks
    that may be waiting, rung when it is set. Set on the loop (from another thread, through the
    loop's call_soon_threadsafe)."""

    def __init__(self) -> None:
        self._set = False
        self._bells: set[Bell] = set()
        self._timers: PreciseTimers | None = None  # made on the loop, at the first exact wait

    def is_set(self) -> bool:
        return self._set

    def set(self) -> None:
        self._set = True
        for bell in list(self._bells):
            bell.ring(Why.HALT)

    def bell(self) -> Bell:
        """A task's bell, rung when the run stops."""
        bell = Bell()
        self._bells.add(bell)
        return bell

    def forget(self, bell: Bell) -> None:
        self._bells.discard(bell)

    async def work(self, seconds: float, bell: Bell) -> None:
        """The work a worker simulates: exactly `seconds` (a crash or the halt may cut it short)."""
        if self._timers is None:
            self._timers = PreciseTimers()
        await bell.wait(seconds, self._timers)

    def close(self) -> None:
        """On the loop, once its tasks are done: the exact timers' descriptor goes."""
        if self._timers is not None:
            self._timers.close()
            self._timers = None

    async def sleep(self, seconds: float, bell: Bell) -> bool:
        """Sleep on this (registered) bell, at least MIN_SLEEP_S; True if the run stopped first."""
        if self._set:
            return True
        await bell.wait(max(MIN_SLEEP_S, seconds))
        return self._set
