"""Who watches a run: the engine tells an observer what a person would want to see, and never draws
or prints anything itself. The command line hands in a terminal observer; a library user may hand in
its own, or none."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Protocol

from pgmq_sim.model.sweep import StepResult
from pgmq_sim.result.audit import LiveAudit
from pgmq_sim.result.stats import WorkerStats
from pgmq_sim.result.window_limits import WindowLimit


@dataclass(frozen=True)
class LiveFigures:
    """What a live display may read while the run goes on (the workers' own counters)."""

    workers: Sequence[WorkerStats]
    target: int | None  # None: bounded by time alone
    produced: Callable[[], int]
    duration_s: float | None = None
    phase: Callable[[], str] = lambda: ""  # what the run is doing now, e.g. a sweep's step
    dead_tuples: Callable[[], int | None] = lambda: None  # the housekeeper's last sample
    sweep_steps: Callable[[], Sequence[StepResult]] = lambda: ()  # a sweep's finished steps
    audit: Callable[[], LiveAudit | None] = lambda: None  # the live audit's closed windows so far
    limit: Callable[[], WindowLimit | None] = lambda: None  # the last closed window's limit


class RunObserver(Protocol):
    def say(self, line: str) -> None:
        """A line for the person running the tool (a note, where the master listens)."""

    def watching(self, figures: LiveFigures) -> None:
        """The workers have started."""

    def tick(self) -> None:
        """A few times a second while the run goes on."""

    def stopped_watching(self) -> None:
        """The run has ended (whatever ended it)."""
