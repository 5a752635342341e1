"""The producer: writes messages with increasing msg_id and distinct, increasing time_added.

Times are assigned here rather than defaulted in SQL: the seed's claim query
never takes two messages of one group whose time_added are equal, and
clock_timestamp() repeats within a microsecond in a bulk insert.
"""

from __future__ import annotations

import random
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta

import psycopg

from pgmq_sim.settings import QUEUE_TYPES
from pgmq_sim.sqlfiles import statement

ONE_US = timedelta(microseconds=1)


@dataclass
class MessageSource:
    """Generates messages: random type, random order_id in 1..orders."""

    orders: int
    rng: random.Random
    next_id: int = 1
    last_added: datetime = field(default_factory=lambda: datetime.min.replace(tzinfo=UTC))
    groups: dict[str, set[int]] = field(default_factory=dict)

    def take(self, count: int) -> list[tuple[int, str, str, int, datetime]]:
        now = datetime.now(UTC)
        rows = []
        for _ in range(count):
            queue_type = self.rng.choice(QUEUE_TYPES)
            order_id = self.rng.randint(1, self.orders)
            self.last_added = max(now, self.last_added + ONE_US)
            rows.append((self.next_id, queue_type, "N", order_id, self.last_added))
            self.groups.setdefault(queue_type, set()).add(order_id)
            self.next_id += 1
        return rows

    @property
    def produced(self) -> int:
        return self.next_id - 1


def copy_messages(conn: psycopg.Connection, rows: list[tuple[int, str, str, int, datetime]]) -> None:
    """Write rows with COPY in one transaction: all or none."""
    with conn.transaction(), conn.cursor() as cur, cur.copy(statement("copy_messages")) as copy:
        for row in rows:
            copy.write_row(row)


def prefill(conn: psycopg.Connection, source: MessageSource, count: int, batch: int = 50_000) -> None:
    """COPY the backlog, then ANALYZE it: without statistics the planner picks scans
    for the claim that a queue table in service would never get."""
    remaining = count
    while remaining:
        size = min(batch, remaining)
        copy_messages(conn, source.take(size))
        remaining -= size
    conn.execute(statement("analyze_queue"))
    conn.commit()


class RateProducer(threading.Thread):
    """Inserts `total` messages at `rate` per second while the workers run.

    Message i is due at start + i/rate, so pacing never drifts: after a slow
    insert the producer catches up with one batch of everything now due.
    """

    def __init__(
        self,
        conn: psycopg.Connection,
        source: MessageSource,
        total: int,
        rate: float,
        stop: threading.Event,
        clock: Callable[[], float],
        on_error: Callable[[BaseException], None],
    ) -> None:
        super().__init__(name="producer", daemon=True)
        self._conn = conn
        self._source = source
        self._total = total
        self._rate = rate
        self._halt = stop
        self._clock = clock
        self._on_error = on_error
        self.produced_at: list[tuple[float, int]] = []

    @property
    def produced(self) -> int:
        return self._source.produced

    def cancel(self) -> None:
        """Cancel an insert that waits on the server (a lock held elsewhere), from another thread."""
        self._conn.cancel_safe(timeout=2)

    def run(self) -> None:
        try:
            self._produce()
        except BaseException as exc:  # reported to the run, which stops
            if not self._halt.is_set():  # else it is the cancel of a stopping run
                self._on_error(exc)

    def _produce(self) -> None:
        start = time.monotonic()
        while self._source.produced < self._total and not self._halt.is_set():
            elapsed = time.monotonic() - start
            due = min(self._total, int(elapsed * self._rate) + 1)
            if due > self._source.produced:
                copy_messages(self._conn, self._source.take(due - self._source.produced))
                self.produced_at.append((self._clock(), self._source.produced))
            else:
                next_due = start + self._source.produced / self._rate
                self._halt.wait(max(0.0, next_due - time.monotonic()))
