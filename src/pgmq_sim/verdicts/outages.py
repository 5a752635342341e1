"""What each fault did to the run, from the timeline: how long no message completed (the outage),
how long from the path's return until the rate before the fault was back (the recovery), and how
many worker connections were lost. An outage that no injected fault explains (a server restarted by
somebody else, a pooler's own restart) is reported as a fault the run met."""

from __future__ import annotations

import dataclasses
import statistics
from collections.abc import Sequence

from pgmq_sim.model.events import Fault
from pgmq_sim.result.stats import SecondSample

MET = "outage"  # the kind of a fault the run met rather than injected
BEFORE_S = 5  # the rate before a fault: the median of the whole seconds before it
BACK_SHARE = 0.9  # back to the rate: a whole second at 90% of it or more
HABIT = 3  # pauses in the seconds before a fault that make a habit of pausing
HABIT_MARGIN = 1.25  # a pause up to this much longer than the habit's median is the habit
NEAR_S = 1.0  # a pause in completions that began this soon after a fault's end is the fault's


def fault_effects(
    faults: Sequence[Fault],
    gaps: Sequence[tuple[float, float]],
    losses: Sequence[float],
    samples: Sequence[SecondSample],
) -> list[Fault]:
    """The faults with their effects, in time order, the met outages among them."""
    processed = [s.processed for s in samples]
    out: list[Fault] = []
    explained: list[tuple[float, float]] = []
    for index, fault in enumerate(faults):
        if fault.kind.endswith(" end"):
            out.append(fault)
            continue
        ends = [f.at_s for f in faults[index + 1 :] if f.kind == fault.kind + " end"]
        until = ends[0] if ends else fault.at_s
        pause = max(
            ((a, b) for a, b in gaps if b > fault.at_s and a <= until + NEAR_S),
            key=lambda g: g[1] - max(g[0], fault.at_s),
            default=None,
        )
        began = fault.at_s
        # workers that sleep when idle pause completions again and again: a pause no longer than
        # those before it is not the fault's (a one-off stall before it is no such habit)
        habit = [b - a for a, b in gaps if began - BEFORE_S <= a < began]
        usual = statistics.median(habit) if len(habit) >= HABIT else 0.0
        if pause is not None and pause[1] - max(pause[0], began) <= HABIT_MARGIN * usual:
            pause = None
        back = pause[1] if pause else until
        explained.append((began - NEAR_S, max(back, until) + NEAR_S))
        out.append(_measured(fault, began, back, until, losses, processed, pause is not None))
    for a, b in gaps:
        lost = [t for t in losses if a <= t <= b]
        if lost and not any(lo <= a <= hi or lo <= b <= hi for lo, hi in explained):
            met = Fault(a, MET, f"not injected: {len(lost)} worker connection(s) lost")
            out.append(_measured(met, a, b, b, losses, processed, True))
    return sorted(out, key=lambda f: f.at_s)


def _measured(
    fault: Fault,
    began: float,
    back: float,
    until: float,
    losses: Sequence[float],
    processed: list[int],
    paused: bool,
) -> Fault:
    lost = sum(1 for t in losses if began - 0.1 <= t <= max(back, until) + 1)
    before = processed[max(1, int(began) - BEFORE_S) : int(began)]
    rate = statistics.median(before) if before else None
    recovery = None
    if rate:
        for second in range(int(back), len(processed) - 1):  # the last second may be partial
            if processed[second] >= BACK_SHARE * rate:
                recovery = max(0.0, second + 1 - back)
                break
    return dataclasses.replace(
        fault,
        outage_s=round(back - max(began, 0.0), 3) if paused else 0.0,
        recovery_s=None if recovery is None else round(recovery, 1),
        rate_before=rate,
        connections_lost=lost,
    )
