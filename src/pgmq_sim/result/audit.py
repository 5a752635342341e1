"""What the audit came to: the journal's and the queue's counts, what they were judged against, and
the verdict with its problems (judged in verdicts/audit)."""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping, Sequence
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


SUMMED = (  # the counts a window adds to the run's: a passed window's lists of ids are empty
    *("processed", "duplicates", "missing", "dead_lettered", "redelivered", "attempts"),
    *("failed_attempts", "early", "order_violations", "overtaking"),
)


@dataclass(frozen=True)
class AuditWindow:
    """A window the live audit closed while the run went: msg_ids lo+1..hi and those the last window
    carried, judged in one snapshot and kept on the server; its messages still pending, carried."""

    number: int
    lo: int
    hi: int
    closed_s: float  # the run's second it closed
    journal_rows: int
    carried: int
    verdict: AuditVerdict
    judged_s: float  # what judging it took, the read and the record (the live audit's own cost)

    def as_json(self) -> dict[str, Any]:
        v = self.verdict
        return {
            "window": self.number,
            "msg_ids": [self.lo + 1, self.hi],
            "closed_s": round(self.closed_s, 3),
            "carried": self.carried,
            "judged_s": round(self.judged_s, 3),
            "verdict": v.verdict,
            **{name: getattr(v, name) for name in SUMMED},
            "problems": list(v.problems),
        }


@dataclass(frozen=True)
class LiveAudit:
    """The audit so far, from the closed windows: what a live view shows."""

    windows: int = 0
    through: int = 0  # msg_ids 1..through judged
    checked: int = 0  # processed or dead-lettered
    lost: int = 0
    duplicated: int = 0
    out_of_order: int = 0
    failed_windows: int = 0

    @classmethod
    def of(cls, windows: Sequence[AuditWindow]) -> LiveAudit:
        verdicts = [w.verdict for w in windows]
        return cls(
            len(windows),
            windows[-1].hi if windows else 0,
            sum(v.processed + v.dead_lettered for v in verdicts),
            sum(v.missing for v in verdicts),
            sum(v.duplicates for v in verdicts),
            sum(v.order_violations for v in verdicts),
            sum(not v.passed for v in verdicts),
        )


def after_windows(rest: AuditCounts, windows: Sequence[Mapping[str, Any]]) -> AuditCounts:
    """The run's counts: what the closed windows left (`rest`) with the windows' own, each as its
    audit's JSON, every one passed (so none has an id to list)."""
    return dataclasses.replace(
        rest, **{name: getattr(rest, name) + sum(int(w.get(name) or 0) for w in windows) for name in SUMMED}
    )


@dataclass(frozen=True)
class LiveAuditRecord:
    """The live audit of a run: its windows, and where the run's end went on from."""

    every_s: float
    windows: tuple[AuditWindow, ...]
    end_from: int  # the end judged msg_ids after this one (0: the whole run, again)
    failures: int  # ticks that closed no window for an error
    compacted_rows: int = 0  # the closed windows' journal rows deleted as the run went
    compaction_stopped: str | None = None  # why the journal was kept from some point on

    def as_json(self) -> dict[str, Any]:
        live = LiveAudit.of(self.windows)
        return {
            "every_s": self.every_s,
            "windows_closed": live.windows,
            "through_msg_id": live.through,
            "failed_windows": live.failed_windows,
            "end_judged_after": self.end_from,
            "errors": self.failures,
            "judged_s": round(sum(w.judged_s for w in self.windows), 3),
            "journal_compacted_rows": self.compacted_rows,
            "compaction_stopped": self.compaction_stopped,
            "windows": [w.as_json() for w in self.windows],
        }
