"""The latency account kept as the run goes: the journal read a chunk of claim time at a time
(db/account.read_chunk), each type's journeys split by the account's own sweep (result/account
held_up) on a thread of its own, fed chunk by chunk, and every message added to its type's bucket of
time from enqueue to completion, so the cohorts (about the median, the slowest 1%) are picked by
bucket at the end, as the whole-journal account picks them. Only the messages a cohort may take are
split (from a band below the median so far up); the buckets of those left unsplit tell the end
whether its cohorts are whole (none of them in a cohort's buckets).

Each chunk's free and claim spans are cut to the chunk: free time is a measure, so the pieces add up
to the whole run's; a marker span at the chunk's end tells the sweep that nothing earlier is coming."""

from __future__ import annotations

import math
import queue
import threading
from collections.abc import Callable, Iterable, Iterator, Sequence
from dataclasses import dataclass, field
from typing import Generic, TypeVar

from pgmq_sim.model.journeys import (
    MEDIAN,
    P99,
    RUN,
    FreeSpans,
    Journey,
    cohort_bounds,
    overlap,
)
from pgmq_sim.result.account import KEPT_S, CohortSplit, Hidden, LatencyAccount, _Cohort, held_up

Span = tuple[float, float]
T = TypeVar("T")


class Stream(Generic[T]):
    """Items handed from the driver to a sweep's thread, in order; iteration blocks until the next
    is handed, and ends at END."""

    def __init__(self) -> None:
        self._items: queue.SimpleQueue[T | None] = queue.SimpleQueue()

    def put(self, items: Sequence[T]) -> None:
        for item in items:
            self._items.put(item)

    def close(self) -> None:
        self._items.put(None)

    def __len__(self) -> int:
        """Items handed and not yet taken (about: the sweep's thread takes them as this reads)."""
        return self._items.qsize()

    def __iter__(self) -> Iterator[T]:
        while True:
            item = self._items.get()
            if item is None:
                return
            yield item


SPLIT_ALL = 5_000  # the first messages are all split; after them, only those a cohort may take:
BAND = 300  # from this many buckets below the median so far (0.1% each: about 35%) up, all of the
# slower ones (a backlog moves the median up through messages that were slow for their time)
TAIL_SHARE = 0.97  # the messages slower than this share of those so far keep their hidden seconds
HIDDEN_ENTRIES = 20_000  # a type's hidden seconds kept, at most, before its slices are made coarser
CANDIDATE = ((RUN, "candidate"),)  # a journey the sweep splits (held_up's cohorts_only)


class HiddenKept:
    """Which messages' hidden time is kept by second (only the slowest 1%'s is ever read: the
    messages of a bucket at or past `hidden_from`), and in slices of how many seconds (a long run's
    are coarser: 2**shift seconds), so the account's memory stays bounded whatever the run's length."""

    def __init__(self) -> None:
        self.hidden_from: int | None = None
        self.shift = 0

    def sliced(self, placed: Hidden) -> Hidden:
        if not self.shift:
            return placed
        return [(second >> self.shift << self.shift, seconds) for second, seconds in placed]

    def coarser(self, cohorts: Iterable[_Cohort]) -> None:
        self.shift += 1
        self.resliced(cohorts)

    def resliced(self, cohorts: Iterable[_Cohort]) -> None:
        """Every kept second in the slices of now (a type made them coarser, the others follow)."""
        for cohort in cohorts:
            merged: dict[int, float] = {}
            for second, seconds in cohort.hidden.items():
                key = second >> self.shift << self.shift
                merged[key] = merged.get(key, 0.0) + seconds
            cohort.hidden = merged


