"""The run's per-second timeline, shared by the threads and locked: arrivals, completions and
percentiles a second, the housekeeper's pulse, the pauses in completions. It keeps a handful of
figures per second, never per message.
"""

from __future__ import annotations

import math
import threading
from array import array
from collections import deque
from dataclasses import dataclass, fields
from typing import Any

from pgmq_sim.model.facts import PoolerPulse
from pgmq_sim.result.histogram import LatencyHistogram
from pgmq_sim.result.reasons import ReasonTally

OPEN_SECONDS = 3  # commits reach the timeline a little out of order; later ones count, unranked
GAP_S = 0.1  # a pause in completions this long is kept, to measure an outage by
MAX_GAPS = 10_000  # the newest kept (a slow rate pauses that long between any two messages)


@dataclass(frozen=True, slots=True)
class SecondSample:
    """One second of the run, for the time series and the plot (slots: a day's run keeps 86,400)."""

    second: int
    arrived: int
    processed: int
    backlog: int
    e2e_p50_ms: float | None
    e2e_p95_ms: float | None
    e2e_p99_ms: float | None
    dead_tuples: int | None = None
    offered: int | None = None  # due by the rate profile in this second (paced runs)
    table_mb: float | None = None  # the queue's table and indexes
    autovacuums: int | None = None  # on the queue's table since the server's statistics began
    snapshot_age_s: float | None = None  # the oldest snapshot another session holds
    rss_mb: float | None = None  # the tool's own resident memory
    lost: int = 0  # worker connections lost in this second
    pooler_waiting: int | None = None  # clients waiting for a server connection (-pooler-admin)
    pooler_wait_ms: float | None = None  # the oldest waiting client's wait
    pooler_servers: int | None = None  # the pooler's server connections busy for the run's clients
    enqueue_p99_ms: float | None = None  # the enqueues committed in this second: due time to commit

    def as_json(self) -> dict[str, int | float | None]:
        return {name: getattr(self, name) for name in SECOND_FIELDS}


SECOND_FIELDS = tuple(f.name for f in fields(SecondSample))


@dataclass(frozen=True, slots=True)
class PulseSample:
    """What the housekeeper saw in one second."""

    dead_tuples: int
    table_mb: float
    autovacuums: int
    snapshot_age_s: float
    rss_mb: float | None


COUNTS = ("arrived", "processed", "lost")  # a second's counts (0 where nothing happened)
NUMBERS = ("offered", "dead_tuples", "autovacuums", "pooler_waiting", "pooler_servers")  # -1: not seen
EMPTY = {**dict.fromkeys(COUNTS, 0), **dict.fromkeys(NUMBERS, -1)}  # a second's own; a figure's: NaN
FIGURES = (  # NaN: not seen
    *("e2e_p50_ms", "e2e_p95_ms", "e2e_p99_ms", "table_mb", "snapshot_age_s", "rss_mb"),
    *("pooler_wait_ms", "enqueue_p99_ms"),
)


class SecondColumns:
    """The run's seconds, a column of 8 bytes a second per figure, not an object a second: a soak's
    series grew 1 KB a second as objects (7 MB in two hours), and a day's run keeps 86,400. An integer
    column's -1 and a float column's NaN are a figure not seen in that second."""

    def __init__(self) -> None:
        self.columns: dict[str, array[Any]] = {
            **{name: array("q") for name in (*COUNTS, *NUMBERS)},
            **{name: array("d") for name in FIGURES},
        }
        self.length = 0

    def reach(self, second: int) -> None:
        """The columns made long enough to hold the second."""
        if second >= self.length:
            more = second + 1 - self.length
            for name, column in self.columns.items():
                column.extend(array(column.typecode, [EMPTY.get(name, math.nan)]) * more)
            self.length = second + 1

    def add(self, name: str, second: int, count: int) -> None:
        self.reach(second)
        column = self.columns[name]
        column[second] = max(0, column[second]) + count

    def put(self, second: int, **figures: float | None) -> None:
        self.reach(second)
        for name, value in figures.items():
            column = self.columns[name]
            column[second] = EMPTY.get(name, math.nan) if value is None else value

    def number(self, name: str, second: int) -> int | None:
        value = int(self.columns[name][second])
        return None if value == -1 else value

    def figure(self, name: str, second: int) -> float | None:
        value = float(self.columns[name][second])
        return None if math.isnan(value) else value


