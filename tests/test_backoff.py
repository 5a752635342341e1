"""The reconnect backoff every session waits on: it doubles up to its cap until its deadline, jitters
so workers do not knock at once, and gives up at once on a stop."""

from __future__ import annotations

import random
import threading

import pytest

from pgmq_sim.model.backoff import Backoff

pytestmark = pytest.mark.unit


class FakeClock:
    """A clock that moves only when the backoff sleeps."""

    def __init__(self) -> None:
        self.now = 0.0
        self.slept: list[float] = []

    def sleep(self, seconds: float) -> bool:
        self.slept.append(seconds)
        self.now += seconds
        return False


def test_backoff_doubles_until_its_deadline_and_yields_to_a_stop() -> None:
    clock = FakeClock()
    backoff = Backoff(0.3, threading.Event(), first=0.05, cap=0.1, clock=lambda: clock.now, sleep=clock.sleep)
    while backoff.wait():
        pass
    # doubling, capped at 0.1; a fourth wait (0.25 + 0.1 s) would pass the 0.3 s deadline
    assert clock.slept == [0.05, 0.1, 0.1]
    stop = threading.Event()
    stop.set()
    stopped = FakeClock()
    assert not Backoff(60, stop, clock=lambda: 0.0, sleep=stopped.sleep).wait()
    assert stopped.slept == []  # a stop gives up at once, without waiting


def test_backoff_jitter_stays_within_one_delay() -> None:
    clock = FakeClock()
    backoff = Backoff(
        10,
        threading.Event(),
        first=0.1,
        cap=0.4,
        rng=random.Random(7),
        clock=lambda: clock.now,
        sleep=clock.sleep,
    )
    for _ in range(5):
        assert backoff.wait()
    for slept, base in zip(clock.slept, [0.1, 0.2, 0.4, 0.4, 0.4], strict=True):
        assert base <= slept < 2 * base
    assert len(set(clock.slept)) == 5  # jittered: workers do not knock at once
