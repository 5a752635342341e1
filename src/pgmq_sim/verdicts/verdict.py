"""A run's verdicts, judged once from its result and read by every view (the summary, the detail,
the JSON document, the report): its limit, what hid its slowest messages, what inflated its costs, the
advice, where the workers' time went, and the episodes: the stretches worse than the run's own
baseline, each with its time and cause."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from pgmq_sim.result.run import RunResult
from pgmq_sim.verdicts.advice import advice
from pgmq_sim.verdicts.bystander import BystanderVerdict, judge_bystander
from pgmq_sim.verdicts.cause import MeasuredCause
from pgmq_sim.verdicts.costs import cost_cause
from pgmq_sim.verdicts.enqueue import enqueue_cause
from pgmq_sim.verdicts.episodes import Episode, episodes
from pgmq_sim.verdicts.figures import run_figures
from pgmq_sim.verdicts.hidden import HiddenAccount
from pgmq_sim.verdicts.limits import Limit, limit_of, time_split, with_cost
from pgmq_sim.verdicts.resources import client_limited


@dataclass(frozen=True)
class RunVerdict:
    limit: Limit
    hidden: HiddenAccount | None
    advice: tuple[str, ...]
    time_split: dict[str, float]
    cost: MeasuredCause | None = None  # a cause outside the run that inflated its costs
    enqueue: MeasuredCause | None = None  # what the slowest enqueues waited for
    episodes: tuple[Episode, ...] = ()  # the stretches clearly worse than the run's own baseline
    client_limited: bool = False  # a client process near a full core: the tool set the pace
    bystander: BystanderVerdict | None = None  # whether the neighbour's beside and alone compare

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
    return RunVerdict(
        limit,
        figures.hidden,
        lines,
        time_split(r),
        cost,
        enqueue,
        episodes(r, figures),
        client_limited(r.client),
        None if r.bystander is None else judge_bystander(r.bystander),
    )
