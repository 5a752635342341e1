"""What the run measured: per-worker counters and latency histograms, and a per-second timeline.

Each worker owns its WorkerStats and is its only writer; the progress display
only reads integers from it, so no lock is needed. The timeline is shared and
locked. Memory does not grow with messages: histograms are fixed-size and the
timeline keeps a handful of figures per second.
"""

from __future__ import annotations

import math
import threading
from collections.abc import Iterable
from dataclasses import dataclass, field

from hdrh.histogram import HdrHistogram

HOUR_US = 3_600_000_000
OPEN_SECONDS = 3  # commits reach the timeline a little out of order; later ones count, unranked


class LatencyHistogram:
    """Latencies in microseconds (1 us .. 1 h), reported in ms. HDR histograms merge exactly,
    so workers in other threads, processes or hosts add up to the run's figures."""

    def __init__(self, digits: int = 3) -> None:
        self._hist = HdrHistogram(1, HOUR_US, digits)

    def record_ms(self, ms: float) -> None:
        self._hist.record_value(min(max(1, round(ms * 1000)), HOUR_US))

    def merge(self, other: LatencyHistogram) -> None:
        self._hist.add(other._hist)

    def reset(self) -> None:
        self._hist.reset()

    @property
    def count(self) -> int:
        return int(self._hist.get_total_count())

    def percentiles_ms(self) -> dict[str, float | None]:
        if self.count == 0:
            return {"p50": None, "p95": None, "p99": None, "max": None}
        at = self._hist.get_value_at_percentile
        return {
            "p50": at(50) / 1000,
            "p95": at(95) / 1000,
            "p99": at(99) / 1000,
            "max": self._hist.get_max_value() / 1000,
        }

    def encode(self) -> str:
        """A compact text form, to send over the wire (Locust messages)."""
        return self._hist.encode().decode("ascii")

    @classmethod
    def decode(cls, text: str) -> LatencyHistogram:
        histogram = cls()
        histogram._hist.add(HdrHistogram.decode(text.encode("ascii")))
        return histogram

    @classmethod
    def merged(cls, parts: Iterable[LatencyHistogram]) -> LatencyHistogram:
        total = cls()
        for part in parts:
            total.merge(part)
        return total


@dataclass
class WorkerStats:
    """One worker's counters; written only by that worker's thread."""

    name: str
    queue_type: str
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


@dataclass(frozen=True)
class SecondSample:
    """One second of the run, for the time series and the plot."""

    second: int
    arrived: int
    processed: int
    backlog: int
    e2e_p50_ms: float | None
    e2e_p95_ms: float | None
    e2e_p99_ms: float | None
    dead_tuples: int | None = None


@dataclass
class _Second:
    arrived: int = 0
    processed: int = 0
    percentiles: tuple[float | None, float | None, float | None] = (None, None, None)
    dead_tuples: int | None = None


class Timeline:
    """Per-second arrivals, completions and end-to-end percentiles, shared by the threads.

    The seconds still open each have a small histogram; older ones are closed into three
    numbers, so a ten-million-message soak holds a few bytes per second, not per message.
    """

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._seconds: list[_Second] = []
        self._open: dict[int, LatencyHistogram] = {}
        self._spare: list[LatencyHistogram] = []
        self._last_dead: int | None = None

    def _at(self, second: int) -> _Second:
        while len(self._seconds) <= second:
            self._seconds.append(_Second())
        return self._seconds[second]

    def arrived(self, at_s: float, count: int) -> None:
        with self._lock:
            self._at(max(0, int(at_s))).arrived += count

    def dead_tuples(self, at_s: float, count: int) -> None:
        with self._lock:
            self._at(max(0, int(at_s))).dead_tuples = count
            self._last_dead = count

    def last_dead_tuples(self) -> int | None:
        return self._last_dead

    def processed(self, at_s: float, e2e_ms: float | None) -> None:
        second = max(0, int(at_s))
        with self._lock:
            self._at(second).processed += 1
            if e2e_ms is None:
                return
            histogram = self._open.get(second)
            if histogram is None:
                if second < max(self._open, default=second) - OPEN_SECONDS:
                    return  # too late to rank; counted above
                histogram = self._open[second] = self._spare.pop() if self._spare else LatencyHistogram(2)
                self._close(before=second - OPEN_SECONDS)
            histogram.record_ms(e2e_ms)

    def processed_batch(self, at_s: float, count: int, e2e: LatencyHistogram | None) -> None:
        """Completions reported together (a worker process's report), with their e2e histogram."""
        second = max(0, int(at_s))
        with self._lock:
            self._at(second).processed += count
            if e2e is None or e2e.count == 0:
                return
            histogram = self._open.get(second)
            if histogram is None:
                if second < max(self._open, default=second) - OPEN_SECONDS:
                    return
                histogram = self._open[second] = self._spare.pop() if self._spare else LatencyHistogram(2)
                self._close(before=second - OPEN_SECONDS)
            histogram.merge(e2e)

    def _close(self, before: float) -> None:
        for second in [s for s in self._open if s < before]:
            histogram = self._open.pop(second)
            p = histogram.percentiles_ms()
            self._at(second).percentiles = (p["p50"], p["p95"], p["p99"])
            histogram.reset()
            self._spare.append(histogram)

    def samples(self, elapsed_s: float) -> list[SecondSample]:
        """The run's seconds up to elapsed_s; the last one may be partial."""
        with self._lock:
            self._close(before=math.inf)
            seconds = max(1, math.ceil(elapsed_s), len(self._seconds))
            self._at(seconds - 1)
            result = []
            arrived = done = 0
            for index, s in enumerate(self._seconds):
                arrived += s.arrived
                done += s.processed
                result.append(
                    SecondSample(
                        index, s.arrived, s.processed, max(0, arrived - done), *s.percentiles, s.dead_tuples
                    )
                )
            return result
