"""Which keys (order_id) a run's messages carry: -key-skew uniform draws order_id evenly from 1..K,
exactly as the producer always has (one rng.randint per message, so a seeded run replays the same
messages); zipf:S makes key 1 the hottest, P(k) proportional to k**-S, the contention real ordered
queues see on a few busy orders. Pure: the producer asks, this module answers from the flags.
"""

from __future__ import annotations

import math
import random
import re
from dataclasses import dataclass, field
from typing import Literal, Protocol

from pgmq_sim.errors import UsageError
from pgmq_sim.model.profiles import NUMBER, number_text
from pgmq_sim.paths import describe_path

INT4_MAX = 2**31 - 1  # msg_id and order_id are the seed's integer columns
KEY_SKEW_FORMS = "give uniform or zipf:S with S > 0, e.g. zipf:1.2"
_TAYLOR_BELOW = 1e-8  # below it, log1p(x)/x and expm1(x)/x come from their series (no 0/0)
_ZIPF_HEAD = 1000  # zipf_share sums this many terms exactly, the rest by Euler-Maclaurin


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
        if name == "zipf" and colon and re.fullmatch(NUMBER, exponent):
            s = float(exponent)
            if math.isfinite(s) and s > 0:
                return cls("zipf", s)
        raise UsageError(f"-key-skew '{describe_path(text)}' is not a skew; {KEY_SKEW_FORMS}")

    def __str__(self) -> str:
        return "uniform" if self.kind == "uniform" else f"zipf:{number_text(self.s)}"


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


def hottest_share(skew: KeySkew, orders: int, types: int) -> float:
    """The hottest group's share of all messages the skew promises (types share them evenly)."""
    within = 1 / orders if skew.kind == "uniform" else zipf_share(orders, skew.s)
    return within / types
