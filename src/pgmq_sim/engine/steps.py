"""A sweep's step measured from readings at its edges: what it achieved, its verdict against the
SLO and the backlog, and the limit judged from its own figures (apart from the walk in
engine/sweeping, which only decides what the next step is)."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

from pgmq_sim.engine.state import RunState
from pgmq_sim.model.facts import ServerCounters
from pgmq_sim.model.kinds import WakeupMode
from pgmq_sim.model.skew import hottest_share
from pgmq_sim.model.sweep import StepResult, slope_per_s
from pgmq_sim.result.costs import CpuReading, ServerCost, per_message
from pgmq_sim.result.enqueues import EnqueueTally
from pgmq_sim.result.histogram import LatencyHistogram
from pgmq_sim.result.run import ordering_bound
from pgmq_sim.result.stats import WorkerCounters
from pgmq_sim.result.waits import WaitProfile
from pgmq_sim.settings import Settings
from pgmq_sim.verdicts.figures import Figures, server_cpu
from pgmq_sim.verdicts.knee import UNFINISHED_SHARE, judge_step
from pgmq_sim.verdicts.limits import Limit, judge


@dataclass
class Edge:
    """Readings at a step's edge."""

    at: float
    produced: int
    finished: int
    empty_claims: int
    histograms: tuple[LatencyHistogram, LatencyHistogram, LatencyHistogram]
    server: ServerCounters | None
    server_cpu: float | None
    client: CpuReading
    elsewhere_cpu_s: float  # worker processes' CPU so far, as they last reported it
    busy_s: float  # the workers' claim, work and completion so far
    work_s: float
    waits: WaitProfile
    enqueues: EnqueueTally

    @classmethod
    def read(cls, state: RunState, server: bool = True) -> Edge:
        """`server`: with the server's counters, a query (a window's edge goes without: the watch
        never waits on the server)."""
        totals = WorkerCounters.total(state.stats)
        histograms = tuple(
            LatencyHistogram.merged(h) for h in zip(*(s.histograms() for s in state.stats), strict=True)
        )
        return cls(
            state.clock(),
            state.produced.committed,
            totals.finished,
            totals.empty_claims,
            histograms,  # type: ignore[arg-type]
            state.meters.counters() if server else None,
            state.meters.server_cpu(),
            CpuReading.now(),
            sum(p.cpu_s for p in state.process_cpu),
            totals.busy_s,
            totals.work_s,
            state.waits.profile(),
            state.enqueues.copy(),
        )


@dataclass(frozen=True)
class StepSetting:
    """What one step ran: its place, its rate or worker count, and what it was judged against."""

    index: int
    kind: str  # "rate" or "workers"
    value: float
    purpose: str
    fixed_rate: float | None  # a workers sweep's -rate; None: the queue was topped up
    slo_p99_ms: float | None
    slo_enqueue_p99_ms: float | None = None

    @property
    def paced(self) -> float | None:
        return self.value if self.kind == "rate" else self.fixed_rate


def allowance(state: RunState, arrivals: int, offered_per_s: float) -> float:
    """What a step that kept up may leave unfinished at its end: a share of its arrivals, a message
    in flight per worker, and, polling, what arrives while idle workers sleep."""
    settings = state.settings
    polling = settings.poll_interval if settings.wakeup == WakeupMode.POLL else 0.0
    return UNFINISHED_SHARE * arrivals + settings.workers + offered_per_s * polling


