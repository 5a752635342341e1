"""A spread run's parts that need no server: every process draws the same arrivals and takes only
its groups' (msg_id = draw place), the lowest id a process may owe, and the processes' enqueue
accounts summed as one process's would be."""

from __future__ import annotations

import random
from datetime import UTC, datetime

import pytest
from builders import enqueue

from pgmq_sim.actors.arrivals import RateProducer
from pgmq_sim.actors.bells import Halt
from pgmq_sim.actors.producer import Arrival, MessageSource
from pgmq_sim.distributed.producing import EnqueueDeltas, apply_deltas, owner
from pgmq_sim.model.keys import GroupTally
from pgmq_sim.model.profiles import ConstantRate
from pgmq_sim.model.skew import KeySkew, key_sampler
from pgmq_sim.result.enqueues import EnqueueTally
from pgmq_sim.result.timeline import Timeline

pytestmark = pytest.mark.unit
NOW = datetime(2026, 1, 1, tzinfo=UTC)
TYPES = ("type1", "type2", "type3")


def source(seed: int = 5) -> MessageSource:
    sampler = key_sampler(KeySkew.parse("uniform"), 40)
    return MessageSource(
        TYPES, sampler, random.Random(seed), NOW, GroupTally(TYPES, 40, 1 / 40), ids_by_draw=True
    )


def producer(share: int, shares: int, clock: list[float]) -> RateProducer:
    return RateProducer(
        [],
        source(),
        300,
        ConstantRate(100),
        Halt(),
        lambda: clock[0],
        EnqueueDeltas(offers=share == 0),
        EnqueueTally(),
        owns=lambda arrival: owner(arrival, shares) == share,
    )


def taken_all(p: RateProducer) -> list[Arrival]:
    """Every waiting arrival, oldest first, taken off."""
    return [p._waiting.popleft() for _ in range(len(p._waiting))]


def test_each_process_takes_its_groups_of_one_arrival_stream_with_ids_by_draw_place() -> None:
    clock = [1.5]
    processes = [producer(share, 3, clock) for share in range(3)]
    for p in processes:
        p._arrive()
    waiting = [taken_all(p) for p in processes]
    ids = sorted(a.draw for w in waiting for a in w)
    assert ids == list(range(1, 152))  # every arrival due by 1.5 s at 100/s (one at 0), once
    groups = [{a.group for a in w} for w in waiting]
    assert all(g for g in groups) and not (groups[0] & groups[1] or groups[1] & groups[2])
    one = source()  # one process draws them in the same order, with the same contents
    single = [one.draw() for _ in range(151)]
    by_id = {a.draw: a for w in waiting for a in w}
    assert all(by_id[i + 1].group == a.group for i, a in enumerate(single))
    rows = processes[1]._source.stamp(waiting[1][:3])
    assert [r.msg_id for r in rows] == [a.draw for a in waiting[1][:3]]


def test_a_process_owes_from_its_lowest_waiting_or_in_flight_id() -> None:
    clock = [0.5]
    p = producer(0, 2, clock)
    assert p.owed_from() == 1  # nothing drawn yet
    p._arrive()
    first = p._waiting.head().draw
    assert p.owed_from() == first
    taken = p._take()
    p.sent = [p._source.stamp(taken)]
    assert p.owed_from() == first and p.owed()[0] == first  # in flight
    p.sent = [[]]  # committed
    p._in_flight.clear()
    rest = [*p._waiting.draws(), *(a.draw for a in p._ahead)]  # and its next, drawn ahead
    assert p._ahead and p.owed_from() == rest[0] and p.owed() == rest
    taken_all(p)
    p._ahead.clear()
    assert p.owed_from() == p._source.drawn + 1


def test_a_process_timer_waits_for_its_own_next_arrival_not_the_others() -> None:
    clock = [0.505]
    p = producer(1, 4, clock)
    next_in = p._arrive()
    assert next_in is not None and p._ahead
    own = p._ahead[0]
    assert owner(own, 4) == 1 and own.due_s == pytest.approx((own.draw - 1) / 100)
    assert next_in == pytest.approx(own.due_s - 0.505)
    clock[0] = own.due_s
    p._arrive()
    assert taken_all(p)[-1] is own  # due now: it waits for a session


def test_the_processes_accounts_summed_are_one_process_account() -> None:
    rng = random.Random(3)
    enqueues = [(rng.random() / 10, rng.random() / 50, rng.random() / 100) for _ in range(2000)]
    whole, parts = EnqueueTally(), [EnqueueTally(), EnqueueTally()]
    for i, (session_s, group_s, server_s) in enumerate(enqueues):
        enqueue(whole, session_s, group_s, server_s)
        enqueue(parts[i % 2], session_s, group_s, server_s)
    summed = EnqueueTally()
    summed.become_sum([EnqueueTally.from_data(part.as_data()) for part in parts])
    one, two = whole.account(2, 1, None), summed.account(2, 1, None)
    assert one is not None and two is not None
    assert one.count == two.count == 2000 and one.latency_ms == two.latency_ms
    assert one.round_trip_ms == two.round_trip_ms and one.slowest_count == two.slowest_count
    assert one.parts_s == pytest.approx(two.parts_s)
    assert one.slowest_parts_s == pytest.approx(two.slowest_parts_s)


def test_only_the_first_share_counts_what_fell_due_and_each_counts_its_rows_written() -> None:
    first, other = EnqueueDeltas(offers=True), EnqueueDeltas(offers=False)
    seconds = EnqueueTally().add([(0.5, 0.7, 0.5, 0.5)] * 4)  # four enqueues committed in second 0
    for deltas in (first, other):
        deltas.offered(0.5, 10)
        for second, latencies in seconds.items():
            deltas.enqueued(second, latencies)
    taken, others = first.take(), other.take()
    assert taken["offered"] == [(0, 10)] and others["offered"] == []
    timeline = Timeline()
    for deltas_taken in (taken, others):
        apply_deltas(timeline, deltas_taken)
    [second] = timeline.samples(1.0)
    assert (second.offered, second.arrived) == (10, 8)  # the rows written: the latencies' counts
    assert first.take() == {"offered": [], "latencies": []}


def test_the_offering_process_runs_to_the_last_arrivals_due_time_when_another_owns_it() -> None:
    """The first process counts every arrival offered; when the run's last arrival is another's, it
    must not close once its own are drawn (CI offered 1,499 of 1,500: the last one never counted)."""
    one = source()
    last = [one.draw() for _ in range(300)][-1]
    shares = next(n for n in range(2, 9) if owner(last, n) != 0)
    clock = [2.985]  # 100/s from 0: arrival 300 falls due at 2.99 s
    first = producer(0, shares, clock)
    first._arrive()
    assert first._arrive() is not None and not first._closed  # before: closed, 299 offered
    clock[0] = 3.2
    assert first._arrive() is None
    first.figures.offer(clock[0], 300)
    first.figures.fold(clock[0])  # as the run's end does
    offered = first.figures._timeline.take()["offered"]  # type: ignore[attr-defined]
    assert sum(count for _, count in offered) == 300, offered
