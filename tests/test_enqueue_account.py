"""The enqueue side's parts that need no server: the produced count under out-of-order commits, the
per-key hold of waiting arrivals, the enqueue account's split and slowest 1%, the -slo halves, and
the enqueue verdict on cases its integration tests do not build."""

from __future__ import annotations

import random
import tracemalloc
from datetime import UTC, datetime

import pytest
from builders import enqueue

from pgmq_sim.actors.arrivals import EnqueueFigures, RateProducer
from pgmq_sim.actors.bells import Halt
from pgmq_sim.actors.producer import MessageSource, ProducedBook
from pgmq_sim.db.values import Message
from pgmq_sim.errors import UsageError
from pgmq_sim.model.facts import NOTIFY_QUEUE
from pgmq_sim.model.keys import GroupTally
from pgmq_sim.model.profiles import ConstantRate
from pgmq_sim.model.skew import KeySkew, key_sampler
from pgmq_sim.model.sweep import parse_slo
from pgmq_sim.result.enqueues import EnqueueTally
from pgmq_sim.result.timeline import Timeline
from pgmq_sim.result.waits import BlockerSeen, WaitProfile
from pgmq_sim.verdicts.cause import Resource
from pgmq_sim.verdicts.enqueue import enqueue_cause

pytestmark = pytest.mark.unit
NOW = datetime(2026, 1, 1, tzinfo=UTC)


def rows(*ids: int) -> list[Message]:
    return [Message(i, "type1", 1, NOW) for i in ids]


def test_the_produced_count_never_passes_an_enqueue_still_in_flight() -> None:
    book = ProducedBook()
    book.landed(rows(1, 2))
    book.landed(rows(4))  # 3 is in flight on another session
    book.landed(rows(6))
    assert (book.committed, book.written) == (2, 4)
    book.landed(rows(3))
    assert book.committed == 4
    book.landed(rows(5))
    assert book.committed == 6
    book.landed(rows(7, 8, 9))  # the prefill's way: in order
    assert book.committed == 9


def source(orders: int = 2) -> MessageSource:
    sampler = key_sampler(KeySkew.parse("uniform"), orders)
    return MessageSource(
        ("type1",), sampler, random.Random(1), NOW, GroupTally(("type1",), orders, 1 / orders)
    )


def test_a_waiting_message_of_a_key_in_flight_is_held_behind_it_and_ready_when_it_committed() -> None:
    """A free session takes the oldest message whose key has nothing in flight; a message passed
    over is held, and its wait for the key counts from its due time to that key's commit."""
    messages = source()
    producer = RateProducer(
        [], messages, 100, ConstantRate(10), Halt(), lambda: 0.0, Timeline(), EnqueueTally()
    )
    arrivals = [messages.draw(due_s=i * 0.1) for i in range(6)]
    for arrival in arrivals:
        producer._waiting.append(arrival)
    first = producer._take()
    assert first == [arrivals[0]]
    key = arrivals[0].group
    second = producer._take()
    expected = next(a for a in arrivals[1:] if a.group != key)
    assert second == [expected]  # the same key's next one was passed over, and held
    held = [a for a in arrivals[1:] if a.group == key]
    assert held and all(a.held for a in held[:1])
    assert producer._take() == []  # both keys in flight: nothing to take
    producer._in_flight.discard(key)
    producer._held[key][0] = 0.25  # its enqueue committed at 0.25 s
    taken = producer._take()
    assert taken == [held[0]] and taken[0].ready_s == max(0.25, held[0].due_s)


def test_waiting_messages_are_kept_as_due_times_and_drawn_as_a_session_looks_as_they_fell_due() -> None:
    """A producer minutes behind holds millions of messages waiting: each is kept as its due time
    until a session looks at it, then drawn in the same order, so a seed replays the same ones."""
    clock = [0.0]
    messages = source(orders=50)
    producer = RateProducer(
        [], messages, 100_000, ConstantRate(1000), Halt(), lambda: clock[0], Timeline(), EnqueueTally()
    )
    clock[0] = 100.0
    tracemalloc.start()
    before = tracemalloc.get_traced_memory()[0]
    producer._arrive()
    held = tracemalloc.get_traced_memory()[0] - before
    tracemalloc.stop()
    assert len(producer._waiting) == 100_000 and messages.drawn == 0
    assert held < 16 * 100_000  # an Arrival each held about 185 bytes
    taken = [producer._waiting.popleft() for _ in range(100_000)]
    eager = source(orders=50)
    assert [(a.group, a.draw) for a in taken] == [(eager.draw().group, i + 1) for i in range(100_000)]
    assert [a.due_s for a in taken] == pytest.approx([i / 1000 for i in range(100_000)])
    assert not producer._waiting and messages.drawn == 100_000


