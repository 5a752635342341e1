"""What happened to a run along the way, recorded by the threads that saw it (faults injected or met,
the oldest snapshot another session held). Plain values: the result and the renderers read them."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from pgmq_sim.model.quantities import count_text, ms_text, seconds_text


@dataclass(frozen=True)
class Fault:
    """A fault injected into, or met by, the run, at a time since the workers started."""

    at_s: float
    kind: str  # a FaultKind, "KIND end" for the end of a hold, or "outage" for one met
    detail: str
    # measured once the run is over (outages.py); None before, or where it cannot be said
    outage_s: float | None = None  # from the fault until a message completed again
    recovery_s: float | None = None  # from then until a whole second ran at 90% of the rate before
    rate_before: float | None = None  # messages per second before the fault (median)
    connections_lost: int | None = None  # worker connections lost to it
    open_at_end: bool = False  # the outage lasted until the run ended: not recovered
    pooler_waiting: int | None = None  # the most clients the pooler's console showed waiting meanwhile
    pooler_wait_ms: float | None = None  # and the longest wait it showed
    # one row for a repeated cause: how many times, the last one's time, the sessions it met
    count: int | None = None
    last_s: float | None = None
    sessions: int | None = None

    def as_json(self) -> dict[str, Any]:
        measured = {
            "outage_s": self.outage_s,
            "recovery_s": self.recovery_s,
            "recovered": not self.open_at_end,
            "rate_before": self.rate_before,
            "connections_lost": self.connections_lost,
            "pooler_waiting_max": self.pooler_waiting,
            "pooler_longest_wait_ms": self.pooler_wait_ms,
        }
        head = {"at_s": round(self.at_s, 3), "kind": self.kind, "detail": self.detail}
        if self.count is not None:
            last = round(self.last_s or self.at_s, 3)
            head |= {"count": self.count, "last_s": last, "sessions": self.sessions}
        return head | (measured if self.connections_lost is not None else {})

    def when(self) -> str:
        """'at 3.0 s', or for a repeated cause 'x199 from 0.3 s to 199.0 s'."""
        if self.count is None or self.count == 1:
            return f"at {self.at_s:.1f} s"
        return f"x{count_text(self.count)} from {self.at_s:.1f} s to {self.last_s or self.at_s:.1f} s"

    def effect(self) -> str:
        """The fault's measured effect, in words ('' before it is measured)."""
        if self.connections_lost is None:
            if self.count is None:  # not measured yet
                return ""
            span = "" if self.count == 1 else f" from {self.at_s:.1f} s to {self.last_s or self.at_s:.1f} s"
            sessions = f" in {count_text(self.sessions)} session(s)" if self.sessions is not None else ""
            return f"{count_text(self.count)} time(s){span}{sessions}"
        out = f"out {seconds_text(self.outage_s)}" if self.outage_s else "no pause in completions"
        if self.count is not None and self.count > 1:
            out = f"{self.when()}, out {seconds_text(self.outage_s or 0)} in all"
        if self.open_at_end:
            back = "not recovered by the end of the run"
        elif self.rate_before is None:
            back = "rate before unknown"
        elif self.recovery_s is None:
            back = f"not back to {self.rate_before:g}/s by the end"
        else:
            back = f"back to {self.rate_before:g}/s within {seconds_text(self.recovery_s)}"
        text = f"{out}, {back}, {count_text(self.connections_lost)} connection(s) lost"
        if self.pooler_waiting:
            text += (
                f"; the pooler showed up to {count_text(self.pooler_waiting)} client(s) waiting for a server"
                f" connection (longest {ms_text(self.pooler_wait_ms or 0)})"
            )
        return text


@dataclass(frozen=True)
class SnapshotHold:
    """The longest another session held the oldest snapshot during the run (its backend_xmin seen
    in consecutive samples), and the dead tuples meanwhile."""

    pid: int
    application: str
    held_s: float
    dead_tuples_before: int
    dead_tuples_peak: int
    xmin_age: int | None = None  # the snapshot's xmin, in transactions behind, when last seen

    def as_json(self) -> dict[str, Any]:
        return dict(self.__dict__) | {"held_s": round(self.held_s, 1)}


@dataclass(frozen=True)
class PoolerView:
    """The pooler's side of the run, read from its console each second (-pooler-admin)."""

    samples: int
    waiting_max: int  # clients waiting for a server connection at once
    longest_wait_ms: float  # the longest any client was seen waiting
    servers_active_max: int
    waited_s: float  # what the run's clients waited for server connections, in all

    def as_json(self) -> dict[str, Any]:
        return dict(self.__dict__) | {"waited_s": round(self.waited_s, 3)}