def measure_step(
    state: RunState,
    step: StepSetting,
    start: Edge,
    end: Edge,
    last: Edge,
    pass_ms: Callable[[float | None], float | None],
) -> StepResult:
    """`end` closes the step's window; `last` closes its settle (the drain after it). `pass_ms`: the
    p99 a step must keep to pass, given its own (a rate search's bound moves with the unloaded p99)."""
    seconds = max(1e-9, end.at - start.at)
    claim, complete, e2e = (
        b.minus(a).percentiles_ms() for a, b in zip(start.histograms, last.histograms, strict=True)
    )
    finished = last.finished - start.finished
    backlog_end = max(0, end.produced - end.finished)
    # the edges' exact backlogs and the whole seconds between them
    backlog_points = [(start.at, float(max(0, start.produced - start.finished)))]
    backlog_points += [
        (s.second + 1.0, float(s.backlog))
        for s in state.timeline.samples(end.at)
        if start.at < s.second + 1 < end.at
    ]
    backlog_points.append((end.at, float(backlog_end)))
    paced = step.paced
    offered = paced if paced is not None else (end.produced - start.produced) / seconds
    slope = slope_per_s(backlog_points)
    # a topped-up queue always has a backlog: only the SLO judges its steps
    backlog_start = max(0, start.produced - start.finished)
    arrivals = end.produced - start.produced
    enqueue = end.enqueues.minus(start.enqueues).latency  # the step's own: settling sends none
    enqueue_ms = enqueue.percentiles_ms() if enqueue.count else None
    verdict, reasons = judge_step(
        paced or 0.0,
        e2e["p99"],
        backlog_end,
        slope,
        step.slo_p99_ms,
        grown=backlog_end - backlog_start,
        allowance=allowance(state, arrivals, paced or 0.0),
        achieved_per_s=(end.finished - start.finished) / seconds if paced else None,
        pass_ms=pass_ms(e2e["p99"]),
        enqueue_p99_ms=enqueue_ms["p99"] if enqueue_ms else None,
        slo_enqueue_p99_ms=step.slo_enqueue_p99_ms,
    )
    cost = (
        ServerCost.between(start.server, last.server, finished, None)
        if start.server is not None and last.server is not None
        else None
    )
    server_cpu_s = (
        last.server_cpu - start.server_cpu
        if start.server_cpu is not None and last.server_cpu is not None
        else None
    )
    # this process, and the worker processes elsewhere (their reports lag by at most 0.2 s)
    client_cpu_s = last.client.cpu_s - start.client.cpu_s + last.elsewhere_cpu_s - start.elsewhere_cpu_s
    faults = tuple(f"{f.at_s:.1f} s {f.kind}" for f in state.faults if start.at <= f.at_s < last.at)
    limit = judge(
        step_figures(state, step, start, end, verdict == "pass", claim["p50"], complete["p50"], cost)
    )
    return StepResult(
        index=step.index,
        setting=step.value,
        started_s=start.at,
        seconds=seconds,
        offered_per_s=offered,
        achieved_per_s=(end.finished - start.finished) / seconds,
        e2e_ms=e2e,
        claim_ms=claim,
        complete_ms=complete,
        backlog_end=backlog_end,
        backlog_slope_per_s=slope,
        settle_s=max(0.0, last.at - end.at),
        backlog_left=max(0, last.produced - last.finished),
        empty_claims=last.empty_claims - start.empty_claims,
        dead_tuples=state.timeline.last_dead_tuples(),
        wal_bytes_per_msg=cost.wal_bytes_per_msg if cost else None,
        server_cpu_us_per_msg=per_message(server_cpu_s, finished, 1e6),
        client_cpu_us_per_msg=per_message(client_cpu_s, finished, 1e6),
        verdict=verdict,
        reasons=reasons,
        faults=faults,
        purpose=step.purpose,
        limit=limit.resource,
        limit_evidence=limit.evidence,
        wait_profile=limit.wait_profile,
        enqueue_ms=enqueue_ms,
    )


