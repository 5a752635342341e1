"""What a claim's text says about the locks it takes: read from the statement, not its comments, by
the audit (a failed audit's cause) and by the limit (a fix that would repeat the run's claim)."""

from __future__ import annotations

import re
from dataclasses import dataclass

COMMENTS = re.compile(r"--[^\n]*|/\*.*?\*/", re.DOTALL)


@dataclass(frozen=True)
class ClaimLocks:
    """What a claim's text says about the locks it takes."""

    row_lock: bool  # FOR UPDATE, FOR NO KEY UPDATE, FOR SHARE
    skip_locked: bool
    advisory: bool
    try_lock: bool = False  # an advisory lock tried, not waited for

    @classmethod
    def read(cls, text: str) -> ClaimLocks:
        words = " ".join(COMMENTS.sub(" ", text).lower().split())  # not what its comments say
        return cls(
            row_lock=bool(re.search(r"\bfor (no key )?(update|share)\b", words)),
            skip_locked="skip locked" in words,
            advisory="advisory_xact_lock" in words or "advisory_lock" in words,
            try_lock="pg_try_advisory" in words,
        )

    @property
    def skips_locked(self) -> bool:
        """The claim passes over rows and groups another worker holds instead of queueing behind them."""
        return self.skip_locked or self.try_lock

    def said(self) -> str:
        found = [
            name
            for name, present in (
                ("FOR UPDATE", self.row_lock),
                ("SKIP LOCKED", self.skip_locked),
                ("an advisory lock", self.advisory),
            )
            if present
        ]
        return ", ".join(found) if found else "no row lock (no FOR UPDATE, no advisory lock)"