def test_a_batch_takes_a_keys_messages_together_in_their_order() -> None:
    messages = source(orders=1)
    producer = RateProducer(
        [], messages, 100, ConstantRate(10), Halt(), lambda: 0.0, Timeline(), EnqueueTally(), batch=3
    )
    arrivals = [messages.draw(due_s=i * 0.1) for i in range(4)]
    for arrival in arrivals:
        producer._waiting.append(arrival)
    assert producer._take() == arrivals[:3]
    assert producer._take() == []  # the key is in flight


def test_the_figures_folded_are_every_enqueue_and_offer_in_its_second() -> None:
    """Kept and folded in, not one by one: once folded, the tally holds every enqueue and the
    timeline each one written in the second it committed in, and what fell due in its second."""
    tally, timeline = EnqueueTally(), Timeline()
    figures = EnqueueFigures(tally, timeline, ConstantRate(10), 100)
    arrivals = [source().draw(due_s=0.1 * i) for i in range(25)]  # due from 0 to 2.4 s
    figures.offer(2.45, 25)
    for arrival in arrivals:
        figures.committed(arrival.due_s, arrival.due_s + 0.004, arrival)
    assert tally.latency.count == 0 and not timeline.samples(3.0)[0].arrived  # not yet folded
    figures.fold(2.45)
    assert tally.latency.count == 25 and tally.round_trip.count == 25
    seconds = timeline.samples(3.0)
    assert [s.arrived for s in seconds] == [10, 10, 5] and [s.offered for s in seconds] == [10, 10, 5]
    assert seconds[0].enqueue_p99_ms == pytest.approx(4.0, rel=0.02)


def test_the_account_splits_every_enqueue_and_the_slowest_one_percent() -> None:
    tally = EnqueueTally()
    for _ in range(990):
        enqueue(tally, 0.0001, 0.0, 0.002)  # 2.1 ms, nearly all the server's
    for _ in range(10):
        enqueue(tally, 0.4, 0.05, 0.002)  # 452 ms, nearly all waiting for a session
    waits = WaitProfile(10, (("cpu", 6), ("wal-flush", 4)))
    account = tally.account(sessions=2, batch=1, waits=waits)
    assert account is not None and account.count == 1000 and account.slowest_count == 10
    slowest = account.split(account.slowest_parts_s)
    assert slowest["session"] == pytest.approx(0.4 / 0.452, abs=0.001)
    assert slowest["server:cpu"] == pytest.approx(0.6 * 0.002 / 0.452, abs=0.001)
    whole = account.split(account.parts_s)
    assert sum(whole.values()) == pytest.approx(1.0)
    assert account.latency_ms["p99"] is not None and account.latency_ms["p99"] < 10
    window = tally.minus(tally.copy())
    assert window.latency.count == 0 and tally.account(2, 1, None) is not None
    assert EnqueueTally().account(1, 1, None) is None


def test_the_slo_takes_either_half_or_both() -> None:
    assert parse_slo("e2e-p99=250") == (250.0, None)
    assert parse_slo("enqueue-p99=20ms") == (None, 20.0)
    assert parse_slo("e2e-p99=250, enqueue-p99=20") == (250.0, 20.0)
    for bad in ("p99=3", "enqueue-p99=0", "e2e-p99=1,e2e-p99=2", "enqueue-p99=x"):
        with pytest.raises(UsageError, match="enqueue-p99=MS"):
            parse_slo(bad)


