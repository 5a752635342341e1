"""Where each message's time went, from enqueue to completion: not yet due, waiting for its group's
earlier message (ordering), waiting while the claim statement that took it, or took an earlier
message of its group, ran (claim: from the statement's arrival at the server to its locks), waiting
while every worker that may take it was busy (capacity), waiting while such a worker was free and no
claim was taking it, its claims empty or asleep after one (hidden: something kept the message from a
free worker), and service (claim to completion, failed attempts included).

At each instant a message is in exactly one part, taken in that order of precedence from its
journey (model/journeys): service, then due, then ordering, then claim, and the rest split by
whether a worker of its type was free (a claim of its type that took some message was running
then: claim; none: hidden). So the parts add up to the message's time, to the float's rounding.
The account is kept for the cohorts a limit is read from: the messages about the median and the
slowest 1%, of each type and of the whole run."""

from __future__ import annotations

import math
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass
from typing import Any, NamedTuple

from pgmq_sim.model.journeys import MEDIAN, P99, RUN, FreeSpans, Journey
from pgmq_sim.result.spans import (
    CLAIM,
    FORGET_AT,
    HOLD,
    NO_TIME,
    NOTHING,
    FreeTime,
    GroupSpans,
    TypeTime,
    open_until,
)

PARTS = ("due", "ordering", "claim", "capacity", "hidden", "service")
KEPT_S = 1.0  # how far before the arrival of the message being split the account keeps spans (a margin)
TOLERANCE_MS = 0.001  # the parts of every message add up to its time within this (float rounding)


class Split(NamedTuple):
    """One message's time, in seconds, by part."""

    due: float = 0.0
    ordering: float = 0.0
    claim: float = 0.0
    capacity: float = 0.0
    hidden: float = 0.0
    service: float = 0.0

    @property
    def total(self) -> float:
        return sum(self)


Hidden = list[tuple[int, float]]  # a message's hidden time by second of the run: (second, seconds)


def split(
    journey: Journey, times: TypeTime, group: GroupSpans | None, origin_s: float | None = None
) -> tuple[Split, Hidden]:
    """A completed message's time by part, and where in the run its hidden time fell (with
    `origin_s`, the run second of the journeys' zero; without, nowhere). `group`: its group's
    earlier messages (None: a design without order)."""
    free, claiming = times
    added, claimed, done = journey.added, journey.claimed, journey.done
    assert claimed is not None, "a dead letter has no account"
    ready = min(max(added, journey.due if journey.due is not None else added), claimed)
    own = []  # its own failed attempts and their backoffs, while it was its group's head
    service = done - claimed
    due = ready - added
    for a in journey.attempts:
        service += a.failed - a.claimed
        own.append((a.claimed, a.failed))
        if a.next_at is not None:
            back = min(a.next_at, claimed) - a.failed
            due += max(0.0, back)
            own.append((a.failed, a.failed + max(0.0, back)))
    spans = group.within(ready, claimed) if group is not None else NOTHING
    # its own claim statement, after it was ready and its own attempts, less its group's spans in it
    claim_from = max(
        ready, journey.claim_from if journey.claim_from is not None else claimed, *(b for _, b in own)
    )
    mine = group.within(claim_from, claimed) if group is not None else NOTHING
    own_claim = max(0.0, claimed - claim_from - mine.held - mine.claim)
    free_own_claim = max(0.0, free.within(claim_from, claimed) - mine.free_held - mine.free_claim)
    claiming_own_claim = max(
        0.0, claiming.within(claim_from, claimed) - mine.claiming_held - mine.claiming_claim
    )
    own_s = sum(b - a for a, b in own)
    free_own = sum(free.within(a, b) for a, b in own)
    claiming_own = sum(claiming.within(a, b) for a, b in own)
    # the rest of its wait, while a worker was free: a claim of its type that took a message ran (its
    # claim), or none did (hidden)
    free_left = free.within(ready, claimed) - spans.free_held - spans.free_claim - free_own_claim - free_own
    claiming_left = (
        claiming.within(ready, claimed)
        - spans.claiming_held
        - spans.claiming_claim
        - claiming_own_claim
        - claiming_own
    )
    rest = max(0.0, claimed - ready - spans.held - spans.claim - own_claim - own_s)
    claimed_by_others = min(rest, max(0.0, claiming_left))
    claim = spans.claim + own_claim + claimed_by_others
    waiting = claimed - ready - spans.held - claim - own_s
    hidden = min(max(0.0, waiting), max(0.0, free_left - claimed_by_others))
    placed: Hidden = []
    if hidden > 0 and origin_s is not None:
        gaps = _between(ready, claimed, [*own, (claim_from, claimed)])
        placed = _by_second(gaps, lambda t: open_until(times, group, t), origin_s)
    parts = Split(due, spans.held, claim, max(0.0, waiting) - hidden, hidden, service)
    return parts, placed


