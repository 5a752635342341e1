"""One run of one workload, through its named phases. Whatever ends it once the database has been
changed (done, error, stall, signal, lost server) ends in a result, with the audit when the server
can be reached."""

from __future__ import annotations

from collections.abc import Callable

import psycopg

from pgmq_sim.dsn import reason
from pgmq_sim.engine import phases
from pgmq_sim.engine.bounded import Signals, outcome_of
from pgmq_sim.engine.checking import check
from pgmq_sim.engine.collecting import collect
from pgmq_sim.engine.ended_by import met
from pgmq_sim.engine.feeds import Paced, Prefill
from pgmq_sim.engine.goals import CountGoal, DeadlineGoal
from pgmq_sim.engine.looped import LoopCarrier
from pgmq_sim.engine.parts import Goal, RunParts, WorkerCarrier
from pgmq_sim.engine.phase_goal import PhasedGoal
from pgmq_sim.engine.state import RunInput, RunState
from pgmq_sim.engine.sweeping import TOP_UP_MIN, SteppedRate, SweepGoal, TopUp
from pgmq_sim.engine.watching import watch
from pgmq_sim.errors import SimError
from pgmq_sim.model.kinds import Outcome
from pgmq_sim.model.profiles import RateProfile
from pgmq_sim.model.search import CONFIRMATIONS, RateSearch, WorkersSearch
from pgmq_sim.model.sweep import SweepSpec
from pgmq_sim.result.observer import RunObserver
from pgmq_sim.result.run import RunResult
from pgmq_sim.result.stats import WorkerCounters
from pgmq_sim.runlog import RunLog
from pgmq_sim.server import Server

CarrierFactory = Callable[[], WorkerCarrier]


def parts_for(state: RunState, carrier: WorkerCarrier) -> RunParts:
    """The parts the settings ask for."""
    settings = state.settings
    if settings.sweep is not None:
        return sweep_parts(state, settings.sweep, carrier)
    if settings.phases:
        return RunParts(
            carrier=carrier,
            feed=Paced(settings.rate_schedule, settings.producers),
            goal=PhasedGoal(settings.phases),
        )
    feed = Paced(settings.rate_schedule, settings.producers) if settings.paced else Prefill()
    # a profile that ends (a replay) bounds a run that has no count
    until = settings.duration or (settings.rate_schedule.end_s if settings.fill_db is None else None)
    goal: Goal = DeadlineGoal(until) if until else CountGoal()
    return RunParts(carrier=carrier, feed=feed, goal=goal)


def sweep_parts(state: RunState, spec: SweepSpec, carrier: WorkerCarrier) -> RunParts:
    """A rate sweep paces the producer through the steps; a workers sweep opens the claim gate to
    each step's count, at a fixed -rate or keeping the queue topped up."""
    settings = state.settings
    profile: RateProfile
    stepped: SteppedRate | None = None
    if spec.kind == "rate" or settings.rate:
        profile = stepped = SteppedRate(0.0)
    else:
        level = max(TOP_UP_MIN, 20 * settings.workers)
        profile = TopUp(lambda: WorkerCounters.total(state.stats).finished, level)
    search: RateSearch | WorkersSearch | None = None
    if spec.adaptive and spec.kind == "workers":
        search = WorkersSearch(settings.types, settings.workers)
    elif spec.adaptive:
        high = spec.values[1] if len(spec.values) > 1 else None
        slo = settings.slo_p99_ms is not None or settings.slo_enqueue_p99_ms is not None
        confirmations = CONFIRMATIONS if slo else 1
        search = RateSearch(
            spec.values[0], high, settings.sweep_resolution, settings.repeat or 1, confirmations
        )
    goal = SweepGoal(
        spec,
        settings.sweep_step_s,
        settings.sweep_settle_s,
        settings.slo_p99_ms,
        stepped,
        settings.rate or None,
        search,
        settings.sweep_budget_s,
        settings.slo_enqueue_p99_ms,
    )
    return RunParts(carrier=carrier, feed=Paced(profile, settings.producers), goal=goal)


def execute(state: RunState, parts: RunParts) -> RunResult:
    """check, prepare, produce, start, watch; then halt and collect, however those ended."""
    state.log.on_failure(state.errors.reporter("log"))
    state.phase = parts.goal.describe
    try:
        state.preflight = check(state, parts)
        phases.prepare(state, parts)
        parts.feed.produce(state)
        phases.start(state, parts)
        watch(state, parts)
    except InterruptedError:
        state.outcome = Outcome.INTERRUPTED
    except SimError as exc:
        if not state.changed:
            raise  # nothing was changed: one line says why
        state.outcome, state.error = outcome_of(exc), str(exc)
    except psycopg.Error as exc:
        text = f"database error: {reason(exc, *state.dsns)}; check the server"
        if not state.changed:
            raise SimError(text) from None
        state.outcome, state.error = Outcome.FAILED, text
        met(state, "the run", exc)
    finally:
        phases.halt(state, parts)
        state.log.on_failure(None)
    return collect(state, parts)


def run_once(
    given: RunInput,
    server: Server,
    observer: RunObserver,
    log: RunLog,
    signals: Signals,
    carrier: CarrierFactory = LoopCarrier,
) -> RunResult:
    state = RunState(given, server, observer, log, signals)
    return execute(state, parts_for(state, carrier()))
