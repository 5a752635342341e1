"""The waits between attempts to reach a lost server. Every reconnecting loop of the tool waits
through one: a thread sleeps through `wait`, a task on the run's loop asks `next_delay` and sleeps
on the loop. The clock and the sleep are injectable, so its schedule is testable exactly."""

from __future__ import annotations

import random
import time
from collections.abc import Callable
from typing import Protocol


class Stopped(Protocol):
    """The run's stop, however it is kept (a thread's event, the loop's halt)."""

    def is_set(self) -> bool: ...


class Backoff:
    """Doubling from `first` up to `cap` (with jitter when given an rng, so many workers do not
    knock at once), until `timeout` has passed or `stop` is set."""

    def __init__(
        self,
        timeout: float,
        stop: Stopped,
        first: float = 0.05,
        cap: float = 2.0,
        rng: random.Random | None = None,
        clock: Callable[[], float] = time.monotonic,
        sleep: Callable[[float], bool] | None = None,
    ) -> None:
        self._clock = clock
        self._deadline = clock() + timeout
        self._stop = stop
        self._sleep = sleep  # returns True when the stop came during the wait
        self._delay = first
        self._cap = cap
        self._rng = rng

    @property
    def stopped(self) -> bool:
        return self._stop.is_set()

    def next_delay(self) -> float | None:
        """The next wait before an attempt, or None when the deadline or a stop says to give up."""
        if self._stop.is_set() or self._clock() + self._delay > self._deadline:
            return None
        delay = self._delay * (1 + self._rng.random()) if self._rng else self._delay
        self._delay = min(self._delay * 2, self._cap)
        return delay

    def wait(self) -> bool:
        """Wait (on this thread) before the next attempt; False when the deadline or a stop says to
        give up."""
        delay = self.next_delay()
        if delay is None:
            return False
        sleep = self._sleep or getattr(self._stop, "wait", None)
        assert sleep is not None, "a thread's backoff needs a stop it can wait on, or a sleep"
        return not sleep(delay)
