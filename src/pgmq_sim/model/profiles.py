"""How many messages are due by each moment: -rate-profile makes the offered rate a function of time
(a ramp, steps, bursts over the base -rate, or a recorded shape replayed from a CSV file). A
profile answers "how many messages are due by t" from the exact integral of its rate, so pacing
never drifts, whatever the producer's sleeps do. Pure: the producer asks, this module answers.
"""

from __future__ import annotations

import bisect
import math
from dataclasses import dataclass, field, fields
from typing import Any, Protocol

IDLE_WAIT_S = 0.05  # the longest sleep next_due_in asks for while nothing is offered
NUMBER = r"(?:\d+(?:\.\d*)?|\.\d+)(?:[eE][+-]?\d+)?"  # unsigned: a sign is never meant in a flag


def number_text(value: float) -> str:
    """A number as short as it reads back exactly (100 not 100.0, 1.2 not 1.20000)."""
    short = f"{value:g}"
    return short if float(short) == value else repr(value)


class RateProfile(Protocol):
    """The offered rate as a function of t, seconds since the workers started.

    Message i is due when the integral of the rate from 0 reaches i - 1 (i when the rate at 0 is
    0, so nothing is due before anything is offered): due(t) is that integral floor'ed (+1), so
    pacing never drifts. A profile that ends offers floor(its integral) messages in all.
    """

    def rate_at(self, t: float) -> float:
        """Offered messages per second at t (0 before 0 and after the end)."""
        ...

    def due(self, t: float) -> int:
        """Messages due by t, never decreasing (0 before 0)."""
        ...

    def next_due_in(self, t: float, count: int) -> float:
        """Seconds from t until message count+1 is due (0 if it already is); at most IDLE_WAIT_S
        while the rate at t is 0, so a producer waiting through a lull still sees its deadline."""
        ...

    def due_time(self, count: int) -> float | None:
        """When message count+1 falls due (the earliest t by which due(t) counts it), whatever t
        is now; None if it never does, or if the profile is not fixed (it cannot say ahead)."""
        ...

    @property
    def end_s(self) -> float | None:
        """After this t nothing more is due; None: the profile goes on forever."""
        ...

    def describe(self) -> str:
        """One line for the report, e.g. 'ramp 100..1000/s over 60 s'."""
        ...

    @property
    def fixed(self) -> bool:
        """Whether due(t) depends on t alone (not on a sweep's step or the messages finished), so a
        next due time, once asked, stays true: the producer keeps it rather than ask per look."""
        ...


@dataclass(frozen=True)
class _Segment:
    """A stretch over which the rate is linear, with the messages offered before it and in it."""

    start_s: float
    end_s: float  # math.inf for the endless last stretch (whose rate is then constant)
    rate_start: float
    rate_end: float
    before: float
    amount: float  # the integral over the stretch (math.inf when endless and rate > 0)

    @property
    def length_s(self) -> float:
        return self.end_s - self.start_s

    def rate_at(self, t: float) -> float:
        if self.rate_start == self.rate_end:
            return self.rate_start
        fraction = min(1.0, max(0.0, (t - self.start_s) / self.length_s))
        return self.rate_start + (self.rate_end - self.rate_start) * fraction

    def offered_by(self, t: float) -> float:
        """The integral from start_s to t (start_s <= t <= end_s).

        Each form is non-decreasing in t under float rounding too, and equals `amount` at end_s
        exactly, so the floor of the running total never steps back across stretches."""
        a, b = self.rate_start, self.rate_end
        if a == b:
            return a * (t - self.start_s) if a else 0.0
        if a < b:
            d = t - self.start_s
            return a * d + (b - a) / (2.0 * self.length_s) * (d * d)
        e = self.end_s - t  # falling: what is still to come is a sum of non-negative terms in e
        return self.amount - (b * e + (a - b) / (2.0 * self.length_s) * (e * e))

    def time_for(self, needed: float) -> float:
        """The earliest t in the stretch by which `needed` (0 < needed <= amount) is offered."""
        a, b = self.rate_start, self.rate_end
        if a == b:
            return min(self.end_s, self.start_s + needed / a)
        if a < b:
            d = _quadratic_root(a, (b - a) / (2.0 * self.length_s), needed)
            return min(self.end_s, self.start_s + d)
        e = _quadratic_root(b, (a - b) / (2.0 * self.length_s), self.amount - needed)
        return max(self.start_s, self.end_s - e)


def _quadratic_root(linear: float, square: float, value: float) -> float:
    """The x >= 0 with square*x*x + linear*x = value (linear, square >= 0), without cancellation."""
    if value <= 0:
        return 0.0
    return 2.0 * value / (linear + math.sqrt(linear * linear + 4.0 * square * value))


