"""A sweep: one continuous run that holds each setting (an arrival rate, or a number of workers) for a
step, measures the step, and judges it against the SLO. Its answer is the knee: the highest rate the
queue sustains, or the number of workers where throughput peaks.

A fixed ladder (rate=A,B,C or A..B*F) runs the steps it is given. An adaptive sweep (rate=auto,
rate=A..B) searches: a doubling ladder until a step fails, bisection between the last pass and the
first failure until they are within the resolution, then a hold at the rate found, three steps
long, which must pass (else it steps down and holds again). Its answer is a bracket, not a point.
With an SLO, an adaptive sweep's knee is one a fixed-rate rerun as long as its hold keeps within
the SLO (bench/knee.py --auto --reruns measures it): near the knee a 30 s run's p99 swings
severalfold from run to run, so a rate whose one hold just kept the SLO fails most reruns. So its
steps and holds pass only with a margin, their e2e p99 keeping half the SLO's headroom over the
unloaded p99 (the lowest step's): p99 <= SLO - (SLO - unloaded)/2; and the knee is confirmed by three
holds in a row, each a rerun; after a hold fails, the search holds 10% lower rather than bisecting
back up to the cliff. The report says how close the holds came to the SLO (the worst of them).

A step's figures are its own, not inherited from the step before: after each rate step the producer
pauses until the backlog drains (at most -settle seconds), so the next step starts from an empty
queue; its end-to-end latencies are those of the messages completed from its start to the end of its
settle, which are the messages it produced when the settle drained.
"""

from __future__ import annotations

import math
import re
from dataclasses import dataclass
from typing import Any, Literal

from pgmq_sim.errors import UsageError
from pgmq_sim.model.search import GAIN_SHARE, SearchOutcome

SWEEP_FORMS = (
    "give rate=auto or rate=A..B (adaptive), rate=A,B,C or rate=A..B*F (a fixed ladder), or workers=A,B,C,"
    " e.g. rate=auto"
)
AUTO_LOW = 50.0  # rate=auto's first step, msg/s
AUTO_WORKERS = 64  # workers=auto's largest step unless -workers says
MAX_STEPS = 100
GROWTH_SHARE = 0.02  # a backlog slope above 2% of the offered rate, per second, is growth
UNFINISHED_SHARE = 0.03  # a step that kept up leaves at most 3% of its arrivals (and one per worker)
KEEP_UP_FLOOR = 0.5  # a step that finished less than half of what was offered failed, whatever else


@dataclass(frozen=True)
class SweepSpec:
    kind: Literal["rate", "workers"]
    values: tuple[float, ...]  # a fixed ladder's steps; an adaptive one's (low,) or (low, high)
    adaptive: bool = False

    @classmethod
    def parse(cls, text: str) -> SweepSpec:
        name, eq, rest = text.strip().partition("=")
        if name not in ("rate", "workers") or not eq:
            raise UsageError(f"-sweep '{text}' is not a sweep; {SWEEP_FORMS}")
        if rest.strip() == "auto":
            return cls(name, (AUTO_LOW,) if name == "rate" else (), adaptive=True)  # type: ignore[arg-type]
        bounded = re.fullmatch(r"\s*(\d+(?:\.\d+)?)\s*\.\.\s*(\d+(?:\.\d+)?)\s*", rest)
        if bounded and name == "rate":
            low, high = (float(g) for g in bounded.groups())
            if not 0 < low < high:
                raise UsageError(f"-sweep '{text}' needs 0 < A < B; {SWEEP_FORMS}")
            return cls("rate", (low, high), adaptive=True)
        geometric = re.fullmatch(
            r"\s*(\d+(?:\.\d+)?)\s*\.\.\s*(\d+(?:\.\d+)?)\s*\*\s*(\d+(?:\.\d+)?)\s*", rest
        )
        if geometric and name == "rate":
            low, high, factor = (float(g) for g in geometric.groups())
            if not (0 < low <= high and factor > 1):
                raise UsageError(f"-sweep '{text}' needs 0 < A <= B and a factor F > 1; {SWEEP_FORMS}")
            values: list[float] = []
            value = low
            while value <= high * (1 + 1e-9) and len(values) <= MAX_STEPS:
                values.append(round(value, 6))
                value *= factor
        else:
            try:
                values = [float(v) for v in rest.split(",") if v.strip()]
            except ValueError:
                raise UsageError(f"-sweep '{text}' has a value that is not a number; {SWEEP_FORMS}") from None
        if not values or not all(math.isfinite(v) and v > 0 for v in values):
            raise UsageError(f"-sweep '{text}' needs values above 0; {SWEEP_FORMS}")
        if name == "workers" and not all(v == int(v) for v in values):
            raise UsageError(f"-sweep '{text}': worker counts are whole numbers")
        if len(values) > MAX_STEPS:
            raise UsageError(f"-sweep '{text}' has more than {MAX_STEPS} steps; give fewer")
        return cls(name, tuple(values))  # type: ignore[arg-type]

    def __str__(self) -> str:
        if self.adaptive:
            if self.kind == "workers" or len(self.values) == 1:
                return f"{self.kind}=auto"
            return f"rate={self.values[0]:g}..{self.values[1]:g}"
        return f"{self.kind}=" + ",".join(f"{v:g}" for v in self.values)


