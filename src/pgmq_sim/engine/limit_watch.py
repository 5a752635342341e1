"""The limit as the run goes: every -audit-window seconds of the run's clock the watch reads the
run's edge and judges the window since the last one from its own figures, as a phase is judged
(engine/steps.limit_between), into the run's tally of window limits (result/window_limits), from
what the run already holds: no query, so the watch never waits on the server for it. The
live views show the last window's; the run keeps the stretches, so an episode of another limit gets
its time and its cause. A sweep's steps are judged by the sweep, not here."""

from __future__ import annotations

import time

from pgmq_sim.engine.judging import SHARE_OF_TIME
from pgmq_sim.engine.state import RunState
from pgmq_sim.engine.steps import Edge, due_between, limit_between, offered_between
from pgmq_sim.result.window_limits import WindowLimit

LAST_WINDOW_S = 1.0  # the run's end closes the last window, if it is at least this long
ON_TIME_S = 1.0  # a message written within this of its due time was written on time (as the run's)


class LimitWatch:
    def __init__(self, state: RunState) -> None:
        self._state = state
        self._every_s = state.settings.audit_window
        self._edge = Edge.read(state, server=False)
        self._wait_s = self._every_s  # the next window's length at least

    @classmethod
    def of(cls, state: RunState, sweeping: bool) -> LimitWatch | None:
        """One where windows are asked for (-audit-window) and the run is not a sweep."""
        return cls(state) if state.settings.audit_window > 0 and not sweeping else None

    def tick(self) -> None:
        """A window every `-audit-window` seconds, or less often: judging one merges every worker's
        histograms (18 ms of CPU for 12 workers at 400/s), and the judging takes at most a tenth of
        the run's time, as the live audit's does, so with thousands of workers it never becomes the
        load it measures."""
        if self._state.clock() - self._edge.at >= self._wait_s:
            began = time.perf_counter()
            self._close()
            self._wait_s = max(self._every_s, SHARE_OF_TIME * (time.perf_counter() - began))

    def close(self) -> None:
        """The run's end: its last window, unless too short to judge."""
        if self._state.clock() - self._edge.at >= LAST_WINDOW_S:
            self._close()

    def _close(self) -> None:
        state, start = self._state, self._edge
        end = self._edge = Edge.read(state, server=False)
        paced = state.settings.paced
        # to three figures: a window's due count is whole messages (101 in 2.01 s is not 50.2005/s)
        offered = float(f"{offered_between(state.settings, start.at, end.at):.3g}") if paced else None
        # its writes against what fell due a second earlier: its edge cuts its last second's writes
        due = due_between(state.settings, start.at, end.at, ON_TIME_S) if paced else None
        cause = limit_between(state, start, end, offered, "window", due).cause
        p99 = end.histograms[2].minus(start.histograms[2]).percentiles_ms()["p99"]
        state.window_limits.add(WindowLimit(start.at, end.at, str(cause.resource), cause.evidence, p99))
