"""A sweep as a goal: it walks the steps, sets each step's rate (through the producer's profile) or
worker count (through the carrier's claim gate), pauses the producer while a step's backlog drains,
and measures every step from readings taken at its edges."""

from __future__ import annotations

import math
import threading
from collections.abc import Callable
from dataclasses import dataclass

from pgmq_sim.engine.parts import RunParts
from pgmq_sim.engine.state import RunState
from pgmq_sim.model.facts import ServerCounters
from pgmq_sim.model.kinds import WakeupMode
from pgmq_sim.model.profiles import IDLE_WAIT_S
from pgmq_sim.model.search import RateSearch, SearchOutcome, WorkersSearch, pass_bound
from pgmq_sim.model.skew import hottest_share
from pgmq_sim.model.sweep import (
    MAX_STEPS,
    UNFINISHED_SHARE,
    StepResult,
    SweepResult,
    SweepSpec,
    judge_step,
    slope_per_s,
)
from pgmq_sim.result.costs import CpuReading, ServerCost, per_message
from pgmq_sim.result.run import ordering_bound
from pgmq_sim.result.stats import LatencyHistogram, WorkerCounters
from pgmq_sim.result.waits import WaitProfile
from pgmq_sim.verdicts.limits import Figures, judge, server_cpu

TOP_UP_MIN = 500  # a workers sweep without -rate keeps at least this many messages waiting


class SteppedRate:
    """A rate profile whose rate the sweep sets; what is due stays the integral of the rates so far,
    so switching never makes messages due twice or skips any."""

    end_s = None

    def __init__(self, rate: float) -> None:
        self._lock = threading.Lock()
        self._since, self._base, self._rate = 0.0, 0.0, rate

    def set(self, at: float, rate: float) -> None:
        with self._lock:
            self._base = self._offered(at)
            self._since, self._rate = at, rate

    def _offered(self, t: float) -> float:
        return self._base + max(0.0, t - self._since) * self._rate

    def rate_at(self, t: float) -> float:
        return self._rate

    def due(self, t: float) -> int:
        with self._lock:
            return int(self._offered(t) + 1e-9)

    def next_due_in(self, t: float, count: int) -> float:
        with self._lock:
            if self._rate <= 0:
                return IDLE_WAIT_S
            return min(IDLE_WAIT_S, max(0.0, (count + 1 - self._offered(t)) / self._rate))

    def describe(self) -> str:
        return "the sweep's rates"


class TopUp:
    """Keeps the queue fed for a workers sweep without -rate: always `level` messages waiting."""

    end_s = None

    def __init__(self, finished: Callable[[], int], level: int) -> None:
        self._finished = finished
        self._level = level

    def rate_at(self, t: float) -> float:
        return math.inf

    def due(self, t: float) -> int:
        return self._finished() + self._level

    def next_due_in(self, t: float, count: int) -> float:
        return 0.02

    def describe(self) -> str:
        return f"a top-up keeping {self._level} messages waiting"


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