def parse_duration(text: str, flag: str) -> float:
    """Seconds, or a number with s, m or h: 90, 90s, 15m, 1h."""
    match = re.fullmatch(r"\s*(\d+(?:\.\d+)?)\s*([smh]?)\s*", text)
    if not match or not float(match.group(1)) > 0:
        raise UsageError(f"{flag} '{text}' is not a duration; give seconds or e.g. 90s, 15m, 1h")
    return float(match.group(1)) * {"": 1, "s": 1, "m": 60, "h": 3600}[match.group(2)]


SLO_KEYS = ("e2e-p99", "enqueue-p99")  # -slo's halves: a message's end to end, an enqueue's
ENQUEUE_REASON = "enqueue p99"  # a step's reason when the enqueue half broke its SLO


def parse_slo(text: str) -> tuple[float | None, float | None]:
    """-slo e2e-p99=MS[,enqueue-p99=MS]: the p99s each step must keep, in ms (either half alone)."""
    found: dict[str, float] = {}
    for item in text.split(","):
        match = re.fullmatch(r"\s*(e2e-p99|enqueue-p99)\s*=\s*(\d+(?:\.\d+)?)\s*(?:ms)?\s*", item)
        if not match or not float(match.group(2)) > 0 or match.group(1) in found:
            raise UsageError(
                f"-slo '{text}' is not an SLO; give e2e-p99=MS, enqueue-p99=MS or both, e.g."
                " e2e-p99=250,enqueue-p99=20"
            )
        found[match.group(1)] = float(match.group(2))
    return found.get("e2e-p99"), found.get("enqueue-p99")


def slope_per_s(points: list[tuple[float, float]]) -> float:
    """Least-squares slope of (second, backlog) points; 0 with fewer than two."""
    if len(points) < 2:
        return 0.0
    n = len(points)
    mean_x = sum(x for x, _ in points) / n
    mean_y = sum(y for _, y in points) / n
    spread = sum((x - mean_x) ** 2 for x, _ in points)
    return sum((x - mean_x) * (y - mean_y) for x, y in points) / spread if spread else 0.0


