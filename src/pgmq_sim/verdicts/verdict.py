"""A run's verdicts, judged once from its result and read by every view (the summary, the detail,
the JSON document, the report, the JUnit file, the exit code): its limit, what hid its slowest
messages, what inflated its costs, the advice, where the workers' time went, the episodes (the
stretches worse than the run's own baseline, each with its time and cause), its drift and its -check
thresholds."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from pgmq_sim.model.kinds import CHECK_EXIT
from pgmq_sim.result.run import RunResult
from pgmq_sim.verdicts.advice import advice
from pgmq_sim.verdicts.bystander import BystanderVerdict, judge_bystander
from pgmq_sim.verdicts.cause import MeasuredCause
from pgmq_sim.verdicts.checks import CheckResult, breached, evaluate
from pgmq_sim.verdicts.costs import cost_cause, inflated
from pgmq_sim.verdicts.drift import DriftReport, judge_drift
from pgmq_sim.verdicts.enqueue import enqueue_cause
from pgmq_sim.verdicts.episodes import Episode, episodes
from pgmq_sim.verdicts.figures import run_figures
from pgmq_sim.verdicts.hidden import HiddenAccount
from pgmq_sim.verdicts.knee import SweepVerdict, judge_sweep
from pgmq_sim.verdicts.limits import Limit, limit_of, time_split, with_cost
from pgmq_sim.verdicts.resources import client_limited


@dataclass(frozen=True)
class RunVerdict:
    limit: Limit
    hidden: HiddenAccount | None
    advice: tuple[str, ...]
    time_split: dict[str, float]
    exit_code: int  # the outcome's, turned by a failed audit or a breached check
    cost: MeasuredCause | None = None  # a cause outside the run that inflated its costs
    enqueue: MeasuredCause | None = None  # what the slowest enqueues waited for
    episodes: tuple[Episode, ...] = ()  # the stretches clearly worse than the run's own baseline
    client_limited: bool = False  # a client process near a full core: the tool set the pace
    bystander: BystanderVerdict | None = None  # whether the neighbour's beside and alone compare
    drift: DriftReport | None = None  # a long run's (or -drift's) trends
    checks: tuple[CheckResult, ...] = ()  # -check, each threshold judged
    sweep: SweepVerdict | None = None  # a sweep's knee, bracket, headline and limit
    claims_inflated: bool = False  # a cause outside the run made its claims' costs, not the queue

    @property
    def breached(self) -> tuple[CheckResult, ...]:
        return breached(self.checks)

    def cost_json(self) -> dict[str, Any] | None:
        return None if self.cost is None else self.cost.as_json() | {"fix": self.cost.fix}

    def enqueue_json(self) -> dict[str, Any] | None:
        return None if self.enqueue is None else self.enqueue.as_json() | {"fix": self.enqueue.fix}


def judge_run(r: RunResult) -> RunVerdict:
    figures = run_figures(r)
    cost = cost_cause(r)
    limit = with_cost(limit_of(r, figures), cost)
    enqueue = None
    if r.enqueue is not None:
        enqueue = enqueue_cause(r.enqueue, figures.offered_per_s, figures.groups, figures.notifies)
    lines = tuple(advice(r, limit, cost))
    drift = run_drift(r)
    checks = evaluate(r.settings.checks, r, drift)
    return RunVerdict(
        limit=limit,
        hidden=figures.hidden,
        advice=lines,
        time_split=time_split(r),
        exit_code=exit_code(r, checks),
        cost=cost,
        enqueue=enqueue,
        episodes=episodes(r, figures),
        client_limited=client_limited(r.client),
        bystander=None if r.bystander is None else judge_bystander(r.bystander),
        drift=drift,
        checks=checks,
        sweep=None if r.sweep is None else judge_sweep(r.sweep),
        claims_inflated=r.claims is not None and inflated(r.claims),
    )


def run_drift(r: RunResult) -> DriftReport | None:
    """The run's drift: judged on a run at one setting (a sweep, a rate profile or phases change it
    on purpose: none), long enough or asked with -drift."""
    s = r.settings
    if r.sweep is not None or s.rate_profile is not None or s.phases:
        return None
    return judge_drift(r.timeline, r.elapsed_s, s.drift, r.census)


def exit_code(r: RunResult, checks: tuple[CheckResult, ...]) -> int:
    """The outcome's code; an audit that fails, or that was asked for and could not run, turns a 0
    into 1, a breached -check into 4."""
    code = r.outcome.exit_code
    if code == 0 and r.audit is not None and not r.audit.passed:
        return 1
    if code == 0 and r.audit is None and r.settings.audit:
        return 1
    if code == 0 and breached(checks):
        return CHECK_EXIT
    return code
