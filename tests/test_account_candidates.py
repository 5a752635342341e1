"""The live account splits only the messages a cohort may take (result/running_account): where the
run's latency grows (a backlog deepening), the median moves up through messages that were slow for
their time and fast for the run, and those must have been split; where it falls, the end refuses the
account rather than give a cohort with messages missing (the whole journal is read instead)."""

from __future__ import annotations

import math
import random
from collections.abc import Callable

import pytest

from pgmq_sim.engine.accounting import LOOKBACK_MESSAGES, LOOKBACK_S, lookback_s
from pgmq_sim.model.journeys import RUN, Journey
from pgmq_sim.result.running_account import RunningAccount

pytestmark = pytest.mark.unit

CHUNKS, PER_CHUNK = 20, 1000


def bucket(latency_s: float) -> int:
    """As sql/account_chunk_journeys.sql buckets a journey: 0.1% wide on a log scale."""
    return math.floor(math.log(max(latency_s, 1e-6)) / math.log(1.001))


def fed(latency_s: Callable[[int, random.Random], float]) -> RunningAccount:
    """A run of CHUNKS seconds, a chunk a second, each message's latency drawn for its second."""
    draw, running, msg_id = random.Random(1), RunningAccount(False, 0.0), 0
    for second in range(CHUNKS):
        journeys = []
        for i in range(PER_CHUNK):
            msg_id += 1
            added = second + i / PER_CHUNK
            latency = latency_s(second, draw)
            done = added + latency
            journeys.append(
                Journey(msg_id, "t", msg_id, added, None, done - 0.001, done, claim_from=done - 0.002,
                        committed=done, bucket=bucket(latency))
            )  # fmt: skip
        journeys.sort(key=lambda j: (j.claimed, j.msg_id))
        running.feed(journeys, {"t": [(second, second + 1.0)]}, {}, CHUNKS + 60.0, float(second))
    return running


def test_a_backlog_deepening_keeps_the_account_whole() -> None:
    """Each second's messages take 30% to 100% of a latency that grows a second a second: the
    final median's messages were split in chunks where they were neither about that chunk's median
    nor among its slowest 3%."""
    running = fed(lambda second, draw: (second + 1) * draw.uniform(0.3, 1.0))
    account = running.finish(60)
    assert account is not None and running.moved is None, running.moved
    assert sum(c.messages for c in account.overall.values()) > 0


def test_a_latency_falling_far_below_the_median_refuses_the_account() -> None:
    running = fed(lambda second, draw: (CHUNKS - second) * draw.uniform(0.3, 1.0))
    assert running.finish(60) is None
    assert running.moved == RUN  # the run's cohorts took messages left unsplit: said, not guessed


def test_the_live_account_keeps_a_count_of_messages_not_a_rates_worth_of_seconds() -> None:
    """What the process keeps is its lookback's messages' spans: at 3,000 msg/s, 30 s would be
    90,000 messages; the lookback is the time 30,000 took, at most 30 s for a slow run."""
    running = fed(lambda second, draw: 0.01)
    assert running.messages == CHUNKS * PER_CHUNK  # the rate so far: every journey fed, counted
    assert lookback_s(0, 0.0) == LOOKBACK_S  # nothing read yet
    assert lookback_s(1_000, 100.0) == LOOKBACK_S  # 10 msg/s: 30,000 would take 3,000 s
    assert lookback_s(300_000, 100.0) == pytest.approx(LOOKBACK_MESSAGES / 3_000)  # 10 s at 3,000/s
