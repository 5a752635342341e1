"""What happened to a run along the way, recorded by the threads that saw it (faults injected or met,
the oldest snapshot another session held). Plain values: the result and the renderers read them."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any


@dataclass(frozen=True)
class Fault:
    """A fault injected into, or met by, the run, at a time since the workers started."""

    at_s: float
    kind: str  # a FaultKind, or "KIND end" for the end of a hold
    detail: str

    def as_json(self) -> dict[str, Any]:
        return {"at_s": round(self.at_s, 3), "kind": self.kind, "detail": self.detail}


@dataclass(frozen=True)
class SnapshotHold:
    """The oldest snapshot another session held during the run, and the dead tuples meanwhile."""

    pid: int
    application: str
    held_s: float
    dead_tuples_before: int
    dead_tuples_peak: int

    def as_json(self) -> dict[str, Any]:
        return dict(self.__dict__) | {"held_s": round(self.held_s, 1)}
