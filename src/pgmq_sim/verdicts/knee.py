"""A sweep judged: each step against the SLO and the backlog's growth (judge_step, as the sweep
goes), and the answer read from its steps: the knee (the highest rate sustained, or the workers
where throughput peaks), the bracket a team can quote, which half of the queue set it, and the
headline that says so (model/sweep holds what the steps measured)."""

from __future__ import annotations

import math
from dataclasses import dataclass

from pgmq_sim.model.quantities import count_text, ms_text
from pgmq_sim.model.search import GAIN_SHARE
from pgmq_sim.model.sweep import StepResult, SweepResult

GROWTH_SHARE = 0.02  # a backlog slope above 2% of the offered rate, per second, is growth
UNFINISHED_SHARE = 0.03  # a step that kept up leaves at most 3% of its arrivals (and one per worker)
KEEP_UP_FLOOR = 0.5  # a step that finished less than half of what was offered failed, whatever else
ENQUEUE_REASON = "enqueue p99"  # a step's reason when the enqueue half broke its SLO


@dataclass(frozen=True)
class SweepVerdict:
    """A sweep's answer, judged once from its steps and read by every view, with the sweep it judged."""

    sweep: SweepResult
    knee: StepResult | None
    max_sustainable_per_s: float | None
    first_failing_per_s: float | None
    resolution_reached: float | None
    headline: str
    limit: str | None  # what bounded the queue at the step that shows it


def judge_sweep(sweep: SweepResult) -> SweepVerdict:
    return SweepVerdict(
        sweep=sweep,
        knee=knee_step(sweep),
        max_sustainable_per_s=max_sustainable_per_s(sweep),
        first_failing_per_s=first_failing_per_s(sweep),
        resolution_reached=resolution_reached(sweep),
        headline=headline(sweep),
        limit=limit_line(sweep),
    )


def judge_step(
    offered_per_s: float,
    p99_ms: float | None,
    backlog_end: int,
    slope: float,
    slo_p99_ms: float | None,
    grown: int = 0,
    allowance: float = 0.0,
    achieved_per_s: float | None = None,
    pass_ms: float | None = None,
    enqueue_p99_ms: float | None = None,
    slo_enqueue_p99_ms: float | None = None,
) -> tuple[str, tuple[str, ...]]:
    """A step fails when its p99 breaks the SLO (or `pass_ms`, a search's bound within it: see
    pass_bound), or when its backlog grew through it: a positive slope above 2% of the offered rate,
    and the backlog `grown` over the step by more than `allowance` (3% of the step's arrivals and a
    message in flight per worker: what a step that kept up leaves unfinished at its end)."""
    reasons = []
    bound = slo_p99_ms if pass_ms is None or slo_p99_ms is None else min(pass_ms, slo_p99_ms)
    if slo_p99_ms is not None and bound is not None and (p99_ms is None or p99_ms > bound):
        shown = "-" if p99_ms is None else ms_text(p99_ms)
        if bound < slo_p99_ms:
            reasons.append(
                f"e2e p99 {shown} > {ms_text(bound)}, the SLO {slo_p99_ms:g} ms less half its headroom"
            )
        else:
            reasons.append(f"e2e p99 {shown} > SLO {slo_p99_ms:g} ms")
    if slo_enqueue_p99_ms is not None and enqueue_p99_ms is not None and enqueue_p99_ms > slo_enqueue_p99_ms:
        reasons.append(f"{ENQUEUE_REASON} {ms_text(enqueue_p99_ms)} > SLO {slo_enqueue_p99_ms:g} ms")
    if offered_per_s > 0 and slope > GROWTH_SHARE * offered_per_s and grown > allowance:
        reasons.append(f"backlog grew {slope:.0f}/s to {count_text(backlog_end)}")
    elif achieved_per_s is not None and offered_per_s > 0 and achieved_per_s < KEEP_UP_FLOOR * offered_per_s:
        reasons.append(f"achieved {achieved_per_s:.0f}/s of {offered_per_s:g}/s offered")
    return ("fail" if reasons else "pass"), tuple(reasons)


def first_failing_per_s(sweep: SweepResult) -> float | None:
    """The lowest failing rate above the knee: with the knee, the bracket a team can quote."""
    if sweep.spec.kind != "rate":
        return None
    knee = knee_step(sweep)
    above = [
        s.setting for s in sweep.steps if s.verdict == "fail" and (knee is None or s.setting > knee.setting)
    ]
    if sweep.search is not None and sweep.search.failing is not None:
        above.append(sweep.search.failing)
    return min(above, default=None)


