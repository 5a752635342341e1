"""The producer: writes messages with increasing msg_id and distinct, increasing time_added.

Times are assigned here rather than defaulted in SQL: the seed's claim query
never takes two messages of one group whose time_added are equal, and
clock_timestamp() repeats within a microsecond in a bulk insert. They follow the
server's clock (read once at start, advanced by this process's monotonic clock),
so end-to-end latency is measured on one clock wherever the workers run.

A message counts as produced once its batch has committed; a batch whose commit
answer was lost is checked against the run record before it is written again.
"""

from __future__ import annotations

import random
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import datetime, timedelta

import psycopg

from pgmq_sim.errors import ServerLostError
from pgmq_sim.queue import Backoff, Row, connect_worker, is_connection_lost, produced_count, write_batch
from pgmq_sim.server import reason
from pgmq_sim.settings import QUEUE_TYPES
from pgmq_sim.stats import Timeline
from pgmq_sim.threads import RunThread

ONE_US = timedelta(microseconds=1)
PREFILL_CHUNK = 20_000  # a stop is noticed between chunks (well under a second each)


@dataclass
class MessageSource:
    """Generates messages: random type, random order_id in 1..orders, times on the server's clock."""

    orders: int
    rng: random.Random
    server_start: datetime
    mono_start: float = field(default_factory=time.monotonic)
    next_id: int = 1
    last_added: datetime | None = None
    groups: dict[str, set[int]] = field(default_factory=dict)

    def take(self, count: int) -> list[Row]:
        now = self.server_start + timedelta(seconds=time.monotonic() - self.mono_start)
        rows = []
        for _ in range(count):
            queue_type = self.rng.choice(QUEUE_TYPES)
            order_id = self.rng.randint(1, self.orders)
            self.last_added = now if self.last_added is None else max(now, self.last_added + ONE_US)
            rows.append((self.next_id, queue_type, "N", order_id, self.last_added))
            self.groups.setdefault(queue_type, set()).add(order_id)
            self.next_id += 1
        return rows

    @property
    def generated(self) -> int:
        return self.next_id - 1


class BatchWriter:
    """The producer's connection, kept across batches and replaced when it is lost."""

    def __init__(self, dsn: str, reconnect_timeout: float, stop: threading.Event, log: Callable[[str], None]):
        self._dsn = dsn
        self._reconnect_timeout = reconnect_timeout
        self._halt = stop
        self._log = log
        self._conn: psycopg.Connection | None = None
        self.committed = 0
        self.connections_lost = 0

    @property
    def connection(self) -> psycopg.Connection | None:
        return self._conn

    def write(self, rows: list[Row]) -> None:
        """Write the batch once, whatever the connection does, or raise past the deadline."""
        target = rows[-1][0]
        backoff = Backoff(self._reconnect_timeout, self._halt)
        in_doubt = False
        while True:
            try:
                if self._conn is None:
                    self._conn = connect_worker(self._dsn)
                if in_doubt:
                    self.committed = produced_count(self._conn)
                    if self.committed >= target:
                        return  # the lost commit went through
                write_batch(self._conn, rows, target)
                self.committed = target
                return
            except psycopg.Error as exc:
                if self._halt.is_set() or not is_connection_lost(exc, self._conn):
                    raise
                self.close()
                if not in_doubt:
                    self.connections_lost += 1
                    self._log(f"producer lost its connection: {reason(exc, self._dsn)}; reconnecting")
                in_doubt = True
                if not backoff.wait():
                    if self._halt.is_set():
                        raise
                    raise ServerLostError(
                        f"producer could not reconnect within {self._reconnect_timeout:g} s"
                        f" (-reconnect-timeout): {reason(exc, self._dsn)}"
                    ) from None

    def close(self) -> None:
        if self._conn is not None:
            self._conn.close()
            self._conn = None


def prefill(writer: BatchWriter, source: MessageSource, count: int, stop: threading.Event) -> None:
    """COPY the backlog in chunks, each its own transaction, checking for a stop between them."""
    while source.generated < count and not stop.is_set():
        writer.write(source.take(min(PREFILL_CHUNK, count - source.generated)))


class RateProducer(RunThread):
    """Inserts `total` messages at `rate` per second while the workers run.

    Message i is due at start + i/rate, so pacing never drifts: after a slow
    insert the producer catches up with one batch of everything now due.
    """

    def __init__(
        self,
        writer: BatchWriter,
        source: MessageSource,
        total: int,
        rate: float,
        stop: threading.Event,
        clock: Callable[[], float],
        timeline: Timeline,
        on_error: Callable[[BaseException], None],
    ) -> None:
        super().__init__("producer", stop, on_error)
        self._writer = writer
        self._source = source
        self._total = total
        self._rate = rate
        self._clock = clock
        self._timeline = timeline

    def connection(self) -> psycopg.Connection | None:
        return self._writer.connection

    def body(self) -> None:
        start = time.monotonic()
        while self._source.generated < self._total and not self._halt.is_set():
            elapsed = time.monotonic() - start
            due = min(self._total, int(elapsed * self._rate) + 1)
            if due > self._source.generated:
                rows = self._source.take(due - self._source.generated)
                self._writer.write(rows)
                self._timeline.arrived(self._clock(), len(rows))
            else:
                next_due = start + self._source.generated / self._rate
                self._halt.wait(max(0.0, next_due - time.monotonic()))
