"""The error that ended a run, classified as the faults are: whose statement met it, the server's
reason, and the one line that names the cause and its fix (verdicts/ending)."""

from __future__ import annotations

import psycopg

from pgmq_sim.db.connection import server_reason
from pgmq_sim.engine.state import RunState
from pgmq_sim.model.kinds import Outcome
from pgmq_sim.model.reasons import Cause, RunEnding
from pgmq_sim.verdicts.ending import ending_line
from pgmq_sim.verdicts.policies import run_shape


def met(state: RunState, who: str, exc: psycopg.Error) -> None:
    """The run's own phase (or a thread of it) met a server error that ends the run."""
    state.ended_by = RunEnding(who, server_reason(exc, *state.dsns))


def name_the_ending(state: RunState) -> None:
    """A run that died of a server error: its cause kept for the verdict, and its line naming the
    cause and the fix (an error the server did not classify keeps the line it has)."""
    if state.outcome in (Outcome.COMPLETED, Outcome.INTERRUPTED, Outcome.STALLED):
        return
    first = state.errors.error  # the first failure any thread reported: where, and what
    if state.ended_by is None and first is not None and isinstance(first[1], psycopg.Error):
        met(state, first[0], first[1])
    ending = state.ended_by
    if ending is not None and ending.reason.cause != Cause.OTHER:
        timeouts = state.preflight.timeouts if state.preflight is not None else None
        state.error = ending_line(ending, timeouts, run_shape(state.settings, state.design.skips_locked))
