"""The parts a kind of run is composed of: who carries the workers (tasks on this process's loop,
Locust's processes and hosts), how messages arrive (a prefill, a paced producer), and when the run
has reached its end. A new kind of run picks other parts; the phases stay the same."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Protocol

from pgmq_sim.actors.threads import RunThread
from pgmq_sim.engine.state import RunState
from pgmq_sim.model.sweep import SweepResult
from pgmq_sim.result.claims import ClaimBook
from pgmq_sim.result.phased import PhaseResult
from pgmq_sim.result.timeline import SecondSample


class WorkerCarrier(Protocol):
    # a lost worker process's completions are counted from the journal: it is kept whole
    counts_from_journal: bool

    def connections(self, state: RunState) -> int:
        """Connections its workers and their helpers will open (the check counts them)."""

    def open(self, state: RunState) -> None:
        """After the checks, before the database is changed (a master starts listening)."""

    def ready(self, state: RunState) -> None:
        """Everything the workers need before they start (a listener, the worker processes' plans)."""

    def go(self, state: RunState) -> list[RunThread]:
        """Start the workers (tasks on the run's loop); threads of the carrier's own, for the run to
        join (a Locust master's monitor)."""

    def connected(self, state: RunState) -> None:
        """After the workers started, before the producer starts: until they have their sessions
        (bounded), so that a paced run's first second is not the workers' connecting."""

    def describe(self, state: RunState) -> str:
        """The workers, for the log: "12 workers", "12 workers in 2 processes"."""

    def crash(self, state: RunState, names: list[str]) -> None:
        """Make these workers die mid-work (a fault)."""

    def allow(self, state: RunState, count: int) -> None:
        """Let only the first `count` workers claim (0: finish what is in flight, claim nothing)."""

    def busy(self, state: RunState) -> int:
        """Workers holding a message now."""

    def wakeups(self, state: RunState) -> int | None:
        """Notifications its listeners read (each a transaction on the server); None: not known."""

    def claim_books(self, state: RunState) -> list[ClaimBook] | None:
        """Its workers' claims by reason and outcome; None: not reported (worker processes')."""

    def stop(self, state: RunState) -> None:
        """The run is stopping (its stop event is set): end the workers' waits."""

    def close(self, state: RunState) -> None:
        """Everything joined: release what open() took."""


class Feed(Protocol):
    @property
    def paced(self) -> bool:
        """Messages arrive while the workers run: the run's clock waits for their sessions."""

    def connections(self, state: RunState) -> int: ...

    def produce(self, state: RunState) -> None:
        """Before the workers start (a prefill)."""

    def start(self, state: RunState) -> None:
        """Once the workers have their sessions: a paced producer, on the run's loop."""

    def behind(self, state: RunState) -> int:
        """Messages due by now that are not written yet (a prefill has none once it is done)."""

    def describe(self) -> str:
        """What the log says of it beside the workers ("" or " and a producer at 100/s")."""


class Goal(Protocol):
    def reached(self, state: RunState, parts: RunParts) -> bool:
        """Called every tick: has the run reached its end?"""

    def describe(self) -> str:
        """What the run is doing now, for the live display ("" when there is nothing to add)."""

    def report(self) -> SweepResult | None:
        """What the goal found beyond the run's own figures (a sweep's steps)."""

    def phases(self, state: RunState, samples: list[SecondSample]) -> tuple[PhaseResult, ...]:
        """The run's phases, each measured (none but a run in phases has them)."""

    @property
    def drains(self) -> bool:
        """Whether a run that reached its goal has processed everything produced (the audit then
        fails what is left behind)."""


@dataclass(frozen=True)
class RunParts:
    carrier: WorkerCarrier
    feed: Feed
    goal: Goal