def resolution_reached(sweep: SweepResult) -> float | None:
    knee, failing = max_sustainable_per_s(sweep), first_failing_per_s(sweep)
    return None if knee is None or failing is None or knee <= 0 else failing / knee - 1


def knee_step(sweep: SweepResult) -> StepResult | None:
    """Rates: the highest step that passed with every lower one passing (the max sustainable
    rate); an adaptive sweep's hold confirmed (passed as often in a row as its search needs), else
    none: a rate not held is not sustainable (best_step is what its search got to).
    Workers: the step with the highest achieved throughput."""
    if sweep.spec.kind == "workers":
        if sweep.spec.adaptive and sweep.steps:  # the fewest workers within 5% of the best
            top = max(s.achieved_per_s for s in sweep.steps)
            enough = [s for s in sweep.steps if s.achieved_per_s * (1 + GAIN_SHARE) >= top]
            return min(enough, key=lambda s: s.setting)
        return max(sweep.steps, key=lambda s: s.achieved_per_s, default=None)
    if sweep.spec.adaptive:  # only a rate held: a search step that passed is no knee
        hold = sweep.hold
        needed = sweep.search.confirmations if sweep.search is not None else 1
        return hold if hold is not None and sweep.confirmed_holds >= needed else None
    best = None
    for step in sorted(sweep.steps, key=lambda s: s.setting):
        if step.verdict != "pass":
            break
        best = step
    return best


def best_step(sweep: SweepResult) -> StepResult | None:
    """An adaptive search's highest step that passed below its first failure (a hold's aside)."""
    lowest_fail = min((s.setting for s in sweep.steps if s.verdict == "fail"), default=math.inf)
    passed = [
        s for s in sweep.steps if s.verdict == "pass" and s.setting < lowest_fail and s.purpose != "hold"
    ]
    return max(passed, key=lambda s: s.setting, default=None)


def max_sustainable_per_s(sweep: SweepResult) -> float | None:
    knee = knee_step(sweep)
    if knee is None:
        return None
    return knee.setting if sweep.spec.kind == "rate" else knee.achieved_per_s


def headline(sweep: SweepResult) -> str:
    knee = knee_step(sweep)
    if sweep.spec.kind == "rate" and sweep.spec.adaptive:
        return _bracket_line(sweep) + _half_line(sweep)
    if knee is None:
        return "no step passed: the lowest rate is already above what this queue sustains"
    p99 = knee.e2e_ms.get("p99")
    shown = ms_text(p99) if p99 is not None else "-"
    if sweep.spec.kind == "workers":
        if sweep.spec.adaptive:
            ordered = sorted(sweep.steps, key=lambda s: s.setting)
            if knee is ordered[-1]:
                return (
                    f"throughput still rising at {knee.setting:g} workers, the most this sweep may use:"
                    f" {knee.achieved_per_s:.0f} msg/s (p99 {shown}); give -workers more"
                )
            return (
                f"throughput stops rising at {knee.setting:g} workers: {knee.achieved_per_s:.0f} msg/s"
                f" (more workers added less than {GAIN_SHARE * 100:.0f}%; p99 {shown})"
            )
        return (
            f"throughput peaks at {knee.setting:g} workers: {knee.achieved_per_s:.0f} msg/s"
            f" (p99 {shown}, step {knee.index + 1})"
        )
    return f"max sustainable rate {knee.setting:g} msg/s (p99 {shown}, step {knee.index + 1})" + _half_line(
        sweep
    )


def _half_line(sweep: SweepResult) -> str:
    """Which half of the queue set the knee, where the enqueue's SLO did."""
    step = limiting_step(sweep)
    if step is None or not any(r.startswith(ENQUEUE_REASON) for r in step.reasons):
        return ""
    said = next(r for r in step.reasons if r.startswith(ENQUEUE_REASON))
    alone = all(r.startswith(ENQUEUE_REASON) for r in step.reasons)
    return f"; the enqueue half set it{'' if alone else ' with the other'}: at {step.setting:g} msg/s {said}"


