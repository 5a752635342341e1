"""A message's journey through the queue, as the tool's journal recorded it on the server's clock:
when it was enqueued and due, its failed attempts, when it was claimed and completed (or made a dead
letter); and when the workers of each type were free. Plain values, in seconds from the run's first
enqueue: the database layer reads them, the latency account (result/account) splits each message's
time from them."""

from __future__ import annotations

import math
from collections.abc import Iterable, Iterator
from typing import NamedTuple

MEDIAN, P99 = "median", "p99"  # the cohorts: the messages about the median, and the slowest 1%
RUN = ""  # a cohort of the whole run, not of one type


class CohortBounds(NamedTuple):
    """A scope's cohorts as buckets of the time from enqueue to completion (sql/account_cohorts.sql):
    about the median, the buckets from `median_lo` to `median_hi`; the slowest 1%, `p99_lo` and up."""

    median_lo: int
    median_hi: int
    p99_lo: int


def cohort_bounds(counts: Iterable[tuple[int, int]]) -> CohortBounds:
    """From (bucket, messages): the buckets of the middle 2% by time (at least the one or two nearest
    the median) and of the slowest 1% (at least one message). A count a bucket at a time: the state
    is the buckets, not the messages."""
    buckets = sorted(counts)
    n = sum(c for _, c in buckets)
    ranks = (
        max(1, math.floor((n + 1) / 2 - n / 100)),
        min(n, math.ceil((n + 1) / 2 + n / 100)),
        min(n, math.floor(0.99 * n) + 1),
    )
    found: list[int] = []
    seen = 0
    for bucket, count in buckets:
        seen += count
        while len(found) < len(ranks) and seen >= ranks[len(found)]:
            found.append(bucket)
    return CohortBounds(*found)


class Attempt(NamedTuple):
    """A failed attempt: claimed, failed, and when the next may run (None: a dead letter)."""

    claimed: float
    failed: float
    next_at: float | None


class Journey(NamedTuple):
    msg_id: int
    queue_type: str
    order_id: int
    added: float
    due: float | None  # None: due when added
    claimed: float | None  # the claim that completed it, after its locks (None: a dead letter)
    done: float  # its completion (its journal row, in the completing transaction), or its dead letter
    attempts: tuple[Attempt, ...] = ()
    cohorts: tuple[tuple[str, str], ...] = ()  # (RUN or its type, MEDIAN or P99)
    claim_from: float | None = None  # when the claim statement that took it arrived (None: not measured)
    # when its commit was over: its worker's next claim arrived, or its worker was free from then
    # (None: not known); it held its group until then, or until the group's next claim arrived
    committed: float | None = None
    # the earliest enqueue of this journey and of every one read after it (None: its own): no
    # window of the account begins before it from here on
    horizon: float | None = None
    bucket: int | None = None  # its time from enqueue to completion, as a cohort bucket (a chunk's read)

    @property
    def start(self) -> float:
        """Its first claim: from then on it held its group."""
        first = self.attempts[0].claimed if self.attempts else self.claimed
        return self.done if first is None else first


class FreeSpans(NamedTuple):
    """When at least one worker of a type was free (the union of its workers' free episodes), and
    when, of that, a claim statement of the type that took a message ran: each in time order, not
    overlapping."""

    queue_type: str
    spans: Iterable[tuple[float, float]]
    claiming: Iterable[tuple[float, float]] = ()


def overlap(
    spans: Iterable[tuple[float, float]], others: Iterable[tuple[float, float]]
) -> Iterator[tuple[float, float]]:
    """Where two streams of spans (each in time order, apart) overlap, in time order."""
    mine, theirs = iter(spans), iter(others)
    a, b = next(mine, None), next(theirs, None)
    while a is not None and b is not None:
        lo, hi = max(a[0], b[0]), min(a[1], b[1])
        if hi > lo:
            yield lo, hi
        if a[1] < b[1]:
            a = next(mine, None)
        else:
            b = next(theirs, None)