@dataclass(frozen=True)
class _Shape:
    """A piecewise linear rate from t = 0: where each stretch starts, and the running integral."""

    segments: tuple[_Segment, ...]
    end_s: float | None
    first: int  # 1 when message 1 is due at t = 0 (the rate there is > 0), else 0
    last: int | None  # messages due in all when the shape ends
    starts: tuple[float, ...]
    befores: tuple[float, ...]

    @classmethod
    def build(cls, stretches: list[tuple[float, float, float]], tail: float | None) -> _Shape:
        """From (until_s, rate_start, rate_end) stretches, each from the previous one's until_s (0
        for the first), and then the rate held forever (None: the shape ends after the stretches;
        0: it ends where the rate drops to 0 for good). Boundaries are kept as given, not summed."""
        parts: list[tuple[float, float, float]] = []
        for until, a, b in stretches:
            if parts and a == b == parts[-1][1] == parts[-1][2]:
                parts[-1] = (until, a, b)  # one stretch per constant rate
            else:
                parts.append((until, a, b))
        if tail == 0.0:
            while parts and parts[-1][1] == parts[-1][2] == 0.0:
                parts.pop()  # a zero rate held to the end: the shape ends where it begins
            tail = None
        segments: list[_Segment] = []
        start, before = 0.0, 0.0
        for until, a, b in parts:
            segment = _Segment(start, until, a, b, before, 0.0)
            amount = segment.offered_by(until) if a <= b else _falling_amount(segment)
            segments.append(_Segment(start, until, a, b, before, amount))
            start, before = until, before + amount
        end_s: float | None = start
        if tail is not None:
            segments.append(_Segment(start, math.inf, tail, tail, before, math.inf if tail else 0.0))
            end_s = None
        if not segments:  # nothing ever offered
            segments.append(_Segment(0.0, math.inf, 0.0, 0.0, 0.0, 0.0))
            end_s = None
        first = 1 if segments[0].rate_start > 0 else 0
        last = None if end_s is None else math.floor(before)
        return cls(
            tuple(segments),
            end_s,
            first,
            last,
            tuple(seg.start_s for seg in segments),
            tuple(seg.before for seg in segments),
        )

    def _segment_at(self, t: float) -> _Segment:
        return self.segments[max(0, bisect.bisect_right(self.starts, t) - 1)]

    def rate_at(self, t: float) -> float:
        if t < 0 or (self.end_s is not None and t >= self.end_s):
            return 0.0
        return self._segment_at(t).rate_at(t)

    def offered_by(self, t: float) -> float:
        """The integral of the rate from 0 to t."""
        if t <= 0:
            return 0.0
        if self.end_s is not None and t >= self.end_s:
            last = self.segments[-1]
            return last.before + last.amount
        index = max(0, bisect.bisect_right(self.starts, t) - 1)
        segment = self.segments[index]
        total = segment.before + segment.offered_by(t)
        if index + 1 < len(self.segments):
            total = min(total, self.befores[index + 1])
        return total

    def due(self, t: float) -> int:
        if t < 0:
            return 0
        count = math.floor(self.offered_by(t)) + self.first
        return count if self.last is None else min(count, self.last)

    def due_at(self, count: int) -> float | None:
        """The earliest t when message `count` is due; None if it never is."""
        if self.last is not None and count > self.last:
            return None
        needed = count - self.first
        if needed <= 0:
            return 0.0
        index = bisect.bisect_left(self.befores, needed) - 1  # the stretch where it is reached
        segment = self.segments[index]
        if segment.amount < needed - segment.before:
            return None  # an endless zero rate, or rounding at the very end
        return segment.time_for(needed - segment.before)


def _falling_amount(segment: _Segment) -> float:
    """The integral over a stretch with a falling rate, by the same sum offered_by subtracts."""
    a, b, length = segment.rate_start, segment.rate_end, segment.length_s
    return b * length + (a - b) / (2.0 * length) * (length * length)


def _next_due_in(profile: RateProfile, when: float | None, t: float, count: int) -> float:
    """Seconds from t until message count+1 is due, nudged so that due(t + it) really counts it."""
    if profile.due(t) > count:
        return 0.0
    rate_now = profile.rate_at(t)
    if when is None:
        return IDLE_WAIT_S
    exact = max(0.0, when - t)
    wait, step = exact, max(abs(t), abs(when), 1.0) * 1e-15
    for _ in range(40):  # float rounding may leave the integral a hair short of the count
        if profile.due(t + wait) > count:
            break
        wait, step = wait + step, step * 2.0
    else:
        wait = exact
    return wait if rate_now > 0 else min(wait, IDLE_WAIT_S)


