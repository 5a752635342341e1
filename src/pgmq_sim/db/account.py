"""The latency account's facts, read from the tool's journal at the run's end (sql/account_*.sql):
the journeys, streamed through a server-side cursor (a run of millions holds a batch at a time), and
when each type's workers were free."""

from __future__ import annotations

from collections.abc import Callable, Iterator, Sequence
from typing import Any, TypeVar

import psycopg

from pgmq_sim.model.journeys import RUN, Attempt, FreeSpans, Journey
from pgmq_sim.sqlfiles import statement

T = TypeVar("T")
BATCH = 5000  # journeys fetched at a time
WORK_MEM = "64MB"  # for the account's sorts, in its own transaction


def read_account(
    conn: psycopg.Connection,
    ordered: bool,
    free_at_end: Sequence[tuple[str, str]],
    consume: Callable[[float, Iterator[Journey], list[FreeSpans]], T],
) -> T | None:
    """`consume(origin, journeys, free)` over the run's journeys in order of type, group and msg_id
    (with order, every done message: its group's holds; else the cohorts' only), `origin` the
    server's epoch of the run's first enqueue; None where nothing was journaled. `free_at_end`:
    (worker, type) of the workers free when the run stopped."""
    row = conn.execute(statement("account_origin")).fetchone()
    if row is None or row[0] is None:
        return None
    free = read_free_spans(conn, free_at_end)
    with conn.transaction(), psycopg.RawServerCursor(conn, "pgmq_sim_journeys") as cursor:
        # a read of the whole journal, sorted three ways: in memory where it fits, and not compiled
        # (JIT took 1.4 s of 3.6 for 100,000 messages)
        conn.execute(f"set local work_mem = '{WORK_MEM}'")
        conn.execute("set local jit = off")
        cursor.itersize = BATCH
        cursor.execute(statement("account_journeys"), (ordered,))
        return consume(float(row[0]), _journeys(cursor), free)


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
        *failed,
    ) in rows:
        cohorts = tuple((scope, name) for scope, name in ((queue_type, by_type), (RUN, by_run)) if name)
        attempts = tuple(Attempt(*a) for a in zip(*(f or () for f in failed), strict=True))
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
        )


def read_free_spans(conn: psycopg.Connection, free_at_end: Sequence[tuple[str, str]]) -> list[FreeSpans]:
    """When at least one worker of each type was free, and when, of that, a claim of the type ran."""
    spans: dict[str, list[tuple[float, float]]] = {}
    workers, types = [w for w, _ in free_at_end], [t for _, t in free_at_end]
    for queue_type, start, end in conn.execute(statement("account_free"), (workers, types)):
        spans.setdefault(queue_type, []).append((start, end))
    claims: dict[str, list[tuple[float, float]]] = {}
    for queue_type, start, end in conn.execute(statement("account_claims")):
        claims.setdefault(queue_type, []).append((start, end))
    return [FreeSpans(t, tuple(s), tuple(overlap(s, claims.get(t, [])))) for t, s in spans.items()]


def overlap(
    spans: Sequence[tuple[float, float]], others: Sequence[tuple[float, float]]
) -> Iterator[tuple[float, float]]:
    """Where two lists of spans (each in time order, apart) overlap, in time order."""
    i = j = 0
    while i < len(spans) and j < len(others):
        lo, hi = max(spans[i][0], others[j][0]), min(spans[i][1], others[j][1])
        if hi > lo:
            yield lo, hi
        if spans[i][1] < others[j][1]:
            i += 1
        else:
            j += 1
