"""The time spans the latency account reads a message's wait against (result/account): when a
type's workers were free, and when a claim statement of the type ran (FreeTime), and what held a
group (GroupSpans: its earlier messages' holds and the claims that took them). Each is read in time
order as the account reaches it, with its time summed before each span (a window is two binary
searches, whatever the spans inside it: no window is clipped against its spans), and what ended
before the account still needs it is dropped: it holds the waits it is splitting, not the run's."""

from __future__ import annotations

import bisect
import math
from array import array
from collections.abc import Iterable
from typing import NamedTuple


class FreeTime:
    """When a type's workers were free: spans in time order, read from `spans` as the account
    reaches them (a span overlapping the last is merged into it), with the free time before each
    summed, so the free time within any window is two binary searches. The spans that ended before
    the time the account still needs are dropped: it holds the spans of the waits it is splitting,
    not the run's."""

    def __init__(self, spans: Iterable[tuple[float, float]]) -> None:
        self._source = iter(spans)
        self._next = next(self._source, None)
        self._starts = array("d")
        self._ends = array("d")
        self._before = array("d")
        self._total = 0.0

    def _load(self, t: float) -> None:
        """Every span that starts before t."""
        while self._next is not None and self._next[0] < t:
            start, end = self._next
            self._next = next(self._source, None)
            if self._ends and start < self._ends[-1]:
                if end > self._ends[-1]:
                    self._total += end - self._ends[-1]
                    self._ends[-1] = end
                continue
            self._starts.append(start)
            self._ends.append(end)
            self._before.append(self._total)
            self._total += end - start

    def forget(self, t: float) -> None:
        """No window of the account begins before t any more."""
        i = bisect.bisect_left(self._ends, t)
        if i > FORGET_AT and 2 * i > len(self._ends):  # a half at a time: each span moves once or twice
            del self._starts[:i], self._ends[:i], self._before[:i]

    def until(self, t: float) -> float:
        """Free time from the first span up to t (t no earlier than what was forgotten)."""
        self._load(t)
        i = bisect.bisect_right(self._starts, t) - 1
        if i < 0:
            return self._before[0] if self._before else self._total
        return self._before[i] + min(t, self._ends[i]) - self._starts[i]

    def within(self, a: float, b: float) -> float:
        return max(0.0, self.until(b) - self.until(a)) if b > a else 0.0


FORGET_AT = 4096  # spans of a type: below this many ended ones, none is forgotten
GROUP_FORGET_AT = 64  # spans of a group (a run may have thousands of groups)


NO_FREE = FreeTime(())


class Within(NamedTuple):
    """A group's spans within a window: the time held, and claimed; the free time inside each; and
    the time inside each that a claim of the type ran while a worker was free."""

    held: float = 0.0
    claim: float = 0.0
    free_held: float = 0.0
    free_claim: float = 0.0
    claiming_held: float = 0.0
    claiming_claim: float = 0.0


NOTHING = Within()
HOLD, CLAIM = 0, 1


class TypeTime(NamedTuple):
    """When a type's workers were free, and when, of that, a claim statement of the type that took a
    message was running."""

    free: FreeTime
    claiming: FreeTime


NO_TIME = TypeTime(NO_FREE, NO_FREE)


