"""The waits between attempts to reach a lost server. Every reconnecting loop of the tool waits
through one; the clock and the sleep are injectable, so its schedule is testable exactly."""

from __future__ import annotations

import random
import threading
import time
from collections.abc import Callable


class Backoff:
    """Doubling from `first` up to `cap` (with jitter when given an rng, so many workers do not
    knock at once), until `timeout` has passed or `stop` is set."""

    def __init__(
        self,
        timeout: float,
        stop: threading.Event,
        first: float = 0.05,
        cap: float = 2.0,
        rng: random.Random | None = None,
        clock: Callable[[], float] = time.monotonic,
        sleep: Callable[[float], bool] | None = None,
    ) -> None:
        self._clock = clock
        self._deadline = clock() + timeout
        self._stop = stop
        self._sleep = sleep or stop.wait  # returns True when the stop came during the wait
        self._delay = first
        self._cap = cap
        self._rng = rng

    @property
    def stopped(self) -> bool:
        return self._stop.is_set()

    def wait(self) -> bool:
        """Wait before the next attempt; False when the deadline or a stop says to give up."""
        if self._stop.is_set() or self._clock() + self._delay > self._deadline:
            return False
        if self._sleep(self._delay * (1 + self._rng.random()) if self._rng else self._delay):
            return False
        self._delay = min(self._delay * 2, self._cap)
        return True
