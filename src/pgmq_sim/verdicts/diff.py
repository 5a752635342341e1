"""Two runs compared figure by figure, each change judged against the runs' own noise.

A figure with a per-second series in both runs (throughput, end-to-end p50 and p99) is compared
by its seconds: a change is `better` or `worse` only when the Mann-Whitney U test (scipy) says the
two sets of seconds differ (p < 0.01; Go's benchstat takes 0.05) and the median second moved by
more than 1.5 interquartile ranges of the steadier run and by the figure's floor (below); else
`~`. A run's noise is its own seconds; a short episode in one run (an autovacuum) moves few of
them. A figure with one value per run (cost per message, a knee) has
no series to measure noise by.

The seconds of one run vary less than runs of one setting do: a cache, a checkpoint or a neighbour
on the machine between two runs moves every second of the later one. Measured on 2 shared cores,
back to back: end-to-end p50 +12%, claim p50 +72%, WAL per message +5%, client CPU +9%; and the
end-to-end p99's median second, the few slowest of each second's messages, from 11.5 to 17 ms over
six runs of one setting back to back (each on a new embedded server: -duration 10 -rate 400
-workers 12 -work-ms 5-5), so that two of them were "better" by 32% at p < 0.001. So every figure
has a floor, the change it must also exceed to count: 5% for throughput and commits, 25% for the
p50s, 50% for the end-to-end p99, 15% for WAL and CPU per message (WAL: more where the runs'
full-page images differ, a checkpoint in one of them), a knee its sweep's resolution (at least 5%)
and, with -repeat, the spread its rounds showed.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from statistics import median, quantiles
from typing import Any

from pgmq_sim.errors import UsageError

SIGNIFICANCE = 0.01
MIN_SECONDS = 8  # fewer whole seconds than this in a run: no series, the floor decides
PAGE_BYTES = 8192  # a full-page image, at most
SPREADS = 1.5  # the median second must move by more than this many interquartile ranges
SETTINGS_COMPARED = (
    "claim", "wakeup", "tx", "workers", "rate", "rate_profile", "sweep", "orders", "types", "work_ms",
    "key_skew", "payload_bytes", "fill_db", "duration", "delmsg", "audit",
)  # fmt: skip
DEFAULT_FAIL_ON = ("throughput", "e2e-p99", "wal-per-msg")
Doc = dict[str, Any]


@dataclass(frozen=True)
class DiffFigure:
    name: str
    higher_is_better: bool
    value: Callable[[Doc], float | None]
    floor: Callable[[Doc, Doc], float]  # the least change that counts, whatever the test says
    series: Callable[[Doc], list[float]] | None = None  # per-second samples, for the noise


def _get(*path: str) -> Callable[[Doc], float | None]:
    def read(doc: Doc) -> float | None:
        value: Any = doc
        for key in path:
            if not isinstance(value, dict) or value.get(key) is None:
                return None
            value = value[key]
        return float(value)

    return read


def _seconds(key: str) -> Callable[[Doc], list[float]]:
    """A per-second series without the first and the last second (ramp-up, a partial second)."""

    def read(doc: Doc) -> list[float]:
        samples = [s.get(key) for s in (doc.get("timeline") or [])[1:-1]]
        return [float(v) for v in samples if v is not None]

    return read


def _floor(share: float) -> Callable[[Doc, Doc], float]:
    return lambda _base, _new: share


def _knee_floor(base: Doc, new: Doc) -> float:
    """The sweep's resolution, and with -repeat what its rounds disagreed on: the spread of the
    achieved rate at one offered rate, and how far from the knee a rate both passed and failed."""
    floors = [0.05]
    for doc in (base, new):
        sweep = doc.get("sweep") or {}
        adaptive = sweep.get("adaptive") or {}
        if adaptive.get("resolution_reached") is not None:
            floors.append(float(adaptive["resolution_reached"]))
        knee = sweep.get("max_sustainable_per_s")
        for rate in adaptive.get("noise") or []:
            achieved = [float(a) for a in rate.get("achieved_per_s") or [] if a]
            if len(achieved) > 1 and median(achieved) > 0:
                floors.append((max(achieved) - min(achieved)) / median(achieved))
            if knee and 0 < rate.get("passed", 0) < rate.get("runs", 0):
                floors.append(abs(float(rate["rate"]) / float(knee) - 1))
    return max(floors)


def _wal_floor(base: Doc, new: Doc) -> float:
    """15%, or more where the runs' full-page images differ: the first change to a page after a
    checkpoint logs the whole page, so a checkpoint inside one run and not the other moves its WAL
    by what it cost in pages (up to a page each), not by what the queue costs."""
    fpi = [_get("server_cost", "wal_fpi_per_msg")(doc) for doc in (base, new)]
    wal = _get("server_cost", "wal_bytes_per_msg")(base)
    if None in fpi or not wal:
        return 0.15
    assert fpi[0] is not None and fpi[1] is not None
    return max(0.15, abs(fpi[1] - fpi[0]) * PAGE_BYTES / wal)


LATENCY, TAIL, COST = _floor(0.25), _floor(0.5), _floor(0.15)
FIGURES = (
    DiffFigure("throughput", True, _get("throughput_per_s"), _floor(0.05), _seconds("processed")),
    DiffFigure("e2e-p50", False, _get("latency_ms", "e2e", "p50"), LATENCY, _seconds("e2e_p50_ms")),
    DiffFigure("e2e-p99", False, _get("latency_ms", "e2e", "p99"), TAIL, _seconds("e2e_p99_ms")),
    DiffFigure("claim-p50", False, _get("latency_ms", "claim", "p50"), LATENCY),
    DiffFigure("wal-per-msg", False, _get("server_cost", "wal_bytes_per_msg"), _wal_floor),
    DiffFigure("commits-per-msg", False, _get("server_cost", "commits_per_msg"), _floor(0.05)),
    DiffFigure("server-cpu-per-msg", False, _get("server_cost", "cpu_us_per_msg"), COST),
    DiffFigure("client-cpu-per-msg", False, _get("client", "cpu_us_per_msg"), COST),
    DiffFigure("knee", True, _get("sweep", "max_sustainable_per_s"), _knee_floor),
)
NAMES = tuple(f.name for f in FIGURES)


@dataclass(frozen=True)
class FigureChange:
    name: str
    base: float | None
    new: float | None
    verdict: str  # better | worse | ~ | n/a
    how: str  # how the noise was judged

    @property
    def change(self) -> float | None:
        if self.base is None or self.new is None or self.base == 0:
            return None
        return self.new / self.base - 1

    def as_json(self) -> dict[str, Any]:
        change = self.change
        return {
            "figure": self.name, "base": self.base, "new": self.new,
            "change": None if change is None else round(change, 4),
            "verdict": self.verdict, "noise": self.how,
        }  # fmt: skip


def setting_differences(base: Doc, new: Doc) -> list[str]:
    a, b = base.get("settings") or {}, new.get("settings") or {}
    out = [f"{key}: {a.get(key)} -> {b.get(key)}" for key in SETTINGS_COMPARED if a.get(key) != b.get(key)]
    if base.get("server") != new.get("server"):
        out.append(f"server: {base.get('server')} -> {new.get('server')}")
    return out


def compare(base: Doc, new: Doc) -> list[FigureChange]:
    changes = []
    for figure in FIGURES:
        b, n = figure.value(base), figure.value(new)
        if b is None or n is None or math.isnan(b) or math.isnan(n):
            changes.append(FigureChange(figure.name, b, n, "n/a", "not in both runs"))
            continue
        changes.append(judge(figure, base, new, b, n))
    return changes


def judge(figure: DiffFigure, base: Doc, new: Doc, b: float, n: float) -> FigureChange:
    change = (n / b - 1) if b else (0.0 if n == b else math.inf)
    direction = "better" if (change > 0) == figure.higher_is_better else "worse"
    floor = figure.floor(base, new)
    series_b = figure.series(base) if figure.series else []
    series_n = figure.series(new) if figure.series else []
    if len(series_b) >= MIN_SECONDS and len(series_n) >= MIN_SECONDS:
        if len(set(series_b + series_n)) == 1:
            return FigureChange(figure.name, b, n, "~", "every second the same")
        from scipy.stats import mannwhitneyu  # half a second to import: only where runs are diffed

        p = float(mannwhitneyu(series_b, series_n, alternative="two-sided").pvalue)
        # the typical seconds must move by more than the steadier run's spread between its own
        # seconds: medians, so that an episode in a few seconds of one run (an autovacuum, a
        # checkpoint, a neighbour) does not pass for a change
        spread = SPREADS * min(_iqr(series_b), _iqr(series_n))
        middle_b, middle_n = median(series_b), median(series_n)
        shift = abs(middle_n - middle_b)
        how = (
            f"Mann-Whitney over {len(series_b)} and {len(series_n)} seconds: p={p:.2g};"
            f" median seconds {middle_b:.3g} -> {middle_n:.3g}, spread {spread:.3g}, floor {floor:.0%}"
        )
        moved = shift > max(spread, floor * abs(middle_b))
        direction = "better" if (middle_n > middle_b) == figure.higher_is_better else "worse"
        significant = p < SIGNIFICANCE and moved
        return FigureChange(figure.name, b, n, direction if significant else "~", how)
    how = f"one value per run: beyond a {floor:.0%} floor"
    return FigureChange(figure.name, b, n, direction if abs(change) > floor else "~", how)


def _iqr(values: Sequence[float]) -> float:
    q = quantiles(values, n=4, method="inclusive")
    return q[2] - q[0]


def parse_fail_on(text: str) -> tuple[str, ...]:
    names = tuple(n.strip() for n in text.split(",") if n.strip())
    unknown = [n for n in names if n not in NAMES]
    if unknown or not names:
        raise UsageError(f"-fail-on '{text}': the figures are {', '.join(NAMES)}")
    return names


def single_run(doc: Doc, what: str) -> Doc:
    """A run's document; a -compare document (several runs) is refused: diff one cell's run."""
    if "runs" in doc and "settings" not in doc:
        raise UsageError(f"{what} holds several runs (-compare); diff the JSON of one run")
    if "settings" not in doc or "throughput_per_s" not in doc:
        raise UsageError(f"{what} is not a pgmq-sim run's JSON (-json FILE)")
    return doc


def worse(changes: Sequence[FigureChange], fail_on: Sequence[str]) -> list[FigureChange]:
    return [c for c in changes if c.name in fail_on and c.verdict == "worse"]


def diff_json(
    differences: list[str], changes: Sequence[FigureChange], failing: Sequence[FigureChange]
) -> Doc:
    """What `pgmq-sim diff -json` and a run's `baseline` both hold."""
    return {
        "settings_differ": differences,
        "figures": [c.as_json() for c in changes],
        "worse": [c.name for c in failing],
    }
