"""What the audit came to: the journal's and the queue's counts, what they were judged against, and
the verdict with its problems (judged in verdicts/audit)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from pgmq_sim.model.facts import AuditCounts


@dataclass(frozen=True, kw_only=True)
class AuditVerdict(AuditCounts):
    expected: int
    ordered: bool
    complete: bool
    retrying: bool = False  # leases or retries: dead letters and redeliveries are counted
    passed: bool
    problems: tuple[str, ...] = ()
    causes: tuple[str, ...] = ()  # why it failed, each naming what was measured
    fix: str | None = None  # the one fix the first cause calls for
    at_least_once: bool = False  # the design may deliver again once a lease passed: redeliveries pass

    @property
    def verdict(self) -> str:
        return "pass" if self.passed else "fail"

    def as_json(self) -> dict[str, Any]:
        return {
            "verdict": self.verdict,
            "expected": self.expected,
            **super().as_json(),
            "order_checked": self.ordered,
            "complete": self.complete,
            "delivery": "at-least-once" if self.at_least_once else "exactly-once",
            "causes": list(self.causes),
            "fix": self.fix,
        }
