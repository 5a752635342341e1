"""A run judged by its windows, not only as a whole: the stretches in which it went clearly worse
than its own baseline (the episodes), each with its time, its figures and its cause, judged from
what was measured in that stretch (the lock census's holders seen then, the faults met or injected
then, the connections lost, the pooler's waiting clients, the producer's unwritten seconds). A
whole-run verdict averages a 140 s episode of a 40-minute soak away; an episode names it."""

from __future__ import annotations

import dataclasses
import math
import statistics
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from pgmq_sim.model.events import Fault
from pgmq_sim.model.facts import NOTIFY_QUEUE
from pgmq_sim.model.quantities import count_text, ms_text
from pgmq_sim.result.holders import HolderSeen
from pgmq_sim.result.run import RunResult
from pgmq_sim.result.timeline import SecondSample
from pgmq_sim.verdicts.cause import (
    SEEN_MARGIN_S,
    MeasuredCause,
    Resource,
    foreign_holder_fix,
    notify_fix,
)
from pgmq_sim.verdicts.figures import Figures, run_figures
from pgmq_sim.verdicts.lock_holders import held_text, holder_text
from pgmq_sim.verdicts.outages import HELD, POLICY, SERVER_ERROR, seen_around
from pgmq_sim.verdicts.resources import WAIT_JUDGES
from pgmq_sim.verdicts.server_waits import waits_text

WINDOWS_PER_RUN = 120  # a run is judged in about this many windows: a short run by the second, a
# 40-minute soak by 20 s, a day by 12 minutes; a stretch shorter than half a window is not an episode
FIRST_JUDGED_S = 1  # the first second makes the connections and the plans: a cold start, not an episode
BASELINE_QUANTILE = 0.25  # the run's baseline: its windows' lower quartile p99, not their median, so
# an episode (with its catch-up) may last up to three quarters of the run and still stand out
EPISODE_FACTOR = 5.0  # a window's p99 this many times the baseline is clearly worse: a steady run's
# per-second p99 wanders within about twice its lower quartile (checkpoints, autovacuum, GC)
MIN_COMPLETIONS = 100  # a window's p99 is one over this many completions at least: over 80 (a second at
# 80/s) it is their slowest, and one message held up once is no episode
EPISODE_FLOOR_MS = 100.0  # and above this: a 1 ms run going to 6 ms is jitter nobody waits on


@dataclass(frozen=True)
class Episode:
    """A stretch of the run clearly worse than its baseline, with what was measured in it and its
    cause (never `none`: what nothing measured explains is `unexplained`)."""

    from_s: int  # on the run's clock, whole seconds
    to_s: int  # exclusive
    p99_ms: float | None  # its worst window's p99 (the end-to-end's, or the enqueue's where higher)
    baseline_p99_ms: float  # the run's windows' lower quartile
    e2e_p99_ms: float | None  # the worst second's end-to-end p99 in it
    enqueue_p99_ms: float | None  # the worst second's enqueue p99 in it
    stalled_s: int  # seconds in it in which nothing completed while work waited
    cause: MeasuredCause

    @property
    def when(self) -> str:
        return f"from {self.from_s} s to {self.to_s} s"

    def figures_text(self) -> str:
        """e.g. 'p99 4.1 s against the run's 8.2 ms; 4 s in which nothing completed while work waited'."""
        said = [f"p99 {ms_text(self.p99_ms)}" if self.p99_ms is not None else "no message completed"]
        said[0] += f" against the run's {ms_text(self.baseline_p99_ms)}"
        if self.stalled_s:
            said.append(f"{self.stalled_s} s in which nothing completed while work waited")
        return "; ".join(said)

    def text(self) -> str:
        """e.g. 'from 5 s to 10 s: p99 4.1 s against the run's 8.2 ms; locks: pid 4242 (...) held ...'."""
        return f"{self.when}: {self.figures_text()}; {self.cause.resource}: {self.cause.evidence}"

    def as_json(self) -> dict[str, Any]:
        return {
            "from_s": self.from_s,
            "to_s": self.to_s,
            "p99_ms": _round(self.p99_ms),
            "baseline_p99_ms": _round(self.baseline_p99_ms),
            "e2e_p99_ms": _round(self.e2e_p99_ms),
            "enqueue_p99_ms": _round(self.enqueue_p99_ms),
            "stalled_s": self.stalled_s,
            "limit": str(self.cause.resource),
            "evidence": self.cause.evidence,
            "fix": self.cause.fix,
        }


@dataclass(frozen=True)
class _Window:
    start_s: int
    seconds: tuple[SecondSample, ...]
    p99_ms: float | None  # the median of its seconds' worst p99s
    stalled: int  # its seconds in which nothing completed while work waited

    @property
    def end_s(self) -> int:
        return self.start_s + len(self.seconds)


