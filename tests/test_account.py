"""The latency account on constructed timelines: each part shown on its own, the precedence between
them, and every message's parts adding up to its time (no server)."""

from __future__ import annotations

import random

import pytest

from pgmq_sim.model.journeys import MEDIAN, P99, RUN, Attempt, FreeSpans, Journey
from pgmq_sim.result.account import TOLERANCE_MS, LatencyAccount, Split, accounted, held_up, split
from pgmq_sim.result.spans import CLAIM, HOLD, FreeTime, GroupSpans, TypeTime

pytestmark = pytest.mark.unit


def journey(msg_id: int, added: float, claimed: float, done: float, **more: object) -> Journey:
    fields: dict[str, object] = {"due": None, "order_id": 1, "queue_type": "type1"} | more
    return Journey(
        msg_id,
        str(fields["queue_type"]),
        int(fields["order_id"]),  # type: ignore[call-overload]
        added,
        fields["due"],  # type: ignore[arg-type]
        claimed,
        done,
        tuple(fields.get("attempts", ())),  # type: ignore[arg-type]
        tuple(fields.get("cohorts", ((RUN, P99),))),  # type: ignore[arg-type]
        fields.get("claim_from"),  # type: ignore[arg-type]
        fields.get("committed"),  # type: ignore[arg-type]
    )


def splits(
    journeys: list[Journey],
    free: list[tuple[float, float]],
    ordered: bool = True,
    claiming: tuple[tuple[float, float], ...] = (),
) -> dict[int, Split]:
    spans = [FreeSpans("type1", tuple(free), claiming)]
    return {j.msg_id: one for j, one, _ in accounted(journeys, spans, ordered)}


def close(one: Split, **expected: float) -> bool:
    return all(abs(getattr(one, part) - expected.get(part, 0.0)) < 1e-9 for part in Split._fields)


def test_service_is_claim_to_completion() -> None:
    one = splits([journey(1, 0.0, 0.0, 0.004)], [])[1]
    assert close(one, service=0.004), one


def test_a_message_waiting_while_every_worker_was_busy_is_capacity() -> None:
    one = splits([journey(1, 0.0, 2.0, 2.5)], [])[1]  # no worker free meanwhile
    assert close(one, capacity=2.0, service=0.5), one


def test_a_message_waiting_while_a_worker_was_free_is_hidden_for_that_time() -> None:
    one = splits([journey(1, 0.0, 2.0, 2.5)], [(0.5, 1.25)])[1]  # a worker free 0.75 s of its wait
    assert close(one, capacity=1.25, hidden=0.75, service=0.5), one


def test_not_yet_due_comes_first_even_while_a_worker_was_free() -> None:
    one = splits([journey(1, 0.0, 3.0, 3.1, due=2.0)], [(0.0, 3.0)])[1]
    assert close(one, due=2.0, hidden=1.0, service=0.1), one


def test_ordering_is_the_time_an_earlier_message_held_the_group() -> None:
    """m2 waits from 0: m1 pending until 1 (capacity), m1 held the group 1..3 (ordering, though a
    worker was free meanwhile), then m2 is the head until its claim at 4 (capacity)."""
    earlier = journey(1, 0.0, 1.0, 3.0, cohorts=())
    later = journey(2, 0.0, 4.0, 4.5)
    got = splits([earlier, later], [(1.5, 2.5)])
    assert close(got[2], ordering=2.0, capacity=2.0, service=0.5), got[2]
    unordered = splits([earlier, later], [(1.5, 2.5)], ordered=False)[2]  # no groups: the wait is capacity
    assert close(unordered, capacity=3.0, hidden=1.0, service=0.5), unordered


def test_an_earlier_message_still_pending_is_not_ordering() -> None:
    """Deep in a backlog: m1 waited for a worker 0..5 itself; m2 behind it waited for that too."""
    got = splits([journey(1, 0.0, 5.0, 5.5, cohorts=()), journey(2, 0.0, 6.0, 6.2)], [])
    assert close(got[2], capacity=5.5, ordering=0.5, service=0.2), got[2]


