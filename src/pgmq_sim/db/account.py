"""The latency account's facts, read from the tool's journal at the run's end (sql/account_*.sql):
the cohorts' journeys, and when each type's workers were free."""

from __future__ import annotations

from collections.abc import Sequence

import psycopg

from pgmq_sim.model.journeys import RUN, Attempt, FreeSpans, Journey
from pgmq_sim.sqlfiles import statement


def read_journeys(conn: psycopg.Connection, ordered: bool) -> tuple[float | None, list[Journey]]:
    """The server's epoch of the run's first enqueue (None: nothing journaled), and the journeys of
    the messages about the median and the slowest 1%, of each type and of the run."""
    row = conn.execute(statement("account_origin")).fetchone()
    origin = None if row is None or row[0] is None else float(row[0])
    journeys = []
    for msg_id, queue_type, order_id, by_type, by_run, added, due, claimed, done, *failed in conn.execute(
        statement("account_journeys"), (ordered,)
    ):
        cohorts = tuple((scope, name) for scope, name in ((queue_type, by_type), (RUN, by_run)) if name)
        attempts = tuple(Attempt(*a) for a in zip(*(f or () for f in failed), strict=True))
        journeys.append(
            Journey(int(msg_id), queue_type, int(order_id), added, due, claimed, done, attempts, cohorts)
        )
    return origin, journeys


def read_free_spans(conn: psycopg.Connection, free_at_end: Sequence[tuple[str, str]]) -> list[FreeSpans]:
    """When at least one worker of each type was free; `free_at_end`: (worker, type) of those free
    when the run stopped."""
    spans: dict[str, list[tuple[float, float]]] = {}
    workers, types = [w for w, _ in free_at_end], [t for _, t in free_at_end]
    for queue_type, start, end in conn.execute(statement("account_free"), (workers, types)):
        spans.setdefault(queue_type, []).append((start, end))
    return [FreeSpans(t, tuple(s)) for t, s in spans.items()]
