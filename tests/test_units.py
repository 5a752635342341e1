"""The pure pieces, without a server: backoff, histograms, the timeline, parsing, progress text."""

from __future__ import annotations

import gc
import random
import threading
import tracemalloc
from pathlib import Path

import pytest

from pgmq_sim.actors.chaos import parse_chaos
from pgmq_sim.cli.command import check_flags
from pgmq_sim.cli.options import RUN
from pgmq_sim.cli.plan import parse_compare
from pgmq_sim.errors import UsageError
from pgmq_sim.model.backoff import Backoff
from pgmq_sim.model.facts import PoolerPulse
from pgmq_sim.render.progress import eta_text, floor_percent
from pgmq_sim.result.stats import LatencyHistogram, PulseSample, Timeline
from pgmq_sim.settings import WorkTime
from pgmq_sim.sqlfiles import MAX_SQL_BYTES, read_sql

pytestmark = pytest.mark.unit


# -- reconnect backoff ----------------------------------------------------------------------------


class FakeClock:
    """A clock that moves only when the backoff sleeps."""

    def __init__(self) -> None:
        self.now = 0.0
        self.slept: list[float] = []

    def sleep(self, seconds: float) -> bool:
        self.slept.append(seconds)
        self.now += seconds
        return False


def test_backoff_doubles_until_its_deadline_and_yields_to_a_stop() -> None:
    clock = FakeClock()
    backoff = Backoff(0.3, threading.Event(), first=0.05, cap=0.1, clock=lambda: clock.now, sleep=clock.sleep)
    while backoff.wait():
        pass
    # doubling, capped at 0.1; a fourth wait (0.25 + 0.1 s) would pass the 0.3 s deadline
    assert clock.slept == [0.05, 0.1, 0.1]
    stop = threading.Event()
    stop.set()
    stopped = FakeClock()
    assert not Backoff(60, stop, clock=lambda: 0.0, sleep=stopped.sleep).wait()
    assert stopped.slept == []  # a stop gives up at once, without waiting


def test_backoff_jitter_stays_within_one_delay() -> None:
    clock = FakeClock()
    backoff = Backoff(
        10,
        threading.Event(),
        first=0.1,
        cap=0.4,
        rng=random.Random(7),
        clock=lambda: clock.now,
        sleep=clock.sleep,
    )
    for _ in range(5):
        assert backoff.wait()
    for slept, base in zip(clock.slept, [0.1, 0.2, 0.4, 0.4, 0.4], strict=True):
        assert base <= slept < 2 * base
    assert len(set(clock.slept)) == 5  # jittered: workers do not knock at once


# -- histograms and the timeline ------------------------------------------------------------


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
    """A soak keeps a few figures per second, in the timeline and in the result's samples: measured
    over five minutes of seconds (completions ranked, the housekeeper's and the pooler's pulses), a
    day's stays under 96 MiB (about 850 bytes a second, 3 MiB an hour; the README states it)."""
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
        samples = timeline.samples(seconds)
        gc.collect()  # the histograms read to rank each second, gone
        per_second = (tracemalloc.get_traced_memory()[0] - before) / seconds
    finally:
        tracemalloc.stop()
    assert len(samples) == seconds and samples[-1].pooler_servers == 4
    assert per_second * 86_400 < 96 * 2**20, per_second


def test_late_commit_is_counted_even_when_its_second_closed() -> None:
    timeline = Timeline()
    timeline.processed(10.0, 1.0)
    timeline.processed(0.5, 1.0)  # far behind: counted, not ranked
    samples = timeline.samples(11.0)
    assert samples[0].processed == 1 and samples[0].e2e_p50_ms is None
    assert samples[10].processed == 1


# -- parsing -----------------------------------------------------------------------------------


@pytest.mark.parametrize(
    "text,expected", [("1-10", (1, 10)), ("0", (0, 0)), (" 2.5 - 3 ", (2.5, 3)), ("7", (7, 7))]
)
def test_work_time_parses(text: str, expected: tuple[float, float]) -> None:
    work = WorkTime.parse(text)
    assert (work.min_ms, work.max_ms) == expected


