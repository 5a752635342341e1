"""The shape of the traffic a run offers: which keys (order_id) its messages carry, and how many
messages are due by each moment. Pure: the producer asks, this module answers from the flags.

Keys: -key-skew uniform draws order_id evenly from 1..K, exactly as the producer always has (one
rng.randint per message, so a seeded run replays the same messages); zipf:S makes key 1 the
hottest, P(k) proportional to k**-S, the contention real ordered queues see on a few busy orders.

Rates: -rate-profile makes the offered rate a function of time (a ramp, steps, bursts over the base
-rate, or a recorded shape from a CSV file). A profile answers "how many messages are due by t"
from the exact integral of its rate, so pacing never drifts, whatever the producer's sleeps do.
"""

from __future__ import annotations

import bisect
import math
import random
import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import Literal, Protocol

from pgmq_sim.errors import UsageError
from pgmq_sim.paths import describe_path

INT4_MAX = 2**31 - 1  # msg_id and order_id are the seed's integer columns
KEY_SKEW_FORMS = "give uniform or zipf:S with S > 0, e.g. zipf:1.2"
IDLE_WAIT_S = 0.05  # the longest sleep next_due_in asks for while nothing is offered
MAX_PROFILE_BYTES = 10_000_000  # a day at one row a second is ~1.5 MB; /dev/zero is not a recording
REPLAY_SPEED_FLAG = "-speed"
_NUMBER = r"(?:\d+(?:\.\d*)?|\.\d+)(?:[eE][+-]?\d+)?"  # unsigned: a sign is never meant
_TAYLOR_BELOW = 1e-8  # below it, log1p(x)/x and expm1(x)/x come from their series (no 0/0)
_ZIPF_HEAD = 1000  # zipf_share sums this many terms exactly, the rest by Euler-Maclaurin


# --- keys ---------------------------------------------------------------------------------------


@dataclass(frozen=True)
class KeySkew:
    """How order_ids are spread: evenly, or Zipf with exponent s (s is 0.0 for uniform)."""

    kind: Literal["uniform", "zipf"]
    s: float = 0.0

    def __post_init__(self) -> None:
        if self.kind not in ("uniform", "zipf"):
            raise ValueError(f"unknown key skew kind {self.kind!r}")
        if self.kind == "uniform" and self.s != 0.0:
            raise ValueError(f"a uniform skew has no exponent (got {self.s!r})")
        if self.kind == "zipf" and not (math.isfinite(self.s) and self.s > 0):
            raise ValueError(f"a zipf skew needs a finite exponent > 0 (got {self.s!r})")

    @classmethod
    def parse(cls, text: str) -> KeySkew:
        """The -key-skew flag's text as a skew, or a one-line usage error."""
        given = text.strip()
        if given == "uniform":
            return cls("uniform")
        name, colon, exponent = given.partition(":")
        if name == "zipf" and colon and re.fullmatch(_NUMBER, exponent):
            s = float(exponent)
            if math.isfinite(s) and s > 0:
                return cls("zipf", s)
        raise UsageError(f"-key-skew '{describe_path(text)}' is not a skew; {KEY_SKEW_FORMS}")

    def __str__(self) -> str:
        return "uniform" if self.kind == "uniform" else f"zipf:{_number_text(self.s)}"


class KeySampler(Protocol):
    """Draws one order_id in 1..K per message (1 is the hottest key when skewed)."""

    def draw(self, rng: random.Random) -> int: ...


def key_sampler(skew: KeySkew, keys: int) -> KeySampler:
    """The sampler the flag asks for over keys 1..keys."""
    if skew.kind == "uniform":
        return UniformKeys(keys)
    return ZipfKeys(keys, skew.s)


def _check_keys(keys: int) -> None:
    if not 1 <= keys <= INT4_MAX:
        raise ValueError(f"keys must be in 1..{INT4_MAX} (order_id is an integer), got {keys}")


@dataclass(frozen=True)
class UniformKeys:
    """Every key equally likely: one rng.randint per draw, so seeded runs keep their messages."""

    keys: int

    def __post_init__(self) -> None:
        _check_keys(self.keys)

    def draw(self, rng: random.Random) -> int:
        return rng.randint(1, self.keys)


