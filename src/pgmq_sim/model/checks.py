"""A -check threshold as the settings hold it: which figure, which comparison, which bound. What each
figure reads from a result, and the judging, are the verdicts' (verdicts/checks)."""

from __future__ import annotations

from dataclasses import dataclass


def number(value: float) -> str:
    """As a person wrote it: 1000000, not 1e+06."""
    return str(int(value)) if value == int(value) else f"{value:.6g}"


CHECK_PATTERN = r"([a-z0-9-]+)\s*(<=|>=|==|<|>)\s*(-?\d+(?:\.\d+)?)\s*(?:ms|us|B|msg/s|%/h)?"
CHECK_FORMS = "give FIGURE<N, <=, >, >= or ==, e.g. e2e-p99<250,throughput>=900,lost==0"


@dataclass(frozen=True)
class Check:
    """One threshold as the user wrote it: a figure, a comparison, a bound in the figure's unit."""

    figure: str
    op: str
    bound: float
    unit: str = ""

    def __str__(self) -> str:
        per_hour = "%/h" if self.unit == "%/h" else ""  # a drift's bound reads as a rate, as written
        return f"{self.figure}{self.op}{number(self.bound)}{per_hour}"