@pytest.mark.parametrize("text", ["ten", "9-3", "-1", "1-", ""])
def test_work_time_refuses(text: str) -> None:
    with pytest.raises(UsageError):
        WorkTime.parse(text)


def test_compare_cells(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    # no -tx: each cell runs its design's own (None), which is single for the seed's table
    assert parse_compare("seed, indexed/notify") == [
        ("seed", "poll", None),
        ("indexed", "notify", None),
    ]
    (tmp_path / "mine").mkdir()
    monkeypatch.chdir(tmp_path)
    assert parse_compare("./mine/notify,./mine") == [("./mine", "notify", None), ("./mine", "poll", None)]
    assert parse_compare("indexed/split,fifo/notify/split", "single") == [
        ("indexed", "poll", "split"),
        ("fifo", "notify", "split"),
    ]
    assert ("fifo", "notify", "split") in parse_compare("all", "split")
    for bad in ("nope", "seed/smoke", " , ", "./missing/notify"):
        with pytest.raises(UsageError):
            parse_compare(bad)


def test_chaos_spec() -> None:
    faults = parse_chaos("kill-connection*2/5s, kill-worker@3s,hold-xmin@500ms+20s")
    assert [(f.kind, f.count, f.at_s, f.every_s, f.duration_s) for f in faults] == [
        ("kill-connection", 2, 5.0, 5.0, None),
        ("kill-worker", 1, 3.0, None, None),
        ("hold-xmin", 1, 0.5, None, 20.0),
    ]
    assert faults[0].times(16) == [5.0, 10.0, 15.0]
    assert parse_chaos("kill-connection/5s@0s")[0].at_s == 0.0
    for bad in ("kill-connection", "explode@1s", "lock-table@1s", "kill-worker@1s+1s", "kill-connection/0s"):
        with pytest.raises(UsageError):
            parse_chaos(bad)


def test_flags_named_as_written_and_given_once() -> None:
    check_flags(["-fill-db", "10", "--workers=3", "-logfile", "-", "-work-ms", "0"])
    with pytest.raises(UsageError, match="unknown flag -frobnicate"):
        check_flags(["-frobnicate"])
    with pytest.raises(UsageError, match="given twice"):
        check_flags(["-fill-db", "50", "--fill-db=300"])


def test_sql_file_limits(tmp_path: Path) -> None:
    big = tmp_path / "big.sql"
    big.write_bytes(b"-- x\n" * (MAX_SQL_BYTES // 5 + 10))
    with pytest.raises(UsageError, match="larger than"):
        read_sql(big, "schema", "fix")
    binary = tmp_path / "bin.sql"
    binary.write_bytes(b"\xff\xfe\x00")
    with pytest.raises(UsageError, match="not UTF-8"):
        read_sql(binary, "schema", "fix")
    with pytest.raises(UsageError, match="larger than"):
        read_sql(Path("/dev/zero"), "schema", "fix")


def test_options_refuse_values_the_table_cannot_hold() -> None:
    """The ranges are the options' (cli/options): a flag's and a file's value are both checked."""
    orders, fill_db = RUN.by_name("orders"), RUN.by_name("fill-db")
    assert orders is not None and fill_db is not None
    with pytest.raises(UsageError, match=r"^-orders 3000000000 must be between 1 and 2147483647 \(order_id"):
        orders.checked(3_000_000_000)
    with pytest.raises(UsageError, match=r"^x.toml:3: fill-db = 2147483648 must be between 1 and .*integer"):
        fill_db.checked(2**31, "x.toml:3: ")


# -- progress text -----------------------------------------------------------------------------


def test_percent_never_rounds_up_to_done() -> None:
    assert floor_percent(996, 1000) == "99.6%"
    assert floor_percent(9999, 10000) == "99.9%"
    assert floor_percent(1000, 1000) == "100.0%"


def test_eta() -> None:
    assert eta_text(3600, 1.0) == "ETA 1:00:00"
    assert eta_text(0, 5.0) == "done"
    assert eta_text(10, 0.0) == "ETA -"
