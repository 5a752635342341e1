"""The audit: exactly-once and per-group order, judged from the journal table.

The journal is written by the completing transaction itself, so the verdict holds with -delmsg,
across processes and after crashes. The database layer counts (`AuditCounts`); this judges.
"""

from __future__ import annotations

from dataclasses import dataclass, fields
from typing import Any

from pgmq_sim.model.facts import AuditCounts

SHOW = 5  # offending msg_ids listed per kind


@dataclass(frozen=True, kw_only=True)
class AuditVerdict(AuditCounts):
    expected: int
    ordered: bool
    complete: bool
    retrying: bool = False  # leases or retries: dead letters and redeliveries are counted

    @classmethod
    def judge(
        cls, counts: AuditCounts, *, expected: int, ordered: bool, complete: bool, retrying: bool = False
    ) -> AuditVerdict:
        """The verdict on these counts: every produced message processed exactly once (or, with
        retries, dead-lettered), none lost; order among the processed ones."""
        values = {f.name: getattr(counts, f.name) for f in fields(AuditCounts)}
        return cls(**values, expected=expected, ordered=ordered, complete=complete, retrying=retrying)

    @property
    def passed(self) -> bool:
        """A partial run (stopped early, or bounded by time) may leave messages pending, never lose
        or repeat one. Redelivery (work started again) is counted, not failed."""
        if self.duplicates or self.missing or (self.ordered and self.order_violations):
            return False
        return self.left_behind == 0 or not self.complete

    @property
    def verdict(self) -> str:
        return "pass" if self.passed else "fail"

    def problems(self) -> list[str]:
        found = []
        if self.duplicates:
            found.append(f"{self.duplicates} duplicate(s), e.g. msg_id {_ids(self.duplicate_ids)}")
        if self.missing:
            found.append(f"{self.missing} missing, e.g. msg_id {_ids(self.missing_ids)}")
        if self.complete and self.left_behind:
            found.append(f"{self.left_behind} left behind in msg_queue")
        if self.order_violations:
            what = "order violation(s)" if self.ordered else "out-of-order (unordered strategy)"
            found.append(f"{self.order_violations} {what}, e.g. msg_id {_ids(self.order_violation_ids)}")
        return found

    def as_json(self) -> dict[str, Any]:
        return {
            "verdict": self.verdict,
            "expected": self.expected,
            **super().as_json(),
            "order_checked": self.ordered,
            "complete": self.complete,
        }


def _ids(ids: tuple[int, ...]) -> str:
    return ", ".join(map(str, ids))