def _between(a: float, b: float, cuts: list[tuple[float, float]]) -> list[tuple[float, float]]:
    """[a, b] less the cuts (a message's own attempts and claim: a few), in time order."""
    left = []
    for c0, c1 in sorted(cuts):
        if c1 <= c0:
            continue
        if c0 > a:
            left.append((a, min(b, c0)))
        a = max(a, c1)
        if a >= b:
            break
    if a < b:
        left.append((a, b))
    return left


def _by_second(gaps: list[tuple[float, float]], until: Callable[[float], float], origin_s: float) -> Hidden:
    """The time `until` counts within the gaps, by second of the run (a second cut at each of the
    run's seconds, those before its start in its first): two reads of `until` a slice, so a wait
    costs its seconds, not the spans inside it."""
    placed: dict[int, float] = {}
    for a, b in gaps:
        t, at = a, until(a)
        while t < b:
            second = max(0, int(origin_s + t))
            edge = min(b, second + 1 - origin_s)
            if edge <= t:  # the float's rounding at a second's edge: the rest of the gap
                edge = b
            got = until(edge)
            if got > at:
                placed[second] = placed.get(second, 0.0) + (got - at)
            t, at = edge, max(at, got)
    return sorted(placed.items())


def accounted(
    journeys: Iterable[Journey],
    free: Iterable[FreeSpans],
    ordered: bool,
    cohorts_only: bool = False,
    origin_s: float | None = None,
) -> Iterator[tuple[Journey, Split, Hidden]]:
    """Each completed message's split (only those in a cohort, if asked): held_up()'s."""
    for journey, one, placed, _ in held_up(journeys, free, ordered, cohorts_only, origin_s):
        yield journey, one, placed


class NotDue(NamedTuple):
    """Of a message's ordering time, what it spent behind an earlier message of its group that was
    not yet due (a head not yet due holds its group, as procrastinate's lock is held by a job
    scheduled later), and the last such head: its msg_id and when it was due."""

    seconds: float = 0.0
    head: int | None = None
    head_due: float | None = None


