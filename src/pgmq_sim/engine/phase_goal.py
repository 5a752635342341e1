"""A run in phases (-phase, a scenario's [[phase]] tables): the producer follows the phases' chained
rates and the fault schedule their pressures (both built from the settings); this goal reads the
run's edges where each phase begins and ends, and ends the run after the last. Each phase is then
measured from its own edges and seconds, as a sweep's step is, and the phase after a pressure gets
its recovery."""

from __future__ import annotations

import dataclasses

import psycopg

from pgmq_sim.db.queue import QueueDatabase
from pgmq_sim.dsn import reason
from pgmq_sim.engine.bounded import call_bounded
from pgmq_sim.engine.goals import DeadlineGoal
from pgmq_sim.engine.parts import RunParts
from pgmq_sim.engine.state import RunState
from pgmq_sim.engine.steps import Edge, limit_between, offered_between
from pgmq_sim.errors import SimError
from pgmq_sim.model.events import Fault
from pgmq_sim.model.pressure import PhaseSpec
from pgmq_sim.model.profiles import number_text
from pgmq_sim.result.account import LatencyAccount
from pgmq_sim.result.holders import LockCensus
from pgmq_sim.result.phased import PhaseResult
from pgmq_sim.result.run import RunResult
from pgmq_sim.result.timeline import SecondSample
from pgmq_sim.verdicts.pressure import recovery
from pgmq_sim.verdicts.server_waits import waits_text

ACCOUNT_TIMEOUT_S = 600.0


class PhasedGoal:
    drains = False

    def __init__(self, phases: tuple[PhaseSpec, ...]) -> None:
        self.specs = phases
        self.ends: list[float] = []
        at = 0.0
        for phase in phases:
            at += phase.duration_s
            self.ends.append(at)
        self._deadline = DeadlineGoal(at)
        self.edges: list[Edge] = []  # where each phase began, and where the last ended

    def describe(self) -> str:
        index = min(len(self.specs), max(1, len(self.edges))) - 1
        phase = self.specs[index]
        said = f"phase {phase.name}" + (f" ({phase.pressure})" if phase.pressure else "")
        draining = self._deadline.describe()
        return f"{said}; {draining}" if draining else said

    def report(self) -> None:
        return None

    def reached(self, state: RunState, parts: RunParts) -> bool:
        while len(self.edges) <= len(self.specs) and (
            not self.edges or state.clock() >= self.ends[len(self.edges) - 1]
        ):
            self.edges.append(Edge.read(state))
            index = len(self.edges) - 1
            if index < len(self.specs):
                self._begin(state, self.specs[index], self.ends[index - 1] if index else 0.0)
        return self._deadline.reached(state, parts)

    def _begin(self, state: RunState, phase: PhaseSpec, at_s: float) -> None:
        state.log.event(f"phase {phase.name} begins" + (f" under {phase.pressure}" if phase.pressure else ""))
        pressure = phase.pressure
        if pressure is not None and pressure.name == "burst":
            rate = state.settings.rate_schedule.rate_at(at_s)
            detail = (
                f"rate x{number_text(pressure.amount or 1)}: {rate:g}/s for {number_text(phase.duration_s)} s"
            )
            state.record_fault(Fault(at_s, "burst", detail))

    def phases(self, state: RunState, samples: list[SecondSample]) -> tuple[PhaseResult, ...]:
        """Each phase that began, measured; a phase the run's end cut short ends there."""
        edges = self.edges
        if len(edges) <= len(self.specs):
            edges = [*edges, Edge.read(state)]
        measured = [
            measure_phase(state, index, spec, edges[index], edges[index + 1], samples, self.ends)
            for index, spec in enumerate(self.specs[: len(edges) - 1])
        ]
        return tuple(with_recovery(measured, samples))


