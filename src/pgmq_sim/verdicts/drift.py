"""Does a long run hold its figures? The run is cut into windows (minutes in a run of ten minutes
or more; tenths of a shorter run judged with -drift), and each figure gets its trend: the
least-squares line through the windows (linregress's, its p-value from scipy's t distribution), per
hour and over the run, as a share of the figure's mean.

A figure drifts when its line is significant (p < 0.01: noise between windows is not a trend) and
its trend per hour passes the figure's bound; in a run shorter than ten minutes the line must also
have moved over the run by more than the figure's floor (an hour's extrapolation of a short run's
wobble is not a drift). The table is judged from its first autovacuum in the run on (its second
in a short run): until vacuum has run, a queue's table grows by the dead rows that vacuum will
reclaim, and that growth says nothing. A snapshot held for more than half the run (and 30 s), timed
by its backend_xmin seen in consecutive samples, drifts when dead tuples rose behind it (vacuum
could remove nothing); the table is then judged from the start. A snapshot held while dead tuples
stayed flat held nothing back, and a transaction open without a snapshot holds none.
The first window (the workers' ramp, the first allocations) is left out of the lines; the tool's
memory is judged by its late slope, the last third of the windows: a warm-up is not a leak.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from statistics import median
from typing import Any

from pgmq_sim.model.census import ServerCensus
from pgmq_sim.model.quantities import count_text
from pgmq_sim.result.timeline import SecondSample
from pgmq_sim.settings import DRIFT_MIN_S, SHORT_DRIFT_S

SIGNIFICANCE = 0.01
SNAPSHOT_MIN_S = 30.0
LATE_WINDOWS = 4  # the fewest a late figure's line is drawn through
DEAD_ROSE = 1000  # dead tuples risen behind a held snapshot (and by half) confirm it held vacuum back


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
    """What a long run's drift came to: its windows, each figure's trend, what drifted."""

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


@dataclass(frozen=True)
class DriftFigure:
    name: str
    label: str
    unit: str
    bound_per_h: float  # a trend beyond this share of the mean per hour, in the worse direction
    floor: float  # a short run's line must move by more than this share of the mean over the run
    rising_is_worse: bool
    read: Callable[[Window], float | None]
    late: bool = False  # judged from the last third of the windows (a warm-up is not a trend)


FIGURES = (
    DriftFigure("throughput", "throughput", "msg/s", 0.10, 0.05, False, lambda w: w.throughput_per_s),
    DriftFigure("e2e_p99", "p99", "ms", 0.25, 0.10, True, lambda w: w.e2e_p99_ms),
    DriftFigure("table", "table", "MB", 0.50, 0.05, True, lambda w: w.table_mb),
    DriftFigure("rss", "tool RSS (last third)", "MB", 0.20, 0.10, True, lambda w: w.rss_mb, late=True),
)


def window_length(elapsed_s: float, asked: bool) -> int | None:
    """Minutes for a long run; tenths of a shorter one when asked; None: no drift section."""
    if elapsed_s >= DRIFT_MIN_S:
        return 60
    if asked and elapsed_s >= SHORT_DRIFT_S * 0.95:
        return max(5, int(elapsed_s // 10))
    return None


def _sampled(chunk: Sequence[SecondSample], key: str) -> list[Any]:
    """The seconds' values of one field, where it was sampled."""
    return [v for s in chunk if (v := getattr(s, key)) is not None]


def _last(chunk: Sequence[SecondSample], key: str) -> Any:
    values = _sampled(chunk, key)
    return values[-1] if values else None


def windows(samples: Sequence[SecondSample], length: int) -> list[Window]:
    """Whole windows only: a partial last one would read as a fall."""
    out = []
    for start in range(0, len(samples) - length + 1, length):
        chunk = samples[start : start + length]
        p99s, ages = _sampled(chunk, "e2e_p99_ms"), _sampled(chunk, "snapshot_age_s")
        out.append(
            Window(
                start,
                length,
                round(sum(s.processed for s in chunk) / length, 3),
                round(median(p99s), 3) if p99s else None,
                _last(chunk, "table_mb"),
                _last(chunk, "dead_tuples"),
                _last(chunk, "autovacuums"),
                max(ages) if ages else None,
                _last(chunk, "rss_mb"),
            )
        )
    return out


