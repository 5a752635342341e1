"""The audit: exactly-once and per-group order, judged from the journal table.

The journal is written by the completing transaction itself, so the verdict holds with -delmsg,
across processes and after crashes. The database layer counts (`AuditCounts`); this judges.
"""

from __future__ import annotations

from dataclasses import fields

from pgmq_sim.model.facts import AuditCounts
from pgmq_sim.result.audit import AuditVerdict

SHOW = 5  # offending msg_ids listed per kind


def judge_audit(
    counts: AuditCounts, *, expected: int, ordered: bool, complete: bool, retrying: bool = False
) -> AuditVerdict:
    """The verdict on these counts: every produced message processed exactly once (or, with
    retries, dead-lettered), none lost; order among the processed ones. A partial run (stopped
    early, or bounded by time) may leave messages pending, never lose or repeat one. Redelivery
    (work started again) is counted, not failed."""
    values = {f.name: getattr(counts, f.name) for f in fields(AuditCounts)}
    found = _problems(counts, ordered, complete)
    failed = counts.duplicates or counts.missing or (ordered and counts.order_violations)
    passed = not failed and (counts.left_behind == 0 or not complete)
    return AuditVerdict(
        **values,
        expected=expected,
        ordered=ordered,
        complete=complete,
        retrying=retrying,
        passed=passed,
        problems=tuple(found),
    )


def _problems(counts: AuditCounts, ordered: bool, complete: bool) -> list[str]:
    found = []
    if counts.duplicates:
        found.append(f"{counts.duplicates} duplicate(s), e.g. msg_id {_ids(counts.duplicate_ids)}")
    if counts.missing:
        found.append(f"{counts.missing} missing, e.g. msg_id {_ids(counts.missing_ids)}")
    if complete and counts.left_behind:
        found.append(f"{counts.left_behind} left behind in msg_queue")
    if counts.order_violations:
        what = "order violation(s)" if ordered else "out-of-order (unordered strategy)"
        found.append(f"{counts.order_violations} {what}, e.g. msg_id {_ids(counts.order_violation_ids)}")
    return found


def _ids(ids: tuple[int, ...]) -> str:
    return ", ".join(map(str, ids))
