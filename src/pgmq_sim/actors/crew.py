"""The queue workers of one process, as tasks on its event loop, with what they share: the wake-up
(one listening connection with -wakeup notify), the claim gate, split mode's owners and their
heartbeat, and a bound on how many log in at once. The engine's carrier runs one in the run's
process; a Locust worker process's child runs one for its share of the workers: the same code."""

from __future__ import annotations

import asyncio
import random
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

import psycopg

from pgmq_sim.actors.bells import Halt
from pgmq_sim.actors.books import ProcessedCounter
from pgmq_sim.actors.gate import ClaimGate
from pgmq_sim.actors.ownership import Heartbeat, Owners
from pgmq_sim.actors.tasks import Tasks
from pgmq_sim.actors.wakeup import NotifyWakeup, PollWakeup, wakeup_for
from pgmq_sim.actors.worker import WorkerLoop, WorkerPlan, worker_index
from pgmq_sim.db.claims import ClaimPort, claim_sessions
from pgmq_sim.db.connection import connect_async
from pgmq_sim.db.values import SessionPlan
from pgmq_sim.result.claims import ClaimBook
from pgmq_sim.result.stats import WorkerStats
from pgmq_sim.result.timeline import Timeline
from pgmq_sim.runlog import RunLog
from pgmq_sim.settings import MAX_WORKERS, WorkTime

# A SCRAM login costs the client about 2 ms of CPU, on the loop: thousands of workers log in a
# bounded number at a time, so those already working are not starved meanwhile.
LOGINS_AT_ONCE = 50


@dataclass(frozen=True)
class CrewPlan:
    """What one process's workers share, from the run's settings (sent to other processes as is)."""

    dsn: str
    session: SessionPlan
    work: WorkTime
    reconnect_timeout: float
    fail_rate: float
    notify: bool
    poll_interval: float
    types: tuple[str, ...]
    split: bool  # owners and a heartbeat
    listen_dsn: str | None = None  # -listen-dsn: LISTEN behind a transaction pooler


class Crew:
    """One process's workers on its loop."""

    def __init__(
        self,
        stats: Sequence[WorkerStats],
        seeds: Sequence[float],
        plan: CrewPlan,
        log: RunLog,
        counter: ProcessedCounter,
        timeline: Timeline,
        clock: Callable[[], float],
        halt: Halt,
        tasks: Tasks,
        on_connected: Callable[[], None] | None = None,
    ) -> None:
        self.stats = list(stats)
        self._seeds = list(seeds)
        self._plan = plan
        self._log = log
        self._counter = counter
        self._timeline = timeline
        self._clock = clock
        self._halt = halt
        self._tasks = tasks
        self._on_connected = on_connected
        self.gate = ClaimGate(MAX_WORKERS)
        self.owners = Owners()
        self.opened = 0  # workers whose first connect is over, done or not
        self.loops: list[WorkerLoop] = []
        self.wakeup: PollWakeup | NotifyWakeup | None = None
        self.heartbeat: Heartbeat | None = None
        self._logins: asyncio.Semaphore | None = None

    @property
    def all_opened(self) -> bool:
        return self.opened >= len(self.stats)

    @property
    def busy(self) -> int:
        """Workers holding a message now (read from any thread)."""
        return self.gate.busy

    @property
    def delivered(self) -> int:
        """Notifications the listener read (each a transaction on the server)."""
        return self.wakeup.delivered if isinstance(self.wakeup, NotifyWakeup) else 0

    @property
    def claim_book(self) -> ClaimBook | None:
        """This process's claims by reason and outcome (once the wake-up is made)."""
        return self.wakeup.book if self.wakeup is not None else None

    def active(self) -> int:
        """Workers the claim gate lets claim."""
        return sum(1 for s in self.stats if self.gate.allows(worker_index(s.name)))

    async def ready(self) -> None:
        """On the loop, before the workers start: the listener's first connection (a failure here
        is the run's: a bad -listen-dsn)."""
        plan = self._plan
        listen = plan.listen_dsn or plan.dsn
        self.wakeup = wakeup_for(
            plan.notify,
            lambda: connect_async(listen),
            plan.poll_interval,
            plan.reconnect_timeout,
            self._halt,
            plan.types,
            plan.session.channel,
        )
        if isinstance(self.wakeup, NotifyWakeup):
            await self.wakeup.start()

    def start(self, after_step: Callable[[WorkerStats], None] | None = None) -> None:
        """On the loop: the workers' tasks (each connects first), the listener's, the heartbeat's."""
        plan, wakeup = self._plan, self.wakeup
        assert wakeup is not None, "ready() first"
        self._logins = asyncio.Semaphore(LOGINS_AT_ONCE)
        opener = claim_sessions(plan.dsn, plan.session)
        logins = self._logins

        async def open_session(worker: str, queue_type: str, owner: str) -> ClaimPort:
            async with logins:
                return await opener(worker, queue_type, owner)

        shared = WorkerPlan(
            plan.dsn,
            plan.session,
            open_session,
            plan.work,
            plan.reconnect_timeout,
            self._clock,
            plan.fail_rate,
            self.gate,
            self.owners,
            self._opened,
        )
        self.loops = [
            WorkerLoop(
                s, shared, wakeup, self._log, self._counter, self._timeline, self._halt, random.Random(seed)
            )
            for s, seed in zip(self.stats, self._seeds, strict=True)
        ]
        for loop in self.loops:
            self._tasks.start(f"worker {loop.stats.name}", loop.run(after_step))
        if isinstance(wakeup, NotifyWakeup):
            self._tasks.start("notify listener", wakeup.run())
        if plan.split:
            self.heartbeat = Heartbeat(self._connect_heartbeat, self.owners, self._halt)
            self._tasks.start("heartbeat", self.heartbeat.run())
        if not self.loops and self._on_connected is not None:
            self._on_connected()

    async def _connect_heartbeat(self) -> psycopg.AsyncConnection[Any]:
        return await connect_async(self._plan.dsn, "heartbeat")

    def _opened(self) -> None:
        self.opened += 1
        if self.opened == len(self.stats) and self._on_connected is not None:
            self._on_connected()

    def crash(self, names: Sequence[str]) -> None:
        """On the loop: these workers die mid-work (a fault)."""
        for loop in self.loops:
            if loop.stats.name in names:
                loop.crash()

    def allow(self, count: int) -> None:
        """On the loop: only the first `count` workers of the run may claim."""
        self.gate.allow(count)
