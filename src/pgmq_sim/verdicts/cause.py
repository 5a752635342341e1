"""A measured cause: the one shape of every verdict's finding (a resource check, a cause of hidden
time, the limit itself): which resource, what was measured (the evidence), the one fix that follows,
and, where causes share an amount, the share each explains. The resources are a closed list, and the
fixes two checks would both give are written here once."""

from __future__ import annotations

from dataclasses import dataclass
from enum import StrEnum
from typing import Any

from pgmq_sim.model.quantities import ms_text
from pgmq_sim.result.account import PARTS, CohortSplit


class Resource(StrEnum):
    """What bounded a run, or explains a share of its time (docs/report.md lists them)."""

    ERROR = "error"  # a run that died of an error that is neither a server policy nor an outage
    CLIENT_CPU = "client-cpu"
    LOCKS = "locks"
    SERVER_POLICY = "server-policy"
    OUTAGE = "outage"
    CLAIM_LOCKS = "claim-locks"
    POLLING = "polling"
    WAKEUP = "wakeup"
    LEASE = "lease"
    POOL = "pool"
    CLAIM_PLAN = "claim-plan"
    WAL_FLUSH = "wal-flush"
    SERVER_WAITS = "server-waits"
    SERVER_CPU = "server-cpu"
    ORDERING = "ordering"
    WORKERS = "workers"
    PRODUCER = "producer"
    NOTIFIER = "notifier"  # a cost's cause: a session outside the run notifying its channel
    DUE = "due"
    UNEXPLAINED = "unexplained"
    NONE = "none"


@dataclass(frozen=True)
class MeasuredCause:
    resource: Resource
    evidence: str
    fix: str | None = None  # the one thing to change; None where nothing in the queue's hands would
    share: float | None = None  # of the amount the causes share (a cohort's hidden time); None: whole

    def as_json(self) -> dict[str, Any]:
        said: dict[str, Any] = {"resource": str(self.resource), "evidence": self.evidence}
        if self.share is not None:
            said["share"] = round(self.share, 3)
        return said


SEEN_MARGIN_S = 1.0  # a session seen in a sample (the lock census, twice a second) is taken to have
# been there up to a second around it: a pause or a wait that close is its


def foreign_holder_fix(pid: int, application: str, what: str, how: str) -> str:
    """A session outside the run holds what the run's sessions needed: no claim or worker setting gets
    past it. `how`: what of the run met it (e.g. 'the claims skip or wait for what it holds')."""
    return (
        f"a session outside the run holds {what}: pid {pid} ({application or 'no application_name'});"
        f" {how}, so no claim or worker setting gets past it: end it, or move it out of the queue's hours"
    )


def notify_fix(run_notifies: bool) -> str:
    """The notification queue's lock: every notifying commit on the server takes it, one at a time
    through its WAL flush. `run_notifies`: the run's wake-up notifies (else the notifications are the
    design's own trigger's, or another application's)."""
    lead = (
        "every notifying commit on the server takes the notification queue's lock, one at a time through"
        " its WAL flush, whatever its database: "
    )
    if run_notifies:
        return lead + (
            "notify less often (one notification per batch, or -wakeup poll with a short -poll-interval),"
            " or move the other notifying applications to another server"
        )
    return lead + (
        "the design's own trigger (or another application) notifies every commit: notify once per"
        " batch of enqueues, drop the trigger where the consumers poll, or move the other notifying"
        " applications to another server"
    )


SEED_CLAIM_FIX = "try -claim indexed, which reads only each group's head"
MORE_WORKERS_CANNOT = (
    "more workers cannot help: spread the keys (more -orders, or split the hot key), or shorten the work:"
    " each group takes one message at a time"
)


def cohort_text(cohort: CohortSplit) -> str:
    """A cohort's time and its parts, largest first: '27.1 s: claim 62%, ordering 30%, hidden 5%'."""
    said = [f"{part} {cohort.share(part):.0%}" for part in sorted(PARTS, key=lambda p: -cohort.part_ms(p))]
    return f"{ms_text(cohort.total_ms)}: " + ", ".join(s for s in said if not s.endswith(" 0%"))
