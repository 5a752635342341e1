"""Where each message's time went, from enqueue to completion: not yet due, waiting for its group's
earlier message (ordering), waiting while every worker that may take it was busy (capacity), waiting
while such a worker was free, its claims empty or asleep after one (hidden: something kept the
message from a free worker), and service (claim to completion, failed attempts included).

At each instant a message is in exactly one part, taken in that order of precedence from its
journey (model/journeys): service, then due, then ordering, and the rest split by whether a worker
of its type was free. So the parts add up to the message's time, to the float's rounding. The
account is kept for the cohorts a limit is read from: the messages about the median and the slowest
1%, of each type and of the whole run."""

from __future__ import annotations

import bisect
from array import array
from collections.abc import Iterable, Iterator, Sequence
from dataclasses import dataclass
from typing import Any, NamedTuple

from pgmq_sim.model.journeys import MEDIAN, P99, RUN, FreeSpans, Journey

PARTS = ("due", "ordering", "capacity", "hidden", "service")
TOLERANCE_MS = 0.001  # the parts of every message add up to its time within this (float rounding)


class Split(NamedTuple):
    """One message's time, in seconds, by part."""

    due: float = 0.0
    ordering: float = 0.0
    capacity: float = 0.0
    hidden: float = 0.0
    service: float = 0.0

    @property
    def total(self) -> float:
        return sum(self)


class FreeTime:
    """When a type's workers were free, with the free time before each span summed, so the free
    time within any window is two binary searches."""

    def __init__(self, spans: Iterable[tuple[float, float]]) -> None:
        self._starts: list[float] = []
        self._ends: list[float] = []
        self._before: list[float] = []
        total = 0.0
        for start, end in sorted(spans):
            if self._ends and start < self._ends[-1]:  # overlapping spans: merged
                if end > self._ends[-1]:
                    total += end - self._ends[-1]
                    self._ends[-1] = end
                continue
            self._starts.append(start)
            self._ends.append(end)
            self._before.append(total)
            total += end - start

    def _until(self, t: float) -> float:
        """Free time from the first span up to t."""
        i = bisect.bisect_right(self._starts, t) - 1
        if i < 0:
            return 0.0
        return self._before[i] + min(t, self._ends[i]) - self._starts[i]

    def within(self, a: float, b: float) -> float:
        return max(0.0, self._until(b) - self._until(a)) if b > a else 0.0

    def pieces(self, a: float, b: float) -> Iterator[tuple[float, float]]:
        """The free spans within [a, b], clipped."""
        return _pieces(self._starts, self._ends, a, b)


def _pieces(
    starts: Sequence[float], ends: Sequence[float], a: float, b: float
) -> Iterator[tuple[float, float]]:
    """Of spans in time order and apart, those within [a, b], clipped to it."""
    i = max(0, bisect.bisect_right(starts, a) - 1)
    while i < len(starts) and starts[i] < b:
        lo, hi = max(a, starts[i]), min(b, ends[i])
        if hi > lo:
            yield lo, hi
        i += 1


NO_FREE = FreeTime(())


class GroupHolds:
    """When a group's earlier messages held it, each from its first claim to its completion or dead
    letter (kept apart: a span that began before the last ended is cut to begin then), with the held
    time and the free time within the holds summed before each, so either up to any time is a
    binary search."""

    def __init__(self, free: FreeTime) -> None:
        self._free = free
        self._starts = array("d")
        self._ends = array("d")
        self._held_before = array("d")
        self._free_before = array("d")
        self._held = self._free_held = 0.0

    def add(self, start: float, end: float) -> None:
        if self._ends:
            start = max(start, self._ends[-1])
        if end <= start:
            return
        self._starts.append(start)
        self._ends.append(end)
        self._held_before.append(self._held)
        self._free_before.append(self._free_held)
        self._held += end - start
        self._free_held += self._free.within(start, end)

    def _until(self, t: float) -> tuple[float, float]:
        i = bisect.bisect_right(self._starts, t) - 1
        if i < 0:
            return 0.0, 0.0
        end = min(t, self._ends[i])
        return self._held_before[i] + (end - self._starts[i]), self._free_before[i] + self._free.within(
            self._starts[i], end
        )

    def within(self, a: float, b: float) -> tuple[float, float]:
        """Held time within [a, b], and the free time inside it."""
        if b <= a:
            return 0.0, 0.0
        (held_b, free_b), (held_a, free_a) = self._until(b), self._until(a)
        return max(0.0, held_b - held_a), max(0.0, free_b - free_a)

    def pieces(self, a: float, b: float) -> Iterator[tuple[float, float]]:
        """The holds within [a, b], clipped."""
        return _pieces(self._starts, self._ends, a, b)