class Timeline:
    """Per-second arrivals, completions and end-to-end percentiles, shared by the threads.

    The seconds still open each have a small histogram; older ones are closed into three
    numbers, so a ten-million-message soak holds a few bytes per second, not per message.
    """

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._seconds = SecondColumns()
        self._open: dict[int, LatencyHistogram] = {}
        self._enqueues: dict[int, LatencyHistogram] = {}  # the open seconds' enqueue latencies
        self._spare: list[LatencyHistogram] = []
        self._last_dead: int | None = None
        # pauses in completions (an outage's length, to the millisecond) and losses, for the faults
        self._last_done: float | None = None
        self._gaps: deque[tuple[float, float]] = deque(maxlen=MAX_GAPS)
        self._losses: deque[float] = deque(maxlen=MAX_GAPS)
        self.reasons = ReasonTally()  # the server's reasons for the errors and losses met

    def arrived(self, at_s: float, count: int) -> None:
        with self._lock:
            self._seconds.add("arrived", max(0, int(at_s)), count)

    def offered(self, at_s: float, count: int) -> None:
        with self._lock:
            self._seconds.add("offered", max(0, int(at_s)), count)

    def pulse(self, at_s: float, sample: PulseSample) -> None:
        with self._lock:
            self._seconds.put(
                max(0, int(at_s)),
                dead_tuples=sample.dead_tuples,
                table_mb=sample.table_mb,
                autovacuums=sample.autovacuums,
                snapshot_age_s=sample.snapshot_age_s,
                rss_mb=sample.rss_mb,
            )
            self._last_dead = sample.dead_tuples

    def pooler(self, at_s: float, sample: PoolerPulse) -> None:
        with self._lock:
            self._seconds.put(
                max(0, int(at_s)),
                pooler_waiting=sample.waiting,
                pooler_wait_ms=sample.longest_wait_ms,
                pooler_servers=sample.servers_active,
            )

    def lost(self, at_s: float, outage: bool = True) -> None:
        """A worker lost its connection: the first loss of an outage (outage=False: a loss the
        server's own policy caused, counted in its second but no sign of an outage)."""
        with self._lock:
            self._seconds.add("lost", max(0, int(at_s)), 1)
            if outage:
                self._losses.append(at_s)

    def pauses(self, end_s: float | None = None) -> tuple[list[tuple[float, float]], list[float]]:
        """The pauses in completions of GAP_S or more (from the last completion to the next, and to
        `end_s`, the run's end, when it came that long after the last), and the times workers lost
        their connections."""
        with self._lock:
            gaps = list(self._gaps)
            last = self._last_done or 0.0
            if end_s is not None and end_s - last >= GAP_S:
                gaps.append((last, end_s))
            return gaps, list(self._losses)

    def last_dead_tuples(self) -> int | None:
        return self._last_dead

    def enqueued(self, second: int, latencies: LatencyHistogram) -> None:
        """Enqueues committed in that second (their rows written in it), each timed from its due time."""
        with self._lock:
            self._seconds.add("arrived", second, latencies.count)
            histogram = self._enqueue_second(second)
            if histogram is not None:
                histogram.merge(latencies)

    def _enqueue_second(self, second: int) -> LatencyHistogram | None:
        """That second's enqueue histogram; None when it closed (counted in the whole, not ranked)."""
        histogram = self._enqueues.get(second)
        if histogram is None:
            if second < max(self._enqueues, default=second) - OPEN_SECONDS:
                return None
            histogram = self._enqueues[second] = LatencyHistogram()
            for old in [s for s in self._enqueues if s < second - OPEN_SECONDS]:
                self._seconds.put(old, enqueue_p99_ms=self._enqueues.pop(old).percentiles_ms()["p99"])
        return histogram

    def processed(self, at_s: float, e2e_ms: float | None) -> None:
        with self._lock:
            histogram = self._count(at_s, 1, e2e_ms is not None)
            if histogram is not None and e2e_ms is not None:
                histogram.record_ms(e2e_ms)

    def processed_batch(self, at_s: float, count: int, e2e: LatencyHistogram | None) -> None:
        """Completions reported together (a worker process's report), with their e2e histogram."""
        with self._lock:
            histogram = self._count(at_s, count, e2e is not None and e2e.count > 0)
            if histogram is not None and e2e is not None:
                histogram.merge(e2e)

    def _count(self, at_s: float, count: int, ranked: bool) -> LatencyHistogram | None:
        """Count completions in their second; the histogram to rank them in, unless that second
        closed too long ago (late commits are counted, not ranked)."""
        second = max(0, int(at_s))
        self._seconds.add("processed", second, count)
        last = self._last_done
        if last is None or at_s > last:
            if last is not None and at_s - last >= GAP_S:
                self._gaps.append((last, at_s))
            self._last_done = at_s
        if not ranked:
            return None
        histogram = self._open.get(second)
        if histogram is None:
            if second < max(self._open, default=second) - OPEN_SECONDS:
                return None
            histogram = self._open[second] = self._spare.pop() if self._spare else LatencyHistogram(2)
            self._close(before=second - OPEN_SECONDS)
        return histogram

    def _close(self, before: float) -> None:
        for second in [s for s in self._open if s < before]:
            histogram = self._open.pop(second)
            p = histogram.percentiles_ms()
            self._seconds.put(second, e2e_p50_ms=p["p50"], e2e_p95_ms=p["p95"], e2e_p99_ms=p["p99"])
            histogram.reset()
            self._spare.append(histogram)

    def samples(self, elapsed_s: float) -> list[SecondSample]:
        """The run's seconds up to elapsed_s; the last one may be partial."""
        with self._lock:
            self._close(before=math.inf)
            for second in list(self._enqueues):
                self._seconds.put(second, enqueue_p99_ms=self._enqueues.pop(second).percentiles_ms()["p99"])
            columns = self._seconds
            columns.reach(max(1, math.ceil(elapsed_s), columns.length) - 1)
            result = []
            arrived = done = 0
            counted, number, figure = columns.columns, columns.number, columns.figure
            for index in range(columns.length):
                arrived += counted["arrived"][index]
                done += counted["processed"][index]
                result.append(
                    SecondSample(
                        index,
                        counted["arrived"][index],
                        counted["processed"][index],
                        max(0, arrived - done),
                        figure("e2e_p50_ms", index),
                        figure("e2e_p95_ms", index),
                        figure("e2e_p99_ms", index),
                        number("dead_tuples", index),
                        number("offered", index),
                        figure("table_mb", index),
                        number("autovacuums", index),
                        figure("snapshot_age_s", index),
                        figure("rss_mb", index),
                        counted["lost"][index],
                        number("pooler_waiting", index),
                        figure("pooler_wait_ms", index),
                        number("pooler_servers", index),
                        figure("enqueue_p99_ms", index),
                    )
                )
            return result
