"""An adaptive sweep's search: which rate (or worker count) to try next, from the verdicts so far.

rate=auto and rate=A..B climb a doubling ladder until a step fails, bisect between the last pass
and the first failure until they are within the resolution, then hold the rate found for three
steps. With an SLO a step passes keeping half the SLO's headroom over the unloaded p99, and the knee
is confirmed by three holds in a row (after a failed one, the search holds 10% lower). workers=auto
doubles the workers while throughput rises (model/sweep says why; verdicts/knee what a step's verdict is)."""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Literal

LADDER_FACTOR = 2.0  # an adaptive ladder doubles
HOLD_STEPS = 3  # the confirmation hold, in step lengths
MAX_HOLDS = 3  # holds that fail step down at most this often
DESCENT = 0.9  # after a failed hold, the search goes down by 10% a step, at the hold's length
MIN_RATE = 1.0  # below this a search stops stepping down
MAX_RATE = 1_000_000.0  # above this a search stops climbing
KEPT_HEADROOM = 0.5  # of the SLO's room over the unloaded p99, what an adaptive sweep's step must keep
CONFIRMATIONS = 3  # with an SLO, holds in a row that confirm an adaptive sweep's knee


@dataclass(frozen=True)
class Probe:
    """The next step a search asks for."""

    rate: float  # a rate, or a worker count
    purpose: Literal["ladder", "bisect", "hold"]
    length: float  # in step lengths


def nice_rate(rate: float) -> float:
    """Three significant digits: 1047.3 -> 1050, 96.42 -> 96.4."""
    if rate <= 0:
        return rate
    digits = 2 - math.floor(math.log10(rate))
    return round(rate, digits) if digits > 0 else float(round(rate, digits))


class RateSearch:
    """The adaptive sweep's plan, fed each step's verdict. A rate passes when most of its repeats
    pass (-repeat N runs each bisection step N times: near the knee, noise decides). The rate found
    is confirmed by `confirmations` holds in a row (with an SLO, CONFIRMATIONS: each is a rerun as
    long as the hold, so the rate reported is one that held as often as that)."""

    def __init__(
        self, low: float, high: float | None, resolution: float, repeat: int = 1, confirmations: int = 1
    ) -> None:
        self.low, self.high, self.resolution, self.repeat = low, high, resolution, repeat
        self.confirmations = confirmations
        self._bracket = resolution  # how close the bracket must close (wider once a confirmation failed)
        self.passing: float | None = None  # the highest rate known to pass
        self.failing: float | None = None  # the lowest rate known to fail above it
        self.held: list[tuple[float, bool]] = []  # (rate, passed) of each confirmation hold
        self.length = 1.0  # in step lengths: a short step's pass proved too weak once a hold failed
        self._probe: Probe | None = Probe(low, "ladder", 1.0)
        self._votes: list[bool] = []

    def next(self) -> Probe | None:
        return self._probe

    def record(self, passed: bool) -> None:
        probe = self._probe
        assert probe is not None
        self._votes.append(passed)
        if probe.purpose == "bisect" and len(self._votes) < self.repeat:
            return  # the same rate again
        votes, self._votes = self._votes, []
        verdict = sum(votes) * 2 > len(votes)
        rate = probe.rate
        if probe.purpose == "hold":
            self.held.append((rate, verdict))
            if verdict:
                again = self.held_in_a_row(rate) < self.confirmations
                self._probe = Probe(rate, "hold", HOLD_STEPS) if again else None
                return
            # the short steps passed what does not hold: search again below, every step as long as a hold
            self.failing = rate if self.failing is None else min(self.failing, rate)
            self.passing, self.length = None, HOLD_STEPS
            if (
                self.confirmations > 1
            ):  # near a cliff, finer steps find rates that pass by luck: hold 10% down
                self._bracket = max(self._bracket, 1 / DESCENT - 1)
            lower = nice_rate(rate * DESCENT)
            failed_holds = sum(not ok for _, ok in self.held)
            self._probe = (
                Probe(lower, "ladder", self.length)
                if failed_holds < MAX_HOLDS and lower >= MIN_RATE
                else None
            )
            return
        if verdict:
            self.passing = rate if self.passing is None else max(self.passing, rate)
        else:
            self.failing = rate if self.failing is None else min(self.failing, rate)
        self._probe = self._after_search_step(rate, verdict, probe.purpose)

    def _after_search_step(self, rate: float, passed: bool, purpose: str) -> Probe | None:
        if self.passing is None:  # even the lowest failed: step down
            lower = nice_rate(rate * (DESCENT if self.length > 1 else 1 / LADDER_FACTOR))
            return Probe(lower, "ladder", self.length) if lower >= MIN_RATE else None
        if self.failing is None:  # climbing
            ceiling = self.high if self.high is not None else MAX_RATE
            if rate >= ceiling:
                return Probe(self.passing, "hold", HOLD_STEPS)  # the range's top holds
            return Probe(nice_rate(min(rate * LADDER_FACTOR, ceiling)), "ladder", 1.0)
        if self.within_resolution:
            return Probe(self.passing, "hold", HOLD_STEPS)
        middle = nice_rate((self.passing + self.failing) / 2)
        if not self.passing < middle < self.failing:  # rounding: as close as three digits go
            return Probe(self.passing, "hold", HOLD_STEPS)
        return Probe(middle, "bisect", self.length)

    @property
    def within_resolution(self) -> bool:
        return (
            self.passing is not None
            and self.failing is not None
            and self.failing <= self.passing * (1 + self._bracket) + 1e-9
        )

    def held_in_a_row(self, rate: float) -> int:
        """The holds at this rate that passed, the last ones in a row."""
        count = 0
        for held, ok in reversed(self.held):
            if held != rate or not ok:
                break
            count += 1
        return count

    @property
    def confirmed(self) -> float | None:
        """The rate whose last holds passed as often as a confirmation needs."""
        last = self.held[-1][0] if self.held else None
        return last if last is not None and self.held_in_a_row(last) >= self.confirmations else None


