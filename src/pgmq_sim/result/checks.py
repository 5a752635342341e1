"""What a run's -check thresholds came to: each check, the value measured, whether it held."""

from __future__ import annotations

from dataclasses import dataclass

from pgmq_sim.model.checks import Check


@dataclass(frozen=True)
class CheckResult:
    check: Check
    value: float | None  # None: not measured in this run
    passed: bool

    def as_json(self) -> dict[str, object]:
        return {
            "check": str(self.check),
            "figure": self.check.figure,
            "value": self.value,
            "bound": self.check.bound,
            "unit": self.check.unit,
            "passed": self.passed,
        }
