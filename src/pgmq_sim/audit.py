"""The audit: exactly-once and per-group order, judged from the journal table.

The journal is written by the completing transaction itself, so the verdict
holds with -delmsg, across processes and after crashes.
"""

from __future__ import annotations

from dataclasses import dataclass

from pgmq_sim.queue import QueueDatabase

SHOW = 5


@dataclass(frozen=True)
class AuditVerdict:
    expected: int
    processed: int
    duplicates: int
    missing: int
    left_behind: int
    order_violations: int
    ordered: bool
    complete: bool
    duplicate_ids: tuple[int, ...]
    missing_ids: tuple[int, ...]
    order_violation_ids: tuple[int, ...]
    retrying: bool = False  # leases or retries: dead letters and redeliveries are counted
    dead_lettered: int = 0
    redelivered: int = 0
    attempts: int = 0
    failed_attempts: int = 0

    @property
    def passed(self) -> bool:
        """A partial run (stopped early) may leave messages pending, never lose or repeat one."""
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

    def as_json(self) -> dict[str, object]:
        return {
            "verdict": self.verdict,
            "expected": self.expected,
            "processed": self.processed,
            "duplicates": self.duplicates,
            "missing": self.missing,
            "left_behind": self.left_behind,
            "order_violations": self.order_violations,
            "order_checked": self.ordered,
            "complete": self.complete,
            "duplicate_ids": list(self.duplicate_ids),
            "missing_ids": list(self.missing_ids),
            "order_violation_ids": list(self.order_violation_ids),
            "dead_lettered": self.dead_lettered,
            "redelivered": self.redelivered,
            "attempts": self.attempts,
            "failed_attempts": self.failed_attempts,
        }


def _ids(ids: tuple[int, ...]) -> str:
    return ", ".join(map(str, ids))


def audit(
    db: QueueDatabase, expected: int, ordered: bool, complete: bool, retrying: bool = False
) -> AuditVerdict:
    """Every produced message processed exactly once (or, with retries, dead-lettered), none
    lost; order among the processed ones. Redelivery (work started again) is counted, not failed."""
    counts = db.audit_counts(expected, SHOW, retrying)
    return AuditVerdict(
        expected=expected,
        processed=counts.processed,
        duplicates=counts.duplicates,
        missing=counts.missing,
        left_behind=counts.left_behind,
        order_violations=counts.order_violations,
        ordered=ordered,
        complete=complete,
        duplicate_ids=counts.duplicate_ids,
        missing_ids=counts.missing_ids,
        order_violation_ids=counts.order_violation_ids,
        retrying=retrying,
        dead_lettered=counts.dead_lettered,
        redelivered=counts.redelivered,
        attempts=counts.attempts,
        failed_attempts=counts.failed_attempts,
    )
