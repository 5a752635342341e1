"""A bystander: a small read-and-update workload on a table of its own, beside the queue on the same
server, at a steady rate for the whole run. Its latency, alone before the workers start and then
beside them, shows what the queue costs the rest of the database."""

from __future__ import annotations

import random
import threading
import time
from collections.abc import Callable

import psycopg

from pgmq_sim.costs import BystanderResult
from pgmq_sim.db.connection import connect
from pgmq_sim.sqlfiles import statement
from pgmq_sim.stats import LatencyHistogram
from pgmq_sim.threads import RunThread

ROWS = 1000
BASELINE_S = 2.0


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
        self.alone = LatencyHistogram()
        self.beside = LatencyHistogram()
        self.errors = 0

    def connection(self) -> psycopg.Connection | None:
        return self._conn

    def baseline(self, seconds: float = BASELINE_S) -> None:
        """Run alone for a while, on the caller's thread, before the workers start."""
        self._paced(self.alone, time.monotonic() + seconds)

    def body(self) -> None:
        try:
            self._paced(self.beside, None)
        finally:
            if self._conn is not None:
                self._conn.close()

    def _paced(self, into: LatencyHistogram, until: float | None) -> None:
        start, done = time.monotonic(), 0
        while not self._halt.is_set() and (until is None or time.monotonic() < until):
            due = start + done / self._rate
            if self._halt.wait(max(0.0, due - time.monotonic())):
                return
            self._once(into)
            done += 1

    def _once(self, into: LatencyHistogram) -> None:
        text = self._template.format(id=self._rng.randint(1, ROWS - 9))
        began = time.perf_counter()
        try:
            if self._conn is None or self._conn.closed:
                self._conn = connect(self._dsn, "bystander", autocommit=True)
            self._conn.execute(text)
        except psycopg.Error:
            if self._halt.is_set():
                return
            self.errors += 1
            if self._conn is not None:  # lost or not, a failed session starts afresh
                self._conn.close()
            self._conn = None
            return
        into.record_ms((time.perf_counter() - began) * 1000)

    def result(self) -> BystanderResult:
        return BystanderResult(
            self._rate, self.alone.count + self.beside.count, self.errors,
            self.alone.percentiles_ms(), self.beside.percentiles_ms(),
        )  # fmt: skip