@dataclass
class TypeSweep:
    """One type's sweep on its thread, and its buckets."""

    queue_type: str
    ordered: bool
    origin_s: float | None
    kept: HiddenKept  # the run's: which buckets' hidden seconds are kept, in slices of how long
    journeys: Stream[Journey] = field(default_factory=Stream)
    free: Stream[Span] = field(default_factory=Stream)
    claiming: Stream[Span] = field(default_factory=Stream)
    buckets: dict[int, _Cohort] = field(default_factory=dict)
    worst: float = 0.0
    failed: BaseException | None = None
    _seconds: int = 0  # hidden seconds' entries kept, over the buckets

    def __post_init__(self) -> None:
        self.thread = threading.Thread(target=self._run, name=f"account {self.queue_type}", daemon=True)
        self.thread.start()

    def _run(self) -> None:
        try:
            spans = [FreeSpans(self.queue_type, iter(self.free), iter(self.claiming))]
            for journey, one, placed, behind in held_up(
                iter(self.journeys), spans, self.ordered, True, self.origin_s
            ):
                assert journey.bucket is not None
                self.worst = max(self.worst, abs(one.total - (journey.done - journey.added)))
                cohort = self.buckets.setdefault(journey.bucket, _Cohort())
                kept = self.kept.hidden_from is None or journey.bucket >= self.kept.hidden_from
                before = len(cohort.hidden)
                cohort.add(one, self.kept.sliced(placed) if kept else [], journey, behind)
                self._seconds += len(cohort.hidden) - before
                if self._seconds > HIDDEN_ENTRIES:  # a long run's: its seconds in slices twice as long
                    self.kept.coarser(self.buckets.values())
                    self._seconds = sum(len(c.hidden) for c in self.buckets.values())
        except BaseException as exc:  # said at the end: the account falls back to the whole journal
            self.failed = exc

    def feed(
        self, journeys: Sequence[Journey], free: Sequence[Span], claiming: Sequence[Span], upto: float
    ) -> None:
        self.free.put([*free, (upto, upto)])
        self.claiming.put([*claiming, (upto, upto)])
        self.journeys.put(journeys)

    def close(self, timeout_s: float) -> None:
        for stream in (self.free, self.claiming, self.journeys):
            stream.close()
        self.thread.join(timeout_s)