def measure_phase(
    state: RunState,
    index: int,
    spec: PhaseSpec,
    start: Edge,
    end: Edge,
    samples: list[SecondSample],
    ends: list[float],
) -> PhaseResult:
    """The phase's figures from its edges; its fault rows by its planned times (a pressure begins
    at the phase's planned start, a tick before its edge is read)."""
    seconds = max(1e-9, end.at - start.at)
    e2e = end.histograms[2].minus(start.histograms[2]).percentiles_ms()
    offered = offered_between(state.settings, start.at, end.at)
    limit = limit_between(state, start, end, offered, "phase")
    backlog_end = max(0, end.produced - end.finished)
    inside = [s for s in samples if start.at <= s.second + 1 and s.second < end.at]
    steady = inside[1:] or inside  # the first second is the one before it, in part
    dead = [s.dead_tuples for s in inside if s.dead_tuples is not None]
    sizes = [s.table_mb for s in inside if s.table_mb is not None]
    waits = end.waits.minus(start.waits)
    enqueue = end.enqueues.minus(start.enqueues).latency
    enqueue_ms = enqueue.percentiles_ms()
    return PhaseResult(
        name=spec.name,
        pressure=str(spec.pressure) if spec.pressure is not None else None,
        started_s=round(start.at, 3),
        seconds=round(seconds, 3),
        offered_per_s=round(offered, 2),
        throughput_per_s=round((end.finished - start.finished) / seconds, 2),
        e2e_ms={"p50": e2e["p50"], "p99": e2e["p99"]},
        backlog_end=backlog_end,
        backlog_max=max([s.backlog for s in steady] + [backlog_end]),
        dead_tuples_end=dead[-1] if dead else state.timeline.last_dead_tuples(),
        dead_tuples_peak=max(dead) if dead else None,
        table_mb_end=sizes[-1] if sizes else None,
        waits=waits_text(waits),
        wait_profile=limit.wait_profile,
        limit=limit.resource,
        limit_evidence=limit.evidence,
        enqueued_per_s=round(enqueue.count / seconds, 2),
        enqueue_ms={"p50": enqueue_ms["p50"], "p99": enqueue_ms["p99"]} if enqueue.count else None,
        faults=tuple(
            f"{f.at_s:.1f} s {f.kind}: {f.detail}"
            for f in state.faults
            if within(f, ends[index - 1] if index else 0.0, ends[index])
        ),
    )


def within(fault: Fault, start_s: float, end_s: float) -> bool:
    """A fault row in the phase from start_s to end_s (a hold's end at the phase's end is its)."""
    if fault.kind.endswith(" end"):
        return start_s < fault.at_s <= end_s + 0.5
    return start_s <= fault.at_s < end_s


def window_accounts(
    state: RunState, db: QueueDatabase, census: LockCensus | None, windows: list[tuple[str, float, float]]
) -> list[LatencyAccount | None]:
    """The latency account of the messages enqueued in each (what, start, end) window of the run's
    clock (a phase, a sweep's step), placed on the server's clock through the lock census's reading
    of it; none without one, and none from the first that cannot be read on."""
    offset = census.server_offset_s if census is not None else None
    if offset is None:
        return [None] * len(windows)
    free_at_end = [(s.name, s.queue_type) for s in state.stats if s.free_at_end]
    ordered = state.design.ordered

    def account_of(start: float, end: float) -> LatencyAccount | None:
        return db.account_between(
            ordered,
            free_at_end,
            lambda origin, journeys, free: LatencyAccount.of(journeys, free, ordered, origin - offset),
            (start + offset, end + offset),
        )

    accounts: list[LatencyAccount | None] = []
    for what, start, end in windows:
        try:
            accounts.append(
                call_bounded(
                    lambda start=start, end=end: account_of(start, end),  # type: ignore[misc]
                    ACCOUNT_TIMEOUT_S,
                    state.signals,
                    f"latency account of {what}",
                )
            )
        except (SimError, psycopg.Error) as exc:  # the run's figures stand without it
            state.note(f"{what}: latency account skipped: {reason(exc, *state.dsns)}", screen=False)
            break
    return accounts + [None] * (len(windows) - len(accounts))


def windowed(state: RunState, db: QueueDatabase, census: LockCensus | None, result: RunResult) -> RunResult:
    """A run's phases and a sweep's steps, each with the account of its own messages."""
    windows = [(f"phase {p.name}", p.started_s, p.started_s + p.seconds) for p in result.phases]
    steps = result.sweep.steps if result.sweep is not None else ()
    windows += [(f"step {s.index + 1}", s.started_s, s.started_s + s.seconds) for s in steps]
    if not windows:
        return result
    accounts = window_accounts(state, db, census, windows)
    phases = tuple(dataclasses.replace(p, account=a) for p, a in zip(result.phases, accounts, strict=False))
    sweep = result.sweep
    if sweep is not None:
        found = accounts[len(phases) :]
        sweep = dataclasses.replace(
            sweep,
            steps=tuple(
                dataclasses.replace(s, latency_account=a.as_json() if a is not None else None)
                for s, a in zip(sweep.steps, found, strict=True)
            ),
        )
    return dataclasses.replace(result, phases=phases, sweep=sweep)


def with_recovery(phases: list[PhaseResult], samples: list[SecondSample]) -> list[PhaseResult]:
    """The phase after a pressure phase gets its recovery, against the first phase under no
    pressure before any pressure (the baseline); none without one."""
    first_pressed = next((i for i, p in enumerate(phases) if p.pressure is not None), None)
    baseline = (
        next((p for p in phases[:first_pressed] if p.pressure is None), None) if first_pressed else None
    )
    if baseline is None:
        return phases
    measured = []
    for index, phase in enumerate(phases):
        if index and phase.pressure is None and phases[index - 1].pressure is not None:
            took = recovery(
                samples,
                phase.started_s,
                phase.started_s + phase.seconds,
                baseline.backlog_max,
                baseline.p99_ms,
            )
            phase = PhaseResult(**{**phase.__dict__, "recovery_s": took, "recovered": took is not None})
        measured.append(phase)
    return measured