def account_of(session_s: float, server_s: float, waits: WaitProfile, sessions: int = 4):  # type: ignore[no-untyped-def]
    tally = EnqueueTally()
    for _ in range(200):
        enqueue(tally, 0.0, 0.0, 0.002)
    for _ in range(3):
        enqueue(tally, session_s, 0.0, server_s)
    account = tally.account(sessions, 1, waits)
    assert account is not None
    return account


def test_too_few_sessions_for_the_rate_is_the_producer_with_the_pool_that_would_carry_it() -> None:
    """Four sessions at a 2 ms round trip carry 2,000/s: at 3,000/s offered they are the cause."""
    cause = enqueue_cause(account_of(0.5, 0.002, WaitProfile(10, (("cpu", 9),))), 3000, 6)
    assert cause.resource == Resource.PRODUCER, cause
    assert "all 4 producer sessions were busy" in cause.evidence and "2000/s" in cause.evidence
    assert cause.fix is not None and cause.fix.startswith("-producers 9:"), cause.fix


def test_sessions_held_by_the_notification_queue_in_another_database_name_that_lock() -> None:
    """The pool carries the rate; its sessions were all busy waiting on the notification queue's lock
    held by a notifier in another database: the cause is that lock, every notifying commit's."""
    holder = BlockerSeen(4242, "pgmq-sim producer", "active", False, "object", NOTIFY_QUEUE,
                         "AccessExclusiveLock", 12, "other")  # fmt: skip
    waits = WaitProfile(40, (("locks", 30), ("cpu", 5)), (("object", 30),), (holder,))
    cause = enqueue_cause(account_of(0.7, 0.05, waits), 300, 6)
    assert cause.resource == Resource.LOCKS, cause
    assert "pid 4242 (pgmq-sim producer; outside the run; in database other; active)" in cause.evidence
    assert "holding AccessExclusiveLock on the notification queue" in cause.evidence
    assert "whatever its database" in cause.evidence
    assert cause.fix is not None and "notify less often" in cause.fix


def test_the_servers_part_without_samples_is_unexplained() -> None:
    account = account_of(0.0, 0.8, WaitProfile(0))
    cause = enqueue_cause(account, 100, 6)
    assert cause.resource == Resource.UNEXPLAINED and "-wait-sample-hz 0" in cause.evidence


def test_one_session_whose_round_trips_wait_on_the_notification_queue_is_not_too_few_sessions() -> None:
    """The issue's case: one producer at 90/s beside an 800/s notify run in another database; its round
    trip (14 ms) is the lock's queue, so more sessions would only queue on it: the cause is the lock."""
    holder = BlockerSeen(12276, "pgmq-sim producer", "active", False, "object", NOTIFY_QUEUE, "", 9, "other")
    waits = WaitProfile(100, (("locks", 73), ("wal-flush", 20), ("cpu", 7)), (("object", 73),), (holder,))
    tally = EnqueueTally()
    for _ in range(300):
        enqueue(tally, 0.0, 0.0, 0.0144)
    for _ in range(5):
        enqueue(tally, 1.6, 0.0, 0.0144)
    account = tally.account(1, 1, waits)
    assert account is not None
    cause = enqueue_cause(account, 90, 60)
    assert cause.resource == Resource.LOCKS, cause
    assert "while its one session was busy, its round trips 73% waiting for a lock" in cause.evidence
    assert "in database other" in cause.evidence and "-producers" not in (cause.fix or "")


def test_a_designs_own_notify_trigger_under_a_polling_run_is_not_told_to_poll() -> None:
    """pgqueuer's insert trigger notifies whatever the run's wake-up: with -wakeup poll, the fix is the
    trigger's, never '-wakeup poll' again (no advice repeats the run's own setting)."""
    holder = BlockerSeen(15767, "pgmq-sim producer", "active", True, "object", NOTIFY_QUEUE, "", 15)
    waits = WaitProfile(100, (("locks", 82), ("cpu", 18)), (("object", 82),), (holder,))
    cause = enqueue_cause(account_of(0.5, 0.03, waits, sessions=8), 200, 60, run_notifies=False)
    assert cause.resource == Resource.LOCKS and cause.fix is not None
    assert "-wakeup poll" not in cause.fix and "the design's own trigger" in cause.fix, cause.fix
