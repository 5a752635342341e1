"""A run's seconds as the timeline draws them: the last, partial second as a rate, a long run's
seconds in buckets."""

from __future__ import annotations

import math
import statistics
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from pgmq_sim.render.palette import PERCENTILES

Doc = dict[str, Any]
MOST_POINTS = 600  # a timeline's points at most: a day's run is drawn in buckets of seconds


def nan(value: Any) -> float:
    return math.nan if value is None else float(value)


@dataclass(frozen=True)
class Track:
    """One run's seconds, as the timeline draws them."""

    label: str
    seconds: list[float]
    processed: list[float]
    arrived: list[float] | None  # paced runs
    backlog: list[float]
    dead_tuples: list[float]
    percentiles: dict[str, list[float]]
    faults: list[Doc]
    episodes: list[Doc]  # verdicts/episodes' stretches, as the JSON holds them
    steps: list[Doc]
    step_unit: str
    bound_per_s: float | None
    bucket_s: int = 1  # seconds per point: a long run's seconds are drawn in buckets

    @classmethod
    def of(cls, doc: Doc, label: str, most: int = MOST_POINTS) -> Track:
        """The run's seconds; past `most` of them, one point per bucket of seconds: the rates their
        mean, the backlog, dead tuples, p95 and p99 their worst second, the p50 their median."""
        samples = doc.get("timeline") or []
        seconds = [float(s["second"] + 1) for s in samples]
        scale = [1.0] * len(samples)
        elapsed = float(doc.get("elapsed_s") or 0.0)
        partial = elapsed - math.floor(elapsed)
        if samples and 0.05 < partial < 1 and len(samples) > math.floor(elapsed):
            scale[-1] = 1 / partial  # the last fraction of a second, as a per-second rate
            seconds[-1] = samples[-1]["second"] + partial
        paced = any(s.get("offered") for s in samples)
        sweep = doc.get("sweep") or {}
        bucket = max(1, math.ceil(len(samples) / most))
        return cls(
            label=label,
            seconds=_buckets(seconds, bucket, max),
            processed=_buckets(
                [s["processed"] * k for s, k in zip(samples, scale, strict=True)], bucket, _mean
            ),
            arrived=_buckets([s["arrived"] * k for s, k in zip(samples, scale, strict=True)], bucket, _mean)
            if paced
            else None,
            backlog=_buckets([float(s["backlog"]) for s in samples], bucket, _worst),
            dead_tuples=_buckets([nan(s.get("dead_tuples")) for s in samples], bucket, _worst),
            percentiles={
                key: _buckets(
                    [nan(s.get(key)) for s in samples], bucket, _median if key == "e2e_p50_ms" else _worst
                )
                for key, _, _ in PERCENTILES
            },
            faults=list(doc.get("faults") or []),
            episodes=list(doc.get("episodes") or []),
            steps=list(sweep.get("steps") or []),
            step_unit=" workers" if sweep.get("kind") == "workers" else "/s",
            bound_per_s=doc.get("ordering_bound_per_s"),
            bucket_s=bucket,
        )


def _buckets(values: list[float], size: int, merge: Callable[[list[float]], float]) -> list[float]:
    if size == 1:
        return values
    return [merge(values[i : i + size]) for i in range(0, len(values), size)]


def _known(values: list[float]) -> list[float]:
    return [v for v in values if not math.isnan(v)]


def _mean(values: list[float]) -> float:
    known = _known(values)
    return sum(known) / len(known) if known else math.nan


def _worst(values: list[float]) -> float:
    return max(_known(values), default=math.nan)


def _median(values: list[float]) -> float:
    known = _known(values)
    return statistics.median(known) if known else math.nan
