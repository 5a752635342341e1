"""The pure pieces, without a server: timeline, histograms, advice rules, parsing, progress text."""

from __future__ import annotations

import dataclasses
import threading
import time
from pathlib import Path
from typing import Any

import pytest

from pgmq_sim import advice
from pgmq_sim.chaos import parse_chaos
from pgmq_sim.cli import check_flags, parse_compare
from pgmq_sim.errors import UsageError
from pgmq_sim.progress import eta_text, floor_percent
from pgmq_sim.queue import Backoff, TableHealth
from pgmq_sim.result import RunResult
from pgmq_sim.settings import Settings, WorkTime
from pgmq_sim.sqlfiles import MAX_SQL_BYTES, read_sql
from pgmq_sim.stats import LatencyHistogram, Timeline, WorkerStats


def settings(**changes: Any) -> Settings:
    base = Settings(
        dsn=None,
        delmsg=False,
        fill_db=1000,
        logfile="-",
        rate=0.0,
        schema=None,
        next_msg=None,
        workers=6,
        work=WorkTime(1, 10),
        orders=2,
        poll_interval=1.0,
        seed=1,
    )
    return dataclasses.replace(base, **changes)


def result(
    *,
    workers: int = 6,
    groups: int = 2,
    processed: int = 1000,
    empty: int = 0,
    claim_ms: float = 0.3,
    complete_ms: float = 0.5,
    e2e_ms: float = 8.0,
    work_ms: float = 5.5,
    health: TableHealth | None = None,
    strategy: str = "seed",
    **changes: Any,
) -> RunResult:
    """A run whose figures are set by hand: each worker processed its share at these latencies."""
    stats = []
    for i in range(workers):
        s = WorkerStats(f"w{i + 1}", ("type1", "type2", "type3")[i % 3])
        share = processed // workers + (1 if i < processed % workers else 0)
        for _ in range(share):
            s.record_processed(e2e_ms, 0.001, work_ms / 1000)
            s.claim.record_ms(claim_ms)
            s.complete.record_ms(complete_ms)
        s.empty_claims = empty // workers + (1 if i < empty % workers else 0)
        stats.append(s)
    return RunResult.from_stats(
        settings=settings(workers=workers, **changes),
        server="test",
        strategy=strategy,
        ordered=True,
        files={},
        produced=processed,
        elapsed_s=2.0,
        outcome="completed",
        stats=stats,
        groups_per_type={"type1": groups, "type2": groups, "type3": groups},
        timeline=[],
        health=health,
        audit=None,
    )


# -- reconnect backoff ----------------------------------------------------------------------------


def test_backoff_doubles_until_its_deadline_and_yields_to_a_stop() -> None:
    stop = threading.Event()
    backoff = Backoff(0.35, stop, first=0.05, cap=0.1)
    began = time.monotonic()
    waits = 0
    while backoff.wait():
        waits += 1
    # 0.05 + 0.1 + 0.1 fits in 0.35 s; a fourth wait of 0.1 would pass the deadline
    assert waits == 3 and 0.24 < time.monotonic() - began < 0.35
    stop.set()
    assert not Backoff(60, stop).wait()


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


def test_late_commit_is_counted_even_when_its_second_closed() -> None:
    timeline = Timeline()
    timeline.processed(10.0, 1.0)
    timeline.processed(0.5, 1.0)  # far behind: counted, not ranked
    samples = timeline.samples(11.0)
    assert samples[0].processed == 1 and samples[0].e2e_p50_ms is None
    assert samples[10].processed == 1


# -- advice rules ------------------------------------------------------------------------------


def test_vacuum_advice_only_for_a_live_queue() -> None:
    drained = result(health=TableHealth(0, 50_000, 0, 0, 1, 1))
    assert advice.dead_tuples(drained) is None
    live = result(health=TableHealth(1_000, 50_000, 0, 0, 1, 1))
    line = advice.dead_tuples(live)
    assert line is not None and "50000 dead tuples" in line


def test_idle_worker_advice_needs_more_workers_than_groups() -> None:
    # exactly 6 workers for 6 groups: empty claims are polling, not crowding
    assert advice.idle_workers(result(workers=6, groups=2, empty=5000)) is None
    crowded = advice.idle_workers(result(workers=12, groups=2, empty=5000))
    assert crowded is not None and "type1" in crowded and "more workers than groups" in crowded


def test_slow_claim_advice_does_not_suggest_the_strategy_in_use() -> None:
    seed_run = advice.slow_claim(result(claim_ms=20, strategy="seed"))
    assert seed_run is not None and "-claim indexed" in seed_run
    indexed_run = advice.slow_claim(result(claim_ms=20, strategy="indexed"))
    assert indexed_run is not None and "-claim indexed" not in indexed_run
    assert advice.slow_claim(result(claim_ms=0.2)) is None


def test_prefill_latency_is_called_backlog_wait() -> None:
    line = advice.backlog_wait(result(e2e_ms=11_000))
    assert line is not None and "waiting in the prefilled backlog" in line
    assert advice.backlog_wait(result(e2e_ms=11_000, rate=100.0)) is None
    assert advice.backlog_wait(result(e2e_ms=8)) is None


def test_too_few_workers_names_the_bound() -> None:
    line = advice.too_few_workers(result(workers=3, groups=4))
    assert line is not None and "3 workers" in line
    assert advice.too_few_workers(result(workers=12, groups=4)) is None


def test_advice_runs_every_rule() -> None:
    lines = advice.advice(result(workers=3, groups=4, e2e_ms=11_000))
    assert any("fewer workers" in line for line in lines)
    assert any("backlog" in line for line in lines)


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


def test_compare_cells() -> None:
    assert parse_compare("seed, indexed/notify") == [
        ("seed", "poll", "single"),
        ("indexed", "notify", "single"),
    ]
    assert parse_compare("indexed/split,fifo/notify/split", "single") == [
        ("indexed", "poll", "split"),
        ("fifo", "notify", "split"),
    ]
    assert ("fifo", "notify", "split") in parse_compare("all", "split")
    for bad in ("nope", "seed/smoke", " , "):
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


def test_settings_refuse_values_the_table_cannot_hold() -> None:
    with pytest.raises(UsageError, match="integer"):
        settings(orders=3_000_000_000)
    with pytest.raises(UsageError, match="integer"):
        settings(fill_db=2**31)


# -- progress text -----------------------------------------------------------------------------


def test_percent_never_rounds_up_to_done() -> None:
    assert floor_percent(996, 1000) == "99.6%"
    assert floor_percent(9999, 10000) == "99.9%"
    assert floor_percent(1000, 1000) == "100.0%"


def test_eta() -> None:
    assert eta_text(3600, 1.0) == "ETA 1:00:00"
    assert eta_text(0, 5.0) == "done"
    assert eta_text(10, 0.0) == "ETA -"
