"""A latency histogram that stays small: HDR buckets kept in arrays made as values fall in them,
so a worker's three histograms and the timeline's open seconds cost kilobytes, however long the run."""

from __future__ import annotations

import functools
from array import array
from collections.abc import Iterable, Iterator

from hdrh.histogram import HdrHistogram

HOUR_US = 3_600_000_000
CHUNK_BITS = 8  # a histogram's counts are kept in arrays of CHUNK buckets, made as values fall in them
CHUNK = 1 << CHUNK_BITS
CHUNK_MASK = CHUNK - 1


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