@dataclass(frozen=True)
class ZipfKeys:
    """Bounded Zipf over 1..keys, P(k) proportional to k**-s, by rejection-inversion.

    Hörmann & Derflinger (1996), in the form of Apache Commons RNG's
    RejectionInversionZipfSampler: the hat integral H(x) = (x**(1-s) - 1)/(1-s) has a limit at
    s = 1 (log x), so one code path serves every s > 0. Exact distribution, no table (keys may be
    millions), O(1) expected rng.random() calls per draw (the acceptance rate is high for all s).
    """

    keys: int
    s: float
    _h_integral_x1: float = field(init=False, repr=False, compare=False)
    _h_integral_keys: float = field(init=False, repr=False, compare=False)
    _squeeze: float = field(init=False, repr=False, compare=False)

    def __post_init__(self) -> None:
        _check_keys(self.keys)
        if not (math.isfinite(self.s) and self.s > 0):
            raise ValueError(f"a zipf exponent must be finite and > 0, got {self.s!r}")
        s = self.s
        object.__setattr__(self, "_h_integral_x1", _h_integral(1.5, s) - 1.0)
        object.__setattr__(self, "_h_integral_keys", _h_integral(self.keys + 0.5, s))
        # below this distance from x, k is accepted without evaluating the exact test (Theorem 2)
        squeeze = 2.0 - _h_integral_inverse(_h_integral(2.5, s) - _h(2.0, s), s)
        object.__setattr__(self, "_squeeze", squeeze)

    def draw(self, rng: random.Random) -> int:
        s, keys = self.s, self.keys
        low, high = self._h_integral_x1, self._h_integral_keys
        while True:
            u = high + rng.random() * (low - high)  # uniform in (H(1.5) - 1, H(keys + 0.5)]
            x = _h_integral_inverse(u, s)
            key = int(x + 0.5) if x < keys else keys  # x may round past keys + 0.5 (or be inf)
            if key < 1:
                key = 1
            # P(key) proportional to H(key + 1/2) - H(key - 1/2) so far; accepting with
            # probability h(key) / that makes it proportional to key**-s
            if key - x <= self._squeeze or u >= _h_integral(key + 0.5, s) - _h(key, s):
                return key


def _h(x: float, s: float) -> float:
    """The hat function x**-s."""
    return math.exp(-s * math.log(x))


def _h_integral(x: float, s: float) -> float:
    """H(x) = (x**(1-s) - 1)/(1-s), log(x) at s = 1, written to stay accurate near s = 1."""
    log_x = math.log(x)
    return _expm1_over_x((1.0 - s) * log_x) * log_x


def _h_integral_inverse(y: float, s: float) -> float:
    """The x with H(x) = y (infinite when y is at H's bound for s > 1)."""
    t = y * (1.0 - s)
    if t <= -1.0:  # only by rounding: H(x) < 1/(s-1) for s > 1
        return math.inf
    return math.exp(_log1p_over_x(t) * y)


def _log1p_over_x(x: float) -> float:
    if abs(x) > _TAYLOR_BELOW:
        return math.log1p(x) / x
    return 1.0 - x * (0.5 - x * (1.0 / 3.0 - 0.25 * x))


def _expm1_over_x(x: float) -> float:
    if abs(x) > _TAYLOR_BELOW:
        return math.expm1(x) / x
    return 1.0 + x * 0.5 * (1.0 + x / 3.0 * (1.0 + 0.25 * x))


def zipf_share(keys: int, s: float, rank: int = 1) -> float:
    """The expected share of the key of this rank under ZipfKeys(keys, s): rank**-s / H(keys, s).

    H(keys, s) = sum of k**-s for k in 1..keys, summed exactly (math.fsum) up to 1000 keys. Past
    that, terms 1..999 exactly and 1000..keys by Euler-Maclaurin with three Bernoulli corrections,
    whose remainder is at most 2*zeta(6)/(2*pi)**6 * s(s+1)(s+2)(s+3)(s+4) * 1000**(-s-5): below
    6e-20 for every s >= 0, and H >= 1, so the share is exact to float rounding (~1e-15 relative).
    """
    _check_keys(keys)
    if not (math.isfinite(s) and s >= 0):
        raise ValueError(f"a zipf exponent must be finite and >= 0, got {s!r}")
    if not 1 <= rank <= keys:
        raise ValueError(f"rank {rank} is not in 1..{keys}")
    return _h(rank, s) / _harmonic(keys, s)


def _harmonic(keys: int, s: float) -> float:
    """The generalized harmonic number H(keys, s) (see zipf_share for its error)."""
    if keys <= _ZIPF_HEAD:
        return math.fsum(_h(k, s) for k in range(1, keys + 1))
    m = _ZIPF_HEAD
    head = math.fsum(_h(k, s) for k in range(1, m))
    log_ratio = math.log(keys / m)
    integral = _h(m, s) * m * log_ratio * _expm1_over_x((1.0 - s) * log_ratio)  # from m to keys

    def derivative(order: int, x: float) -> float:  # d^order/dx^order of x**-s, order odd
        factor = 1.0
        for i in range(order):
            factor *= s + i
        return -factor * _h(x, s) / float(x) ** order

    corrections = (
        (derivative(1, keys) - derivative(1, m)) / 12.0
        - (derivative(3, keys) - derivative(3, m)) / 720.0
        + (derivative(5, keys) - derivative(5, m)) / 30240.0
    )
    return math.fsum((head, integral, (_h(m, s) + _h(keys, s)) / 2.0, corrections))