def step_figures(
    state: RunState,
    step: StepSetting,
    start: Edge,
    end: Edge,
    kept_up: bool,
    claim_ms: float | None,
    complete_ms: float | None,
    cost: ServerCost | None,
    due: float | None = None,
) -> Figures:
    """The step's figures for the limit's judge, from its edges; the lock census's holders, those
    seen between them. `due`: the messages the producer owed in it (else its rate's for its time)."""
    settings = state.settings
    seconds = max(1e-9, end.at - start.at)
    holders = tuple(h for h in state.locks.census().holders if h.first_s <= end.at and h.last_s >= start.at)
    workers = int(step.value) if step.kind == "workers" else settings.workers
    finished = end.finished - start.finished
    busy_s, work_s = end.busy_s - start.busy_s, end.work_s - start.work_s
    work_ms = work_s / finished * 1000 if finished else 0.0
    bound = None
    if state.design.ordered and work_ms > 0:
        groups = min(
            len(settings.queue_types) * settings.orders,
            1 / hottest_share(settings.key_skew, settings.orders, settings.types),
        )
        bound = ordering_bound(groups, work_ms + (claim_ms or 0.0) + (complete_ms or 0.0))
    cpu_s = (
        end.server_cpu - start.server_cpu
        if end.server_cpu is not None and start.server_cpu is not None
        else None
    )
    cpu_share, cores = server_cpu(cpu_s, seconds)
    arrived = end.produced - start.produced
    paced = step.paced
    owed = (due if due is not None else paced * seconds) if paced else None
    return Figures(
        workers=workers,
        achieved_per_s=finished / seconds,
        offered_per_s=paced,
        arrived_share=min(1.0, arrived / owed) if owed else None,
        kept_up=kept_up,
        busy=min(1.0, busy_s / (workers * seconds)),
        service_ms=busy_s / finished * 1000 if finished else None,
        ordering_bound_per_s=bound,
        groups=len(settings.queue_types) * settings.orders,
        waits=end.waits.minus(start.waits),
        pooled=state.preflight is not None and state.preflight.path.pooled,
        claim_ms=claim_ms,
        complete_ms=complete_ms,
        work_ms=work_ms,
        server_cpu_share=cpu_share,
        server_cores=cores,
        client_core_share=(end.client.cpu_s - start.client.cpu_s) / seconds,
        blocks_per_msg=cost.blocks_per_msg if cost else None,
        strategy=state.design.label,
        claim_skips_locked=state.design.skips_locked,
        notifies=settings.wakeup == WakeupMode.NOTIFY,
        holders=holders,
    )


def offered_between(settings: Settings, start_s: float, end_s: float) -> float:
    """The rate the run's schedule offered from start_s to end_s, per second of its offering (up
    to the run's end)."""
    until = end_s if settings.duration is None else max(start_s, min(end_s, settings.duration))
    return due_between(settings, start_s, end_s) / max(1e-9, until - start_s)


def due_between(settings: Settings, start_s: float, end_s: float, grace_s: float = 0.0) -> float:
    """The messages that fell due from start_s to end_s, none past the run's end; with `grace_s`,
    those that fell due that much earlier (a message written within it is on time)."""
    schedule, duration = settings.rate_schedule, settings.duration

    def due(at: float) -> float:
        offered_until = at if duration is None else min(at, duration)
        return schedule.due(max(0.0, offered_until - grace_s))

    return due(end_s) - due(start_s)


def limit_between(
    state: RunState,
    start: Edge,
    end: Edge,
    offered_per_s: float | None,
    purpose: str,
    due: float | None = None,
) -> Limit:
    """The limit of a stretch of the run (a phase, a window) from its edges: judged as a step at the
    rate offered in it, or at the run's workers where the queue was not paced; `due`, step_figures'."""
    claim, complete = (
        b.minus(a).percentiles_ms()["p50"]
        for a, b in zip(start.histograms[:2], end.histograms[:2], strict=True)
    )
    arrivals = end.produced - start.produced
    backlog_start = max(0, start.produced - start.finished)
    backlog_end = max(0, end.produced - end.finished)
    kept_up = backlog_end - backlog_start <= allowance(state, arrivals, offered_per_s or 0.0)
    cost = (
        ServerCost.between(start.server, end.server, end.finished - start.finished, None)
        if start.server is not None and end.server is not None
        else None
    )
    setting = (
        StepSetting(0, "rate", offered_per_s, purpose, None, None)
        if offered_per_s is not None
        else StepSetting(0, "workers", state.settings.workers, purpose, None, None)
    )
    return judge(step_figures(state, setting, start, end, kept_up, claim, complete, cost, due))
