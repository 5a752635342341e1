"""What a long run's drift came to: its windows, each figure's trend, what drifted."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any


@dataclass(frozen=True)
class Window:
    start_s: int
    seconds: int
    throughput_per_s: float
    e2e_p99_ms: float | None  # the median of the window's per-second p99s
    table_mb: float | None
    dead_tuples: int | None
    autovacuums: int | None  # runs so far, cumulative
    snapshot_age_s: float | None  # the oldest snapshot's age, the window's longest
    rss_mb: float | None

    def as_json(self) -> dict[str, Any]:
        return dict(self.__dict__)


@dataclass(frozen=True)
class Trend:
    figure: str
    first: float
    last: float
    per_hour: float  # the line's slope per hour, in the figure's unit
    share_per_hour: float  # as a share of the mean
    share_over_run: float
    p: float
    drifting: bool

    def as_json(self) -> dict[str, Any]:
        return {
            "figure": self.figure,
            "first": round(self.first, 3),
            "last": round(self.last, 3),
            "per_hour": round(self.per_hour, 3),
            "share_per_hour": round(self.share_per_hour, 4),
            "share_over_run": round(self.share_over_run, 4),
            "p": float(f"{self.p:.3g}"),
            "drifting": self.drifting,
        }


@dataclass(frozen=True)
class DriftReport:
    window_s: int
    windows: tuple[Window, ...]
    trends: tuple[Trend, ...]
    drifting: tuple[str, ...]  # e.g. "table +95.7 MB per hour, +123% over the run"
    snapshot_max_s: float | None
    autovacuums: int | None  # during the run
    table_note: str  # from when the table was judged, or why it was not
    bounds_per_hour: dict[str, float]  # each figure's bound, as judged

    @property
    def verdict(self) -> str:
        return "drifting" if self.drifting else "stable"

    def trend(self, figure: str) -> Trend | None:
        return next((t for t in self.trends if t.figure == figure), None)

    def as_json(self) -> dict[str, Any]:
        return {
            "verdict": self.verdict,
            "drifting": list(self.drifting),
            "window_s": self.window_s,
            "trends": [t.as_json() for t in self.trends],
            "bounds_per_hour": self.bounds_per_hour,
            "oldest_snapshot_max_s": self.snapshot_max_s,
            "autovacuums": self.autovacuums,
            "table_note": self.table_note,
            "windows": [w.as_json() for w in self.windows],
        }