@dataclass(frozen=True)
class StepResult:
    index: int
    setting: float  # the offered rate, or the number of workers
    started_s: float
    seconds: float
    offered_per_s: float
    achieved_per_s: float
    e2e_ms: dict[str, float | None]
    claim_ms: dict[str, float | None]
    complete_ms: dict[str, float | None]
    backlog_end: int
    backlog_slope_per_s: float
    settle_s: float
    backlog_left: int  # after the settle: inherited by the next step
    empty_claims: int
    dead_tuples: int | None
    wal_bytes_per_msg: float | None
    server_cpu_us_per_msg: float | None
    client_cpu_us_per_msg: float | None
    verdict: str  # pass | fail
    reasons: tuple[str, ...] = ()
    faults: tuple[str, ...] = ()  # faults injected during the step
    purpose: str = "step"  # a fixed ladder's step; a search's "ladder", "bisect" or "hold"
    limit: str | None = None  # the resource that bounded the step (limits.py)
    limit_evidence: str | None = None
    wait_profile: dict[str, float] | None = None
    latency_account: dict[str, Any] | None = None  # the account of the messages enqueued in the step
    enqueue_ms: dict[str, float | None] | None = None  # the step's enqueues, due time to commit

    def as_json(self) -> dict[str, Any]:
        data = dict(self.__dict__)
        data["reasons"] = list(self.reasons)
        data["faults"] = list(self.faults)
        for key in (
            "started_s",
            "seconds",
            "offered_per_s",
            "achieved_per_s",
            "backlog_slope_per_s",
            "settle_s",
        ):
            data[key] = round(data[key], 3)
        return data


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
        shown = "-" if p99_ms is None else f"{p99_ms:g}"
        if bound < slo_p99_ms:
            reasons.append(
                f"e2e p99 {shown} ms > {bound:.0f} ms, the SLO {slo_p99_ms:g} ms less half its headroom"
            )
        else:
            reasons.append(f"e2e p99 {shown} ms > SLO {slo_p99_ms:g} ms")
    if slo_enqueue_p99_ms is not None and enqueue_p99_ms is not None and enqueue_p99_ms > slo_enqueue_p99_ms:
        reasons.append(f"{ENQUEUE_REASON} {enqueue_p99_ms:g} ms > SLO {slo_enqueue_p99_ms:g} ms")
    if offered_per_s > 0 and slope > GROWTH_SHARE * offered_per_s and grown > allowance:
        reasons.append(f"backlog grew {slope:.0f}/s to {backlog_end}")
    elif achieved_per_s is not None and offered_per_s > 0 and achieved_per_s < KEEP_UP_FLOOR * offered_per_s:
        reasons.append(f"achieved {achieved_per_s:.0f}/s of {offered_per_s:g}/s offered")
    return ("fail" if reasons else "pass"), tuple(reasons)