class SweepGoal:
    drains = False  # a failing last step may leave a backlog: that is its finding, not a loss

    def __init__(
        self,
        spec: SweepSpec,
        step_s: float,
        settle_s: float,
        slo_p99_ms: float | None,
        rate: SteppedRate | None,
        fixed_rate: float | None = None,
        search: RateSearch | WorkersSearch | None = None,
        budget_s: float | None = None,
    ) -> None:
        """`rate`: the producer's profile (rate sweeps, and workers sweeps at a fixed -rate, which is
        `fixed_rate`); None for a workers sweep that keeps the queue topped up. `search`: an adaptive
        sweep's plan, which picks each next rate from the verdicts so far, within `budget_s`."""
        self.spec = spec
        self.search = search
        self.budget_s = budget_s
        self.cut_by_budget = False
        self._value, self._purpose, self._length = 0.0, "step", 1.0
        self.fixed_rate = fixed_rate
        self.step_s = step_s
        self.settle_s = settle_s
        self.slo_p99_ms = slo_p99_ms
        self.rate = rate
        self.steps: list[StepResult] = []
        self._index = -1
        self._phase = "start"
        self._step_start: Edge | None = None
        self._step_end: Edge | None = None
        self._deadline = 0.0

    def _unloaded_ms(self, p99_now: float | None = None) -> float | None:
        """The lowest p99 of the steps so far (with this one's): the queue's latency unloaded."""
        seen = [p for s in self.steps if (p := s.e2e_ms["p99"]) is not None]
        return min([*seen, *([p99_now] if p99_now is not None else [])], default=None)

    def _pass_ms(self, unloaded_ms: float | None) -> float | None:
        """A rate search's steps pass keeping half the SLO's headroom (model/sweep.pass_bound)."""
        if not isinstance(self.search, RateSearch) or self.slo_p99_ms is None:
            return None
        return pass_bound(self.slo_p99_ms, unloaded_ms)

    def describe(self) -> str:
        if self._index < 0:
            return ""
        of = "" if self.search is not None else f"/{len(self.spec.values)}"
        purpose = f" ({self._purpose})" if self.search is not None else ""
        step = f"step {self._index + 1}{of}{purpose}: {self._setting_text()}"
        return step + (" (draining)" if self._phase == "settle" else "")

    def _setting_text(self) -> str:
        value = self._value
        return f"{value:g} msg/s" if self.spec.kind == "rate" else f"{value:g} workers"

    def report(self) -> SweepResult:
        search = None
        if isinstance(self.search, RateSearch):
            unloaded = self._unloaded_ms()
            search = SearchOutcome.of(
                self.search, self.budget_s, self.cut_by_budget, unloaded, self._pass_ms(unloaded)
            )
        return SweepResult(self.spec, self.step_s, self.settle_s, self.slo_p99_ms, tuple(self.steps), search)

    def reached(self, state: RunState, parts: RunParts) -> bool:
        now = state.clock()
        if self._phase == "start":
            return self._begin(state, parts, 0)
        if self._phase == "step" and now >= self._deadline:
            self._step_end = self._edge(state)
            if self.rate is None:  # a workers sweep keeps the queue fed: no settle
                return self._finish(state, parts, self._step_end)
            self.rate.set(now, 0.0)
            self._phase, self._deadline = "settle", now + self.settle_s
            return False
        if self._phase == "settle":
            backlog = state.writer.committed - WorkerCounters.total(state.stats).finished
            if backlog <= 0 or now >= self._deadline:
                return self._finish(state, parts, self._edge(state))
        return False

    def _begin(self, state: RunState, parts: RunParts, index: int) -> bool:
        self._index = index
        if self.search is not None:
            probe = self.search.next()
            assert probe is not None
            self._value, self._purpose, self._length = probe.rate, probe.purpose, probe.length
        else:
            self._value = self.spec.values[index]
        value = self._value
        now = state.clock()
        if self.spec.kind == "workers":
            parts.carrier.allow(state, int(value))
        if self.rate is not None:
            self.rate.set(now, value if self.spec.kind == "rate" else self.fixed_rate or 0.0)
        self._step_start = self._edge(state)
        self._phase, self._deadline = "step", now + self.step_s * self._length
        state.log.event(f"sweep {self.describe()}")
        return False

    def _finish(self, state: RunState, parts: RunParts, last: Edge) -> bool:
        start, end = self._step_start, self._step_end
        assert start is not None and end is not None
        self.steps.append(self._measure(state, start, end, last))
        step = self.steps[-1]
        state.log.event(
            f"sweep step {step.index + 1}: offered {step.offered_per_s:.0f}/s,"
            f" achieved {step.achieved_per_s:.0f}/s, e2e p99 {step.e2e_ms['p99']} ms,"
            f" backlog {step.backlog_end}: {step.verdict}"
            + (f" ({'; '.join(step.reasons)})" if step.reasons else "")
        )
        if self.search is not None:
            if isinstance(self.search, RateSearch):
                self.search.record(step.verdict == "pass")
            else:
                self.search.record(step.achieved_per_s)
            probe = self.search.next()
            if probe is None:
                return True
            if len(self.steps) >= MAX_STEPS:
                self.cut_by_budget = True
                state.log.event(f"sweep: {MAX_STEPS} steps without an answer; the search stops")
                return True
            if self.budget_s is not None:
                needs = self.step_s * probe.length + self.settle_s
                if state.clock() + needs > self.budget_s:
                    self.cut_by_budget = True
                    state.log.event(
                        f"sweep: the budget of {self.budget_s:g} s leaves no room for the next step"
                    )
                    return True
        elif self._index + 1 >= len(self.spec.values):
            return True
        return self._begin(state, parts, self._index + 1)

    def _edge(self, state: RunState) -> Edge:
        totals = WorkerCounters.total(state.stats)
        histograms = tuple(
            LatencyHistogram.merged(h) for h in zip(*(s.histograms() for s in state.stats), strict=True)
        )
        return Edge(
            state.clock(),
            state.writer.committed,
            totals.finished,
            totals.empty_claims,
            histograms,  # type: ignore[arg-type]
            state.meters.counters(),
            state.meters.server_cpu(),
            CpuReading.now(),
            sum(p.cpu_s for p in state.process_cpu),
            totals.busy_s,
            totals.work_s,
            state.waits.profile(),
        )

    @staticmethod
    def _allowance(state: RunState, arrivals: int, offered_per_s: float) -> float:
        """What a step that kept up may leave unfinished at its end: a share of its arrivals, a
        message in flight per worker, and, polling, what arrives while idle workers sleep."""
        settings = state.settings
        polling = settings.poll_interval if settings.wakeup == WakeupMode.POLL else 0.0
        return UNFINISHED_SHARE * arrivals + settings.workers + offered_per_s * polling

    def _measure(self, state: RunState, start: Edge, end: Edge, last: Edge) -> StepResult:
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
        setting = self._value
        paced = setting if self.spec.kind == "rate" else self.fixed_rate  # None: topped up
        offered = paced if paced is not None else (end.produced - start.produced) / seconds
        slope = slope_per_s(backlog_points)
        # a topped-up queue always has a backlog: only the SLO judges its steps
        backlog_start = max(0, start.produced - start.finished)
        arrivals = end.produced - start.produced
        verdict, reasons = judge_step(
            paced or 0.0,
            e2e["p99"],
            backlog_end,
            slope,
            self.slo_p99_ms,
            grown=backlog_end - backlog_start,
            allowance=self._allowance(state, arrivals, paced or 0.0),
            achieved_per_s=(end.finished - start.finished) / seconds if paced else None,
            pass_ms=self._pass_ms(self._unloaded_ms(e2e["p99"])),
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
            self._figures(state, start, end, paced, verdict == "pass", claim["p50"], complete["p50"], cost)
        )
        return StepResult(
            index=self._index,
            setting=setting,
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
            purpose=self._purpose,
            limit=limit.resource,
            limit_evidence=limit.evidence,
            wait_profile=limit.wait_profile,
        )

    def _figures(
        self,
        state: RunState,
        start: Edge,
        end: Edge,
        paced: float | None,
        kept_up: bool,
        claim_ms: float | None,
        complete_ms: float | None,
        cost: ServerCost | None,
    ) -> Figures:
        """The step's figures for the limit's judge, from its edges."""
        settings = state.settings
        seconds = max(1e-9, end.at - start.at)
        workers = int(self._value) if self.spec.kind == "workers" else settings.workers
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
        return Figures(
            workers=workers,
            achieved_per_s=finished / seconds,
            offered_per_s=paced,
            arrived_share=min(1.0, arrived / (paced * seconds)) if paced else None,
            kept_up=kept_up,
            busy=min(1.0, busy_s / (workers * seconds)),
            service_ms=busy_s / finished * 1000 if finished else None,
            ordering_bound_per_s=bound,
            groups=len(settings.queue_types) * settings.orders,
            waits=end.waits.minus(start.waits),
            pooled=state.path is not None and state.path.pooled,
            claim_ms=claim_ms,
            complete_ms=complete_ms,
            work_ms=work_ms,
            server_cpu_share=cpu_share,
            server_cores=cores,
            client_core_share=(end.client.cpu_s - start.client.cpu_s) / seconds,
            blocks_per_msg=cost.blocks_per_msg if cost else None,
            strategy=state.design.label,
            claim_skips_locked=state.design.skips_locked,
        )
