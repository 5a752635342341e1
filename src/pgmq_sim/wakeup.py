"""How an idle worker learns that a message may be waiting: polling or LISTEN/NOTIFY.

A worker takes a token before its claim and waits with it after an empty
claim; a notification that arrived in between changes the token, so the wait
returns at once and no wake-up is lost in that window.
"""

from __future__ import annotations

import threading
from collections.abc import Callable
from typing import Protocol

import psycopg

from pgmq_sim.backoff import Backoff
from pgmq_sim.db.connection import reconnecting

CHANNEL = "pgmq_sim"


class Wakeup(Protocol):
    def token(self, queue_type: str) -> int: ...

    def wait(self, queue_type: str, token: int) -> None: ...

    def close(self) -> None: ...


class PollWakeup:
    """The Go tool's behaviour: sleep a fixed interval after finding nothing."""

    def __init__(self, interval: float, stop: threading.Event) -> None:
        self._interval = interval
        self._stop = stop

    def token(self, queue_type: str) -> int:
        return 0

    def wait(self, queue_type: str, token: int) -> None:
        self._stop.wait(self._interval)

    def close(self) -> None:
        pass


class NotifyWakeup:
    """One listening connection; a notification wakes one idle worker of the type per
    message that arrived (seed 000 proposes signalling one handler), and a woken worker
    keeps claiming until it finds nothing.

    A lost listener reconnects (until the reconnect deadline) and wakes every waiter, since
    notifications sent meanwhile are gone; the fallback bounds the cost of any wake-up
    that is missed anyway.
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
        self._fallback = fallback
        self._reconnect_timeout = reconnect_timeout
        self._stop = stop
        self._on_error = on_error
        lock = threading.Lock()
        self._changed = {t: threading.Condition(lock) for t in types}
        self._lock = lock
        self._generation = dict.fromkeys(types, 0)
        self._conn = self._listening()
        self._thread = threading.Thread(target=self._listen, name="listener", daemon=True)
        self._thread.start()

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
                    self._wake_all()
                    self._reconnect()
        except BaseException as exc:
            if not self._stop.is_set():
                self._on_error(exc)
        finally:
            self._conn.close()

    def _deliver(self) -> None:
        for note in self._conn.notifies(timeout=0.2):
            queue_type, _, count = note.payload.partition(":")
            changed = self._changed.get(queue_type)
            if changed is None:  # a type no worker serves
                continue
            with changed:
                self._generation[queue_type] += 1
                changed.notify(int(count) if count.isdigit() else 1)

    def _reconnect(self) -> None:
        self._conn = reconnecting(
            self._listening,
            Backoff(self._reconnect_timeout, self._stop),
            lost=lambda exc: isinstance(exc, psycopg.OperationalError),
        )

    def _wake_all(self) -> None:
        with self._lock:
            for queue_type, changed in self._changed.items():
                self._generation[queue_type] += 1
                changed.notify_all()

    def token(self, queue_type: str) -> int:
        with self._lock:
            return self._generation[queue_type]

    def wait(self, queue_type: str, token: int) -> None:
        with self._lock:
            self._changed[queue_type].wait_for(
                lambda: self._generation[queue_type] != token or self._stop.is_set(),
                timeout=self._fallback,
            )

    def close(self) -> None:
        """Called once the run's stop event is set: release every waiting worker."""
        with self._lock:
            for changed in self._changed.values():
                changed.notify_all()
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