def held_up(
    journeys: Iterable[Journey],
    free: Iterable[FreeSpans],
    ordered: bool,
    cohorts_only: bool = False,
    origin_s: float | None = None,
) -> Iterator[tuple[Journey, Split, Hidden, NotDue]]:
    """Each completed message's split, where its hidden time fell (with `origin_s`), and what of its
    ordering a head not yet due held. Journeys are read by type (in code point order, as `free`'s
    types) and by claim, so everything that held a message's group before its claim is read before
    it, whatever order the design keeps: the group's messages claimed before it (their spans are its
    ordering and its claims) and a head not yet due (a higher priority's, a later msg_id's:
    procrastinate's lock); and the spans of everything that ended well before the earliest enqueue
    still to be read (`Journey.horizon`) can be forgotten: what the account holds is the messages in
    flight around it, whatever the run's length."""
    types = iter(free)
    found: FreeSpans | None = next(types, None)
    queue_type: str | None = None
    times = NO_TIME
    groups: dict[int, GroupSpans] = {}
    for n, journey in enumerate(journeys):
        horizon = journey.added if journey.horizon is None else journey.horizon
        if journey.queue_type != queue_type:
            queue_type, times, groups = journey.queue_type, NO_TIME, {}
            while found is not None and found.queue_type < queue_type:
                found = next(types, None)
            if found is not None and found.queue_type == queue_type:
                times = TypeTime(FreeTime(found.spans), FreeTime(found.claiming))
        group = None
        if ordered:
            group = groups.get(journey.order_id)
            if group is None:
                group = groups[journey.order_id] = GroupSpans(times)
            elif group.committed is not None:  # its last message held it through its commit
                first = (
                    journey.start if journey.claim_from is None else min(journey.claim_from, journey.start)
                )
                group.hold_until(min(group.committed, first))
        if journey.claimed is not None and (journey.cohorts or not cohorts_only):
            one, placed = split(journey, times, group, origin_s)
            behind = min(one.ordering, group.behind_not_due(journey.added, journey.claimed)) if group else 0.0
            head = group.head if group is not None and behind > 0 else None
            yield journey, one, placed, NotDue(behind, *head) if head is not None else NotDue()
        if group is not None:
            if journey.due is not None and journey.due > journey.added:  # not yet due: it holds its group
                group.fill(HOLD, journey.added, min(journey.due, journey.start))  # since its enqueue
                group.not_due.append((journey.added, min(journey.due, journey.start)))
                group.head = (journey.msg_id, journey.due)
            if journey.claim_from is not None and journey.claimed is not None and not journey.attempts:
                group.add(CLAIM, journey.claim_from, journey.claimed)  # with attempts: inside its hold
            group.add(HOLD, journey.start, journey.done)
            group.committed = journey.committed
            group.forget(horizon - KEPT_S)
        if n % FORGET_AT == 0:
            _forget(times, groups, horizon - KEPT_S)


def _forget(times: TypeTime, groups: dict[int, GroupSpans], t: float) -> None:
    """Spans that ended before t, and groups whose every span did (no window still to be read
    begins before t)."""
    times.free.forget(t)
    times.claiming.forget(t)
    done = [g for g, spans in groups.items() if spans.last_end < t and (spans.committed or -math.inf) < t]
    for order_id in done:
        del groups[order_id]


@dataclass(frozen=True)
class NotDueHead:
    """A group's head not yet due that held a message of its group behind it (procrastinate's lock
    is held by a job scheduled later): the group, the head, its due time on the run's clock, and
    the message that waited."""

    queue_type: str
    order_id: int
    msg_id: int
    due_s: float
    held_msg_id: int

    def as_json(self) -> dict[str, Any]:
        return {
            "queue_type": self.queue_type,
            "order_id": self.order_id,
            "msg_id": self.msg_id,
            "due_s": round(self.due_s, 3),
            "held_msg_id": self.held_msg_id,
        }


@dataclass(frozen=True)
class CohortSplit:
    """A cohort's mean split, in ms, and where in the run (seconds on the run's clock) its hidden
    time fell: seconds of hidden time summed over the cohort's messages, by second."""

    messages: int
    due_ms: float
    ordering_ms: float
    capacity_ms: float
    hidden_ms: float
    service_ms: float
    hidden_by_second: tuple[tuple[int, float], ...] = ()
    claim_ms: float = 0.0
    not_due_head_ms: float = 0.0  # of ordering_ms: behind an earlier message of the group not yet due
    not_due_head: NotDueHead | None = None  # one such head, and a message it held

    @property
    def total_ms(self) -> float:
        return sum(self.part_ms(part) for part in PARTS)

    def part_ms(self, part: str) -> float:
        value: float = getattr(self, f"{part}_ms")
        return value

    def share(self, part: str) -> float:
        total = self.total_ms
        return self.part_ms(part) / total if total > 0 else 0.0

    @property
    def largest(self) -> str:
        """The part that took most of the cohort's time."""
        return max(PARTS, key=self.part_ms)

    def as_json(self) -> dict[str, Any]:
        data: dict[str, Any] = {"messages": self.messages, "e2e_ms": round(self.total_ms, 3)}
        data |= {f"{part}_ms": round(self.part_ms(part), 3) for part in PARTS}
        if self.not_due_head is not None:
            data |= {
                "not_due_head_ms": round(self.not_due_head_ms, 3),
                "not_due_head": self.not_due_head.as_json(),
            }
        return data