def episodes(r: RunResult, figures: Figures | None = None) -> tuple[Episode, ...]:
    """The run's episodes in time order; none where its load changed on purpose (a sweep, phases, a
    rate profile: a step's rise is the plan, judged step by step), for a prefilled queue, or where no
    window had a p99.
    `figures`: the whole run's (verdicts/figures), the judges' reading of a stretch's waits."""
    if r.sweep is not None or r.phases or r.settings.phases or r.settings.rate_profile is not None:
        return ()
    if r.producer is None:  # a prefilled queue: its messages' latency is their place in the drain,
        return ()  # rising by design from the first to the last
    judged = [s for s in r.timeline if s.second >= FIRST_JUDGED_S and s.second + 1 <= r.elapsed_s]
    length = window_length(r.elapsed_s, statistics.fmean(s.processed for s in judged) if judged else 0.0)
    by_window: dict[int, list[SecondSample]] = {}
    for s in judged:  # whole seconds, in windows from the run's start
        by_window.setdefault(s.second // length, []).append(s)
    cut = [_window(seconds) for _, seconds in sorted(by_window.items())]
    p99s = [w.p99_ms for w in cut if w.p99_ms is not None]
    if not p99s:
        return ()
    baseline = _quantile(p99s, BASELINE_QUANTILE)
    moving = statistics.median(sum(s.processed for s in w.seconds) for w in cut) > 0
    bound = max(baseline * EPISODE_FACTOR, EPISODE_FLOOR_MS)
    found: list[list[_Window]] = []
    worse: set[int] = set()  # the windows clearly worse, by start
    for window in cut:
        if window.p99_ms is not None and window.p99_ms > bound:
            worse.add(window.start_s)
        elif not (moving and window.stalled * 2 >= len(window.seconds)):  # a stall: most windows moved
            continue
        if found and found[-1][-1].end_s == window.start_s:
            found[-1].append(window)
        else:
            found.append([window])
    # a stall alone, its catch-up never worse than the bound, is a pause the faults already name
    worse_runs = [run for run in found if any(w.start_s in worse for w in run)]
    if worse_runs and figures is None:
        figures = run_figures(r)
    return tuple(_episode(r, run, baseline, figures) for run in worse_runs)


def window_length(elapsed_s: float, per_s: float = 0.0) -> int:
    """Seconds per window: WINDOWS_PER_RUN windows over the run, a second at least, and long enough
    for MIN_COMPLETIONS at the run's `per_s` completions a second."""
    by_count = math.ceil(MIN_COMPLETIONS / per_s) if per_s > 0 else 1
    return max(1, math.ceil(elapsed_s / WINDOWS_PER_RUN), by_count)


def _window(seconds: Sequence[SecondSample]) -> _Window:
    worst = [w for s in seconds if (w := _worst_ms(s)) is not None]
    stalled = sum(1 for s in seconds if _stalled(s))
    return _Window(seconds[0].second, tuple(seconds), statistics.median(worst) if worst else None, stalled)


def _worst_ms(s: SecondSample) -> float | None:
    """A second's worst p99: its completions' end-to-end, or its enqueues' where higher."""
    figures = [f for f in (s.e2e_p99_ms, s.enqueue_p99_ms) if f is not None]
    return max(figures) if figures else None


def _stalled(s: SecondSample) -> bool:
    """Nothing completed in the second while messages waited, or were due and not written."""
    return s.processed == 0 and (s.backlog > 0 or (s.offered or 0) > s.arrived)


def _episode(r: RunResult, run: Sequence[_Window], baseline: float, figures: Figures | None) -> Episode:
    seconds = [s for w in run for s in w.seconds]
    e2e = [s.e2e_p99_ms for s in seconds if s.e2e_p99_ms is not None]
    enqueue = [s.enqueue_p99_ms for s in seconds if s.enqueue_p99_ms is not None]
    p99s = [w.p99_ms for w in run if w.p99_ms is not None]
    from_s, to_s = run[0].start_s, run[-1].end_s
    return Episode(
        from_s,
        to_s,
        max(p99s) if p99s else None,
        baseline,
        max(e2e) if e2e else None,
        max(enqueue) if enqueue else None,
        sum(w.stalled for w in run),
        episode_cause(r, from_s, to_s, seconds, figures),
    )


def episode_cause(
    r: RunResult,
    from_s: float,
    to_s: float,
    seconds: Sequence[SecondSample],
    figures: Figures | None = None,
) -> MeasuredCause:
    """What was measured in [from_s, to_s) that explains it, the first that applies: a session outside
    the run the lock census saw holding a lock then (most samples first), a fault injected or met
    then, worker connections lost, clients the pooler held waiting, the server's waits sampled then
    (the whole run's judges on the stretch's samples: locks, the WAL flush, other waits), the
    producer's seconds with nothing written; else unexplained, with what was looked at."""
    holders = [h for h in (r.locks.holders if r.locks else ()) if seen_around(h, from_s, to_s)]
    if holders:
        return _held(max(holders, key=lambda h: h.samples), len(holders), figures)
    faults = [f for f in r.faults if _during(f, from_s, to_s)]
    if faults:
        return _fault(faults)
    lost = sum(s.lost for s in seconds)
    if lost:
        return MeasuredCause(Resource.OUTAGE, f"{count_text(lost)} worker connection(s) lost in it")
    waiting = [s.pooler_waiting for s in seconds if s.pooler_waiting]
    if waiting:
        longest = max((s.pooler_wait_ms or 0.0) for s in seconds)
        return MeasuredCause(
            Resource.POOL,
            f"the pooler held up to {count_text(max(waiting))} client(s) waiting for a server connection"
            f" (the longest {ms_text(longest)}) in {len(waiting)} s of it",
        )
    window = r.wait_slices.between(from_s, to_s) if r.wait_slices is not None else None
    if window is not None and figures is not None:
        judged = dataclasses.replace(figures, waits=window)
        waited = next((c for judge in WAIT_JUDGES if (c := judge(judged)) is not None), None)
        if waited is not None:
            return dataclasses.replace(waited, evidence=f"in these seconds, {waited.evidence}")
    unwritten = [s for s in seconds if (s.offered or 0) > 0 and s.arrived == 0]
    if unwritten:
        due = sum(s.offered or 0 for s in unwritten)
        census = "the lock census saw no session holding what it waited for" if r.locks else "no lock census"
        return MeasuredCause(
            Resource.PRODUCER,
            f"the producer wrote nothing in {len(unwritten)} s of it while {count_text(due)} messages fell"
            f" due; {census}",
        )
    looked = "no lock holder in the census, no fault, no connection lost"
    if r.locks is None:
        looked = "no lock census (-wait-sample-hz 0), no fault, no connection lost"
    waits = f"; the server's waits in it: {waits_text(window)}" if window is not None else ""
    evidence = f"{looked}, the producer kept writing{waits}; {_flow(seconds)}"
    return MeasuredCause(Resource.UNEXPLAINED, evidence)


def _flow(seconds: Sequence[SecondSample]) -> str:
    """What went in and out meanwhile: e.g. '800 arrived, 310 completed, the backlog 2 -> 492'."""
    arrived, done = sum(s.arrived for s in seconds), sum(s.processed for s in seconds)
    before = seconds[0].backlog + done - arrived  # before its first second
    backlog = f"{count_text(before)} -> {count_text(seconds[-1].backlog)}"
    return f"in it {count_text(arrived)} arrived, {count_text(done)} completed, the backlog {backlog}"


def _held(holder: HolderSeen, seen: int, figures: Figures | None) -> MeasuredCause:
    """The holder seen most; the notification queue's lock is every notifier's, so its fix is
    notifying less, not ending one session."""
    others = f"; {count_text(seen - 1)} other session(s) seen holding locks then" if seen > 1 else ""
    if holder.blocking_on == NOTIFY_QUEUE:
        fix = notify_fix(figures.notifies if figures is not None else False)
    else:
        fix = foreign_holder_fix(
            holder.pid, holder.application, held_text(holder), "the run's sessions waited for it"
        )
    return MeasuredCause(
        Resource.LOCKS, f"{holder_text(holder)} (in {count_text(holder.samples)} census samples){others}", fix
    )


def _fault(faults: Sequence[Fault]) -> MeasuredCause:
    first = faults[0]
    resource = {POLICY: Resource.SERVER_POLICY, SERVER_ERROR: Resource.ERROR, HELD: Resource.LOCKS}.get(
        first.kind, Resource.OUTAGE
    )
    more = f"; {count_text(len(faults) - 1)} more fault row(s) in it" if len(faults) > 1 else ""
    return MeasuredCause(resource, f"{first.kind} {first.when()}: {first.detail}{more}")


def _during(fault: Fault, from_s: float, to_s: float) -> bool:
    """A fault (not a hold's end) that began, or whose repeats went on, within the episode's span (a
    second early at most: what a fault does follows it)."""
    if fault.kind.endswith(" end"):
        return False
    last = max(fault.last_s or fault.at_s, fault.at_s + (fault.outage_s or 0.0))
    return fault.at_s - SEEN_MARGIN_S <= to_s and last + SEEN_MARGIN_S >= from_s


def _quantile(values: Sequence[float], q: float) -> float:
    """The q-quantile, interpolated between the two nearest values (statistics' inclusive method)."""
    if len(values) == 1:
        return values[0]
    return statistics.quantiles(values, n=100, method="inclusive")[round(q * 100) - 1]


def _round(value: float | None) -> float | None:
    return None if value is None else round(value, 2)
