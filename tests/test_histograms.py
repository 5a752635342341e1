"""The latency histograms: they merge exactly and survive the wire, count as hdrh counts, read a window
as hdrh reads the values in it, and merge while their worker records."""

from __future__ import annotations

import random
import threading

import pytest

from pgmq_sim.result.histogram import LatencyHistogram

pytestmark = pytest.mark.unit


def test_histograms_merge_exactly_and_survive_the_wire() -> None:
    a, b = LatencyHistogram(), LatencyHistogram()
    for ms in range(1, 101):
        (a if ms % 2 else b).record_ms(ms)
    merged = LatencyHistogram.merged(
        [LatencyHistogram.decode(a.encode()), LatencyHistogram.decode(b.encode())]
    )
    assert merged.count == 100
    p = merged.percentiles_ms()
    assert p["p50"] == pytest.approx(50, rel=0.001) and p["max"] == pytest.approx(100, rel=0.001)


@pytest.mark.parametrize("digits", [2, 3])
def test_inline_recording_counts_exactly_as_hdrh_does(digits: int) -> None:
    """record_ms computes hdrh's counts index itself (it is on every message's path)."""
    from hdrh.histogram import HdrHistogram

    ours, theirs = LatencyHistogram(digits), HdrHistogram(1, 3_600_000_000, digits)
    rng = random.Random(7)
    for _ in range(20_000):
        ms = rng.choice([0.0004, 0.0015]) if rng.random() < 0.01 else 10 ** rng.uniform(-3, 7)
        ours.record_ms(ms)
        theirs.record_value(min(max(1, round(ms * 1000)), 3_600_000_000))
    mine = ours._hdr()
    assert list(mine.counts) == list(theirs.counts)
    assert (mine.total_count, mine.min_value, mine.max_value) == (
        theirs.total_count,
        theirs.min_value,
        theirs.max_value,
    )


def test_a_window_of_a_sparse_histogram_reads_as_hdrh_reads_the_same_values() -> None:
    """minus() and merge() work on the sparse counts; a window must read as the values in it."""
    from hdrh.histogram import HdrHistogram

    rng = random.Random(3)
    before = [10 ** rng.uniform(-2, 3) for _ in range(3_000)]
    after = [10 ** rng.uniform(-1, 2) for _ in range(5_000)]
    cumulative = LatencyHistogram()
    for ms in before:
        cumulative.record_ms(ms)
    earlier = LatencyHistogram()
    earlier.merge(cumulative)
    for ms in after:
        cumulative.record_ms(ms)
    window = cumulative.minus(earlier)
    reference = HdrHistogram(1, 3_600_000_000, 3)
    for ms in after:
        reference.record_value(max(1, round(ms * 1000)))
    assert window.count == len(after)
    p = window.percentiles_ms()
    assert p["p50"] == reference.get_value_at_percentile(50) / 1000
    assert p["p99"] == reference.get_value_at_percentile(99) / 1000
    assert p["max"] == reference.get_max_value() / 1000


def test_a_histogram_merges_and_reads_while_its_worker_records() -> None:
    """A sweep's edge and the live figures merge workers' histograms while they record."""
    live = LatencyHistogram()
    stop = threading.Event()

    def record() -> None:
        rng = random.Random(1)
        while not stop.is_set():
            live.record_ms(10 ** rng.uniform(-3, 6))

    worker = threading.Thread(target=record, daemon=True)
    worker.start()
    try:
        for i in range(120):  # without the copies this fails within a few dozen
            total = LatencyHistogram()
            total.merge(live)
            total.minus(LatencyHistogram())
            if i % 40 == 0:
                live.percentiles_ms()
    finally:
        stop.set()
        worker.join(5)
    assert live.count > 0


def test_a_histogram_holds_its_buckets_in_bounded_memory_however_many_values_fall_in_its_tail() -> None:
    """A soak's tail falls in a new bucket now and then, all run long: the histogram's memory must not
    grow a key per bucket (a dict did: 36 histograms took 10 MB more in two hours), but stay within
    the arrays of the chunks it touched (at most 92 of 2 KiB for 3 digits)."""
    import tracemalloc

    rng = random.Random(5)
    values = [10 ** rng.uniform(0, 3) for _ in range(100_000)]  # 1 ms to 1 s: about 10,000 buckets
    tracemalloc.start()
    try:
        histogram = LatencyHistogram()
        for ms in values:
            histogram.record_ms(ms)
        held, _ = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    assert histogram.count == len(values)
    assert held < 256 * 1024, held