GAIN_SHARE = 0.05  # workers=auto: doubling the workers must add more than 5% to throughput


class WorkersSearch:
    """workers=auto: double the workers from one per type while throughput rises by more than 5%;
    the answer is the count after which it stopped rising."""

    def __init__(self, first: int, most: int) -> None:
        self.most = most
        self.achieved: list[tuple[int, float]] = []
        self._probe: Probe | None = Probe(first, "ladder", 1.0)

    def next(self) -> Probe | None:
        return self._probe

    def record(self, achieved_per_s: float) -> None:
        assert self._probe is not None
        count = int(self._probe.rate)
        self.achieved.append((count, achieved_per_s))
        rising = len(self.achieved) < 2 or achieved_per_s > self.achieved[-2][1] * (1 + GAIN_SHARE)
        self._probe = (
            Probe(min(count * 2, self.most), "ladder", 1.0) if rising and count < self.most else None
        )


def pass_bound(slo_ms: float, unloaded_ms: float | None) -> float:
    """The p99 an adaptive sweep's step passes within: the SLO less KEPT_HEADROOM of its room over
    the unloaded p99 (the SLO itself when that is unknown or above it)."""
    if unloaded_ms is None or unloaded_ms >= slo_ms:
        return slo_ms
    return slo_ms - KEPT_HEADROOM * (slo_ms - unloaded_ms)


@dataclass(frozen=True)
class SearchOutcome:
    """How an adaptive sweep ended: its bracket, its holds, and what cut it short."""

    resolution: float  # asked for, as a fraction
    repeat: int
    passing: float | None  # the highest rate that passed (before any hold)
    failing: float | None  # the lowest rate that failed above the knee
    holds: tuple[tuple[float, bool], ...]
    budget_s: float | None
    cut_by_budget: bool
    unloaded_ms: float | None = None  # with an SLO: the lowest step's p99, and the bound it set
    pass_ms: float | None = None
    confirmations: int = 1  # holds in a row that confirm the knee

    @classmethod
    def of(
        cls,
        search: RateSearch,
        budget_s: float | None,
        cut_by_budget: bool,
        unloaded_ms: float | None = None,
        pass_ms: float | None = None,
    ) -> SearchOutcome:
        return cls(
            search.resolution, search.repeat, search.passing, search.failing, tuple(search.held),
            budget_s, cut_by_budget, unloaded_ms, pass_ms, search.confirmations,
        )  # fmt: skip
