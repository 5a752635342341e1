"""Workers as threads of this process: the default carrier, and the one every other carrier's
workers mirror (they run the same `WorkerLoop`)."""

from __future__ import annotations

import threading
import time

from pgmq_sim.actors.ownership import Heartbeat, Owners
from pgmq_sim.actors.threads import RunThread
from pgmq_sim.actors.wakeup import NotifyWakeup, Wakeup, wakeup_for
from pgmq_sim.actors.worker import ClaimGate, Worker, WorkerPlan, crew
from pgmq_sim.db.claims import claim_sessions
from pgmq_sim.db.connection import connect_worker
from pgmq_sim.engine.bounded import TICK_S, call_bounded
from pgmq_sim.engine.state import RunState
from pgmq_sim.model.kinds import TxMode, WakeupMode
from pgmq_sim.settings import MAX_WORKERS

CONNECTED_WAIT_S = 30.0  # the producer waits at most this for the workers' first sessions


class ThreadCarrier:
    def __init__(self) -> None:
        self.workers: list[Worker] = []
        self.wakeup: Wakeup | None = None
        self.gate = ClaimGate(MAX_WORKERS)
        self.owners = Owners()
        self.opened = threading.Semaphore(0)

    def connections(self, state: RunState) -> int:
        settings = state.settings
        listener = 1 if settings.wakeup == WakeupMode.NOTIFY else 0
        return settings.workers + listener + (1 if settings.tx == TxMode.SPLIT else 0)

    def open(self, state: RunState) -> None:
        pass

    def ready(self, state: RunState) -> None:
        settings, dsn = state.settings, state.server.dsn
        self.wakeup = call_bounded(  # the listener's first connection is bounded
            lambda: wakeup_for(
                settings.wakeup == WakeupMode.NOTIFY,
                lambda: connect_worker(settings.listen_dsn or dsn),
                settings.poll_interval,
                settings.reconnect_timeout,
                state.stop,
                state.errors.reporter("notify listener"),
                settings.queue_types,
            ),
            30,
            state.signals,
            "listener connection",
        )

    def go(self, state: RunState) -> list[RunThread]:
        settings, dsn = state.settings, state.server.dsn
        assert self.wakeup is not None
        session = state.session
        assert session is not None
        plan = WorkerPlan(
            dsn,
            session,
            claim_sessions(dsn, session),
            settings.work,
            settings.reconnect_timeout,
            state.clock,
            settings.fail_rate,
            self.gate,
            self.owners,
            self.opened,
        )
        seeds = [state.rng.random() for _ in state.stats]
        loops = crew(
            state.stats, seeds, plan, self.wakeup, state.log, state.counter, state.timeline, state.stop
        )
        self.workers = [
            Worker(loop, state.stop, state.errors.reporter(f"worker {loop.stats.name}")) for loop in loops
        ]
        threads: list[RunThread] = list(self.workers)
        if settings.tx == TxMode.SPLIT:
            threads.append(Heartbeat(dsn, self.owners, state.stop, state.errors.reporter("heartbeat")))
        return threads

    def connected(self, state: RunState) -> None:
        began = time.monotonic()
        deadline = began + CONNECTED_WAIT_S
        for _ in self.workers:
            while not self.opened.acquire(timeout=TICK_S):
                if state.stop.is_set() or state.signals.interrupt.is_set() or time.monotonic() > deadline:
                    return  # the run goes on: its watch names the failure or the stop
        state.log.event(f"{len(self.workers)} workers connected in {time.monotonic() - began:.2f} s")

    def describe(self, state: RunState) -> str:
        return f"{state.settings.workers} workers"

    def crash(self, state: RunState, names: list[str]) -> None:
        for worker in self.workers:
            if worker.name in names:
                worker.loop.crash()

    def allow(self, state: RunState, count: int) -> None:
        self.gate.allow(count)

    def busy(self, state: RunState) -> int:
        return self.gate.busy

    def wakeups(self, state: RunState) -> int | None:
        return self.wakeup.delivered if isinstance(self.wakeup, NotifyWakeup) else 0

    def stop(self, state: RunState) -> None:
        for worker in self.workers:
            worker.loop.interrupt()
        if self.wakeup is not None:
            self.wakeup.close()

    def close(self, state: RunState) -> None:
        pass
