"""A sweep as a goal: it walks the steps, sets each step's rate (through the producer's profile) or
worker count (through the carrier's claim gate), pauses the producer while a step's backlog drains,
and measures every step (engine/steps) from readings taken at its edges."""

from __future__ import annotations

import math
import threading
from collections.abc import Callable

from pgmq_sim.engine.parts import RunParts
from pgmq_sim.engine.state import RunState
from pgmq_sim.engine.steps import Edge, StepSetting, measure_step
from pgmq_sim.model.profiles import IDLE_WAIT_S
from pgmq_sim.model.quantities import count_text
from pgmq_sim.model.search import RateSearch, SearchOutcome, WorkersSearch, pass_bound
from pgmq_sim.model.sweep import MAX_STEPS, StepResult, SweepResult, SweepSpec
from pgmq_sim.result.phased import PhaseResult
from pgmq_sim.result.stats import WorkerCounters
from pgmq_sim.result.timeline import SecondSample

TOP_UP_MIN = 500  # a workers sweep without -rate keeps at least this many messages waiting


class SteppedRate:
    """A rate profile whose rate the sweep sets; what is due stays the integral of the rates so far,
    so switching never makes messages due twice or skips any."""

    end_s = None
    fixed = False  # the sweep sets its steps' rates as it goes

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

    def due_time(self, count: int) -> float | None:
        return None  # not fixed

    def describe(self) -> str:
        return "the sweep's rates"


class TopUp:
    """Keeps the queue fed for a workers sweep without -rate: always `level` messages waiting."""

    end_s = None
    fixed = False  # due with the messages finished

    def __init__(self, finished: Callable[[], int], level: int) -> None:
        self._finished = finished
        self._level = level

    def rate_at(self, t: float) -> float:
        return math.inf

    def due(self, t: float) -> int:
        return self._finished() + self._level

    def next_due_in(self, t: float, count: int) -> float:
        return 0.02

    def due_time(self, count: int) -> float | None:
        return None  # not fixed

    def describe(self) -> str:
        return f"a top-up keeping {count_text(self._level)} messages waiting"


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
        slo_enqueue_p99_ms: float | None = None,
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
        self.slo_enqueue_p99_ms = slo_enqueue_p99_ms
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

    def phases(self, state: RunState, samples: list[SecondSample]) -> tuple[PhaseResult, ...]:
        return ()

    def report(self) -> SweepResult:
        search = None
        if isinstance(self.search, RateSearch):
            unloaded = self._unloaded_ms()
            search = SearchOutcome.of(
                self.search, self.budget_s, self.cut_by_budget, unloaded, self._pass_ms(unloaded)
            )
        return SweepResult(
            self.spec,
            self.step_s,
            self.settle_s,
            self.slo_p99_ms,
            tuple(self.steps),
            search,
            self.slo_enqueue_p99_ms,
        )

    def reached(self, state: RunState, parts: RunParts) -> bool:
        now = state.clock()
        if self._phase == "start":
            return self._begin(state, parts, 0)
        if self._phase == "step" and now >= self._deadline:
            self._step_end = Edge.read(state)
            if self.rate is None:  # a workers sweep keeps the queue fed: no settle
                return self._finish(state, parts, self._step_end)
            self.rate.set(now, 0.0)
            self._phase, self._deadline = "settle", now + self.settle_s
            return False
        if self._phase == "settle":
            backlog = state.produced.committed - WorkerCounters.total(state.stats).finished
            if backlog <= 0 or now >= self._deadline:
                return self._finish(state, parts, Edge.read(state))
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
        self._step_start = Edge.read(state)
        self._phase, self._deadline = "step", now + self.step_s * self._length
        state.log.event(f"sweep {self.describe()}")
        return False

    def _finish(self, state: RunState, parts: RunParts, last: Edge) -> bool:
        start, end = self._step_start, self._step_end
        assert start is not None and end is not None
        setting = StepSetting(
            self._index,
            self.spec.kind,
            self._value,
            self._purpose,
            self.fixed_rate,
            self.slo_p99_ms,
            self.slo_enqueue_p99_ms,
        )
        self.steps.append(
            measure_step(state, setting, start, end, last, lambda p99: self._pass_ms(self._unloaded_ms(p99)))
        )
        step = self.steps[-1]
        state.log.event(
            f"sweep step {step.index + 1}: offered {step.offered_per_s:.0f}/s,"
            f" achieved {step.achieved_per_s:.0f}/s, e2e p99 {step.e2e_ms['p99']} ms,"
            f" backlog {count_text(step.backlog_end)}: {step.verdict}"
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