def _nudged(profile: RateProfile, when: float | None, count: int) -> float | None:
    """`when`, nudged as _next_due_in nudges it: due(when) really counts message count+1."""
    if when is None:
        return None
    at, step = when, max(abs(when), 1.0) * 1e-15
    for _ in range(40):
        if profile.due(at) > count:
            return at
        at, step = at + step, step * 2.0
    return when


class _ShapedProfile:
    """What every profile built from a _Shape answers the same way."""

    _shape: _Shape
    fixed = True

    def rate_at(self, t: float) -> float:
        return self._shape.rate_at(t)

    def due(self, t: float) -> int:
        return self._shape.due(t)

    def next_due_in(self, t: float, count: int) -> float:
        return _next_due_in(self, self._shape.due_at(count + 1), t, count)

    def due_time(self, count: int) -> float | None:
        return _nudged(self, self._shape.due_at(count + 1), count)

    @property
    def end_s(self) -> float | None:
        return self._shape.end_s

    def describe(self) -> str:
        raise NotImplementedError


def _check_rate(rate: float, what: str) -> None:
    if not (math.isfinite(rate) and rate >= 0):
        raise ValueError(f"{what} must be a finite rate >= 0, got {rate!r}")


def _check_seconds(seconds: float, what: str) -> None:
    if not (math.isfinite(seconds) and seconds > 0):
        raise ValueError(f"{what} must be a finite number of seconds > 0, got {seconds!r}")


@dataclass(frozen=True)
class ConstantRate(_ShapedProfile):
    """The producer's pacing before profiles: message i due at (i-1)/rate, due = int(t*rate) + 1."""

    rate: float
    _shape: _Shape = field(init=False, repr=False, compare=False)

    def __post_init__(self) -> None:
        _check_rate(self.rate, "a constant rate")
        object.__setattr__(self, "_shape", _Shape.build([], self.rate))

    def describe(self) -> str:
        return f"constant {number_text(self.rate)}/s"


@dataclass(frozen=True)
class Ramp(_ShapedProfile):
    """Linear from start to end over over_s seconds, then end held (to find where a queue bends)."""

    start: float
    end: float
    over_s: float
    _shape: _Shape = field(init=False, repr=False, compare=False)

    def __post_init__(self) -> None:
        _check_rate(self.start, "a ramp's start")
        _check_rate(self.end, "a ramp's end")
        _check_seconds(self.over_s, "a ramp's length")
        shape = _Shape.build([(self.over_s, self.start, self.end)], self.end)
        object.__setattr__(self, "_shape", shape)

    def describe(self) -> str:
        rates = f"{number_text(self.start)}..{number_text(self.end)}/s"
        return f"ramp {rates} over {number_text(self.over_s)} s"


@dataclass(frozen=True)
class Steps(_ShapedProfile):
    """Each rate for each_s seconds, the last one held: a staircase to read capacity off."""

    rates: tuple[float, ...]
    each_s: float
    _shape: _Shape = field(init=False, repr=False, compare=False)

    def __post_init__(self) -> None:
        if not self.rates:
            raise ValueError("steps need at least one rate")
        for rate in self.rates:
            _check_rate(rate, "a step")
        _check_seconds(self.each_s, "a step's length")
        stretches = [((i + 1) * self.each_s, rate, rate) for i, rate in enumerate(self.rates[:-1])]
        object.__setattr__(self, "_shape", _Shape.build(stretches, self.rates[-1]))

    def describe(self) -> str:
        rates = ", ".join(number_text(rate) for rate in self.rates)
        return f"steps {rates}/s, {number_text(self.each_s)} s each"


@dataclass(frozen=True)
class Replay(_ShapedProfile):
    """A recorded (second, rate) shape, piecewise constant, replayed `speed` times faster.

    A row's rate holds until the next row's second; the last row's for one recorded second, then
    the profile ends. Before the first row's second nothing is offered. Time is compressed, rates
    are kept: a day at speed 1440 lasts 60 s and offers 1/1440 of the day's messages.
    """

    points: tuple[tuple[float, float], ...]
    speed: float = 1.0
    _shape: _Shape = field(init=False, repr=False, compare=False)

    def __post_init__(self) -> None:
        if not self.points:
            raise ValueError("a replay needs at least one (second, rate) row")
        if not (math.isfinite(self.speed) and self.speed > 0):
            raise ValueError(f"a replay speed must be finite and > 0, got {self.speed!r}")
        previous = -math.inf
        for second, rate in self.points:
            if not (math.isfinite(second) and second >= 0 and second > previous):
                raise ValueError(f"replay seconds must be finite, >= 0 and increasing, got {second!r}")
            _check_rate(rate, "a replayed rate")
            previous = second
        stretches = [(self.points[0][0] / self.speed, 0.0, 0.0)] if self.points[0][0] > 0 else []
        follows = [second for second, _ in self.points[1:]] + [self.points[-1][0] + 1.0]
        for (_, rate), until in zip(self.points, follows, strict=True):
            stretches.append((until / self.speed, rate, rate))
        object.__setattr__(self, "_shape", _Shape.build(stretches, None))

    def describe(self) -> str:
        recorded = self.points[-1][0] + 1.0
        return (
            f"replay of {len(self.points)} rows ({number_text(recorded)} s recorded)"
            f" at {number_text(self.speed)}x: {number_text(recorded / self.speed)} s"
        )


