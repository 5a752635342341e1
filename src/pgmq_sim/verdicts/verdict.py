"""A run's verdicts, judged once from its result and read by every view (the summary, the detail,
the JSON document, the report): its limit, what hid its slowest messages, the advice, and where the
workers' time went."""

from __future__ import annotations

from dataclasses import dataclass

from pgmq_sim.result.run import RunResult
from pgmq_sim.verdicts.advice import advice
from pgmq_sim.verdicts.figures import run_figures
from pgmq_sim.verdicts.hidden import HiddenAccount
from pgmq_sim.verdicts.limits import Limit, judge, time_split


@dataclass(frozen=True)
class RunVerdict:
    limit: Limit
    hidden: HiddenAccount | None
    advice: tuple[str, ...]
    time_split: dict[str, float]


def judge_run(r: RunResult) -> RunVerdict:
    figures = run_figures(r)
    limit = judge(figures)
    return RunVerdict(limit, figures.hidden, tuple(advice(r, limit)), time_split(r))
