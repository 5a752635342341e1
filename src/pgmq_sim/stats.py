"""What the run measured: per-worker counters and latency histograms, merged at the end.

Each worker owns its WorkerStats and is its only writer; the progress display
only reads integers from it, so no lock is needed.
"""

from __future__ import annotations

import math
from array import array
from collections.abc import Iterable
from dataclasses import dataclass, field

from hdrh.histogram import HdrHistogram

HOUR_US = 3_600_000_000


class LatencyHistogram:
    """Latencies in microseconds (1 us .. 1 h, 3 significant digits), reported in ms."""

    def __init__(self) -> None:
        self._hist = HdrHistogram(1, HOUR_US, 3)

    def record_ms(self, ms: float) -> None:
        self._hist.record_value(min(max(1, round(ms * 1000)), HOUR_US))

    def merge(self, other: LatencyHistogram) -> None:
        self._hist.add(other._hist)

    @property
    def count(self) -> int:
        return int(self._hist.get_total_count())

    def percentiles_ms(self) -> dict[str, float | None]:
        if self.count == 0:
            return {"p50": None, "p95": None, "p99": None, "max": None}
        at = self._hist.get_value_at_percentile
        return {
            "p50": at(50) / 1000,
            "p95": at(95) / 1000,
            "p99": at(99) / 1000,
            "max": self._hist.get_max_value() / 1000,
        }

    @classmethod
    def merged(cls, parts: Iterable[LatencyHistogram]) -> LatencyHistogram:
        total = cls()
        for part in parts:
            total.merge(part)
        return total


@dataclass
class WorkerStats:
    """One worker's counters; written only by that worker's thread."""

    name: str
    queue_type: str
    processed: int = 0
    empty_claims: int = 0
    busy_s: float = 0.0
    work_s: float = 0.0
    claim: LatencyHistogram = field(default_factory=LatencyHistogram)
    complete: LatencyHistogram = field(default_factory=LatencyHistogram)
    e2e: LatencyHistogram = field(default_factory=LatencyHistogram)
    commit_at_s: array = field(default_factory=lambda: array("d"))
    e2e_ms: array = field(default_factory=lambda: array("d"))

    def record_processed(
        self, commit_at_s: float, e2e_ms: float | None, busy_s: float, work_s: float
    ) -> None:
        """e2e_ms is None when the completion found no row (a message processed twice)."""
        if e2e_ms is not None:
            self.e2e.record_ms(e2e_ms)
        self.commit_at_s.append(commit_at_s)
        self.e2e_ms.append(math.nan if e2e_ms is None else e2e_ms)
        self.busy_s += busy_s
        self.work_s += work_s
        self.processed += 1


@dataclass(frozen=True)
class SecondSample:
    """One second of the run, for the time series and the plot."""

    second: int
    arrived: int
    processed: int
    backlog: int
    e2e_p50_ms: float | None
    e2e_p95_ms: float | None
    e2e_p99_ms: float | None


def percentile(sorted_values: list[float], pct: float) -> float:
    """Nearest-rank percentile of an already sorted list."""
    rank = max(1, math.ceil(pct / 100 * len(sorted_values)))
    return sorted_values[rank - 1]


def timeline(
    workers: list[WorkerStats], produced_at_s: list[tuple[float, int]], elapsed_s: float
) -> list[SecondSample]:
    """Per-second throughput, backlog and end-to-end latency from the workers' samples.

    produced_at_s lists (time, messages produced so far) points from the producer.
    """
    seconds = max(1, math.ceil(elapsed_s))
    per_second: list[list[float]] = [[] for _ in range(seconds)]
    for stats in workers:
        for at, e2e in zip(stats.commit_at_s, stats.e2e_ms, strict=True):
            bucket = per_second[min(int(at), seconds - 1)]
            bucket.append(e2e)
    samples = []
    done = 0
    produced_index = 0
    produced = 0
    previous = 0
    for second, bucket in enumerate(per_second):
        done += len(bucket)
        latencies = sorted(v for v in bucket if not math.isnan(v))
        while produced_index < len(produced_at_s) and produced_at_s[produced_index][0] <= second + 1:
            produced = produced_at_s[produced_index][1]
            produced_index += 1
        pct = [percentile(latencies, p) if latencies else None for p in (50, 95, 99)]
        samples.append(SecondSample(second, produced - previous, len(bucket), max(0, produced - done), *pct))
        previous = produced
    return samples
