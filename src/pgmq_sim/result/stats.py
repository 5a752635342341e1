"""What the run measured: per-worker counters and latency histograms, and a per-second timeline.

Each worker owns its WorkerStats and is its only writer; the progress display
only reads integers from it, so no lock is needed. The timeline is shared and
locked. Memory does not grow with messages: histograms are fixed-size and the
timeline keeps a handful of figures per second.
"""

from __future__ import annotations

import functools
import math
import threading
from array import array
from collections import deque
from collections.abc import Iterable, Iterator
from dataclasses import dataclass, field, fields
from typing import Any

from hdrh.histogram import HdrHistogram

from pgmq_sim.model.facts import PoolerPulse
from pgmq_sim.result.reasons import ReasonTally

HOUR_US = 3_600_000_000
OPEN_SECONDS = 3  # commits reach the timeline a little out of order; later ones count, unranked
CHUNK_BITS = 8  # a histogram's counts are kept in arrays of CHUNK buckets, made as values fall in them
CHUNK = 1 << CHUNK_BITS
CHUNK_MASK = CHUNK - 1
GAP_S = 0.1  # a pause in completions this long is kept, to measure an outage by
MAX_GAPS = 10_000  # the newest kept (a slow rate pauses that long between any two messages)


@functools.cache
def _shape(digits: int) -> HdrHistogram:
    """An empty histogram of this precision, for its index arithmetic (never recorded into)."""
    return HdrHistogram(1, HOUR_US, digits)