# --- rates --------------------------------------------------------------------------------------


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

    @property
    def end_s(self) -> float | None:
        """After this t nothing more is due; None: the profile goes on forever."""
        ...

    def describe(self) -> str:
        """One line for the report, e.g. 'ramp 100..1000/s over 60 s'."""
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


class _ShapedProfile:
    """What every profile built from a _Shape answers the same way."""

    _shape: _Shape

    def rate_at(self, t: float) -> float:
        return self._shape.rate_at(t)

    def due(self, t: float) -> int:
        return self._shape.due(t)

    def next_due_in(self, t: float, count: int) -> float:
        return _next_due_in(self, self._shape.due_at(count + 1), t, count)

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
        return f"constant {_number_text(self.rate)}/s"


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
        rates = f"{_number_text(self.start)}..{_number_text(self.end)}/s"
        return f"ramp {rates} over {_number_text(self.over_s)} s"


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
        rates = ", ".join(_number_text(rate) for rate in self.rates)
        return f"steps {rates}/s, {_number_text(self.each_s)} s each"


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
            f"replay of {len(self.points)} rows ({_number_text(recorded)} s recorded)"
            f" at {_number_text(self.speed)}x: {_number_text(recorded / self.speed)} s"
        )


@dataclass(frozen=True)
class Burst:
    """base msg/s, plus rate more during [k*every_s, k*every_s + burst_s) for k = 0, 1, 2, ...:
    a queue's recovery after a spike, again and again."""

    base: float
    rate: float
    burst_s: float
    every_s: float

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

    def describe(self) -> str:
        over = f" over {_number_text(self.base)}/s" if self.base else ""
        return (
            f"burst +{_number_text(self.rate)}/s for {_number_text(self.burst_s)} s"
            f" every {_number_text(self.every_s)} s{over}"
        )


# --- the -rate-profile flag ---------------------------------------------------------------------

_RAMP = re.compile(rf"ramp:({_NUMBER})\.\.({_NUMBER})/({_NUMBER})s?")
_STEP = re.compile(rf"step:({_NUMBER}(?:,{_NUMBER})*)/({_NUMBER})s?")
_BURST = re.compile(rf"burst:({_NUMBER})\*({_NUMBER})s?/({_NUMBER})s?")
_FORMS = {
    "ramp": "ramp:A..B/Ts (rates A, B >= 0 msg/s, T > 0 s), e.g. ramp:100..1000/60s",
    "step": "step:A,B,C/Ts (rates >= 0 msg/s, each for T > 0 s), e.g. step:100,200,400/10s",
    "burst": "burst:R*Ds/Ts (R > 0 msg/s more than -rate for D s every T s, D <= T), e.g. burst:500*2s/10s",
}
_CSV_FIX = "give second,rate rows (a header allowed), seconds >= 0 and increasing, rates >= 0, e.g. 0,100"


def parse_rate_profile(text: str, base_rate: float, speed: float) -> RateProfile:
    """The -rate-profile flag: ramp:A..B/Ts, step:A,B,C/Ts, burst:R*Ds/Ts over the base -rate, or
    the path of a CSV file of second,rate rows replayed `speed` times faster."""
    given = text.strip()
    kind = given.partition(":")[0]
    if kind in _FORMS:
        return _parse_form(kind, given, text, base_rate)
    if not given:
        raise UsageError(f"-rate-profile is empty; give {_FORMS['ramp']}, step:.., burst:.. or a CSV file")
    return _read_replay(Path(text), speed)