def test_the_claim_that_took_it_or_its_groups_earlier_message_is_claim() -> None:
    """m1's claim ran 1..2 (a worker free throughout): m1 and m2 behind it wait on it, claim; m1 held
    the group 2..3; m2's own claim ran 3.5..4, and 3..3.5 a worker was free, no claim running: hidden."""
    earlier = journey(1, 0.0, 2.0, 3.0, claim_from=1.0)
    later = journey(2, 0.0, 4.0, 4.5, claim_from=3.5)
    got = splits([earlier, later], [(0.0, 10.0)])
    assert close(got[1], hidden=1.0, claim=1.0, service=1.0), got[1]
    assert close(got[2], hidden=1.5, claim=1.5, ordering=1.0, service=0.5), got[2]


def test_a_claim_that_took_another_message_while_a_worker_was_free_is_claim() -> None:
    """Another message's claim ran 0.5..1.5 while m1 waited with a worker free: claim, not hidden."""
    one = splits([journey(1, 0.0, 2.0, 2.5)], [(0.0, 2.0)], claiming=((0.5, 1.5),))[1]
    assert close(one, hidden=1.0, claim=1.0, service=0.5), one


def test_an_earlier_message_holds_its_group_through_its_commit() -> None:
    """m1 done (its journal row) at 2, its commit over at 2.3 (its worker's next claim arrived): the
    group was m1's until then; m2's claim arrived at 2.4. Had m2's claim arrived at 2.2, the group
    would have been m1's until 2.2 only."""
    got = splits([journey(1, 0.0, 1.0, 2.0, committed=2.3), journey(2, 0.0, 2.5, 3.0, claim_from=2.4)], [])
    assert close(got[2], capacity=1.1, ordering=1.3, claim=0.1, service=0.5), got[2]
    got = splits([journey(1, 0.0, 1.0, 2.0, committed=2.3), journey(2, 0.0, 2.5, 3.0, claim_from=2.2)], [])
    assert close(got[2], capacity=1.0, ordering=1.2, claim=0.3, service=0.5), got[2]


def test_a_failed_attempt_is_service_and_its_backoff_not_yet_due() -> None:
    attempts = (Attempt(1.0, 1.2, 2.0),)
    one = splits([journey(1, 0.0, 3.0, 3.5, attempts=attempts)], [(0.0, 10.0)])[1]
    # free throughout: waiting 0..1 and 2..3 is hidden; 1..1.2 service, 1.2..2 backoff
    assert close(one, hidden=2.0, service=0.7, due=0.8), one


def test_a_dead_letter_holds_its_group_and_has_no_account_of_its_own() -> None:
    dead = journey(1, 0.0, None, 2.0, attempts=(Attempt(0.5, 1.0, 1.5), Attempt(1.5, 2.0, None)))
    got = splits([dead, journey(2, 0.0, 2.5, 3.0)], [])
    assert set(got) == {2}
    assert close(got[2], capacity=1.0, ordering=1.5, service=0.5), got[2]


def test_free_time_merges_overlapping_spans_and_answers_any_window() -> None:
    free = FreeTime([(0.0, 1.0), (0.5, 2.0), (3.0, 4.0)])
    assert free.within(0.0, 10.0) == pytest.approx(3.0)
    assert free.within(1.5, 3.5) == pytest.approx(1.0)
    assert free.within(2.0, 3.0) == 0.0
    assert free.within(0.25, 1.75) == pytest.approx(1.5)  # across the merged overlap


