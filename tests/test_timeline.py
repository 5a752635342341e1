"""The run's timeline: every message counted in its second and each second ranked, a late commit
counted where its second closed, and its memory per second, never per message (a day fits)."""

from __future__ import annotations

import gc
import tracemalloc

import pytest

from pgmq_sim.model.facts import PoolerPulse
from pgmq_sim.result.timeline import PulseSample, Timeline

pytestmark = pytest.mark.unit


def test_timeline_counts_every_message_and_ranks_each_second() -> None:
    timeline = Timeline()
    timeline.arrived(0, 30)
    for i in range(10):
        timeline.processed(0.5, 10.0 + i)  # second 0: 10..19 ms
    for _ in range(20):
        timeline.processed(1.2, 100.0)
    samples = timeline.samples(2.0)
    assert [s.processed for s in samples] == [10, 20]
    assert [s.backlog for s in samples] == [20, 0]
    assert samples[0].e2e_p50_ms == pytest.approx(14, abs=0.2)
    assert samples[1].e2e_p99_ms == pytest.approx(100, rel=0.01)


def test_timeline_memory_is_per_second_not_per_message() -> None:
    timeline = Timeline()
    for i in range(200_000):
        timeline.processed(i / 20_000, 5.0)  # 10 seconds of 20,000 messages each
    samples = timeline.samples(10.0)
    assert len(samples) == 10 and sum(s.processed for s in samples) == 200_000
    # a handful of open histograms at most, recycled as seconds close
    assert len(timeline._open) + len(timeline._spare) <= 5


def test_a_day_of_seconds_fits_in_memory() -> None:
    """A soak keeps a few figures per second: measured over five minutes of seconds (completions
    ranked, the housekeeper's and the pooler's pulses), the timeline holds a day's in under 24 MiB
    (a column of 8 bytes a second per figure: about 200 bytes a second, where an object a second took
    630), and with the result's samples read from it, under 96 MiB (the docs state both)."""
    seconds = 300
    gc.collect()
    tracemalloc.start()
    try:
        before = tracemalloc.get_traced_memory()[0]
        timeline = Timeline()
        for second in range(seconds):
            for k in range(12):
                timeline.processed(second + k / 12, 5.0 + k)
            timeline.arrived(second + 0.5, 800)
            timeline.offered(second + 0.5, 800)
            timeline.pulse(second + 0.3, PulseSample(93_000 + second, 5.82, second // 60, 0.0, 60.1))
            timeline.pooler(second + 0.4, PoolerPulse(3, 8, 4, 0, 120.5, second * 0.1))
        gc.collect()
        kept = (tracemalloc.get_traced_memory()[0] - before) / seconds
        samples = timeline.samples(seconds)
        gc.collect()  # the histograms read to rank each second, gone
        per_second = (tracemalloc.get_traced_memory()[0] - before) / seconds
    finally:
        tracemalloc.stop()
    assert len(samples) == seconds and samples[-1].pooler_servers == 4
    assert samples[-1].dead_tuples == 93_299 and samples[-1].table_mb == 5.82 and samples[-1].offered == 800
    assert samples[0].enqueue_p99_ms is None and samples[0].pooler_wait_ms == 120.5
    assert kept * 86_400 < 24 * 2**20, kept
    assert per_second * 86_400 < 96 * 2**20, per_second


def test_late_commit_is_counted_even_when_its_second_closed() -> None:
    timeline = Timeline()
    timeline.processed(10.0, 1.0)
    timeline.processed(0.5, 1.0)  # far behind: counted, not ranked
    samples = timeline.samples(11.0)
    assert samples[0].processed == 1 and samples[0].e2e_p50_ms is None
    assert samples[10].processed == 1
