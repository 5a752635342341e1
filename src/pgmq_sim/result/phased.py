"""A run's phases as measured: each phase's figures from its own edges and seconds, the recovery
after a pressure (as verdicts/pressure judged it), and -suite pressure's scorecard rows read from
the cells' runs."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from pgmq_sim.result.account import LatencyAccount


@dataclass(frozen=True)
class PhaseResult:
    name: str
    pressure: str | None
    started_s: float
    seconds: float
    offered_per_s: float
    throughput_per_s: float
    e2e_ms: dict[str, float | None]  # p50, p99 of the messages completed in the phase
    backlog_end: int
    backlog_max: int
    dead_tuples_end: int | None
    dead_tuples_peak: int | None
    table_mb_end: float | None
    waits: str  # the server's waits in the phase, in words
    wait_profile: dict[str, float] | None
    limit: str | None
    limit_evidence: str | None
    faults: tuple[str, ...] = ()  # the fault rows that began in the phase
    recovery_s: float | None = None  # after a pressure phase: until back to the baseline's
    recovered: bool | None = None  # None: not measured (no pressure before it, or no baseline)
    account: LatencyAccount | None = field(default=None, compare=False)  # of the messages enqueued in it
    enqueued_per_s: float | None = None  # enqueues committed in the phase, per second
    enqueue_ms: dict[str, float | None] | None = None  # their p50, p99: due time to commit

    @property
    def p99_ms(self) -> float | None:
        return self.e2e_ms.get("p99")

    def as_json(self) -> dict[str, Any]:
        data = {k: v for k, v in self.__dict__.items() if k != "account"}
        return data | {"latency_account": self.account.as_json() if self.account is not None else None}


@dataclass(frozen=True)
class SuiteCell:
    """One -suite pressure cell: a design under one pressure, its baseline, the pressure and the
    recovery; or why it was skipped, or why its pressure was not injected (its audit kept, nothing
    scored under a pressure)."""

    design: str
    pressure: str
    audit: str | None = None  # passed, failed; None: not run
    lost: int | None = None
    duplicated: int | None = None
    out_of_order: int | None = None
    throughput_per_s: float | None = None  # during the pressure
    p99_ms: float | None = None
    recovery_s: float | None = None
    recovered: bool | None = None
    dead_tuples_peak: int | None = None
    limit: str | None = None
    limit_evidence: str | None = None  # what named it (a lock's: the lock and its holder)
    skipped: str | None = None  # the reason the server, the role or the path could not take it
    not_injected: str | None = None  # the run went, its pressure was never applied: why

    def as_json(self) -> dict[str, Any]:
        return dict(self.__dict__)