def test_every_messages_parts_add_up_to_its_time() -> None:
    """Random groups, arrivals, due times, retries and free spans: each completed message's parts sum
    to its time within the stated tolerance, none negative."""
    rng = random.Random(38)
    for _ in range(200):
        free = sorted(
            (t, t + rng.uniform(0, 0.5)) for t in (rng.uniform(0, 20) for _ in range(rng.randint(0, 30)))
        )
        claiming = tuple(
            (t, t + rng.uniform(0, 0.3))
            for t in sorted(rng.uniform(0, 20) for _ in range(rng.randint(0, 10)))
        )
        claiming = tuple(  # apart, as the journal's merged claims are
            (max(a, claiming[i - 1][1] if i else a), b) for i, (a, b) in enumerate(claiming)
        )
        journeys, t = [], 0.0
        for msg_id in range(1, rng.randint(2, 15)):
            added = rng.uniform(0, 10)
            due = added + rng.uniform(0, 1) if rng.random() < 0.3 else None
            start = max(t, due or added) + rng.uniform(0, 1)
            attempts = []
            for _ in range(rng.randint(0, 2)):
                failed = start + rng.uniform(0, 0.1)
                attempts.append(Attempt(start, failed, failed + rng.uniform(0, 0.5)))
                start = attempts[-1].next_at + rng.uniform(0, 0.2)  # type: ignore[operator]
            claim_from = start - rng.uniform(0, 0.5) if rng.random() < 0.8 else None  # may begin early
            t = start + rng.uniform(0, 0.1)
            committed = t + rng.uniform(0, 0.5) if rng.random() < 0.7 else None  # may pass the next claim
            journeys.append(
                journey(
                    msg_id,
                    added,
                    start,
                    t,
                    due=due,
                    attempts=tuple(attempts),
                    claim_from=claim_from,
                    committed=committed,
                )
            )
        spans = [FreeSpans("type1", tuple(free), tuple((a, b) for a, b in claiming if b > a))]
        for j, one, _ in accounted(journeys, spans, rng.random() < 0.8):
            assert min(one) >= 0, one
            assert abs(one.total - (j.done - j.added)) * 1000 <= TOLERANCE_MS, (j, one)


def test_the_cohorts_mean_split_and_where_their_hidden_time_fell() -> None:
    median = ((RUN, MEDIAN), ("type1", MEDIAN))
    journeys = [
        journey(1, 0.0, 0.010, 0.012, cohorts=median),
        journey(2, 1.0, 3.0, 3.5, order_id=2),  # hidden 1.2..3.0, placed in seconds 1 and 2 of the run
    ]
    account = LatencyAccount.of(journeys, [FreeSpans("type1", ((1.2, 3.0),))], True, origin_s=0.0)
    assert account.median is not None and account.p99 is not None
    assert account.median.service_ms == pytest.approx(2.0) and account.median.capacity_ms == pytest.approx(
        10.0
    )
    assert account.p99.hidden_ms == pytest.approx(1800.0) and account.p99.largest == "hidden"
    assert account.p99.hidden_by_second == ((1, pytest.approx(0.8)), (2, pytest.approx(1.0)))
    assert set(account.per_type["type1"]) == {MEDIAN}
    assert account.worst_error_ms <= TOLERANCE_MS
    assert account.as_json()["overall"]["p99"]["hidden_ms"] == pytest.approx(1800.0)


def test_a_later_head_not_yet_due_holds_its_group_from_its_enqueue_whatever_its_msg_id() -> None:
    """procrastinate's lock (issue 51): within a lock the head is the highest priority, then the
    earliest id, due or not. h (msg_id 3, the higher priority) was enqueued at 1 and due at 6; m
    (msg_id 2, enqueued at 0.5) waited behind it from 1 until h was done, while workers were free;
    a (msg_id 1) overtook nothing, it ran 2..2.1 while h was not due. Read by claim (a, h, m), h's hold
    from its enqueue goes in the group under a's span: m's wait is ordering, not hidden, and names h."""
    first = journey(1, 0.0, 2.0, 2.1, cohorts=())
    head = journey(3, 1.0, 6.0, 6.2, due=6.0, cohorts=())
    behind = journey(2, 0.5, 6.3, 6.4)
    spans = [FreeSpans("type1", ((0.0, 2.0), (2.1, 6.0), (6.2, 6.3)), ())]
    got = {j.msg_id: (one, held) for j, one, _, held in held_up([first, head, behind], spans, True)}
    one, held = got[2]
    # free 0.5..1 (nothing held it yet: hidden), then held 1..6.2 (a 2..2.1 and h), 6.2..6.3 hidden
    assert close(one, ordering=5.2, hidden=0.6, service=0.1), one
    assert held.head == 3 and held.head_due == 6.0 and abs(held.seconds - 5.0) < 1e-9, held