class LatencyHistogram:
    """Latencies in microseconds (1 us .. 1 h), reported in ms. HDR histograms merge exactly,
    so workers in other threads, processes or hosts add up to the run's figures.

    Counts are kept by HDR index in arrays of CHUNK buckets, each made when a value first falls in
    it: a worker's latencies fill a few dozen of the 92 chunks of a 3-digit histogram, whose whole
    array (184 KiB) would cost a run of 500 workers most of its memory. Kept by index in a dict,
    they grew all run long, a key for each new value of the tail (a two-hour soak's 36 histograms
    took 10 MB more); a chunk's array holds its buckets at 8 bytes, once made. The full histogram
    is built only to be read (percentiles, the wire). A read copies the chunks first (each copy
    atomic under the GIL): a worker records while another thread merges or reads."""

    def __init__(self, digits: int = 3) -> None:
        self._shape_to(digits)
        self._total = 0
        self._min = HOUR_US + 1
        self._max = 0

    def _shape_to(self, digits: int) -> None:
        self._digits = digits
        shape = _shape(digits)
        # record_ms is on every message's path: hdrh's own index arithmetic, done inline
        self._mask = shape.sub_bucket_mask
        self._half_magnitude = shape.sub_bucket_half_count_magnitude
        self._half = shape.sub_bucket_half_count
        self._unit = shape.unit_magnitude
        self._chunks: list[array[int] | None] = [None] * -(-shape.counts_len // CHUNK)

    def record_ms(self, ms: float) -> None:
        """The same counts index as HdrHistogram.record_value (a unit test holds them equal), at a
        third of its cost."""
        value = min(max(1, round(ms * 1000)), HOUR_US)
        half_magnitude = self._half_magnitude
        bucket = (value | self._mask).bit_length() - self._unit - half_magnitude - 1
        index = ((bucket + 1) << half_magnitude) + (value >> (bucket + self._unit)) - self._half
        chunk = self._chunks[index >> CHUNK_BITS]
        if chunk is None:
            chunk = self._chunks[index >> CHUNK_BITS] = array("Q", bytes(8 * CHUNK))
        chunk[index & CHUNK_MASK] += 1
        self._total += 1
        if value < self._min:
            self._min = value
        if value > self._max:
            self._max = value

    def _copies(self) -> list[tuple[int, array[int]]]:
        """Each chunk made so far, copied: its place and its counts."""
        return [(n, chunk[:]) for n, chunk in enumerate(self._chunks) if chunk is not None]

    def _items(self) -> Iterator[tuple[int, int]]:
        """Every bucket counted: its index and its count."""
        for n, chunk in self._copies():
            base = n << CHUNK_BITS
            yield from ((base + i, count) for i, count in enumerate(chunk) if count)

    def _hdr(self) -> HdrHistogram:
        """The full histogram, built for a read and not kept."""
        hist = HdrHistogram(1, HOUR_US, self._digits)
        for index, count in self._items():
            hist.counts[index] = count
        hist.total_count = self._total
        if self._total:
            hist.min_value, hist.max_value = self._min, self._max
        return hist

    def _load(self, hist: HdrHistogram) -> None:
        self._shape_to(hist.significant_figures)
        for index, count in enumerate(hist.counts):
            if count:
                self._add(index, int(count))
        self._total = int(hist.get_total_count())
        self._min, self._max = HOUR_US + 1, 0
        if self._total:
            self._min, self._max = int(hist.get_min_value()), int(hist.get_max_value())

    def _add(self, index: int, count: int) -> None:
        chunk = self._chunks[index >> CHUNK_BITS]
        if chunk is None:
            chunk = self._chunks[index >> CHUNK_BITS] = array("Q", bytes(8 * CHUNK))
        chunk[index & CHUNK_MASK] += count

    def merge(self, other: LatencyHistogram) -> None:
        if other._digits != self._digits:  # another precision: hdrh re-records its values
            hist = self._hdr()
            hist.add(other._hdr())
            self._load(hist)
            return
        chunks = self._chunks
        for n, theirs in other._copies():  # its worker may be recording meanwhile
            mine = chunks[n]
            if mine is None:
                chunks[n] = theirs
                continue
            for i, count in enumerate(theirs):
                if count:
                    mine[i] += count
        self._total += other._total
        self._min = min(self._min, other._min)
        self._max = max(self._max, other._max)

    def reset(self) -> None:
        self._chunks = [None] * len(self._chunks)
        self._total, self._min, self._max = 0, HOUR_US + 1, 0

    def minus(self, earlier: LatencyHistogram) -> LatencyHistogram:
        """What was recorded since `earlier` (a copy of this histogram taken then): a window of a
        cumulative histogram, for a sweep's step."""
        if earlier._digits != self._digits:
            raise ValueError("histograms of different shapes")
        window = LatencyHistogram(self._digits)
        then = dict(earlier._items())
        for index, count in self._items():
            if count > then.get(index, 0):
                window._add(index, count - then.get(index, 0))
                window._total += count - then.get(index, 0)
        if window._total:
            indexes = [index for index, _ in window._items()]
            shape = _shape(self._digits)
            window._min = shape.get_value_from_index(indexes[0])
            window._max = shape.get_highest_equivalent_value(shape.get_value_from_index(indexes[-1]))
        return window

    @property
    def count(self) -> int:
        return self._total

    def cumulative_ms(self, bounds_ms: Iterable[float]) -> tuple[list[int], float]:
        """How many values were at most each bound (Prometheus's buckets), and their sum in ms
        (each value taken at the middle of its bucket, within the histogram's precision)."""
        shape = _shape(self._digits)
        values = sorted((shape.get_value_from_index(i), c) for i, c in self._items())
        total_us = sum((low + shape.get_highest_equivalent_value(low)) / 2 * count for low, count in values)
        out, running, position = [], 0, 0
        for bound in bounds_ms:
            limit = bound * 1000
            while position < len(values) and values[position][0] <= limit:
                running += values[position][1]
                position += 1
            out.append(running)
        return out, total_us / 1000

    def percentiles_ms(self) -> dict[str, float | None]:
        if self._total == 0:
            return {"p50": None, "p95": None, "p99": None, "max": None}
        hist = self._hdr()
        at = hist.get_value_at_percentile
        return {
            "p50": at(50) / 1000,
            "p95": at(95) / 1000,
            "p99": at(99) / 1000,
            "max": hist.get_max_value() / 1000,
        }

    def encode(self) -> str:
        """A compact text form, to send over the wire (Locust messages)."""
        return self._hdr().encode().decode("ascii")

    @classmethod
    def decode(cls, text: str) -> LatencyHistogram:
        histogram = cls()
        histogram._load(HdrHistogram.decode(text.encode("ascii")))
        return histogram

    @classmethod
    def merged(cls, parts: Iterable[LatencyHistogram]) -> LatencyHistogram:
        total = cls()
        for part in parts:
            total.merge(part)
        return total


@dataclass
class WorkerCounters:
    """A worker's counters; every field is a count or a sum, so totals add field by field."""

    processed: int = 0
    empty_claims: int = 0
    busy_s: float = 0.0
    work_s: float = 0.0
    connections_lost: int = 0
    reconnects: int = 0
    failed_attempts: int = 0
    dead_lettered: int = 0
    lost_ownership: int = 0
    crashes: int = 0
    claim_commits: int = 0  # split mode: a claim that found a message commits on its own
    clock_reads: int = 0  # a completion's clocks read after its commit, in a transaction of their own
    fallback_finds: int = 0  # -wakeup notify: claims at the type's fallback that found messages
    free_at_end: int = 0  # workers free when the run stopped (1 for one worker): the account's last episode

    @classmethod
    def names(cls) -> tuple[str, ...]:
        return COUNTER_NAMES

    def counters(self) -> dict[str, int | float]:
        return {name: getattr(self, name) for name in self.names()}

    def set_counters(self, values: dict[str, int | float]) -> None:
        for name in self.names():
            setattr(self, name, values[name])

    @classmethod
    def total(cls, parts: Iterable[WorkerCounters]) -> WorkerCounters:
        total = cls()
        for part in parts:
            for name in cls.names():
                setattr(total, name, getattr(total, name) + getattr(part, name))
        return total

    @property
    def finished(self) -> int:
        """Messages this worker is done with: processed, or given up on as dead letters."""
        return self.processed + self.dead_lettered


COUNTER_NAMES = tuple(f.name for f in fields(WorkerCounters))  # read per tick: computed once


@dataclass(kw_only=True)
class WorkerStats(WorkerCounters):
    """One worker's counters and latencies; written only by that worker's thread."""

    name: str
    queue_type: str
    claim: LatencyHistogram = field(default_factory=LatencyHistogram)
    complete: LatencyHistogram = field(default_factory=LatencyHistogram)
    e2e: LatencyHistogram = field(default_factory=LatencyHistogram)

    def record_processed(self, e2e_ms: float | None, busy_s: float, work_s: float) -> None:
        """e2e_ms is None when the completion found no row (a message processed twice)."""
        if e2e_ms is not None:
            self.e2e.record_ms(e2e_ms)
        self.busy_s += busy_s
        self.work_s += work_s
        self.processed += 1

    def histograms(self) -> tuple[LatencyHistogram, LatencyHistogram, LatencyHistogram]:
        return self.claim, self.complete, self.e2e


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