class _Cohort:
    def __init__(self) -> None:
        self.messages = 0
        self.sums = dict.fromkeys(PARTS, 0.0)
        self.hidden: dict[int, float] = {}
        self.not_due = 0.0
        self.head: NotDueHead | None = None

    def add(self, one: Split, placed: Hidden, journey: Journey, behind: NotDue) -> None:
        self.messages += 1
        if behind.head is not None and behind.head_due is not None:
            self.not_due += behind.seconds
            self.head = NotDueHead(
                journey.queue_type, journey.order_id, behind.head, behind.head_due, journey.msg_id
            )
        for part, value in zip(PARTS, one, strict=True):
            self.sums[part] += value
        for second, seconds in placed:
            self.hidden[second] = self.hidden.get(second, 0.0) + seconds

    def merge(self, other: _Cohort) -> None:
        self.messages += other.messages
        self.not_due += other.not_due
        self.head = other.head or self.head
        for part in PARTS:
            self.sums[part] += other.sums[part]
        for second, seconds in other.hidden.items():
            self.hidden[second] = self.hidden.get(second, 0.0) + seconds

    def result(self) -> CohortSplit:
        n = max(1, self.messages)
        mean = {f"{part}_ms": self.sums[part] / n * 1000 for part in PARTS}
        hidden = tuple(sorted((s, round(v, 6)) for s, v in self.hidden.items() if v > 0))
        return CohortSplit(
            self.messages,
            hidden_by_second=hidden,
            not_due_head_ms=self.not_due / n * 1000,
            not_due_head=self.head,
            **mean,
        )


@dataclass(frozen=True)
class LatencyAccount:
    """The split of the run's cohorts (MEDIAN and P99) over the whole run and per type."""

    overall: dict[str, CohortSplit]
    per_type: dict[str, dict[str, CohortSplit]]
    worst_error_ms: float  # the largest gap between a message's parts and its time (rounding)
    seconds: float | None = None  # what reading and splitting the journal took, after the run
    live_chunks: int = 0  # the chunks of the journal read and split while the run went
    live_cpu_s: float | None = None  # the CPU of the process that split them (not the run's own)

    @classmethod
    def of(
        cls,
        journeys: Iterable[Journey],
        free: Iterable[FreeSpans],
        ordered: bool,
        origin_s: float | None = None,
    ) -> LatencyAccount:
        """`journeys` in order of type and claim (held_up); `origin_s`: the run second of their zero
        (the run's first enqueue), where known."""
        cohorts: dict[tuple[str, str], _Cohort] = {}
        worst = 0.0
        for journey, one, placed, behind in held_up(journeys, free, ordered, True, origin_s):
            worst = max(worst, abs(one.total - (journey.done - journey.added)))
            for key in journey.cohorts:
                cohorts.setdefault(key, _Cohort()).add(one, placed, journey, behind)
        overall = {name: c.result() for (scope, name), c in cohorts.items() if scope == RUN}
        per_type: dict[str, dict[str, CohortSplit]] = {}
        for (scope, name), c in sorted(cohorts.items()):
            if scope != RUN:
                per_type.setdefault(scope, {})[name] = c.result()
        return cls(overall, per_type, worst * 1000)

    @property
    def p99(self) -> CohortSplit | None:
        return self.overall.get(P99)

    @property
    def median(self) -> CohortSplit | None:
        return self.overall.get(MEDIAN)

    def as_json(self) -> dict[str, Any]:
        return {
            "parts": list(PARTS),
            "tolerance_ms": TOLERANCE_MS,
            "worst_error_ms": round(self.worst_error_ms, 6),
            "seconds": None if self.seconds is None else round(self.seconds, 3),
            "live_chunks": self.live_chunks,
            "live_cpu_s": None if self.live_cpu_s is None else round(self.live_cpu_s, 2),
            "overall": {name: c.as_json() for name, c in self.overall.items()},
            "per_type": {t: {name: c.as_json() for name, c in cs.items()} for t, cs in self.per_type.items()},
        }