def split(
    journey: Journey, free: FreeTime, holds: GroupHolds | None
) -> tuple[Split, list[tuple[float, float]]]:
    """A completed message's time by part, and the pieces of it that were hidden (to place them in
    the run). `holds`: its group's earlier messages (None: a design without order)."""
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
    held, free_held = holds.within(ready, claimed) if holds is not None else (0.0, 0.0)
    own_s = sum(b - a for a, b in own)
    waiting = claimed - ready - held - own_s
    free_own = sum(free.within(a, b) for a, b in own)
    hidden = min(max(0.0, waiting), max(0.0, free.within(ready, claimed) - free_held - free_own))
    pieces = []
    if hidden > 0:
        cuts = own + (list(holds.pieces(ready, claimed)) if holds is not None else [])
        pieces = _minus(list(free.pieces(ready, claimed)), cuts)
    parts = Split(due, held, max(0.0, waiting) - hidden, hidden, service)
    return parts, pieces


def _minus(pieces: list[tuple[float, float]], cuts: list[tuple[float, float]]) -> list[tuple[float, float]]:
    """The pieces (in time order, apart) with the cuts taken out: one pass over both in time order."""
    merged: list[list[float]] = []
    for a, b in sorted(cuts):
        if merged and a <= merged[-1][1]:
            merged[-1][1] = max(merged[-1][1], b)
        elif b > a:
            merged.append([a, b])
    left, i = [], 0
    for a, b in pieces:
        while i < len(merged) and merged[i][1] <= a:
            i += 1
        j = i
        while a < b:
            if j >= len(merged) or merged[j][0] >= b:
                left.append((a, b))
                break
            c0, c1 = merged[j]
            if c0 > a:
                left.append((a, c0))
            a = max(a, c1)
            j += 1
    return left


def accounted(
    journeys: Iterable[Journey], free: Iterable[FreeSpans], ordered: bool, cohorts_only: bool = False
) -> Iterator[tuple[Journey, Split, list[tuple[float, float]]]]:
    """Each completed message's split (only those in a cohort, if asked), journeys read in order of
    type, group and msg_id (a group's earlier messages first: their holds are its ordering)."""
    for journey, one, pieces, _ in held_up(journeys, free, ordered, cohorts_only):
        yield journey, one, pieces


class NotDue(NamedTuple):
    """Of a message's ordering time, what it spent behind an earlier message of its group that was
    not yet due (a head not yet due holds its group, as procrastinate's lock is held by a job
    scheduled later), and the last such head: its msg_id and when it was due."""

    seconds: float = 0.0
    head: int | None = None
    head_due: float | None = None