Spans = list[tuple[float, float]]


def union(spans: Spans) -> Spans:
    merged: list[list[float]] = []
    for a, b in sorted(spans):
        if merged and a < merged[-1][1]:
            merged[-1][1] = max(merged[-1][1], b)
        elif b > a:
            merged.append([a, b])
    return [(a, b) for a, b in merged]


def subtract(pieces: Spans, cut: tuple[float, float]) -> Spans:
    c0, c1 = cut
    left = []
    for a, b in pieces:
        left += [(x, y) for x, y in ((a, min(b, c0)), (max(a, c1), b)) if y > x]
    return left


def reference_placed(
    journey: Journey, free: Spans, claiming: Spans, held: Spans, origin_s: float
) -> dict[int, float]:
    """The account's placing of a message's hidden time before issue 50, written plainly: every free
    span inside its wait clipped to it, less every claiming span, every span of its group (cut to
    begin where the last ended, as the group keeps them), its own attempts and backoffs and its own
    claim, each piece left spread over the run's seconds it covers."""
    assert journey.claimed is not None
    ready = min(max(journey.added, journey.due or journey.added), journey.claimed)
    own: Spans = []
    for a in journey.attempts:
        own.append((a.claimed, a.failed))
        if a.next_at is not None:
            own.append((a.failed, a.failed + max(0.0, min(a.next_at, journey.claimed) - a.failed)))
    claim_from = max(ready, journey.claim_from or journey.claimed, *(b for _, b in own))
    group: Spans = []
    for a, b in held:
        a = max(a, group[-1][1]) if group else a
        if b > a:
            group.append((a, b))
    pieces = [(max(a, ready), min(b, journey.claimed)) for a, b in union(free)]
    pieces = [(a, b) for a, b in pieces if b > a]
    for cut in [*union(claiming), *group, *own, (claim_from, journey.claimed)]:
        pieces = subtract(pieces, cut)
    placed: dict[int, float] = {}
    for a, b in pieces:
        t = a
        while t < b:
            second = max(0, int(origin_s + t))
            edge = min(b, second + 1 - origin_s)
            placed[second] = placed.get(second, 0.0) + (edge - t)
            t = edge
    return placed


def random_spans(rng: random.Random, n: int, end: float, longest: float) -> Spans:
    """Spans in order of their starts, some overlapping."""
    return [(t, t + rng.uniform(0, longest)) for t in sorted(rng.uniform(0, end) for _ in range(n))]


