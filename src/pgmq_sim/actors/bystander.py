"""A bystander: a small read-and-update workload on a table of its own, beside the queue on the same
server, at a steady rate for the whole run. Its latency beside the workers, against its latency
alone, shows what the queue costs the rest of the database.

Alone is measured twice, before the workers start (after a warm-up that is not counted: a fresh
connection and cold caches) and after they stopped, so that the baseline is the server's own state
and not a start-up's; the result says whether the two agree, and so whether they can be compared."""

from __future__ import annotations

import random
import threading
import time
from collections.abc import Callable

import psycopg

from pgmq_sim.actors.threads import RunThread
from pgmq_sim.db.connection import connect
from pgmq_sim.result.costs import BystanderResult
from pgmq_sim.result.histogram import LatencyHistogram
from pgmq_sim.sqlfiles import statement

ROWS = 1000
BASELINE_S = 2.0  # each alone window
WARMUP_S = 0.5  # before the first window, not counted


class Bystander(RunThread):
    """Paced like the producer (transaction i is due at i/rate), on a connection of its own; a lost
    connection is counted and replaced at the next transaction."""

    def __init__(
        self,
        dsn: str,
        rate: float,
        seed: float,
        stop: threading.Event,
        on_error: Callable[[BaseException], None],
    ) -> None:
        super().__init__("bystander", stop, on_error)
        self._dsn = dsn
        self._rate = rate
        self._rng = random.Random(seed)
        self._conn: psycopg.Connection | None = None
        self._template = statement("bystander_work")
        self.before = LatencyHistogram()  # alone, before the workers started
        self.beside = LatencyHistogram()
        self.after = LatencyHistogram()  # alone, after they stopped
        self.warmup = LatencyHistogram()  # not reported: counted only among the transactions
        self.errors = 0

    def connection(self) -> psycopg.Connection | None:
        return self._conn

    def baseline(self, seconds: float = BASELINE_S) -> None:
        """Run alone, on the caller's thread, before the workers start."""
        self._alone(self.before, seconds, self._halt)

    def alone_after(self, interrupt: threading.Event, seconds: float = BASELINE_S) -> None:
        """Run alone again once the workers stopped (the run's stop is set by then: a signal ends it)."""
        self._alone(self.after, seconds, interrupt)

    def _alone(self, into: LatencyHistogram, seconds: float, halt: threading.Event) -> None:
        """A warm-up on a fresh connection, not counted, then the window."""
        try:
            self._paced(self.warmup, time.monotonic() + WARMUP_S, halt)
            self._paced(into, time.monotonic() + seconds, halt)
        finally:
            self._close()

    def body(self) -> None:
        try:
            self._paced(self.beside, None, self._halt)
        finally:
            self._close()

    def _close(self) -> None:
        if self._conn is not None:
            self._conn.close()
            self._conn = None

    def _paced(self, into: LatencyHistogram, until: float | None, halt: threading.Event) -> None:
        start, done = time.monotonic(), 0
        while not halt.is_set() and (until is None or time.monotonic() < until):
            due = start + done / self._rate
            if halt.wait(max(0.0, due - time.monotonic())):
                return
            self._once(into, halt)
            done += 1

    def _once(self, into: LatencyHistogram, halt: threading.Event) -> None:
        text = self._template.format(id=self._rng.randint(1, ROWS - 9))
        began = time.perf_counter()
        try:
            if self._conn is None or self._conn.closed:
                self._conn = connect(self._dsn, "bystander", autocommit=True)
            self._conn.execute(text)
        except psycopg.Error:
            if halt.is_set():
                return
            self.errors += 1
            if self._conn is not None:  # lost or not, a failed session starts afresh
                self._conn.close()
            self._conn = None
            return
        into.record_ms((time.perf_counter() - began) * 1000)

    def result(self) -> BystanderResult:
        alone = LatencyHistogram()
        alone.merge(self.before)
        alone.merge(self.after)
        return BystanderResult(
            self._rate, self.warmup.count + alone.count + self.beside.count, self.errors,
            alone.percentiles_ms(), self.beside.percentiles_ms(),
            self.before.percentiles_ms(), self.after.percentiles_ms() if self.after.count else None,
        )  # fmt: skip
