"""What a run's result is: a typed, frozen model with its JSON form. Renderers show it."""

from __future__ import annotations

import functools
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

from pgmq_sim.model.census import ServerCensus
from pgmq_sim.model.events import Fault, PoolerView, SnapshotHold
from pgmq_sim.model.facts import TableHealth
from pgmq_sim.model.keys import KeyDistribution
from pgmq_sim.model.kinds import Outcome
from pgmq_sim.model.reasons import ReasonCount, RunEnding
from pgmq_sim.model.sweep import SweepResult
from pgmq_sim.model.timeouts import ServerTimeouts
from pgmq_sim.result.account import LatencyAccount
from pgmq_sim.result.audit import AuditVerdict, LiveAuditRecord
from pgmq_sim.result.claims import ClaimAccount
from pgmq_sim.result.costs import BystanderResult, ClientCost, ServerCost
from pgmq_sim.result.enqueues import EnqueueAccount
from pgmq_sim.result.histogram import LatencyHistogram
from pgmq_sim.result.holders import LockCensus
from pgmq_sim.result.phased import PhaseResult
from pgmq_sim.result.serverpath import RunPath
from pgmq_sim.result.stats import WorkerCounters, WorkerStats
from pgmq_sim.result.timeline import SecondSample
from pgmq_sim.result.waits import WaitProfile, WaitSlices
from pgmq_sim.result.window_limits import LimitStretch
from pgmq_sim.settings import Settings


@dataclass(frozen=True)
class WorkerResult:
    name: str
    queue_type: str
    processed: int
    empty_claims: int
    busy_share: float
    connections_lost: int = 0
    reconnects: int = 0
    runner: str = "local"  # the process or host that ran it
    fallback_finds: int = 0  # -wakeup notify: its claims at the type's fallback that found messages

    def as_json(self) -> dict[str, Any]:
        return dict(self.__dict__)


@dataclass(frozen=True)
class RetryFigures:
    """Leases and retries: what failed, what was recovered, and how long heads blocked groups."""

    failed_attempts: int
    dead_lettered: int
    recovered: int
    lost_ownership: int
    crashes: int
    blocked_groups: tuple[tuple[str, int, int, float], ...]  # (type, order_id, failures, blocked s)

    @property
    def blocked_s_total(self) -> float:
        return sum(g[3] for g in self.blocked_groups)

    def as_json(self) -> dict[str, Any]:
        return {
            "failed_attempts": self.failed_attempts,
            "dead_lettered": self.dead_lettered,
            "recovered": self.recovered,
            "lost_ownership": self.lost_ownership,
            "crashes": self.crashes,
            "blocked_s_total": round(self.blocked_s_total, 3),
            "blocked_s_max": round(max((g[3] for g in self.blocked_groups), default=0.0), 3),
            "blocked_groups": [
                {"queue_type": t, "order_id": o, "failures": n, "blocked_s": round(b, 3)}
                for t, o, n, b in self.blocked_groups
            ],
        }


@dataclass(frozen=True)
class ProducerFigures:
    """The producer against its rate: the messages due, those written on time (by the end of the
    second after the one they fell due in), those written by the run's end, and the seconds in which
    messages were due and none was written."""

    offered: int
    on_time: int
    written: int
    stalled_s: int

    @classmethod
    def of(cls, samples: Sequence[SecondSample]) -> ProducerFigures | None:
        """From the timeline's seconds (the producer writes in the order messages fall due); None
        where nothing was offered (a prefilled queue)."""
        offered = [s.offered or 0 for s in samples]
        if not any(offered):
            return None
        due, written, cumulative = 0, 0, []
        for s, o in zip(samples, offered, strict=True):
            due, written = due + o, written + s.arrived
            cumulative.append((due, written))
        on_time = 0
        for i, (due_by, _) in enumerate(cumulative):
            due_before = cumulative[i - 1][0] if i else 0
            written_by_next = cumulative[min(i + 1, len(cumulative) - 1)][1]
            on_time += max(0, min(due_by, written_by_next) - due_before)
        stalled = sum(1 for s, o in zip(samples, offered, strict=True) if o > 0 and s.arrived == 0)
        return cls(due, on_time, written, stalled)

    @property
    def on_time_share(self) -> float:
        return self.on_time / self.offered if self.offered else 1.0

    def as_json(self) -> dict[str, Any]:
        return dict(self.__dict__) | {"on_time_share": round(self.on_time_share, 4)}