@dataclass(frozen=True)
class SweepResult:
    spec: SweepSpec
    step_s: float
    settle_s: float
    slo_p99_ms: float | None
    steps: tuple[StepResult, ...]
    search: SearchOutcome | None = None
    slo_enqueue_p99_ms: float | None = None  # the enqueue half's SLO, where one was given

    @property
    def hold(self) -> StepResult | None:
        """An adaptive sweep's last confirmation hold."""
        return next((s for s in reversed(self.steps) if s.purpose == "hold"), None)

    @property
    def holds(self) -> tuple[StepResult, ...]:
        """The last holds at the last hold's rate, in a row (a search step after them, stepping down
        from a failed one, does not end them): the knee's confirmation when they passed."""
        last = self.hold
        if last is None:
            return ()
        out: list[StepResult] = []
        for step in reversed(self.steps[: self.steps.index(last) + 1]):
            if step.purpose != "hold" or step.setting != last.setting:
                break
            out.append(step)
        return tuple(reversed(out))

    @property
    def confirmed_holds(self) -> int:
        """Of those, the passed ones in a row at the end."""
        count = 0
        for step in reversed(self.holds):
            if step.verdict != "pass":
                break
            count += 1
        return count

    @property
    def hold_p99_ms(self) -> float | None:
        """The worst e2e p99 of the last holds that passed in a row (else of the last hold)."""
        passed = (
            self.holds[len(self.holds) - self.confirmed_holds :] if self.confirmed_holds else self.holds[-1:]
        )
        p99s = [p for s in passed if (p := s.e2e_ms.get("p99")) is not None]
        return max(p99s, default=None)

    @property
    def hold_slo_share(self) -> float | None:
        """How close the hold's e2e p99 came to the SLO (the worst of a confirmation's holds)."""
        p99 = self.hold_p99_ms
        return None if p99 is None or not self.slo_p99_ms else p99 / self.slo_p99_ms

    @property
    def first_failing_per_s(self) -> float | None:
        """The lowest failing rate above the knee: with the knee, the bracket a team can quote."""
        if self.spec.kind != "rate":
            return None
        knee = self.knee
        above = [
            s.setting
            for s in self.steps
            if s.verdict == "fail" and (knee is None or s.setting > knee.setting)
        ]
        if self.search is not None and self.search.failing is not None:
            above.append(self.search.failing)
        return min(above, default=None)

    @property
    def resolution_reached(self) -> float | None:
        knee, failing = self.max_sustainable_per_s, self.first_failing_per_s
        return None if knee is None or failing is None or knee <= 0 else failing / knee - 1

    def noise(self) -> list[dict[str, Any]]:
        """Rates run more than once (-repeat): their verdicts and the spread of p99 and throughput."""
        by_rate: dict[float, list[StepResult]] = {}
        for step in self.steps:
            if step.purpose == "bisect":
                by_rate.setdefault(step.setting, []).append(step)
        return [
            {
                "rate": rate,
                "runs": len(runs),
                "passed": sum(s.verdict == "pass" for s in runs),
                "e2e_p99_ms": [s.e2e_ms.get("p99") for s in runs],
                "achieved_per_s": [round(s.achieved_per_s, 1) for s in runs],
            }
            for rate, runs in sorted(by_rate.items())
            if len(runs) > 1
        ]

    @property
    def knee(self) -> StepResult | None:
        """Rates: the highest step that passed with every lower one passing (the max sustainable
        rate); an adaptive sweep's hold confirmed (passed as often in a row as its search needs), else
        none: a rate not held is not sustainable (best_step is what its search got to).
        Workers: the step with the highest achieved throughput."""
        if self.spec.kind == "workers":
            if self.spec.adaptive and self.steps:  # the fewest workers within 5% of the best
                top = max(s.achieved_per_s for s in self.steps)
                enough = [s for s in self.steps if s.achieved_per_s * (1 + GAIN_SHARE) >= top]
                return min(enough, key=lambda s: s.setting)
            return max(self.steps, key=lambda s: s.achieved_per_s, default=None)
        if self.spec.adaptive:  # only a rate held: a search step that passed is no knee
            hold = self.hold
            needed = self.search.confirmations if self.search is not None else 1
            return hold if hold is not None and self.confirmed_holds >= needed else None
        best = None
        for step in sorted(self.steps, key=lambda s: s.setting):
            if step.verdict != "pass":
                break
            best = step
        return best

    @property
    def best_step(self) -> StepResult | None:
        """An adaptive search's highest step that passed below its first failure (a hold's aside)."""
        lowest_fail = min((s.setting for s in self.steps if s.verdict == "fail"), default=math.inf)
        passed = [
            s for s in self.steps if s.verdict == "pass" and s.setting < lowest_fail and s.purpose != "hold"
        ]
        return max(passed, key=lambda s: s.setting, default=None)

    @property
    def max_sustainable_per_s(self) -> float | None:
        knee = self.knee
        if knee is None:
            return None
        return knee.setting if self.spec.kind == "rate" else knee.achieved_per_s

    def headline(self) -> str:
        knee = self.knee
        if self.spec.kind == "rate" and self.spec.adaptive:
            return self._bracket_line() + self._half_line()
        if knee is None:
            return "no step passed: the lowest rate is already above what this queue sustains"
        p99 = knee.e2e_ms.get("p99")
        shown = f"{p99:.1f} ms" if p99 is not None else "-"
        if self.spec.kind == "workers":
            if self.spec.adaptive:
                ordered = sorted(self.steps, key=lambda s: s.setting)
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
        return (
            f"max sustainable rate {knee.setting:g} msg/s (p99 {shown}, step {knee.index + 1})"
            + self._half_line()
        )

    def _half_line(self) -> str:
        """Which half of the queue set the knee, where the enqueue's SLO did."""
        step = self.limiting_step
        if step is None or not any(r.startswith(ENQUEUE_REASON) for r in step.reasons):
            return ""
        said = next(r for r in step.reasons if r.startswith(ENQUEUE_REASON))
        alone = all(r.startswith(ENQUEUE_REASON) for r in step.reasons)
        return (
            f"; the enqueue half set it{'' if alone else ' with the other'}: at {step.setting:g} msg/s {said}"
        )

    def _bracket_line(self) -> str:
        """Held: e.g. max sustainable 1000 msg/s (1050 fails, within 5%; held 30 s at p99 133 ms).
        Not held: which step passed and which hold failed, and no rate called sustainable."""
        knee, hold, search = self.knee, self.hold, self.search
        failing, needed = self.first_failing_per_s, search.confirmations if search is not None else 1
        if not any(s.verdict == "pass" for s in self.steps):
            return "no step passed: the lowest rate is already above what this queue sustains"
        parts = []
        if knee is not None and hold is not None:
            reached = self.resolution_reached
            if failing is None:
                parts.append("no step failed: the knee is above the range")
            elif reached is not None:
                parts.append(f"{_failed_text(self.steps, failing)}, within {reached * 100:.0f}%")
            parts.append(self._held_text(hold))
        else:
            best = self.best_step
            if best is not None and (hold is None or best.setting != hold.setting):
                parts.append(
                    f"{best.setting:g} msg/s passed its {best.seconds:.0f} s step {_p99(best)}, never held"
                )
            if hold is not None and self.confirmed_holds:
                parts.append(f"{hold.setting:g} msg/s {self._held_text(hold)}")
            elif hold is not None:
                parts.append(_failed_text(self.steps, hold.setting))
            if failing is not None and (hold is None or failing != hold.setting):
                parts.append(_failed_text(self.steps, failing))
        if search is not None and search.cut_by_budget:
            budget = (
                "its step limit" if search.budget_s is None else f"the -sweep-budget of {search.budget_s:g} s"
            )
            parts.append(f"{budget} cut the search short")
        if knee is not None:
            return f"max sustainable {knee.setting:g} msg/s ({'; '.join(parts)})"
        held = any(s.purpose == "hold" and s.verdict == "pass" for s in self.steps)
        return f"no rate held{f' {needed} times in a row' if held else ''}: {'; '.join(parts)}"

    def _held_text(self, hold: StepResult) -> str:
        """e.g. held 3 x 30 s at p99 up to 131 ms, 52% of the SLO; or held 2 of 3 times ..."""
        p99, count = self.hold_p99_ms, self.confirmed_holds
        at = f"at p99 {p99:.0f} ms" if p99 is not None else "without a p99"
        if count > 1:
            at = f"at p99 up to {p99:.0f} ms" if p99 is not None else at
        share, search = self.hold_slo_share, self.search
        if share is not None:
            at += f", {share:.0%} of the SLO"
            if search is not None and search.pass_ms is not None and search.unloaded_ms is not None:
                at += (
                    f"; a step passed at p99 <= {search.pass_ms:.0f} ms, half the SLO's headroom over"
                    f" the unloaded {search.unloaded_ms:.0f} ms kept"
                )
        needed = search.confirmations if search is not None else 1
        held = (
            ("held" + (f" {count} x" if count > 1 else ""))
            if self.knee is hold
            else f"held {count} of {needed} times"
        )
        return f"{held} {hold.seconds:.0f} s {at}"

    @property
    def limiting_step(self) -> StepResult | None:
        """The step that shows what bounds the queue: a rate sweep's lowest failing step above the
        knee; a workers sweep's step with the most workers."""
        if self.spec.kind == "workers":
            return max(self.steps, key=lambda s: (s.setting, s.index), default=None)
        failing = self.first_failing_per_s
        return next((s for s in reversed(self.steps) if s.setting == failing and s.verdict == "fail"), None)

    def limit_line(self) -> str | None:
        step = self.limiting_step
        if step is None or step.limit is None:
            return None
        at = f"{step.setting:g} workers" if self.spec.kind == "workers" else f"{step.setting:g} msg/s"
        return f"at {at} the limit was {step.limit}: {step.limit_evidence}"


def _p99(step: StepResult) -> str:
    p99 = step.e2e_ms.get("p99")
    return "without a p99" if p99 is None else f"at p99 {p99:.1f} ms" if p99 < 100 else f"at p99 {p99:.0f} ms"


def _failed_text(steps: tuple[StepResult, ...], rate: float) -> str:
    """What failed at a rate: a step of the search, or only its hold after its step passed."""
    at = [s for s in steps if s.setting == rate]
    hold = next((s for s in reversed(at) if s.purpose == "hold" and s.verdict == "fail"), None)
    if hold is None or any(s.verdict == "fail" and s.purpose != "hold" for s in at):
        return f"{rate:g} fails"
    step = next((s for s in reversed(at) if s.purpose != "hold"), None)
    passed = f" passed its {step.seconds:.0f} s step {_p99(step)} but" if step is not None else ""
    return f"{rate:g} msg/s{passed} FAILED to hold {hold.seconds:.0f} s {_p99(hold)}"