class RunningAccount:
    def __init__(self, ordered: bool, origin_s: float | None, split_all: bool = False) -> None:
        self._ordered, self._origin_s = ordered, origin_s
        self._split_all = split_all  # every message, not the candidates (no journal to read again)
        self._types: dict[str, TypeSweep] = {}
        self._forgotten = -math.inf  # the sweeps may have forgotten what ended before this
        self.missed: int | None = None  # a message enqueued before it: the account is not whole
        self._kept = HiddenKept()
        self._counts: dict[str, dict[int, int]] = {RUN: {}}  # messages by bucket, of the run and each type
        self._skipped: dict[str, set[int]] = {}  # each scope's buckets with a message not split
        self.chunks = 0
        self.messages = 0  # journeys fed
        self.longest_s = 0.0  # the longest time from enqueue to completion so far
        self.moved: str | None = None  # the scope a cohort of which took a message not split

    def feed(
        self,
        journeys: Sequence[Journey],
        free: dict[str, list[Span]],
        claims: dict[str, list[Span]],
        upto: float,
        floor: float,
    ) -> None:
        """A chunk: its journeys (by type and claim), each type's free and claim spans cut to it;
        `floor`, what no later chunk's message was enqueued before (the sweeps forget what ended
        before it). A message enqueued before what was forgotten is missed: finish says so."""
        for journey in journeys:  # counted first: the candidates are judged with this chunk's in
            if journey.bucket is not None:
                for scope in (RUN, journey.queue_type):
                    counts = self._counts.setdefault(scope, {})
                    counts[journey.bucket] = counts.get(journey.bucket, 0) + 1
                self.longest_s = max(self.longest_s, journey.done - journey.added)
        split = self._candidates()
        by_type: dict[str, list[Journey]] = {}
        for journey in journeys:  # one copy of each journey made (a chunk's are many)
            if journey.added < self._forgotten and self.missed is None:
                self.missed = journey.msg_id
            horizon = journey.added if journey.horizon is None else journey.horizon
            chosen = split(journey)
            if journey.bucket is not None and not chosen:
                for scope in (RUN, journey.queue_type):
                    self._skipped.setdefault(scope, set()).add(journey.bucket)
            by_type.setdefault(journey.queue_type, []).append(
                journey._replace(
                    horizon=min(horizon, floor), cohorts=CANDIDATE if chosen else journey.cohorts
                )
            )
        self._forgotten = max(self._forgotten, floor - KEPT_S)
        self.chunks += 1
        self.messages += len(journeys)
        for queue_type in sorted({*by_type, *free, *claims, *self._types}):
            sweep = self._types.get(queue_type)
            if sweep is None:
                sweep = TypeSweep(queue_type, self._ordered, self._origin_s, self._kept)
                self._types[queue_type] = sweep
            mine = free.get(queue_type, [])
            sweep.feed(
                by_type.get(queue_type, []), mine, list(overlap(mine, claims.get(queue_type, []))), upto
            )

    def queued(self) -> int:
        """Journeys fed and not yet split by the sweeps."""
        return sum(len(sweep.journeys) for sweep in self._types.values())

    def _candidates(self) -> Callable[[Journey], bool]:
        """Which of the chunk's messages a cohort may take, from the counts so far (this chunk's
        in): from a band below each scope's median up; every one until SPLIT_ALL. A message
        faster than that is left unsplit: the end refuses the account if a cohort takes one (the
        median fell that far), and the whole journal is read."""
        if self._split_all or sum(self._counts[RUN].values()) < SPLIT_ALL:
            return lambda journey: journey.bucket is not None
        lowest = {
            scope: cohort_bounds(counts.items()).median_lo - BAND for scope, counts in self._counts.items()
        }
        self._kept.hidden_from = _at_share(self._counts[RUN], TAIL_SHARE)

        def split(journey: Journey) -> bool:
            bucket = journey.bucket
            return bucket is not None and bucket >= min(
                lowest[RUN], lowest.get(journey.queue_type, lowest[RUN])
            )

        return split

    def finish(self, timeout_s: float) -> LatencyAccount | None:
        """Every stream closed and every sweep joined; the account, or None where one failed."""
        for sweep in self._types.values():
            sweep.close(timeout_s)
        if self.missed is not None or any(
            s.failed is not None or s.thread.is_alive() for s in self._types.values()
        ):
            return None
        for sweep in self._types.values():
            self._kept.resliced(sweep.buckets.values())
        for scope, skipped in self._skipped.items():  # a cohort with a message not split: not whole
            bounds = cohort_bounds(self._counts[scope].items())
            if any(bounds.median_lo <= b <= bounds.median_hi or b >= bounds.p99_lo for b in skipped):
                self.moved = scope
                return None
        overall: dict[str, CohortSplit] = {}
        per_type: dict[str, dict[str, CohortSplit]] = {}
        everything: dict[int, list[_Cohort]] = {}
        for queue_type, sweep in sorted(self._types.items()):
            per_type[queue_type] = _cohorts(
                {b: [c] for b, c in sweep.buckets.items()}, self._counts[queue_type]
            )
            for bucket, cohort in sweep.buckets.items():
                everything.setdefault(bucket, []).append(cohort)
        overall = _cohorts(everything, self._counts[RUN])
        worst = max((s.worst for s in self._types.values()), default=0.0)
        return LatencyAccount(overall, {t: c for t, c in per_type.items() if c}, worst * 1000)


def _cohorts(buckets: dict[int, list[_Cohort]], counts: dict[int, int]) -> dict[str, CohortSplit]:
    """A scope's cohorts picked by bucket, as cohort_bounds picks them from the journal's counts
    (`counts`: every message's; `buckets`: the split ones' sums)."""
    if not buckets or not counts:
        return {}
    bounds = cohort_bounds(counts.items())
    found: dict[str, _Cohort] = {}
    for bucket, cs in sorted(buckets.items()):
        name = (
            P99
            if bucket >= bounds.p99_lo
            else MEDIAN
            if bounds.median_lo <= bucket <= bounds.median_hi
            else None
        )
        if name is None:
            continue
        for c in cs:
            found.setdefault(name, _Cohort()).merge(c)
    return {name: found[name].result() for name in (MEDIAN, P99) if name in found}


def _at_share(counts: dict[int, int], share: float) -> int:
    """The bucket below which `share` of the messages counted fell."""
    total, seen = sum(counts.values()), 0
    for bucket, count in sorted(counts.items()):
        seen += count
        if seen >= share * total:
            return bucket
    return max(counts)


__all__ = ["RUN", "RunningAccount"]