@dataclass(frozen=True)
class Burst:
    """base msg/s, plus rate more during [k*every_s, k*every_s + burst_s) for k = 0, 1, 2, ...:
    a queue's recovery after a spike, again and again."""

    base: float
    rate: float
    burst_s: float
    every_s: float
    fixed = True  # a class attribute, not a field

    def __post_init__(self) -> None:
        _check_rate(self.base, "a burst's base")
        _check_rate(self.rate, "a burst's rate")
        _check_seconds(self.burst_s, "a burst's length")
        _check_seconds(self.every_s, "a burst's period")
        if self.burst_s > self.every_s:
            raise ValueError(f"a burst of {self.burst_s!r} s does not fit in its period {self.every_s!r} s")

    @property
    def end_s(self) -> float | None:
        return None

    @property
    def _per_period(self) -> float:
        return self._within_period(self.every_s)

    def _within_period(self, into: float) -> float:
        """Offered from the start of a period to `into` seconds into it (0 <= into <= every_s)."""
        high = min(into, self.burst_s)
        return (self.base + self.rate) * high + self.base * (into - high)

    def _period_of(self, t: float) -> tuple[int, float]:
        period = math.floor(t / self.every_s)
        return period, min(self.every_s, max(0.0, t - period * self.every_s))

    def rate_at(self, t: float) -> float:
        if t < 0:
            return 0.0
        _, into = self._period_of(t)
        return self.base + self.rate if into < self.burst_s else self.base

    def due(self, t: float) -> int:
        if t < 0:
            return 0
        period, into = self._period_of(t)
        per_period = self._per_period
        # capped by the next period's start, so rounding never lets the floor step back there
        offered = min(period * per_period + self._within_period(into), (period + 1) * per_period)
        return math.floor(offered) + self._first

    @property
    def _first(self) -> int:
        return 1 if self.base + self.rate > 0 else 0

    def _due_at(self, count: int) -> float | None:
        needed = count - self._first
        if needed <= 0:
            return 0.0
        per_period = self._per_period
        if per_period <= 0:
            return None
        period = math.floor(needed / per_period)
        rest = needed - period * per_period
        if rest <= 0 and period > 0:  # reached at the very end of the period before
            period, rest = period - 1, per_period
        in_burst = (self.base + self.rate) * self.burst_s
        if rest <= in_burst:
            return period * self.every_s + rest / (self.base + self.rate)
        return period * self.every_s + min(self.every_s, self.burst_s + (rest - in_burst) / self.base)

    def next_due_in(self, t: float, count: int) -> float:
        return _next_due_in(self, self._due_at(count + 1), t, count)

    def due_time(self, count: int) -> float | None:
        return _nudged(self, self._due_at(count + 1), count)

    def describe(self) -> str:
        over = f" over {number_text(self.base)}/s" if self.base else ""
        return (
            f"burst +{number_text(self.rate)}/s for {number_text(self.burst_s)} s"
            f" every {number_text(self.every_s)} s{over}"
        )


_KINDS: dict[str, type[ConstantRate | Ramp | Steps | Replay | Burst]] = {
    "constant": ConstantRate,
    "ramp": Ramp,
    "steps": Steps,
    "replay": Replay,
    "burst": Burst,
}


def profile_data(profile: RateProfile) -> dict[str, Any] | None:
    """A profile of its form's numbers as plain data, so another process (a spread run's producer,
    which may not see a replayed file) builds the same one; None for one set as the run goes (a
    sweep's, the phases')."""
    for kind, form in _KINDS.items():
        if type(profile) is form:
            values = {f.name: getattr(profile, f.name) for f in fields(form) if f.init}
            return {"kind": kind, **values}
    return None


def profile_of(data: dict[str, Any]) -> RateProfile:
    """The profile `profile_data` gave (its numbers exact: floats travel as floats)."""
    values = {name: value for name, value in data.items() if name != "kind"}
    if data["kind"] == "steps":
        values["rates"] = tuple(float(rate) for rate in values["rates"])
    if data["kind"] == "replay":
        values["points"] = tuple((float(second), float(rate)) for second, rate in values["points"])
    return _KINDS[str(data["kind"])](**values)
