"""What a run's -check thresholds came to: each check, the value measured, whether it held."""

from __future__ import annotations

from dataclasses import dataclass

from pgmq_sim.model.checks import Check


@dataclass(frozen=True)
class CheckResult:
    check: Check
    value: float | None  # None: not measured in this run
    passed: bool | None  # None: not judged (the verdict it mirrors calls the figure noise), not breached
    not_judged: str | None = None  # why, as the verdict says it

    def as_json(self) -> dict[str, object]:
        return {
            "check": str(self.check),
            "figure": self.check.figure,
            "value": self.value,
            "bound": self.check.bound,
            "unit": self.check.unit,
            "passed": self.passed,
            "not_judged": self.not_judged,
        }