def _bracket_line(sweep: SweepResult) -> str:
    """Held: e.g. max sustainable 1000 msg/s (1050 fails, within 5%; held 30 s at p99 133 ms).
    Not held: which step passed and which hold failed, and no rate called sustainable."""
    knee, hold, search = knee_step(sweep), sweep.hold, sweep.search
    failing, needed = first_failing_per_s(sweep), search.confirmations if search is not None else 1
    if not any(s.verdict == "pass" for s in sweep.steps):
        return "no step passed: the lowest rate is already above what this queue sustains"
    parts = []
    if knee is not None and hold is not None:
        reached = resolution_reached(sweep)
        if failing is None:
            parts.append("no step failed: the knee is above the range")
        elif reached is not None:
            parts.append(f"{_failed_text(sweep.steps, failing)}, within {reached * 100:.0f}%")
        parts.append(_held_text(sweep, hold))
    else:
        best = best_step(sweep)
        if best is not None and (hold is None or best.setting != hold.setting):
            parts.append(
                f"{best.setting:g} msg/s passed its {best.seconds:.0f} s step {_p99(best)}, never held"
            )
        if hold is not None and sweep.confirmed_holds:
            parts.append(f"{hold.setting:g} msg/s {_held_text(sweep, hold)}")
        elif hold is not None:
            parts.append(_failed_text(sweep.steps, hold.setting))
        if failing is not None and (hold is None or failing != hold.setting):
            parts.append(_failed_text(sweep.steps, failing))
    if search is not None and search.cut_by_budget:
        budget = (
            "its step limit" if search.budget_s is None else f"the -sweep-budget of {search.budget_s:g} s"
        )
        parts.append(f"{budget} cut the search short")
    if knee is not None:
        return f"max sustainable {knee.setting:g} msg/s ({'; '.join(parts)})"
    held = any(s.purpose == "hold" and s.verdict == "pass" for s in sweep.steps)
    return f"no rate held{f' {count_text(needed)} times in a row' if held else ''}: {'; '.join(parts)}"


def _held_text(sweep: SweepResult, hold: StepResult) -> str:
    """e.g. held 3 x 30 s at p99 up to 131 ms, 52% of the SLO; or held 2 of 3 times ..."""
    p99, count = sweep.hold_p99_ms, sweep.confirmed_holds
    at = f"at p99 {ms_text(p99)}" if p99 is not None else "without a p99"
    if count > 1:
        at = f"at p99 up to {ms_text(p99)}" if p99 is not None else at
    share, search = sweep.hold_slo_share, sweep.search
    if share is not None:
        at += f", {share:.0%} of the SLO"
        if search is not None and search.pass_ms is not None and search.unloaded_ms is not None:
            at += (
                f"; a step passed at p99 <= {ms_text(search.pass_ms)}, half the SLO's headroom over"
                f" the unloaded {ms_text(search.unloaded_ms)} kept"
            )
    needed = search.confirmations if search is not None else 1
    held = (
        ("held" + (f" {count_text(count)} x" if count > 1 else ""))
        if knee_step(sweep) is hold
        else f"held {count_text(count)} of {count_text(needed)} times"
    )
    return f"{held} {hold.seconds:.0f} s {at}"


def limiting_step(sweep: SweepResult) -> StepResult | None:
    """The step that shows what bounds the queue: a rate sweep's lowest failing step above the
    knee; a workers sweep's step with the most workers."""
    if sweep.spec.kind == "workers":
        return max(sweep.steps, key=lambda s: (s.setting, s.index), default=None)
    failing = first_failing_per_s(sweep)
    return next((s for s in reversed(sweep.steps) if s.setting == failing and s.verdict == "fail"), None)


def limit_line(sweep: SweepResult) -> str | None:
    step = limiting_step(sweep)
    if step is None or step.limit is None:
        return None
    at = f"{step.setting:g} workers" if sweep.spec.kind == "workers" else f"{step.setting:g} msg/s"
    return f"at {at} the limit was {step.limit}: {step.limit_evidence}"


def _p99(step: StepResult) -> str:
    p99 = step.e2e_ms.get("p99")
    return "without a p99" if p99 is None else f"at p99 {ms_text(p99)}"


def _failed_text(steps: tuple[StepResult, ...], rate: float) -> str:
    """What failed at a rate: a step of the search, or only its hold after its step passed."""
    at = [s for s in steps if s.setting == rate]
    hold = next((s for s in reversed(at) if s.purpose == "hold" and s.verdict == "fail"), None)
    if hold is None or any(s.verdict == "fail" and s.purpose != "hold" for s in at):
        return f"{rate:g} fails"
    step = next((s for s in reversed(at) if s.purpose != "hold"), None)
    passed = f" passed its {step.seconds:.0f} s step {_p99(step)} but" if step is not None else ""
    return f"{rate:g} msg/s{passed} FAILED to hold {hold.seconds:.0f} s {_p99(hold)}"
