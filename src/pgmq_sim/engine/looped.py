"""Workers as tasks on the run's event loop in this process: the default carrier. A Locust worker
process runs the same crew (actors/crew) on a loop of its own."""

from __future__ import annotations

import time

from pgmq_sim.actors.crew import Crew, CrewPlan
from pgmq_sim.actors.threads import RunThread
from pgmq_sim.engine.loop import poll
from pgmq_sim.engine.state import RunState
from pgmq_sim.model.kinds import TxMode, WakeupMode
from pgmq_sim.model.quantities import count_text
from pgmq_sim.result.claims import ClaimBook
from pgmq_sim.result.stats import WorkerCounters

CONNECTED_WAIT_S = 30.0  # the producer waits at most this for the workers' first sessions
LISTENER_WAIT_S = 30.0


def crew_plan(state: RunState) -> CrewPlan:
    settings = state.settings
    assert state.preflight is not None
    return CrewPlan(
        state.server.dsn,
        state.preflight.session,
        settings.work,
        settings.reconnect_timeout,
        settings.fail_rate,
        settings.wakeup == WakeupMode.NOTIFY,
        settings.poll_interval,
        settings.queue_types,
        settings.tx == TxMode.SPLIT,
        settings.listen_dsn,
    )


class LoopCarrier:
    counts_from_journal = False

    def __init__(self) -> None:
        self.crew: Crew | None = None

    def connections(self, state: RunState) -> int:
        settings = state.settings
        listener = 1 if settings.wakeup == WakeupMode.NOTIFY else 0
        return settings.workers + listener + (1 if settings.tx == TxMode.SPLIT else 0)

    def open(self, state: RunState) -> None:
        pass

    def ready(self, state: RunState) -> None:
        loop = state.on_loop()
        seeds = [state.rng.random() for _ in state.stats]
        crew = self.crew = Crew(
            state.stats,
            seeds,
            crew_plan(state),
            state.log,
            state.counter,
            state.timeline,
            state.clock,
            loop.halt,
            loop.tasks,
            lambda: state.meters.connected(len(state.stats), WorkerCounters.total(state.stats).finished),
        )
        loop.run(crew.ready, LISTENER_WAIT_S, state.signals, "listener connection")  # bounded

    def go(self, state: RunState) -> list[RunThread]:
        crew = self.crew
        assert crew is not None
        state.on_loop().call(crew.start)
        return []

    def connected(self, state: RunState) -> None:
        crew = self.crew
        assert crew is not None
        began = time.monotonic()
        try:
            if not poll(
                lambda: crew.all_opened or state.stop.is_set(), CONNECTED_WAIT_S, state.signals, True
            ):
                return  # the run goes on: its watch names the failure or the stop
        except InterruptedError:
            return
        if not state.stop.is_set():
            state.log.event(
                f"{count_text(len(crew.stats))} workers connected in {time.monotonic() - began:.2f} s"
            )

    def describe(self, state: RunState) -> str:
        return f"{state.settings.workers} workers"  # the log's 'starting N workers': bench/ reads it as \d+

    def crash(self, state: RunState, names: list[str]) -> None:
        if self.crew is not None:
            state.on_loop().call(self.crew.crash, names)

    def allow(self, state: RunState, count: int) -> None:
        if self.crew is not None:
            state.on_loop().call(self.crew.allow, count)

    def busy(self, state: RunState) -> int:
        return self.crew.busy if self.crew is not None else 0

    def wakeups(self, state: RunState) -> int | None:
        return self.crew.delivered if self.crew is not None else 0

    def claim_books(self, state: RunState) -> list[ClaimBook] | None:
        book = self.crew.claim_book if self.crew is not None else None
        return [book] if book is not None else []

    def stop(self, state: RunState) -> None:
        if state.loop is not None:
            state.loop.halt_now()

    def close(self, state: RunState) -> None:
        pass
