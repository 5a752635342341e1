"""A sweep: one continuous run that holds each setting (an arrival rate, or a number of workers) for a
step, measures the step, and judges it against the SLO. Its answer is the knee: the highest rate the
queue sustains, or the number of workers where throughput peaks.

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

SWEEP_FORMS = "give rate=A,B,C, rate=A..B*F (geometric) or workers=A,B,C, e.g. rate=100..1600*2"
MAX_STEPS = 100
GROWTH_SHARE = 0.02  # a backlog slope above 2% of the offered rate, per second, is growth


@dataclass(frozen=True)
class SweepSpec:
    kind: Literal["rate", "workers"]
    values: tuple[float, ...]

    @classmethod
    def parse(cls, text: str) -> SweepSpec:
        name, eq, rest = text.strip().partition("=")
        if name not in ("rate", "workers") or not eq:
            raise UsageError(f"-sweep '{text}' is not a sweep; {SWEEP_FORMS}")
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
        return f"{self.kind}=" + ",".join(f"{v:g}" for v in self.values)


def parse_slo(text: str) -> float:
    """-slo e2e-p99=MS: the end-to-end p99 each step must keep, in ms."""
    match = re.fullmatch(r"\s*e2e-p99\s*=\s*(\d+(?:\.\d+)?)\s*(?:ms)?\s*", text)
    if not match or not float(match.group(1)) > 0:
        raise UsageError(f"-slo '{text}' is not an SLO; give e2e-p99=MS, e.g. e2e-p99=250")
    return float(match.group(1))


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
    offered_per_s: float, p99_ms: float | None, backlog_end: int, slope: float, slo_p99_ms: float | None
) -> tuple[str, tuple[str, ...]]:
    """A step fails when its p99 breaks the SLO, or when its backlog grew through it: a positive
    slope above 2% of the offered rate and, at its end, more than one second of offered messages."""
    reasons = []
    if slo_p99_ms is not None and (p99_ms is None or p99_ms > slo_p99_ms):
        reasons.append(f"e2e p99 {p99_ms if p99_ms is not None else '-'} ms > SLO {slo_p99_ms:g} ms")
    if offered_per_s > 0 and slope > GROWTH_SHARE * offered_per_s and backlog_end > offered_per_s:
        reasons.append(f"backlog grew {slope:.0f}/s to {backlog_end}")
    return ("fail" if reasons else "pass"), tuple(reasons)


@dataclass(frozen=True)
class SweepResult:
    spec: SweepSpec
    step_s: float
    settle_s: float
    slo_p99_ms: float | None
    steps: tuple[StepResult, ...]

    @property
    def knee(self) -> StepResult | None:
        """Rates: the highest step that passed with every lower one passing (the max sustainable
        rate). Workers: the step with the highest achieved throughput."""
        if self.spec.kind == "workers":
            return max(self.steps, key=lambda s: s.achieved_per_s, default=None)
        best = None
        for step in sorted(self.steps, key=lambda s: s.setting):
            if step.verdict != "pass":
                break
            best = step
        return best

    @property
    def max_sustainable_per_s(self) -> float | None:
        knee = self.knee
        if knee is None:
            return None
        return knee.setting if self.spec.kind == "rate" else knee.achieved_per_s

    def headline(self) -> str:
        knee = self.knee
        if knee is None:
            return "no step passed: the lowest rate is already above what this queue sustains"
        p99 = knee.e2e_ms.get("p99")
        shown = f"{p99:.1f} ms" if p99 is not None else "-"
        if self.spec.kind == "workers":
            return (
                f"throughput peaks at {knee.setting:g} workers: {knee.achieved_per_s:.0f} msg/s"
                f" (p99 {shown}, step {knee.index + 1})"
            )
        return f"max sustainable rate {knee.setting:g} msg/s (p99 {shown}, step {knee.index + 1})"

    def as_json(self) -> dict[str, Any]:
        return {
            "spec": str(self.spec),
            "kind": self.spec.kind,
            "step_s": self.step_s,
            "settle_s": self.settle_s,
            "slo": {"e2e_p99_ms": self.slo_p99_ms},
            "max_sustainable_per_s": self.max_sustainable_per_s,
            "knee_step": None if self.knee is None else self.knee.index + 1,
            "headline": self.headline(),
            "steps": [s.as_json() for s in self.steps],
        }