def _parse_form(kind: str, given: str, text: str, base_rate: float) -> RateProfile:
    pattern = {"ramp": _RAMP, "step": _STEP, "burst": _BURST}[kind]
    match = pattern.fullmatch(given)

    def bad(problem: str) -> UsageError:
        return UsageError(f"-rate-profile '{describe_path(text)}' {problem}; give {_FORMS[kind]}")

    if not match:
        raise bad(f"is not a {kind} profile")
    numbers = [float(n) for group in match.groups() for n in group.split(",")]
    if not all(math.isfinite(n) for n in numbers):
        raise bad("has a number too large to be finite")
    *rates, seconds = numbers
    if kind == "burst":
        rate, burst_s, seconds = numbers
        if not (math.isfinite(base_rate) and base_rate >= 0):
            raise UsageError(f"-rate {base_rate:g} is not a base for a burst; give -rate 0 or more")
        if rate <= 0:
            raise bad("adds no messages")
        if burst_s <= 0 or seconds <= 0:
            raise bad("has a length of 0 s")
        if burst_s > seconds:
            raise bad(f"lasts {_number_text(burst_s)} s, longer than its period")
        return Burst(base_rate, rate, burst_s, seconds)
    if seconds <= 0:
        raise bad("lasts 0 s")
    if not any(rates):
        raise bad("never offers a message")
    if kind == "ramp":
        return Ramp(rates[0], rates[1], seconds)
    return Steps(tuple(rates), seconds)


def _read_replay(path: Path, speed: float) -> Replay:
    """Read a recorded shape: at most MAX_PROFILE_BYTES, one-line errors naming the first bad line."""
    shown = describe_path(path)
    if not (math.isfinite(speed) and speed > 0):
        raise UsageError(f"{REPLAY_SPEED_FLAG} {speed:g} is not a speed; give a finite number > 0, e.g. 60")
    try:
        with path.open("rb") as handle:
            data = handle.read(MAX_PROFILE_BYTES + 1)
    except FileNotFoundError:
        raise UsageError(
            f"-rate-profile '{shown}' is neither a form nor an existing CSV file;"
            f" give {_FORMS['ramp']}, step:A,B,C/Ts, burst:R*Ds/Ts or a file of second,rate rows"
        ) from None
    except OSError as exc:
        reason = exc.strerror or type(exc).__name__
        raise UsageError(f"cannot read -rate-profile file {shown}: {reason}; {_CSV_FIX}") from None
    if len(data) > MAX_PROFILE_BYTES:
        raise UsageError(
            f"-rate-profile file {shown} is larger than {MAX_PROFILE_BYTES // 1_000_000} MB;"
            f" give a shorter recording (fewer rows) with {REPLAY_SPEED_FLAG} to compress it"
        )
    try:
        content = data.decode("utf-8-sig")
    except UnicodeDecodeError as exc:
        where = data[: exc.start].count(b"\n") + 1
        raise UsageError(f"-rate-profile file {shown} line {where} is not UTF-8 text; {_CSV_FIX}") from None
    points: list[tuple[float, float]] = []
    for number, line in enumerate(content.splitlines(), start=1):
        if not line.strip():
            continue
        problem, point = _csv_row(line, points[-1][0] if points else None)
        if problem and not points and number == 1 and _is_header(line):
            continue
        if point is None:
            raise UsageError(f"-rate-profile file {shown} line {number}: {problem}; {_CSV_FIX}")
        points.append(point)
    if not points:
        raise UsageError(f"-rate-profile file {shown} has no second,rate rows; {_CSV_FIX}")
    if not any(rate for _, rate in points):
        raise UsageError(f"-rate-profile file {shown} never offers a message (every rate is 0); {_CSV_FIX}")
    return Replay(tuple(points), speed)


def _is_header(line: str) -> bool:
    first = line.split(",")[0].strip().removesuffix("s")
    try:
        float(first)
    except ValueError:
        return True
    return False


def _csv_row(line: str, previous_s: float | None) -> tuple[str, tuple[float, float] | None]:
    """One row as (second, rate), or what is wrong with it."""
    fields = [part.strip() for part in line.split(",")]
    quoted = f"'{describe_path(line.strip()[:40])}'"
    if len(fields) != 2:
        return f"{quoted} is not second,rate", None
    try:
        second = float(fields[0].removesuffix("s"))
        rate = float(fields[1])
    except ValueError:
        return f"{quoted} is not two numbers second,rate", None
    if not (math.isfinite(second) and second >= 0):
        return f"second {fields[0]} is not a finite number >= 0", None
    if previous_s is not None and second <= previous_s:
        return f"second {fields[0]} does not come after {_number_text(previous_s)}", None
    if not (math.isfinite(rate) and rate >= 0):
        return f"rate {fields[1]} is not a finite number >= 0", None
    return "", (second, rate)


def _number_text(value: float) -> str:
    """A number as short as it reads back exactly (100 not 100.0, 1.2 not 1.20000)."""
    short = f"{value:g}"
    return short if float(short) == value else repr(value)


def hottest_share(skew: KeySkew, orders: int, types: int) -> float:
    """The hottest group's share of all messages the skew promises (types share them evenly)."""
    within = 1 / orders if skew.kind == "uniform" else zipf_share(orders, skew.s)
    return within / types
