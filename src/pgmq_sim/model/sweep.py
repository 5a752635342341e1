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
from pgmq_sim.model.search import SearchOutcome

SWEEP_FORMS = (
    "give rate=auto or rate=A..B (adaptive), rate=A,B,C or rate=A..B*F (a fixed ladder), or workers=A,B,C,"
    " e.g. rate=auto"
)
AUTO_LOW = 50.0  # rate=auto's first step, msg/s
AUTO_WORKERS = 64  # workers=auto's largest step unless -workers says
MAX_STEPS = 100


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
