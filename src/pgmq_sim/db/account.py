"""The latency account's facts, read from the tool's journal at the run's end (sql/account_*.sql):
the journeys, streamed through a server-side cursor (a run of millions holds a batch at a time), and
when each type's workers were free."""

from __future__ import annotations

import itertools
from collections.abc import Callable, Iterable, Iterator, Sequence
from datetime import datetime
from typing import Any, NamedTuple, TypeVar

import psycopg

from pgmq_sim.model.journeys import RUN, Attempt, FreeSpans, Journey, cohort_bounds, overlap
from pgmq_sim.sqlfiles import statement

T = TypeVar("T")
BATCH = 5000  # journeys fetched at a time
WORK_MEM = "64MB"  # for the account's sorts, in its own transaction
Spans = dict[str, list[tuple[float, float]]]  # each type's, in time order
Chunk = tuple[list[Journey], Spans, Spans]  # a chunk's journeys, free spans and claim spans


def read_account(
    conn: psycopg.Connection,
    ordered: bool,
    free_at_end: Sequence[tuple[str, str]],
    consume: Callable[[float, Iterator[Journey], Iterator[FreeSpans]], T],
) -> T | None:
    """`consume(origin, journeys, free)` over the run's journeys in order of type (code point order)
    and claim (with order, every done message: its group's holds; else the cohorts' only), and
    when each type's workers were free, by type in the same order, each streamed as the account
    reaches it; `origin` the server's epoch of the run's first enqueue; None where nothing was
    journaled. `free_at_end`: (worker, type) of the workers free when the run stopped."""
    row = conn.execute(statement("account_origin")).fetchone()
    if row is None or row[0] is None:
        return None
    workers, types = [w for w, _ in free_at_end], [t for _, t in free_at_end]
    with (
        conn.transaction(),
        psycopg.RawServerCursor(conn, "pgmq_sim_journeys") as journeys,
        psycopg.RawServerCursor(conn, "pgmq_sim_free") as free,
        psycopg.RawServerCursor(conn, "pgmq_sim_claims") as claims,
    ):
        # reads of the whole journal, sorted: in memory where they fit, and not compiled (JIT took
        # 1.4 s of 3.6 for 100,000 messages)
        conn.execute(f"set local work_mem = '{WORK_MEM}'")
        conn.execute("set local jit = off")
        for cursor in (journeys, free, claims):
            cursor.itersize = BATCH
        journeys.execute(statement("account_journeys"), (ordered, *_cohorts(conn)))
        free.execute(statement("account_free"), (workers, types))
        claims.execute(statement("account_claims"))
        return consume(float(row[0]), _journeys(journeys), _free_spans(free, claims))


def _cohorts(conn: psycopg.Connection) -> tuple[list[str], list[int], list[int], list[int], list[int]]:
    """The cohorts' buckets, of each type and of the run, from the journal's counts by bucket."""
    counts: dict[str, list[tuple[int, int]]] = {}
    for queue_type, bucket, messages in conn.execute(statement("account_cohorts")):
        counts.setdefault(queue_type, []).append((int(bucket), int(messages)))
    types = sorted(counts)
    bounds = [cohort_bounds(counts[t]) for t in types]
    run = cohort_bounds(pair for t in types for pair in counts[t])
    return (
        types,
        [b.median_lo for b in bounds],
        [b.median_hi for b in bounds],
        [b.p99_lo for b in bounds],
        list(run),
    )


def _free_spans(free: Iterable[tuple[Any, ...]], claims: Iterable[tuple[Any, ...]]) -> Iterator[FreeSpans]:
    """Each type's free spans, and where a claim of the type ran in them, as lazy streams."""
    claimed = _by_type(claims)
    other = next(claimed, None)
    for queue_type, spans in _by_type(free):
        while other is not None and other[0] < queue_type:  # the same order: code points
            other = next(claimed, None)
        theirs = other[1] if other is not None and other[0] == queue_type else iter(())
        mine, overlapped = itertools.tee(spans)
        yield FreeSpans(queue_type, mine, overlap(overlapped, theirs))


def _by_type(rows: Iterable[tuple[Any, ...]]) -> Iterator[tuple[str, Iterator[tuple[float, float]]]]:
    for queue_type, group in itertools.groupby(rows, key=lambda r: str(r[0])):
        yield queue_type, ((float(a), float(b)) for _, a, b in group)


def _journeys(rows: Iterator[tuple[Any, ...]]) -> Iterator[Journey]:
    for (
        msg_id,
        queue_type,
        order_id,
        by_type,
        by_run,
        added,
        due,
        claimed,
        done,
        claim_from,
        committed,
        horizon,
        *failed,
    ) in rows:
        # most rows are in no cohort and failed never: built without a generator each (a row's cost)
        cohorts = (
            tuple((scope, name) for scope, name in ((queue_type, by_type), (RUN, by_run)) if name)
            if by_type or by_run
            else ()
        )
        attempts = tuple(map(Attempt._make, zip(*failed, strict=True))) if failed[0] else ()
        yield Journey(
            int(msg_id),
            queue_type,
            int(order_id),
            added,
            due,
            claimed,
            done,
            attempts,
            cohorts,
            claim_from,
            committed,
            horizon,
        )