def test_hidden_time_is_placed_in_the_run_as_clipping_every_span_placed_it() -> None:
    """Read from sums before each span (two reads a second of a wait), a message's hidden time lands
    in the same seconds of the run, to the float's rounding, as clipping its wait against every free,
    claiming and group span inside it did: on random overlapping free spans, claims that ran in them
    (claiming lies within free, as the journal's overlap makes it), group spans added out of step
    (holds and claims overlapping, cut apart by the group), retries, due times and claims that began
    early, and run clocks whose seconds fall anywhere in the spans."""
    rng = random.Random(50)
    placed_any = 0
    for case in range(400):
        free = random_spans(rng, rng.randint(0, 60), 30, 1.5)
        claims = union(random_spans(rng, rng.randint(0, 30), 30, 1.0))
        claiming = [
            (max(a, c), min(b, d)) for a, b in union(free) for c, d in claims if min(b, d) > max(a, c)
        ]
        times = TypeTime(FreeTime(free), FreeTime(sorted(claiming)))
        group = GroupSpans(times)
        held = random_spans(rng, rng.randint(0, 12), 30, 3.0)
        for a, b in held:
            group.add(rng.choice((HOLD, CLAIM)), a, b)
        added = rng.uniform(0, 10)
        due = added + rng.uniform(0, 3) if rng.random() < 0.3 else None
        start = max(added, due or added) + rng.uniform(0, 2)
        attempts = []
        for _ in range(rng.randint(0, 2)):
            failed = start + rng.uniform(0, 0.5)
            attempts.append(Attempt(start, failed, failed + rng.uniform(0, 1)))
            start = failed + rng.uniform(0, 2)  # sometimes before its backoff ended
        claimed = start + rng.uniform(0, 15)
        claim_from = claimed - rng.uniform(0, 3) if rng.random() < 0.8 else None
        one = journey(
            1, added, claimed, claimed + 0.1, due=due, attempts=tuple(attempts), claim_from=claim_from
        )
        origin_s = rng.choice((0.0, rng.uniform(0, 5), 1.7e9 + rng.uniform(0, 1)))
        parts, placed = split(one, times, group, origin_s)
        expected = reference_placed(one, free, claiming, held, origin_s) if parts.hidden > 0 else {}
        got = dict(placed)
        for second in set(got) | set(expected):
            assert got.get(second, 0.0) == pytest.approx(expected.get(second, 0.0), abs=1e-6), (case, second)
        placed_any += bool(expected)
    assert placed_any > 100  # most cases placed some hidden time


def overlap_s(spans: Spans, others: Spans, a: float, b: float) -> float:
    """Time in [a, b] inside both (each apart, in order)."""
    mine = [(x, y) for x, y in spans if y > a and x < b]
    theirs = [(c, d) for c, d in others if d > a and c < b]
    return sum(max(0.0, min(y, d, b) - max(x, c, a)) for x, y in mine for c, d in theirs)


def test_a_groups_sums_read_after_spans_are_forgotten_are_its_spans_clipped_to_the_window() -> None:
    """A group's free and claiming sums are laid only when read (issue 50): read now and then while
    hundreds of spans are added, and after the group and its type forget what ended before t, any
    window from t on holds exactly its spans clipped to it, the free and claiming time inside each
    kind too, whether or not the forgotten spans were ever laid."""
    rng = random.Random(52)
    for case in range(20):
        free = union(random_spans(rng, 400, 200, 1.0))
        claiming = [(a + (b - a) / 3, b - (b - a) / 3) for a, b in free]
        times = TypeTime(FreeTime(free), FreeTime(claiming))
        group = GroupSpans(times)
        kept: list[tuple[int, float, float]] = []
        t = 0.0
        for _ in range(300):
            start, kind = t + rng.uniform(-0.2, 0.4), rng.choice((HOLD, CLAIM))
            t = start + rng.uniform(0.05, 0.5)
            group.add(kind, start, t)
            start = max(start, kept[-1][2]) if kept else start
            if t > start:
                kept.append((kind, start, t))
            if rng.random() < 0.05:  # a cohort's message read the group now
                group.within(max(0.0, t - 5), t)
        forget_at = rng.uniform(0.5, 0.9) * t
        times.free.forget(forget_at)
        times.claiming.forget(forget_at)
        group.forget(forget_at)
        for _ in range(20):
            a = rng.uniform(forget_at, t)
            b = rng.uniform(a, t + 1)
            got = group.within(a, b)
            for kind, (held, in_free, in_claiming) in (
                (HOLD, (got.held, got.free_held, got.claiming_held)),
                (CLAIM, (got.claim, got.free_claim, got.claiming_claim)),
            ):
                mine = [(x, y) for k, x, y in kept if k == kind]
                assert held == pytest.approx(overlap_s(mine, [(a, b)], a, b), abs=1e-9), case
                assert in_free == pytest.approx(overlap_s(mine, free, a, b), abs=1e-9), case
                assert in_claiming == pytest.approx(overlap_s(mine, claiming, a, b), abs=1e-9), case