def held_up(
    journeys: Iterable[Journey], free: Iterable[FreeSpans], ordered: bool, cohorts_only: bool = False
) -> Iterator[tuple[Journey, Split, list[tuple[float, float]], NotDue]]:
    """accounted()'s splits, each with what of its ordering a head not yet due held."""
    by_type = {f.queue_type: FreeTime(f.spans) for f in free}
    group: tuple[str, int] | None = None
    holds: GroupHolds | None = None
    waiting = GroupHolds(NO_FREE)  # the group's heads while not yet due
    head: tuple[int, float] | None = None
    for journey in journeys:
        free_time = by_type.get(journey.queue_type, NO_FREE)
        if ordered and (journey.queue_type, journey.order_id) != group:
            group, holds = (journey.queue_type, journey.order_id), GroupHolds(free_time)
            waiting, head = GroupHolds(NO_FREE), None
        if journey.claimed is not None and (journey.cohorts or not cohorts_only):
            one, pieces = split(journey, free_time, holds)
            behind = min(one.ordering, waiting.within(journey.added, journey.claimed)[0])
            yield journey, one, pieces, NotDue(behind, *(head or (None, None))) if behind > 0 else NotDue()
        if holds is not None:
            if journey.due is not None and journey.due > journey.added:  # not yet due: it holds its group
                holds.add(journey.added, min(journey.due, journey.start))
                waiting.add(journey.added, min(journey.due, journey.start))
                head = (journey.msg_id, journey.due)
            holds.add(journey.start, journey.done)


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
    not_due_head_ms: float = 0.0  # of ordering_ms: behind an earlier message of the group not yet due
    not_due_head: str | None = None  # one such: "group type1:3 held by msg_id 17, not due until ..."

    @property
    def total_ms(self) -> float:
        return self.due_ms + self.ordering_ms + self.capacity_ms + self.hidden_ms + self.service_ms

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

    def text(self) -> str:
        """e.g. '27.1 s: hidden 89%, capacity 6%, service 3%, ordering 2%'."""
        said = [f"{part} {self.share(part):.0%}" for part in sorted(PARTS, key=lambda p: -self.part_ms(p))]
        return f"{_duration(self.total_ms)}: " + ", ".join(s for s in said if not s.endswith(" 0%"))

    def as_json(self) -> dict[str, Any]:
        data: dict[str, Any] = {"messages": self.messages, "e2e_ms": round(self.total_ms, 3)}
        data |= {f"{part}_ms": round(self.part_ms(part), 3) for part in PARTS}
        if self.not_due_head is not None:
            data |= {"not_due_head_ms": round(self.not_due_head_ms, 3), "not_due_head": self.not_due_head}
        return data


def _duration(ms: float) -> str:
    return f"{ms / 1000:.1f} s" if ms >= 10_000 else f"{ms:.1f} ms" if ms < 100 else f"{ms:.0f} ms"


class _Cohort:
    def __init__(self) -> None:
        self.messages = 0
        self.sums = dict.fromkeys(PARTS, 0.0)
        self.hidden: dict[int, float] = {}
        self.not_due = 0.0
        self.head: str | None = None

    def add(
        self,
        one: Split,
        pieces: list[tuple[float, float]],
        origin_s: float | None,
        journey: Journey,
        behind: NotDue,
    ) -> None:
        self.messages += 1
        if behind.head is not None and behind.head_due is not None:
            self.not_due += behind.seconds
            self.head = (
                f"group {journey.queue_type}:{journey.order_id} held by msg_id {behind.head}, not due until"
                f" {behind.head_due:.2f} s into the run (msg_id {journey.msg_id} waited behind it)"
            )
        for part, value in zip(PARTS, one, strict=True):
            self.sums[part] += value
        if origin_s is None:
            return
        for a, b in pieces:  # spread over the run's seconds it covers
            t = a
            while t < b:
                second = max(0, int(origin_s + t))
                edge = min(b, second + 1 - origin_s)
                self.hidden[second] = self.hidden.get(second, 0.0) + (edge - t)
                t = edge

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

    @classmethod
    def of(
        cls,
        journeys: Iterable[Journey],
        free: Iterable[FreeSpans],
        ordered: bool,
        origin_s: float | None = None,
    ) -> LatencyAccount:
        """`journeys` in order of type, group and msg_id; `origin_s`: the run second of their zero
        (the run's first enqueue), where known."""
        cohorts: dict[tuple[str, str], _Cohort] = {}
        worst = 0.0
        for journey, one, pieces, behind in held_up(journeys, free, ordered, cohorts_only=True):
            worst = max(worst, abs(one.total - (journey.done - journey.added)))
            for key in journey.cohorts:
                cohorts.setdefault(key, _Cohort()).add(one, pieces, origin_s, journey, behind)
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
            "overall": {name: c.as_json() for name, c in self.overall.items()},
            "per_type": {t: {name: c.as_json() for name, c in cs.items()} for t, cs in self.per_type.items()},
        }
