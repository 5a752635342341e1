"""The few threads a run keeps beside its event loop (the bystander, the pooler's console watch, a
Locust master's monitor): one way to stop, cancel and report a failure."""

from __future__ import annotations

import threading
import time
from collections.abc import Callable

import psycopg

from pgmq_sim.db.connection import cancel_query


class RunThread(threading.Thread):
    """A thread that ends when the run's stop event is set and reports its first failure to
    the run; a failure after the stop is the stop itself (a cancelled query), not an error."""

    def __init__(self, name: str, stop: threading.Event, on_error: Callable[[BaseException], None]) -> None:
        super().__init__(name=name, daemon=True)
        self._halt = stop
        self._on_error = on_error

    def body(self) -> None:
        raise NotImplementedError

    def connection(self) -> psycopg.Connection | None:
        """The connection a cancel reaches, if any."""
        return None

    def run(self) -> None:
        try:
            self.body()
        except BaseException as exc:
            if not self._halt.is_set():
                self._on_error(exc)

    def cancel(self) -> None:
        """Cancel the query this thread waits on, from another thread (psycopg allows it)."""
        conn = self.connection()
        if conn is not None:
            cancel_query(conn)


def join_all(threads: list[RunThread], grace_s: float) -> list[RunThread]:
    """Give the threads a grace period together, then cancel the queries of those still
    waiting on the server (a lock held elsewhere, a frozen server), so a stop never hangs.
    Returns the threads that are still alive (daemons, left to the process's exit)."""
    deadline = time.monotonic() + grace_s
    for thread in threads:
        thread.join(timeout=max(0.0, deadline - time.monotonic()))
    alive = [t for t in threads if t.is_alive()]
    # cancels go out together: against a frozen server each one waits out its own timeout
    cancels = [threading.Thread(target=t.cancel, daemon=True) for t in alive]
    for cancel in cancels:
        cancel.start()
    deadline = time.monotonic() + grace_s
    for thread in alive:
        thread.join(timeout=max(0.0, deadline - time.monotonic()))
    return [t for t in alive if t.is_alive()]