@dataclass(frozen=True)
class RunResult:
    settings: Settings
    server: str
    strategy: str
    ordered: bool
    files: dict[str, dict[str, str]]
    target: int | None  # None: bounded by time alone
    produced: int
    processed: int
    elapsed_s: float
    outcome: Outcome
    per_type: dict[str, int]
    e2e_ms: dict[str, float | None]
    claim_ms: dict[str, float | None]
    complete_ms: dict[str, float | None]
    empty_claims: int
    workers: tuple[WorkerResult, ...]
    work_mean_ms: float
    timeline: tuple[SecondSample, ...]
    health: TableHealth | None
    audit: AuditVerdict | None
    stall_causes: tuple[str, ...] = ()
    error: str | None = None
    faults: tuple[Fault, ...] = ()
    notes: tuple[str, ...] = field(default=())
    retries: RetryFigures | None = None
    snapshot: SnapshotHold | None = None
    server_cost: ServerCost | None = None
    client: ClientCost = field(default_factory=ClientCost)
    path: RunPath | None = None
    keys: KeyDistribution | None = None
    sweep: SweepResult | None = None
    bystander: BystanderResult | None = None
    worker_backends_max: int | None = None  # server connections serving the workers at once (sampled)
    pooler: PoolerView | None = None  # the pooler's side, read from its console (-pooler-admin)
    waits: WaitProfile | None = None  # the run's backends sampled from pg_stat_activity
    claim_total_s: float = 0.0  # the workers' claim round trips, summed
    complete_total_s: float = 0.0  # and their completions'
    spare_connections: int | None = None  # connections the server and role allowed beyond the run's
    pool_server_room: int | None = None  # pooled: the slots left the pooler, its own included
    queue: dict[str, Any] | None = None  # the queue design: its name, origin, folder, options, tables
    e2e_by_priority: dict[int, dict[str, float]] | None = None  # -priority: each level's percentiles
    claim_skips_locked: bool = False  # the claim passes over locked rows (SKIP LOCKED, a try-lock)
    server_reasons: tuple[ReasonCount, ...] = ()  # why the server ended statements and sessions, by cause
    timeouts: ServerTimeouts | None = None  # the server's timeouts for the run's role, read before it
    census: ServerCensus | None = None  # the settings that shape the queue, read before it
    latency: LatencyAccount | None = None  # where the cohorts' time went (from the journal)
    locks: LockCensus | None = None  # who held the locks a claim may skip or wait on (sampled)
    audit_skipped: str | None = None  # why the audit asked for did not run (the error it got)
    claims: ClaimAccount | None = None  # what the claims did and why they were made (the cost account)
    phases: tuple[PhaseResult, ...] = ()  # a run in phases: each measured apart
    ended_by: RunEnding | None = None  # the server's error that ended a run that died
    enqueue: EnqueueAccount | None = None  # the enqueues made while the workers ran, timed and split
    wait_slices: WaitSlices | None = None  # the wait samples by stretch of the run (an episode's own)
    live_audit: LiveAuditRecord | None = None  # the windows judged while the run went
    limit_by_window: tuple[LimitStretch, ...] = ()  # each window's limit, as the run went, in stretches

    @classmethod
    def from_stats(
        cls,
        *,
        settings: Settings,
        elapsed_s: float,
        stats: Sequence[WorkerStats],
        runners: Sequence[str] | None = None,
        **measured: Any,
    ) -> RunResult:
        """The result from the workers' own counters and histograms, merged; `measured` holds the
        fields measured elsewhere (the server, the audit, the timeline, ...), by their names."""
        totals = WorkerCounters.total(stats)
        processed = totals.processed
        runners = runners or ["local"] * len(stats)
        claim = LatencyHistogram.merged(s.claim for s in stats)
        complete = LatencyHistogram.merged(s.complete for s in stats)
        for name in _SEQUENCES:
            if name in measured:
                measured[name] = tuple(measured[name])
        if measured.get("client") is None:
            measured["client"] = ClientCost()
        return cls(
            settings=settings,
            target=settings.fill_db,
            processed=processed,
            elapsed_s=elapsed_s,
            per_type={t: sum(s.processed for s in stats if s.queue_type == t) for t in settings.queue_types},
            e2e_ms=LatencyHistogram.merged(s.e2e for s in stats).percentiles_ms(),
            claim_ms=claim.percentiles_ms(),
            complete_ms=complete.percentiles_ms(),
            empty_claims=totals.empty_claims,
            workers=tuple(
                WorkerResult(
                    s.name,
                    s.queue_type,
                    s.processed,
                    s.empty_claims,
                    round(min(1.0, s.busy_s / elapsed_s), 4) if elapsed_s else 0.0,
                    s.connections_lost,
                    s.reconnects,
                    runner,
                    s.fallback_finds,
                )
                for s, runner in zip(stats, runners, strict=True)
            ),
            work_mean_ms=(totals.work_s / processed * 1000) if processed else settings.work.mean_ms,
            claim_total_s=claim.cumulative_ms(())[1] / 1000,
            complete_total_s=complete.cumulative_ms(())[1] / 1000,
            **measured,
        )

    @property
    def throughput_per_s(self) -> float:
        return self.processed / self.elapsed_s if self.elapsed_s > 0 else 0.0

    @property
    def groups(self) -> int:
        return sum(self.groups_per_type.values())

    @functools.cached_property
    def producer(self) -> ProducerFigures | None:
        """The producer's shortfall against the offered rate (paced runs)."""
        return ProducerFigures.of(self.timeline)

    @property
    def connections_lost(self) -> int:
        return sum(w.connections_lost for w in self.workers)

    @property
    def reconnects(self) -> int:
        return sum(w.reconnects for w in self.workers)

    @property
    def bound_groups(self) -> float:
        """How many groups' worth advance side by side: G, or 1/f when the hottest group has a
        share f of the messages that leaves fewer (a skew)."""
        cap = float(self.groups)
        if self.keys is not None and self.keys.expected_hot_share > 0:
            hot_cap = 1 / self.keys.expected_hot_share
            cap = hot_cap if self.keys.groups is None else min(cap, hot_cap)
        return cap

    @property
    def groups_per_type(self) -> dict[str, int]:
        return dict(self.keys.groups_per_type) if self.keys else {}

    @property
    def cycle_ms(self) -> float | None:
        """A group's cycle: its message's work, claim and completion (p50), since the group's next
        message is claimed only after this one committed; None without work (no bound to speak of)."""
        if not self.ordered or self.settings.work.mean_ms <= 0 or self.work_mean_ms <= 0:
            return None
        return self.work_mean_ms + (self.claim_ms["p50"] or 0.0) + (self.complete_ms["p50"] or 0.0)

    @property
    def ordering_bound_per_s(self) -> float | None:
        """The ordering bound: each group advances one message per cycle, so G groups allow G per
        cycle, and a group with share f of the messages caps the run at 1/(f cycle) (a skew)."""
        cycle = self.cycle_ms
        return None if cycle is None else ordering_bound(self.bound_groups, cycle)

    @property
    def work_bound_per_s(self) -> float | None:
        """The work-only bound, G/W: as if claims and completions took no time (the ordering bound's
        ceiling, which the port's throughput target is measured against)."""
        if self.cycle_ms is None:
            return None
        return ordering_bound(self.bound_groups, self.work_mean_ms)

    @property
    def worker_bound_per_s(self) -> float | None:
        """The ordering bound with these workers: a type's groups advance at most as many at a
        time as the type has workers."""
        bound, cycle = self.ordering_bound_per_s, self.cycle_ms
        if bound is None or cycle is None:
            return None
        busy = sum(
            min(groups, sum(1 for w in self.workers if w.queue_type == queue_type))
            for queue_type, groups in self.groups_per_type.items()
        )
        return min(ordering_bound(busy, cycle), bound)

    @property
    def bound_share(self) -> float | None:
        bound = self.ordering_bound_per_s
        return self.throughput_per_s / bound if bound else None

    @property
    def work_bound_share(self) -> float | None:
        bound = self.work_bound_per_s
        return self.throughput_per_s / bound if bound else None


_SEQUENCES = ("timeline", "stall_causes", "faults", "notes", "server_reasons")  # kept as tuples


def ordering_bound(groups: float, cycle_ms: float) -> float:
    """Messages per second that groups advancing one message per cycle allow."""
    return groups * 1000 / cycle_ms


def _round(value: float | None, digits: int = 2) -> float | None:
    return None if value is None else round(value, digits)