def trend(figure: DriftFigure, cut: Sequence[Window], short: bool) -> Trend | None:
    """The line through the windows after the first (a late figure: the last third, at least
    LATE_WINDOWS of them); None: too few points or a zero mean."""
    judged = cut[1:][-max(LATE_WINDOWS, len(cut) // 3) :] if figure.late else cut[1:]
    points = [(w.start_s + w.seconds / 2, v) for w in judged if (v := figure.read(w)) is not None]
    if len(points) < 4:
        return None
    xs, ys = [x for x, _ in points], [y for _, y in points]
    mean = sum(ys) / len(ys)
    if mean == 0:
        return None
    slope, p = (0.0, 1.0) if len(set(ys)) == 1 else least_squares(xs, ys)
    span_s = xs[-1] - xs[0]
    per_hour = slope * 3600
    share_h, share_run = per_hour / abs(mean), slope * span_s / abs(mean)
    worse = share_h > 0 if figure.rising_is_worse else share_h < 0
    drifting = (
        worse
        and p < SIGNIFICANCE
        and abs(share_h) > figure.bound_per_h
        and (not short or abs(share_run) > figure.floor)
    )
    return Trend(figure.name, ys[0], ys[-1], per_hour, share_h, share_run, p, drifting)


def least_squares(xs: Sequence[float], ys: Sequence[float]) -> tuple[float, float]:
    """The line's slope, and the two-sided p-value of a slope of zero, as scipy.stats.linregress
    gives them; only the t distribution is scipy's (scipy.special): importing scipy.stats at the
    run's end cost 75 MB of the tool's memory and half a second."""
    from scipy.special import stdtr  # a third of a second to import: only where a drift is judged

    n = len(xs)
    mx, my = sum(xs) / n, sum(ys) / n
    sxx = sum((x - mx) ** 2 for x in xs)
    syy = sum((y - my) ** 2 for y in ys)
    sxy = sum((x - mx) * (y - my) for x, y in zip(xs, ys, strict=True))
    r = max(-1.0, min(1.0, sxy / math.sqrt(sxx * syy)))
    df = n - 2
    if abs(r) == 1.0:
        return sxy / sxx, 0.0
    t = r * math.sqrt(df / ((1.0 - r) * (1.0 + r)))
    return sxy / sxx, float(2 * stdtr(df, -abs(t)))


def unjudged(report: DriftReport, figure: str) -> str | None:
    """Why the drift verdict would call this figure's move no drift whatever its bound: noise (p at or
    above the significance), a short run's wobble (the line moved within the figure's floor), or no
    line at all (the table before its autovacuums). None: the move is judged by its bound."""
    t = report.trend(figure)
    if t is None:
        return f"no trend ({report.table_note})" if figure == "table" else "no trend: too few windows"
    if t.p >= SIGNIFICANCE and t.per_hour != 0:  # a flat line (every window alike) is no noise
        return f"noise: p = {t.p:.2g}, not below {SIGNIFICANCE} (the drift verdict: {report.verdict})"
    floor = next(f.floor for f in FIGURES if f.name == figure)
    if report.window_s < 60 and abs(t.share_over_run) <= floor:
        return (
            f"a short run's wobble: {t.share_over_run:+.0%} over the run, within {floor:.0%}"
            f" (the drift verdict: {report.verdict})"
        )
    return None


def after_autovacuum(cut: Sequence[Window], nth: int) -> Sequence[Window]:
    """The windows from the one before the nth whose autovacuum count rose (nothing: fewer ran)."""
    counts = [w.autovacuums for w in cut]
    for index in range(1, len(cut)):
        before, now = counts[index - 1], counts[index]
        if before is not None and now is not None and now > before:
            nth -= 1
            if nth == 0:
                return cut[index - 1 :]
    return ()


def dead_rose_behind(cut: Sequence[Window]) -> tuple[int, int] | None:
    """The dead tuples in the first and the last window the longest hold spans, where they rose by
    DEAD_ROSE and by half: what a snapshot vacuum cannot get past does. None: they did not."""
    end, longest = max(enumerate(w.snapshot_age_s or 0.0 for w in cut), key=lambda a: a[1])
    began = cut[end].start_s + cut[end].seconds - longest
    held = [
        w.dead_tuples for w in cut[: end + 1] if w.start_s + w.seconds > began and w.dead_tuples is not None
    ]
    if len(held) < 2:
        return None
    first, last = held[0], held[-1]
    return (first, last) if last - first >= max(DEAD_ROSE, first / 2) else None


def judge_drift(
    samples: Sequence[SecondSample], elapsed_s: float, asked: bool = False, census: ServerCensus | None = None
) -> DriftReport | None:
    """`census`: the server's settings read before the run. Autovacuum kept from the queue's tables
    (the setting and where it is set, or the table's reloption) has the table judged from the start,
    and the run is never stable, for nothing reclaims what it leaves dead; a table not judged for want
    of autovacuums is said with the thresholds and naptime that made it wait."""
    autovacuum_off = census.autovacuum_off() if census is not None else None
    length = window_length(elapsed_s, asked)
    if length is None:
        return None
    cut = windows(samples, length)
    if len(cut) < 5:
        return None
    short = length < 60  # tenths of a run under ten minutes
    ages = [w.snapshot_age_s for w in cut if w.snapshot_age_s is not None]
    snapshot_max = max(ages) if ages else None
    run_s = cut[-1].start_s + cut[-1].seconds
    long_held = snapshot_max is not None and snapshot_max > max(SNAPSHOT_MIN_S, run_s / 2)
    rose = dead_rose_behind(cut) if long_held else None
    held = rose is not None
    # held: vacuum reclaims nothing anyway. In a short run (autovacuum wakes once a minute by
    # default) the table still grows after the first vacuum until the next one reuses its space
    table_cut = cut if held or autovacuum_off else after_autovacuum(cut, 2 if short else 1)
    trends = tuple(
        t for f in FIGURES if (t := trend(f, table_cut if f.name == "table" else cut, short)) is not None
    )
    drifting = [
        f"{f.label} {t.per_hour:+,.3g} {f.unit} per hour, {t.share_over_run:+.0%} over the run"
        for f in FIGURES
        if (t := next((t for t in trends if t.figure == f.name and t.drifting), None)) is not None
        and not (autovacuum_off and f.name == "table")  # said with its cause, below
    ]
    if rose is not None:
        drifting.append(
            f"a snapshot held {snapshot_max:.0f} s while dead tuples rose"
            f" {count_text(rose[0])} -> {count_text(rose[1])}:"
            " vacuum could remove nothing behind it"
        )
    if autovacuum_off:
        drifting.append(unvacuumed(cut, autovacuum_off))
    counts = [s.autovacuums for s in samples if s.autovacuums is not None]
    autovacuums = counts[-1] - counts[0] if counts else None
    note = _table_note(cut, table_cut, held, any(t.figure == "table" for t in trends), short)
    if autovacuum_off:
        note = f"{note.partition(',')[0]}, judged from the start (autovacuum off)"
    elif census is not None and "not judged" in note:
        note += f" ({census.vacuum_thresholds()})"
    if long_held and not held:
        note += f"; a snapshot held {snapshot_max:.0f} s, but dead tuples did not rise behind it"
    bounds = {f.name: f.bound_per_h for f in FIGURES}
    return DriftReport(length, tuple(cut), trends, tuple(drifting), snapshot_max, autovacuums, note, bounds)


def unvacuumed(cut: Sequence[Window], off: str) -> str:
    """Autovacuum off, named with what it left: the dead tuples and the table's growth per hour."""
    return unvacuumed_at([(w.start_s + w.seconds / 2, w.dead_tuples, w.table_mb) for w in cut], off)


def unvacuumed_at(points: Sequence[tuple[float, int | None, float | None]], off: str) -> str:
    """From (seconds, dead tuples, table MB) points: a drift's windows, or a run's seconds."""
    dead = [d for _, d, _ in points if d is not None]
    sized = [(t, mb) for t, _, mb in points if mb is not None]
    rose = (
        f"dead tuples {count_text(dead[0])} -> {count_text(dead[-1])}"
        if len(dead) > 1
        else f"{count_text(dead[0])} dead tuples"
        if dead
        else "dead tuples not read"
    )
    grew = "table size not read"
    if len(sized) >= 2 and sized[-1][0] > sized[0][0]:
        (t0, first), (t1, last) = sized[0], sized[-1]
        grew = f"table {first:.3g} -> {last:.3g} MB, {(last - first) / (t1 - t0) * 3600:+,.3g} MB per hour"
    return f"autovacuum off ({off}): {rose}, {grew}; nothing reclaims them"


def _table_note(
    cut: Sequence[Window], judged: Sequence[Window], held: bool, has_trend: bool, short: bool
) -> str:
    sizes = [w.table_mb for w in cut if w.table_mb is not None]
    grew = f"table {sizes[0]:.3g} -> {sizes[-1]:.3g} MB" if sizes else "table size not read"
    which = "second" if short else "first"
    if held:
        return f"{grew}, judged from the start (a held snapshot)"
    if has_trend:
        return f"{grew}, judged from the {which} autovacuum (in the window from {judged[1].start_s} s)"
    if not judged:
        ran = "fewer than two autovacuums" if short else "no autovacuum"
        return f"{grew}, not judged: {ran} in the run, so its dead rows were not yet reused"
    return f"{grew}, not judged: the {which} autovacuum came too late to draw a line after it"