def read_origin(conn: psycopg.Connection) -> float | None:
    """The account's zero: the run's first enqueue, the server's epoch."""
    row = conn.execute(statement("account_origin")).fetchone()
    return None if row is None or row[0] is None else float(row[0])


def read_chunk(
    conn: psycopg.Connection,
    origin: float,
    lo: float,
    hi: float | None,
    free_at_end: Sequence[tuple[str, str]],
) -> Chunk:
    """The journeys claimed from `lo` to `hi` (epochs; None: on to the end, with the workers free at
    the end), and each type's free and claim spans cut to them, in seconds from `origin`. A free
    episode is journaled at the claim that ends it: `hi` must come before every worker's latest
    claim (as read_cutoff's do), or a worker idle from before `hi` to the end is missed."""
    workers, types = [w for w, _ in free_at_end], [t for _, t in free_at_end]
    with conn.transaction():
        conn.execute(f"set local work_mem = '{WORK_MEM}'")
        conn.execute("set local jit = off")
        raw = psycopg.RawCursor(conn)
        rows = raw.execute(statement("account_chunk_journeys"), (origin, lo, hi)).fetchall()
        free = raw.execute(statement("account_chunk_free"), (origin, lo, hi, workers, types)).fetchall()
        claims = raw.execute(statement("account_chunk_claims"), (origin, lo, hi)).fetchall()
    journeys = [
        Journey(int(m), t, int(o), added, due, claimed, done, _attempts(failed), (), claim_from, committed,
                horizon, bucket)
        for m, t, o, bucket, added, due, claimed, done, claim_from, committed, horizon, *failed in rows
    ]  # fmt: skip
    return journeys, _spans(free), _spans(claims)


def _attempts(failed: list[Any]) -> tuple[Attempt, ...]:
    return tuple(map(Attempt._make, zip(*failed, strict=True))) if failed[0] else ()


def _spans(rows: Iterable[tuple[Any, ...]]) -> Spans:
    spans: Spans = {}
    for queue_type, a, b in rows:
        spans.setdefault(str(queue_type), []).append((float(a), float(b)))
    return spans


MARGIN_S = 2.0  # a chunk ends this long before the lowest latest claim (sql/account_cutoff.sql)
Seen = dict[str, datetime]  # each worker's latest claim journaled at a read


class LiveChunk(NamedTuple):
    """A read while the run goes: the account's zero, the chunk's end (the server's epochs), what
    each worker had journaled then, the chunk, the rows journaled since the last read whose spans
    began before its end (`late`: not 0, the account is not whole), and whether it stopped short of
    the cut-off at the cap (`capped`: the rest is there to read)."""

    origin: float
    upto: float
    seen: Seen
    chunk: Chunk
    late: int
    capped: bool


def read_cutoff(conn: psycopg.Connection, after: float, workers: Sequence[str]) -> Seen | None:
    """Each worker's latest claim journaled since `after`; None while one has journaled none since."""
    latest: Seen = dict(psycopg.RawCursor(conn).execute(statement("account_cutoff"), (after,)).fetchall())
    return latest if workers and all(w in latest for w in workers) else None


def read_late(conn: psycopg.Connection, seen: Seen | None, upto: float) -> int:
    """The rows journaled since `seen` whose span of free or claim time began before `upto`."""
    if not seen:
        return 0
    row = (
        psycopg.RawCursor(conn)
        .execute(statement("account_late"), (list(seen), list(seen.values()), upto))
        .fetchone()
    )
    return int(row[0]) if row else 0


def _read_cap(conn: psycopg.Connection, after: float, most: int) -> float | None:
    """The claim time (epoch) `most` journal rows on from `after`; None where fewer are journaled."""
    row = psycopg.RawCursor(conn).execute(statement("account_chunk_cap"), (after, most)).fetchone()
    return None if row is None else float(row[0])


def read_live_chunk(
    conn: psycopg.Connection,
    origin: float | None,
    after: float,
    seen: Seen | None,
    workers: Sequence[str],
    most: int,
) -> LiveChunk | None:
    """While the run goes, in one snapshot: the account's zero (`origin`, or read now), what each
    worker has journaled, the chunk of claims from `after` to MARGIN_S before the lowest of those (or
    to the claim `most` rows on, if earlier), and the rows late for the last chunk; None while there
    is no new chunk."""
    try:
        conn.execute("set transaction isolation level repeatable read")
        origin = origin if origin is not None else read_origin(conn)
        latest = read_cutoff(conn, after, workers) if origin is not None else None
        if origin is None or latest is None:
            return None
        cutoff = min(latest.values()).timestamp() - MARGIN_S
        cap = _read_cap(conn, after, most) if cutoff > after else None
        upto = cutoff if cap is None or cap <= after else min(cutoff, cap)
        if upto <= after:
            return None
        late = read_late(conn, seen, after)
        chunk = read_chunk(conn, origin, after, upto, ())
        return LiveChunk(origin, upto, latest, chunk, late, upto < cutoff)
    finally:
        conn.rollback()  # it wrote nothing
