"""The server's settings that shape the queue, read for a run (model/census): after its schema, and
for a refusal of connections, who holds the slots. The census informs; it never stops a run: a read
that fails is a note, and the run goes on without it."""

from __future__ import annotations

import psycopg

from pgmq_sim.dsn import reason
from pgmq_sim.engine.bounded import NotAnswering, call_bounded
from pgmq_sim.engine.state import RunState

CENSUS_TIMEOUT_S = 30


def read_census(state: RunState, tables: tuple[str, ...]) -> None:
    """The settings, the queue's tables now made: autovacuum kept from them is said before the run."""
    try:
        state.census = census = call_bounded(
            lambda: state.views.census(tables), CENSUS_TIMEOUT_S, state.signals, "settings census"
        )
    except (psycopg.Error, NotAnswering) as exc:
        state.note(f"the server's settings were not read: {reason(exc, *state.dsns)}")
        return
    if (off := census.autovacuum_off()) is not None:
        state.note(f"autovacuum is off for the queue's tables ({off}): nothing reclaims their dead tuples")


def slot_holders(state: RunState, own_role: bool) -> str:
    """Who holds the server's connection slots (the role's own sessions, for its CONNECTION LIMIT)."""
    try:
        slots = call_bounded(state.views.slots, CENSUS_TIMEOUT_S, state.signals, "connection slots", True)
    except (psycopg.Error, NotAnswering) as exc:
        return f"who holds them not read: {reason(exc, *state.dsns)}"
    return slots.said(slots.role if own_role else None)
