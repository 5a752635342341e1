"""When a run has reached its end."""

from __future__ import annotations

import time

from pgmq_sim.engine.parts import RunParts
from pgmq_sim.engine.state import RunState
from pgmq_sim.engine.watching import nothing_remains
from pgmq_sim.result.phased import PhaseResult
from pgmq_sim.result.timeline import SecondSample

DRAIN_GRACE_S = 2.0  # beyond the longest work time: a worker that does not finish is cut off


class CountGoal:
    """The seed's end: as soon as -fill-db messages are committed as processed (or dead-lettered).
    The counter sets the run's done event; a completion whose commit answer was lost and could not
    be checked is settled by asking the server whether anything remains."""

    drains = True

    def describe(self) -> str:
        return ""

    def report(self) -> None:
        return None

    def phases(self, state: RunState, samples: list[SecondSample]) -> tuple[PhaseResult, ...]:
        return ()

    def reached(self, state: RunState, parts: RunParts) -> bool:
        counter, target = state.counter, state.settings.fill_db
        in_doubt = counter.in_doubt
        if not in_doubt or target is None:
            return False
        return counter.count + in_doubt >= target and nothing_remains(state)


class DeadlineGoal:
    """A run bounded by time: at -duration the producer stops and the workers claim nothing more;
    the run ends once the work in flight has finished (or a grace period past the longest work).
    What is still pending then is the backlog, not a loss. -fill-db, when given, may end it first."""

    drains = False

    def __init__(self, duration_s: float) -> None:
        self.duration_s = duration_s
        self._draining_since: float | None = None

    def describe(self) -> str:
        return "finishing the work in flight" if self._draining_since is not None else ""

    def report(self) -> None:
        return None

    def phases(self, state: RunState, samples: list[SecondSample]) -> tuple[PhaseResult, ...]:
        return ()

    def reached(self, state: RunState, parts: RunParts) -> bool:
        if state.clock() < self.duration_s:
            return False
        if self._draining_since is None:
            self._draining_since = time.monotonic()
            parts.carrier.allow(state, 0)
            state.log.event(f"duration {self.duration_s:g} s reached: finishing the work in flight")
        grace = state.settings.work.max_ms / 1000 + DRAIN_GRACE_S
        return parts.carrier.busy(state) == 0 or time.monotonic() - self._draining_since > grace
