"""Waits kept to the microsecond on the event loop, for the work a worker simulates. libuv's timers
count whole milliseconds: a wait either ends up to a millisecond early or, forced never early,
about a millisecond late (measured: 6.2 ms for 5 ms of work), which would make every message's work
longer than asked and a hot group's cycle with it. A thread's sleep is exact to a few tens of
microseconds; so is a Linux timerfd, which the loop polls like a socket. One timerfd serves every
worker of the loop, armed for the earliest deadline; elsewhere the loop's own timer, never early."""

from __future__ import annotations

import asyncio
import contextlib
import ctypes
import ctypes.util
import heapq
import itertools
import os
import time
from typing import Any

CLOCK_MONOTONIC = 1  # time.monotonic's clock on Linux
TFD_NONBLOCK, TFD_CLOEXEC, TFD_TIMER_ABSTIME = os.O_NONBLOCK, os.O_CLOEXEC, 1
LOOP_TICK_S = 0.001  # the loop's own timers: its clock counts whole milliseconds


class _Timespec(ctypes.Structure):
    _fields_ = [("tv_sec", ctypes.c_long), ("tv_nsec", ctypes.c_long)]


class _Itimerspec(ctypes.Structure):
    _fields_ = [("it_interval", _Timespec), ("it_value", _Timespec)]


def _libc() -> ctypes.CDLL | None:
    name = ctypes.util.find_library("c")
    if name is None:
        return None
    libc = ctypes.CDLL(name, use_errno=True)
    return libc if hasattr(libc, "timerfd_create") else None


class PreciseTimers:
    """Futures resolved at their deadlines (time.monotonic seconds), never early. Made and used on
    one running loop; `close` when the loop is done."""

    def __init__(self) -> None:
        self._loop = asyncio.get_running_loop()
        self._due: list[tuple[float, int, asyncio.Future[Any]]] = []
        self._order = itertools.count()
        self._armed = float("inf")
        self._libc = _libc()
        self._fd = -1
        if self._libc is not None:
            fd = self._libc.timerfd_create(CLOCK_MONOTONIC, TFD_NONBLOCK | TFD_CLOEXEC)
            if fd >= 0:
                self._fd = fd
                self._loop.add_reader(fd, self._fired)

    def at(self, deadline: float, future: asyncio.Future[Any]) -> None:
        """Resolve `future` (if nothing did first) at `deadline`."""
        if self._fd < 0:  # no timerfd: the loop's timer, a millisecond late rather than early
            self._loop.call_at(deadline + LOOP_TICK_S, _resolve, future)
            return
        heapq.heappush(self._due, (deadline, next(self._order), future))
        if deadline < self._armed:
            self._arm(deadline)

    def _arm(self, deadline: float) -> None:
        assert self._libc is not None
        self._armed = deadline
        seconds = int(deadline)
        value = _Itimerspec(_Timespec(0, 0), _Timespec(seconds, max(1, int((deadline - seconds) * 1e9))))
        self._libc.timerfd_settime(self._fd, TFD_TIMER_ABSTIME, ctypes.byref(value), None)

    def _fired(self) -> None:
        with contextlib.suppress(BlockingIOError):  # read: the descriptor is quiet until re-armed
            os.read(self._fd, 8)
        now = time.monotonic()
        due = self._due
        while due and due[0][0] <= now:
            _resolve(heapq.heappop(due)[2])
        self._armed = float("inf")
        while due and due[0][2].done():  # ended early (a crash, the halt): not worth a wake-up
            heapq.heappop(due)
        if due:
            self._arm(due[0][0])

    def close(self) -> None:
        if self._fd >= 0:
            self._loop.remove_reader(self._fd)
            os.close(self._fd)
            self._fd = -1
        for _, _, future in self._due:
            future.cancel()
        self._due.clear()


def _resolve(future: asyncio.Future[Any]) -> None:
    if not future.done():
        future.set_result(None)