class GroupSpans:
    """What kept a group's next message from its worker, span by span in time order and apart (a
    span that began before the last ended is cut to begin then, so the earlier one comes first):
    each earlier message's hold, from its first claim to its completion or dead letter, and the
    claim statement that took it, from its arrival to its locks. Each kind's time, and the free and
    claiming time within it, are summed before each span, so any of them up to any time is a
    binary search. The free and claiming sums are laid only when a read reaches them: most groups
    are never read (only the cohorts' messages are split), and laying them was most of the
    account's time. A sum is only ever read as a difference after what was forgotten, so the spans
    laid after the type forgot their time shift every later sum alike and change no difference."""

    def __init__(self, times: TypeTime) -> None:
        self._measures = times
        self._starts = array("d")
        self._ends = array("d")
        self._kinds = array("b")
        self._before = tuple(array("d") for _ in Within._fields)
        self._sums = [0.0] * len(Within._fields)  # held and claim: every span; the rest: those laid
        self.committed: float | None = None  # when its last message's commit was over, where known
        self.not_due: list[tuple[float, float]] = []  # its heads' spans while not yet due
        self.head: tuple[int, float] | None = None  # the last such head: its msg_id, when it was due

    @property
    def last_end(self) -> float:
        return self._ends[-1] if self._ends else -math.inf

    def forget(self, t: float) -> None:
        """No window of the account begins before t any more."""
        self.not_due = [(a, b) for a, b in self.not_due if b >= t]
        i = bisect.bisect_left(self._ends, t)
        if i > GROUP_FORGET_AT and 2 * i > len(self._ends):
            del self._starts[:i], self._ends[:i], self._kinds[:i]
            for before in self._before:
                del before[:i]  # the sums not yet laid stand where they were: the next laid from there

    def add(self, kind: int, start: float, end: float) -> None:
        if self._ends:
            start = max(start, self._ends[-1])
        if end <= start:
            return
        self._starts.append(start)
        self._ends.append(end)
        self._kinds.append(kind)
        held, claim = self._before[:2]
        held.append(self._sums[0])
        claim.append(self._sums[1])
        self._sums[kind] += end - start

    def fill(self, kind: int, start: float, end: float) -> None:
        """A span that may begin before the last ends (a head not yet due, read at its claim, held
        the group from its enqueue): the parts of it no span covers, each in its place."""
        i = bisect.bisect_right(self._ends, start)
        if i == len(self._ends):
            self.add(kind, start, end)
            return
        spans = list(zip(self._starts[i:], self._ends[i:], self._kinds[i:], strict=True))
        gaps, at = [], start
        for a, b, _ in spans:
            if a >= end:
                break
            if a > at:
                gaps.append((at, a, kind))
            at = max(at, b)
        if end > at:
            gaps.append((at, end, kind))
        if not gaps:
            return
        for field, before in enumerate(self._before):  # the spans from i on are laid again
            if i < len(before):
                self._sums[field] = before[i]
                del before[i:]
        del self._starts[i:], self._ends[i:], self._kinds[i:]
        for a, b, k in sorted(spans + gaps):
            self.add(k, a, b)

    def _lay(self, last: int) -> None:
        """The free and claiming sums before each span up to `last`, and through it."""
        befores, sums = self._before[2:], self._sums
        free, claiming = self._measures.free.until, self._measures.claiming.until
        for i in range(len(befores[0]), last + 1):
            for before, value in zip(befores, sums[2:], strict=True):
                before.append(value)
            kind, start, end = self._kinds[i], self._starts[i], self._ends[i]
            sums[2 + kind] += max(0.0, free(end) - free(start))
            sums[4 + kind] += max(0.0, claiming(end) - claiming(start))

    def hold_until(self, t: float) -> None:
        """The last span's message held the group on until t."""
        if self._ends:
            self.add(HOLD, self._ends[-1], t)

    def until(self, t: float) -> list[float]:
        """Each of Within's sums from its first span kept up to t."""
        i = bisect.bisect_right(self._starts, t) - 1
        if i < 0:  # before its first span kept (t no earlier than what was forgotten)
            self._lay(0 if self._starts else -1)
            return [before[0] for before in self._before] if self._starts else list(self._sums)
        self._lay(i)
        at = [before[i] for before in self._before]
        kind, start, end = self._kinds[i], self._starts[i], min(t, self._ends[i])
        at[kind] += end - start
        at[2 + kind] += self._measures.free.within(start, end)
        at[4 + kind] += self._measures.claiming.within(start, end)
        return at

    def within(self, a: float, b: float) -> Within:
        """Held and claimed time within [a, b], and the free and claiming time inside each."""
        if b <= a:
            return NOTHING
        return Within(*(max(0.0, y - x) for x, y in zip(self.until(a), self.until(b), strict=True)))

    def behind_not_due(self, a: float, b: float) -> float:
        """Of [a, b], the time its heads not yet due held the group."""
        return sum(max(0.0, min(b, y) - max(a, x)) for x, y in self.not_due)


def open_until(times: TypeTime, group: GroupSpans | None, t: float) -> float:
    """Of the free time up to t, what no claim of the type that took a message ran in and no span of
    the group held: free less claiming less the group's free time, plus the group's claiming time
    (claiming lies within free, so that is counted out once). Each a sum before t: a message's
    hidden time in any slice of its wait is two reads, whatever the spans inside it."""
    at = times.free.until(t) - times.claiming.until(t)
    if group is not None:
        _, _, free_held, free_claim, claiming_held, claiming_claim = group.until(t)
        at -= free_held + free_claim - claiming_held - claiming_claim
    return at
