"""How the run's tasks wait on its event loop. A waiting task holds a `Bell`, which whatever it
waits for rings: a notification's credit, the claim gate opening, a crash to simulate, the run's
`Halt` (which rings every bell at once). A wait is one future and at most one timer, what
asyncio.sleep costs, with an end that others can bring forward; no task is created per wait.

The loop is uvloop's (libuv's poll loop: measured a quarter cheaper per message than asyncio's
own). Its timers count whole milliseconds from the loop's clock, read once per iteration: a delay
is rounded to the nearest millisecond and counted from a moment already past, so a timer may fire
up to a millisecond early. A wait here is due at an absolute time half a millisecond late, which
libuv cannot round to before it: the work a worker simulates takes at least its time. A loop that
paces itself sleeps at least `MIN_SLEEP_S`: a shorter sleep returns at once and spins.
"""

from __future__ import annotations

import asyncio
import time
from enum import Enum

import uvloop

MIN_SLEEP_S = 0.001
ROUNDING_S = 0.0005  # libuv rounds a timer to the nearest millisecond of its clock


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

    async def wait(self, timeout: float | None) -> Why | None:
        """Until rung (what rang it) or `timeout` seconds have passed (None)."""
        loop = asyncio.get_running_loop()
        future: asyncio.Future[Why | None] = loop.create_future()
        self._future = future
        timer = None
        if timeout is not None:
            timer = loop.call_at(time.monotonic() + timeout + ROUNDING_S, _expire, future)
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

    async def sleep(self, seconds: float, bell: Bell) -> bool:
        """Sleep on this (registered) bell, at least MIN_SLEEP_S; True if the run stopped first."""
        if self._set:
            return True
        await bell.wait(max(MIN_SLEEP_S, seconds))
        return self._set
