"""The master's watch over its worker processes while the run's own watch waits for its goal: a
lost process is noted and the run goes on; when reports go quiet, the server says whether the run is
done (a lost process leaves its last completions unreported)."""

from __future__ import annotations

import time

import psycopg

from pgmq_sim.actors.threads import RunThread
from pgmq_sim.distributed.members import Members
from pgmq_sim.engine.bounded import NotAnswering, call_bounded
from pgmq_sim.engine.state import RunState
from pgmq_sim.engine.watching import PING_TIMEOUT_S
from pgmq_sim.errors import SimError

CHECK_S = 0.5
QUIET_S = 1.0  # no report raised the count this long below the target: ask the server


class Monitor(RunThread):
    def __init__(self, members: Members, state: RunState) -> None:
        super().__init__("monitor", state.stop, state.errors.reporter("monitor"))
        self.members = members
        self.state = state

    def body(self) -> None:
        while not self._halt.wait(CHECK_S):
            self.check()

    def check(self) -> None:
        """Notice lost processes; end the run when the server says it is done."""
        state, members = self.state, self.members
        for member in members:
            if member.lost is None and not member.final:
                why = members.gone(member)
                if why is not None:
                    member.lost = why
                    state.note(
                        f"worker process {member.runner} lost ({why}); the run goes on with the others"
                    )
        self._check_producers()
        lost = any(member.lost for member in members)
        quiet = time.monotonic() - members.last_count_change >= QUIET_S
        target = state.settings.fill_db
        if state.done.is_set() or not (lost or quiet) or target is None or state.produced.committed < target:
            return
        try:
            remaining = call_bounded(state.db.remaining, PING_TIMEOUT_S, state.signals, "remaining count")
        except (NotAnswering, psycopg.Error):
            return
        if remaining == 0:
            state.log.event("the server has no message left: done (some completions were not reported)")
            members.reconcile()
            state.done.set()
            return
        if lost:
            self._check_types_served(remaining)
        members.last_count_change = time.monotonic()

    def _check_producers(self) -> None:
        """A spread run whose producing processes are all lost enqueues nothing more: it stops."""
        state = self.state
        producing = [member for member in self.members if member.producing is not None]
        if producing and all(member.lost for member in producing) and not state.stop.is_set():
            gone = ", ".join(member.runner for member in producing)
            state.errors.report(
                "producer",
                SimError(f"every producing process was lost ({gone}): no more enqueues; stopping"),
            )

    def _check_types_served(self, remaining: int) -> None:
        state = self.state
        by_name = state.stats_by_name
        alive = {by_name[n].queue_type for member in self.members if not member.lost for n in member.names}
        orphaned = sorted({s.queue_type for s in state.stats} - alive)
        if orphaned:
            gone = ", ".join(member.runner for member in self.members if member.lost)
            state.errors.report(
                "workers",
                SimError(
                    f"{', '.join(orphaned)} has no worker left after {gone} was lost and"
                    f" {remaining} messages remain; stopping"
                ),
            )
