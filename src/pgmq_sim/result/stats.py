"""What each worker measured: its counters and its latency histograms.

Each worker owns its WorkerStats and is its only writer; the progress display only reads integers
from it, so no lock is needed. Memory does not grow with messages: histograms are fixed-size.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass, field, fields

from pgmq_sim.result.histogram import LatencyHistogram


@dataclass
class WorkerCounters:
    """A worker's counters; every field is a count or a sum, so totals add field by field."""

    processed: int = 0
    empty_claims: int = 0
    busy_s: float = 0.0
    work_s: float = 0.0
    connections_lost: int = 0
    reconnects: int = 0
    failed_attempts: int = 0
    dead_lettered: int = 0
    lost_ownership: int = 0
    crashes: int = 0
    claim_commits: int = 0  # split mode: a claim that found a message commits on its own
    clock_reads: int = 0  # a completion's clocks read after its commit, in a transaction of their own
    fallback_finds: int = 0  # -wakeup notify: claims at the type's fallback that found messages
    free_at_end: int = 0  # workers free when the run stopped (1 for one worker): the account's last episode

    @classmethod
    def names(cls) -> tuple[str, ...]:
        return COUNTER_NAMES

    def counters(self) -> dict[str, int | float]:
        return {name: getattr(self, name) for name in self.names()}

    def set_counters(self, values: dict[str, int | float]) -> None:
        for name in self.names():
            setattr(self, name, values[name])

    @classmethod
    def total(cls, parts: Iterable[WorkerCounters]) -> WorkerCounters:
        total = cls()
        for part in parts:
            for name in cls.names():
                setattr(total, name, getattr(total, name) + getattr(part, name))
        return total

    @property
    def finished(self) -> int:
        """Messages this worker is done with: processed, or given up on as dead letters."""
        return self.processed + self.dead_lettered


COUNTER_NAMES = tuple(f.name for f in fields(WorkerCounters))  # read per tick: computed once


@dataclass(kw_only=True)
class WorkerStats(WorkerCounters):
    """One worker's counters and latencies; written only by that worker's thread."""

    name: str
    queue_type: str
    claim: LatencyHistogram = field(default_factory=LatencyHistogram)
    complete: LatencyHistogram = field(default_factory=LatencyHistogram)
    e2e: LatencyHistogram = field(default_factory=LatencyHistogram)

    def record_processed(self, e2e_ms: float | None, busy_s: float, work_s: float) -> None:
        """e2e_ms is None when the completion found no row (a message processed twice)."""
        if e2e_ms is not None:
            self.e2e.record_ms(e2e_ms)
        self.busy_s += busy_s
        self.work_s += work_s
        self.processed += 1

    def histograms(self) -> tuple[LatencyHistogram, LatencyHistogram, LatencyHistogram]:
        return self.claim, self.complete, self.e2e
